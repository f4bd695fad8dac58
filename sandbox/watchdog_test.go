package sandbox

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/builtins"
)

// The watchdog samples slowly while every run is below a quarter of its budget, and fast once
// one is past it: the slow interval is safe only because it ends there.
func TestWatchdogSamplesFastPastAQuarterOfABudget(t *testing.T) {
	const limit = 64 << 20
	b := builtins.NewBudget(limit)
	b.Growth(0) // a reading below every other one: the baseline is 0 from here on
	w := &watchdog{runs: map[*watched]struct{}{{budget: b}: {}}}
	assert.False(t, w.busy(0), "no growth: the slow interval")
	assert.False(t, w.busy(limit/idleGrowth-1))
	assert.True(t, w.busy(limit/idleGrowth+1), "past a quarter: the fast interval")
	assert.False(t, (&watchdog{runs: map[*watched]struct{}{}}).busy(limit), "no runs, nothing to watch")
}

// testRun is a watched run with a budget of limit whose baseline is an empty heap.
func testRun(limit int64) *watched {
	b := builtins.NewBudget(limit)
	b.Growth(0)
	return &watched{budget: b, cancel: func() {}}
}

// several returns a watchdog of the given runs, whose collections the test plays by hand.
func several(runs ...*watched) *watchdog {
	w := &watchdog{runs: map[*watched]struct{}{}, gcRunning: true}
	for _, r := range runs {
		w.runs[r] = struct{}{}
	}
	return w
}

// report plays a run's measurement in the current round.
func report(w *watchdog, r *watched, bytes int64) {
	r.estimate.Store(bytes)
	r.reported.Store(w.round)
}

// collected plays a collection that began and ended after t.
func collected(w *watchdog, t time.Time) {
	w.gcRunning, w.lastGCStart, w.lastGCEnd = false, t.Add(time.Millisecond), t.Add(2*time.Millisecond)
}

// With several runs, the heap's growth is everyone's: the run that holds the memory is stopped,
// and the neighbours that only look over by the heap are not.
func TestWatchdogStopsTheRunThatHoldsTheMemory(t *testing.T) {
	const limit = 64 << 20
	hog, a, b := testRun(limit), testRun(limit), testRun(limit)
	w := several(hog, a, b)
	t0 := time.Now()
	heap := int64(80 << 20) // everyone over by the heap

	assert.Empty(t, w.sweep(t0, heap), "nobody is judged before measuring")
	require.NotZero(t, w.round)
	for _, r := range []*watched{hog, a, b} {
		assert.Equal(t, w.round, r.asked.Load(), "every run is asked to measure")
	}
	report(w, hog, 40<<20)
	report(w, a, 1<<10)
	assert.Empty(t, w.sweep(t0.Add(time.Millisecond), heap), "b has not reported")
	report(w, b, 2<<10)
	assert.Empty(t, w.sweep(t0.Add(time.Millisecond), heap), "no collection since the round began: garbage may explain the heap")

	collected(w, t0)
	assert.Equal(t, []*watched{hog}, w.sweep(t0.Add(3*time.Millisecond), heap))
	assert.Zero(t, w.round, "the round ends with the decision")
	assert.Zero(t, a.asked.Load())
}

// A run stopped for memory holds it until it leaves: nobody else is judged meanwhile.
func TestWatchdogWaitsForAStoppedRunToLeave(t *testing.T) {
	const limit = 64 << 20
	hog, a := testRun(limit), testRun(limit)
	w := several(hog, a)
	t0 := time.Now()
	heap := int64(80 << 20)
	w.sweep(t0, heap)
	report(w, a, 1<<10)
	hog.stopped.Store(true) // it measured over its budget and stopped itself
	collected(w, t0)
	assert.Empty(t, w.sweep(t0.Add(3*time.Millisecond), heap))
}

// A run that does not report in time is held in a builtin: when no measurement explains the
// heap, it is stopped as a single run would be, and the runs that reported are not.
func TestWatchdogStopsAnOverdueRun(t *testing.T) {
	const limit = 64 << 20
	held, a := testRun(limit), testRun(limit)
	w := several(held, a)
	t0 := time.Now()
	heap := int64(80 << 20)
	w.sweep(t0, heap)
	report(w, a, 1<<10)
	collected(w, t0)
	assert.Empty(t, w.sweep(t0.Add(measureWait/2), heap), "held may still reach a checkpoint")
	assert.Equal(t, []*watched{held}, w.sweep(t0.Add(measureWait+time.Millisecond), heap))
}

