package sandbox

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
)

// The heap watchdog samples the heap every watchInterval while some run has grown past a quarter
// of its budget, and every idleInterval while none has: a sample costs the process a thread
// wake-up (about 6% of a small run's time at 2 ms), and from a quarter of its budget a run cannot
// reach its budget in idleInterval at the rate an interpreter allocates (a few hundred MB/s; the
// guards refuse the single operations that would allocate faster).
const (
	watchInterval = 2 * time.Millisecond
	idleInterval  = 20 * time.Millisecond
	// idleGrowth is the fraction of its budget every run must be below for the slow interval.
	idleGrowth = 4
)

// watchdog cancels runs whose heap growth passes their budget through allocations that no guard
// sees (large comprehensions, many medium values). One goroutine serves every run in the
// process; it runs only while some run is active, and between samples it sleeps in the kernel
// on its own OS thread where it can (pause).
//
// The heap it reads counts dead values until they are swept, so a run that is just over its
// budget is blamed only if it is still over after a collection that ended after it went over
// (the collection runs in the background, so the plan cannot outrun a blocked watchdog). A run
// over one and a half times its budget is stopped at once: with the default GOGC, garbage can
// explain that only for a run that keeps three quarters of its budget live, which no plan in
// this domain needs. A run's heap therefore grows by about 1.5 times its budget before it is
// stopped, plus what it allocates in one checkpoint interval: past 1.5 times its budget a run
// takes the sample itself at its checkpoint (watched.checkpoint, sampleNow), so that bound holds
// by steps however late this goroutine and its collections are scheduled. A collection is waited
// for before the 1.5 times rule only when a run that may have left memory behind left while this
// one was active (lastExit, watched.began).
//
// That is the rule while one run is active. While several are, the heap's growth is theirs
// together, and one run that holds memory would make every run that overlaps it look over its
// budget. So once some run is over by the heap, every run is asked to measure what its own
// values hold (watched.checkpoint, on its own goroutine), and runs are judged by that (see
// attribute).
type watchdog struct {
	mu          sync.Mutex
	runs        map[*watched]struct{}
	running     bool
	gcRunning   bool
	lastGCStart time.Time
	lastGCEnd   time.Time
	// lastExit is when a run that may have held memory last left: one stopped for memory, or
	// one that left during a round without having reported that it held little. What it held
	// is garbage until the next collection, and must not be blamed on the runs that remain.
	lastExit   time.Time
	several    bool  // several runs were active at the last sample
	round      int64 // the current round of measurements; 0 while none is under way
	rounds     int64 // rounds begun so far
	roundStart time.Time
	// stall, while not nil, holds the watchdog's goroutine and its collections until it is
	// closed: a test's stand-in for a machine too busy to schedule them.
	stall chan struct{}
}

// The wait for a run's measurement: a run reaches a checkpoint every checkpointSteps steps
// unless a builtin holds it. One that has not reported in paceFactor times the slowest interval
// between checkpoints seen among the runs (measureWait at least) is taken to be held there. The
// wait follows the machine's load, as the runs' pace does.
const (
	measureWait = 100 * time.Millisecond
	paceFactor  = 8
)

// remeasureFactor: a run measures again in a round once it has taken this many steps per value
// its last walk met, so that walking costs a fraction of its time however much it holds, and a
// run that keeps growing is measured again before it has grown by much.
const remeasureFactor = 4

