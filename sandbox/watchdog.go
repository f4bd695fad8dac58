package sandbox

import (
	"runtime"
	"sync"
	"time"

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
// process; it runs only while some run is active.
//
// The heap it reads counts dead values until they are swept, so a run that is just over its
// budget is blamed only if it is still over after a collection that ended after it went over
// (the collection runs in the background, so the plan cannot outrun a blocked watchdog). A run
// over one and a half times its budget is stopped at once: with the default GOGC, garbage can
// explain that only for a run that keeps three quarters of its budget live, which no plan in
// this domain needs. A run's heap therefore grows by about 1.5 times its budget before it is
// stopped, plus what it allocates in the moment it takes to notice.
type watchdog struct {
	mu        sync.Mutex
	runs      map[*watched]struct{}
	running   bool
	gcRunning bool
	lastGCEnd time.Time
}

// watched is one active run.
type watched struct {
	budget    *builtins.Budget
	cancel    func()    // stops the run with the memory limit as its reason
	overSince time.Time // when the run was first seen over its budget; zero while within it
}

var heapWatchdog = &watchdog{runs: map[*watched]struct{}{}}

// watch starts watching a run; the returned function stops it.
func (w *watchdog) watch(r *watched) (stop func()) {
	w.mu.Lock()
	w.runs[r] = struct{}{}
	if !w.running {
		w.running = true
		go w.loop()
	}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.runs, r)
		w.mu.Unlock()
	}
}

func (w *watchdog) loop() {
	timer := time.NewTimer(watchInterval)
	defer timer.Stop()
	idle := time.Duration(0)
	for range timer.C {
		w.mu.Lock()
		if len(w.runs) == 0 {
			if idle += idleInterval; idle > 200*time.Millisecond {
				w.running = false
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			timer.Reset(idleInterval)
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
			r.cancel()
		}
		timer.Reset(next)
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
// a run is over its budget for the first time. w.mu is held.
func (w *watchdog) sweep(now time.Time, heap int64) []*watched {
	var stop []*watched
	needGC := false
	for r := range w.runs {
		used := r.budget.Growth(heap)
		switch {
		case used <= r.budget.Limit:
			r.overSince = time.Time{}
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
	if needGC && !w.gcRunning {
		w.gcRunning = true
		go func() {
			runtime.GC()
			w.mu.Lock()
			w.gcRunning, w.lastGCEnd = false, time.Now()
			w.mu.Unlock()
		}()
	}
	return stop
}