// The wait for a report follows the runs' pace: on a machine where a checkpoint takes long,
// a run is not overdue after measureWait.
func TestWatchdogWaitFollowsThePace(t *testing.T) {
	const limit = 64 << 20
	slow, a := testRun(limit), testRun(limit)
	a.pace.Store(int64(measureWait)) // a checkpoint every 100 ms
	w := several(slow, a)
	t0 := time.Now()
	heap := int64(80 << 20)
	w.sweep(t0, heap)
	report(w, a, 1<<10)
	collected(w, t0)
	assert.Empty(t, w.sweep(t0.Add(2*measureWait), heap))
	assert.Equal(t, []*watched{slow}, w.sweep(t0.Add(paceFactor*measureWait+time.Millisecond), heap))
}

// When every run reported and none holds a quarter of its budget, the walks cannot see what
// fills the heap (an operand stack, Go memory behind a value): every run over is stopped, as a
// single run would be, so the process stays bounded.
func TestWatchdogStopsEveryRunWhenNoWalkExplainsTheHeap(t *testing.T) {
	const limit = 64 << 20
	a, b := testRun(limit), testRun(limit)
	w := several(a, b)
	t0 := time.Now()
	heap := int64(80 << 20)
	w.sweep(t0, heap)
	report(w, a, 1<<10)
	report(w, b, 2<<10)
	collected(w, t0)
	assert.ElementsMatch(t, []*watched{a, b}, w.sweep(t0.Add(3*time.Millisecond), heap))
}

// A run left alone after others is judged afresh: what they held may still be on the heap.
func TestWatchdogJudgesALastRunAfterACollection(t *testing.T) {
	const limit = 64 << 20
	a, b := testRun(limit), testRun(limit)
	w := several(a, b)
	w.sweep(time.Now(), 80<<20)
	w.leave(b, time.Now()) // as unwatch does
	w.gcRunning = false
	sweep := func(heap int64) []*watched {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.sweep(time.Now(), heap)
	}
	assert.Empty(t, sweep(200<<20), "not stopped at once for memory another run may have left")
	for { // the collection it started ends
		w.mu.Lock()
		running := w.gcRunning
		w.mu.Unlock()
		if !running {
			break
		}
		runtime.Gosched()
	}
	assert.Equal(t, []*watched{a}, sweep(200<<20), "still far over after it")
}

// A single run keeps the rule it always had: far over its budget, it is stopped at once.
func TestWatchdogStopsASingleRunFarOverAtOnce(t *testing.T) {
	const limit = 64 << 20
	a := testRun(limit)
	w := several(a)
	assert.Equal(t, []*watched{a}, w.sweep(time.Now(), limit*2))
}

// A run that leaves during a round may leave its memory on the heap until the next collection:
// the runs that remain are not judged before it, unless the run reported that it held little.
func TestWatchdogWaitsForTheMemoryOfARunThatLeft(t *testing.T) {
	const limit = 64 << 20
	t0 := time.Now().Add(-time.Second)
	heap := int64(80 << 20)
	for _, tc := range []struct {
		name     string
		reported bool
		judged   bool
	}{
		{"unreported", false, false},
		{"reported little", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, gone := testRun(limit), testRun(limit), testRun(limit)
			w := several(a, b, gone)
			w.sweep(t0, heap)
			report(w, a, 1<<10)
			report(w, b, 1<<10)
			if tc.reported {
				report(w, gone, 1<<10)
			}
			collected(w, t0)
			w.gcRunning = true // the test plays the collections
			w.leave(gone, t0.Add(3*time.Millisecond))
			stop := w.sweep(t0.Add(4*time.Millisecond), heap)
			if tc.judged {
				assert.ElementsMatch(t, []*watched{a, b}, stop)
			} else {
				assert.Empty(t, stop)
			}
		})
	}
}

// A run that began after another left is not held back by what that one may have left on the
// heap (it is in the run's baseline, or freed): far over its budget, it is stopped at once,
// without waiting for a collection.
func TestWatchdogStopsARunThatBeganAfterAnotherLeft(t *testing.T) {
	const limit = 64 << 20
	t0 := time.Now()
	w := several()
	w.lastExit = t0
	before, after := testRun(limit), testRun(limit)
	before.began, after.began = t0.Add(-time.Millisecond), t0.Add(time.Millisecond)
	w.runs[after] = struct{}{}
	assert.Equal(t, []*watched{after}, w.sweep(t0.Add(2*time.Millisecond), limit*2))
	delete(w.runs, after)
	w.runs[before] = struct{}{}
	assert.Empty(t, w.sweep(t0.Add(2*time.Millisecond), limit*2), "one active when the other left waits for a collection")
}