// watched is one active run.
type watched struct {
	budget *builtins.Budget
	// began is when the run's budget read its baseline. What a run that left before then held
	// is in that baseline or already freed, so it cannot make this run look over (see sweep).
	began     time.Time
	cancel    func()    // stops the run with the memory limit as its reason
	overSince time.Time // when the run was first seen over its budget; zero while within it
	// shared returns the identities of the values every run shares (Env.shared).
	shared func() map[any]struct{}
	// selfMeasure: the run measures what its values hold at its checkpoints whether or not the
	// watchdog asks (paced by remeasureFactor), and stops itself over its budget. A run that
	// begins on a heap full of others' garbage, freed by a collection while it allocates, shows
	// no growth of the heap at all; a domain's code (a module's top level, a rule's call) holds
	// little, so its walks cost little, and it runs in the trusted process on every apply.
	selfMeasure bool

	// Attribution among concurrent runs, shared between the watchdog and the run's goroutine.
	asked    atomic.Int64 // the round the watchdog asks the run to measure in; 0: none
	reported atomic.Int64 // the last round the run measured in
	estimate atomic.Int64 // what it holds, in bytes, by its last measurement
	pace     atomic.Int64 // nanoseconds between its last two checkpoints; 0 until known
	stopped  atomic.Bool  // it was stopped for memory

	askedAt time.Time // when it was asked in the current round; the watchdog's, under w.mu

	// The run's goroutine's own.
	last        time.Time // its last checkpoint
	lastRound   int64     // the round of its last measurement
	nextMeasure uint64    // the step count from which it measures again in the same round
}

// stop cancels the run with the memory limit as its reason.
func (r *watched) stop() {
	r.stopped.Store(true)
	r.cancel()
}

// checkpoint is called on the run's goroutine every checkpointSteps steps. While the watchdog
// asks, it measures what the run's values hold (once per round, and again as the run goes on;
// see remeasureFactor), reports it, and stops the run if that is over its budget.
//
// First, a run that has grown past one and a half times its budget by the heap asks the
// watchdog for a sample at once (sampleNow): on a loaded machine the watchdog's goroutine may
// wait tens of milliseconds to be scheduled, in which a comprehension allocates tens of MB, so a
// run cannot outrun the watchdog by more than one checkpoint interval (one heap reading per
// checkpointSteps steps costs nothing measurable).
func (r *watched) checkpoint(thread *starlark.Thread) {
	if r.budget.Growth(builtins.HeapInUse()) > r.budget.Limit+r.budget.Limit/2 {
		heapWatchdog.sampleNow()
		if r.stopped.Load() {
			return
		}
	}
	now := time.Now()
	if !r.last.IsZero() {
		r.pace.Store(int64(now.Sub(r.last)))
	}
	r.last = now
	round := r.asked.Load()
	if round == 0 && r.selfMeasure {
		if thread.Steps < r.nextMeasure {
			return
		}
		walk := newReach(r.shared(), r.budget.Limit)
		walk.thread(thread)
		r.nextMeasure = thread.Steps + remeasureFactor*uint64(walk.nodes)
		if walk.bytes > r.budget.Limit {
			r.stop()
		}
		return
	}
	if round == 0 || (round == r.lastRound && thread.Steps < r.nextMeasure) {
		return
	}
	walk := newReach(r.shared(), r.budget.Limit)
	walk.thread(thread)
	r.lastRound, r.nextMeasure = round, thread.Steps+remeasureFactor*uint64(walk.nodes)
	r.estimate.Store(walk.bytes)
	r.reported.Store(round)
	if walk.bytes > r.budget.Limit {
		r.stop()
	}
}

// finished is called on the run's goroutine when its program has ended, with its globals. If
// the watchdog is asking, the run reports what they hold, or what it measured in the round if
// that was more, so that its leaving is known to free little or much (see lastExit): a run
// shorter than a checkpoint interval never reported.
func (r *watched) finished(globals starlark.StringDict) {
	round := r.asked.Load()
	if round == 0 {
		return
	}
	walk := newReach(r.shared(), r.budget.Limit)
	for _, v := range globals {
		walk.value(v)
	}
	bytes := walk.bytes
	if r.reported.Load() == round {
		// What it measured at a checkpoint of this round and dropped since (its frames'
		// values) is garbage it leaves behind too (rvlate: reporting the globals alone let the
		// run left alone be stopped at once for that memory).
		bytes = max(bytes, r.estimate.Load())
	}
	r.estimate.Store(bytes)
	r.reported.Store(round)
}

var heapWatchdog = &watchdog{runs: map[*watched]struct{}{}}

// watch starts watching a run until unwatch.
func (w *watchdog) watch(r *watched) {
	w.mu.Lock()
	w.runs[r] = struct{}{}
	if !w.running {
		w.running = true
		go w.loop()
	}
	w.mu.Unlock()
}

// unwatch stops watching a run.
func (w *watchdog) unwatch(r *watched) {
	w.mu.Lock()
	w.leave(r, time.Now())
	w.mu.Unlock()
}

// leave stops watching a run. A run stopped for memory, one that leaves during a round without
// having reported that it held less than a sixteenth of its budget, or one that leaves while
// several runs are active and no round is under way (nothing measured it), may leave memory
// behind that the next collection frees (lastExit). w.mu is held.
func (w *watchdog) leave(r *watched, now time.Time) {
	delete(w.runs, r)
	switch {
	case r.stopped.Load(),
		w.round != 0 && (r.reported.Load() != w.round || r.estimate.Load() >= r.budget.Limit/16),
		w.round == 0 && w.several:
		w.lastExit = now
	}
}

func (w *watchdog) loop() {
	if pauseLocksThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	pause(watchInterval)
	idle := time.Duration(0)
	for {
		w.mu.Lock()
		if stall := w.stall; stall != nil {
			w.mu.Unlock()
			<-stall
			continue
		}
		if len(w.runs) == 0 {
			if idle += idleInterval; idle > 200*time.Millisecond {
				w.running = false
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			pause(idleInterval)
			continue
		}
		idle = 0
		heap := builtins.HeapInUse()
		stop := w.sweep(time.Now(), heap)
		next := idleInterval
		if w.busy(heap) {
			next = watchInterval
		}
		w.mu.Unlock()
		for _, r := range stop {
			r.stop()
		}
		pause(next)
	}
}

// sampleNow samples the heap and stops the runs sweep says to stop, as the watchdog's loop does,
// on the caller's goroutine (a run's, at its checkpoint).
func (w *watchdog) sampleNow() {
	w.mu.Lock()
	stop := w.sweep(time.Now(), builtins.HeapInUse())
	w.mu.Unlock()
	for _, r := range stop {
		r.stop()
	}
}

// busy reports whether some run has grown past 1/idleGrowth of its budget, when the watchdog
// samples at its fast interval. w.mu is held.
func (w *watchdog) busy(heap int64) bool {
	for r := range w.runs {
		if r.budget.Growth(heap) > r.budget.Limit/idleGrowth {
			return true
		}
	}
	return false
}

// sweep decides, for a heap reading, which runs to stop, and starts a background collection when
// it needs one. w.mu is held.
func (w *watchdog) sweep(now time.Time, heap int64) []*watched {
	if len(w.runs) > 1 {
		return w.attribute(now, heap)
	}
	if w.several {
		// The run was one of several: its overSince was theirs too, and it is judged afresh.
		// What the others held is waited for only if they may have held it (lastExit, set as
		// each left: see leave), not from this sample's time: that held a run that began long
		// after a burst for a collection before it could be stopped (flakehunt: 57 MiB on a
		// 16 MiB budget), and a hog beside a stream of short runs that each reported holding
		// little was held for one begun after each left, and never stopped (rvlate).
		w.endRound()
		for r := range w.runs {
			r.overSince = time.Time{}
		}
		w.several = false
	}
	var stop []*watched
	needGC := false
	for r := range w.runs {
		used := r.budget.Growth(heap)
		switch {
		case used <= r.budget.Limit:
			r.overSince = time.Time{}
		case r.began.Before(w.lastExit) && (!w.lastGCStart.After(w.lastExit) || w.lastGCEnd.Before(w.lastGCStart)):
			// A run that left while this one was active may have left its memory: only a
			// collection that began after it left tells. (One that left before this run began
			// cannot: its memory is in this run's baseline, or freed, which only lowers the heap.
			// Waiting for a collection there let every run after one stopped for memory grow
			// unchecked for as long as the collection took on a loaded machine.)
			needGC = true
		case used > r.budget.Limit+r.budget.Limit/2:
			stop = append(stop, r)
		case r.overSince.IsZero():
			r.overSince, needGC = now, true
		case w.lastGCEnd.After(r.overSince):
			stop = append(stop, r)
		default:
			needGC = true
		}
	}
	if needGC {
		w.collect()
	}
	return stop
}

// collect starts a background collection unless one is running. w.mu is held.
func (w *watchdog) collect() {
	if w.gcRunning {
		return
	}
	w.gcRunning, w.lastGCStart = true, time.Now()
	stall := w.stall
	go func() {
		if stall != nil {
			<-stall
		}
		runtime.GC()
		w.mu.Lock()
		w.gcRunning, w.lastGCEnd = false, time.Now()
		w.mu.Unlock()
	}()
}

// attribute is sweep while several runs are active. When some run is over its budget by the
// heap, a round of measurements begins: every run is asked to measure what its values hold, and
// one whose measure is over its budget stops itself (watched.checkpoint). The runs still over by
// the heap (the suspects) are judged once every run has reported or is overdue (held in a
// builtin), no run stopped for memory is still leaving, and a collection that began after the
// round did, and after the last stopped run left, has ended:
//
//   - the run that holds the most, when that is at least a quarter of its budget, is stopped:
//     it explains the growth best (two runs that each hold 60% of their budget are over
//     together, and stopping one is enough), and it need not be a suspect itself (a run that
//     began after another grew is not);
//   - otherwise the overdue suspects are stopped, as a single run would be: a run held in a
//     builtin may be the one allocating;
//   - otherwise the walks see nothing that explains the heap (memory on the operand stack, or
//     behind values the walk cannot look into), and every suspect is stopped, as a single run
//     would be, so that the process stays bounded.
//
// The round then ends, and the next sample begins another if some run is still over.
// w.mu is held.
func (w *watchdog) attribute(now time.Time, heap int64) []*watched {
	w.several = true
	var suspects []*watched
	leaving := false
	for r := range w.runs {
		if r.stopped.Load() {
			leaving = true // its memory goes when it leaves
			continue
		}
		if r.budget.Growth(heap) <= r.budget.Limit {
			r.overSince = time.Time{}
			continue
		}
		if r.overSince.IsZero() {
			r.overSince = now
		}
		suspects = append(suspects, r)
	}
	if len(suspects) == 0 && !leaving {
		w.endRound()
		return nil
	}
	if w.round == 0 {
		w.rounds++
		w.round, w.roundStart = w.rounds, now
	}
	slowest := time.Duration(0)
	for r := range w.runs {
		if r.asked.Load() != w.round {
			r.askedAt = now
			r.asked.Store(w.round)
		}
		slowest = max(slowest, time.Duration(r.pace.Load()))
	}
	if leaving || len(suspects) == 0 {
		return nil
	}
	cutoff := w.roundStart
	if w.lastExit.After(cutoff) {
		cutoff = w.lastExit
	}
	if !w.lastGCStart.After(cutoff) || w.lastGCEnd.Before(w.lastGCStart) {
		w.collect() // garbage and the memory of runs that left must not count
		return nil
	}
	var largest *watched
	var overdue []*watched
	wait := max(measureWait, paceFactor*slowest)
	for r := range w.runs {
		if r.reported.Load() != w.round {
			if now.Sub(r.askedAt) <= wait {
				return nil
			}
			if r.overSince.IsZero() {
				continue
			}
			overdue = append(overdue, r)
			continue
		}
		if largest == nil || r.estimate.Load() > largest.estimate.Load() {
			largest = r
		}
	}
	w.endRound()
	switch {
	case largest != nil && largest.estimate.Load() >= largest.budget.Limit/4:
		return []*watched{largest}
	case len(overdue) > 0:
		return overdue
	}
	return suspects
}

// endRound stops asking runs to measure. w.mu is held.
func (w *watchdog) endRound() {
	if w.round == 0 {
		return
	}
	w.round = 0
	for r := range w.runs {
		r.asked.Store(0)
	}
}
