package sandbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/builtins"
)

// A hog whose memory no walk sees (it reports holding little), beside a stream of short runs
// that follow one another (one leaves, the next joins, no sample between), each shorter than a
// collection. Every short run reports that it holds little before it leaves, so its leaving
// frees nothing the hog could be blamed for. The hog must still be stopped: the process has to
// stay bounded. When leave ended the round and moved lastExit on every 2 -> 1, each short run
// began a new round that needed a collection begun after it, which the next one's leaving
// outdated again: the hog, at twice its budget, was never judged.
func TestRvlateAHogIsJudgedThroughAStreamOfShortRuns(t *testing.T) {
	const limit = 64 << 20
	hog := testRun(limit) // baseline: an empty heap
	w := several(hog)
	heap := int64(2 * limit) // the hog's growth: twice its budget, everyone else's a little
	t0 := time.Now().Add(-time.Hour)
	stopped := -1
	for k := range 20 {
		tk := t0.Add(time.Duration(k) * 10 * time.Millisecond)
		// A short run: its baseline is a heap that held the hog already (a budget it is far below).
		short := &watched{budget: builtins.NewBudget(4 * limit), began: tk, cancel: func() {}}
		w.runs[short] = struct{}{}
		require.Empty(t, w.sweep(tk, heap))
		report(w, hog, 1<<10)
		report(w, short, 1<<10) // finished: it held little
		if stop := w.sweep(tk.Add(2*time.Millisecond), heap); len(stop) > 0 {
			assert.Equal(t, []*watched{hog}, stop, "only the hog holds the heap")
			stopped = k
			break
		}
		w.leave(short, tk.Add(5*time.Millisecond))
		// The collection begun in this run's life ends after it left.
		w.gcRunning, w.lastGCStart, w.lastGCEnd = true, tk.Add(time.Millisecond), tk.Add(6*time.Millisecond)
	}
	assert.GreaterOrEqual(t, stopped, 0, "the hog, at twice its budget, was never stopped")
}

// As above, but the hog samples the heap itself while it is alone between two short runs (past
// one and a half times its budget it does so at every checkpoint: sampleNow). That sample ended
// "several runs are active" and took its own time for when the others left, though each had
// reported holding little: the hog, which began before, then waited for a collection begun after
// it, and the next short run joined first, and so on.
func TestRvlateAHogAloneBetweenShortRunsIsStopped(t *testing.T) {
	const limit = 64 << 20
	hog := testRun(limit)
	w := several(hog)
	heap := int64(2 * limit)
	t0 := time.Now().Add(-time.Hour)
	var stop []*watched
	for k := 0; k < 20 && len(stop) == 0; k++ {
		tk := t0.Add(time.Duration(k) * 10 * time.Millisecond)
		short := &watched{budget: builtins.NewBudget(4 * limit), began: tk, cancel: func() {}}
		w.runs[short] = struct{}{}
		require.Empty(t, w.sweep(tk, heap))
		report(w, hog, 1<<10)
		report(w, short, 1<<10)
		w.leave(short, tk.Add(2*time.Millisecond))
		stop = w.sweep(tk.Add(3*time.Millisecond), heap) // the hog's own sample, alone
		w.gcRunning, w.lastGCStart, w.lastGCEnd = true, tk.Add(time.Millisecond), tk.Add(4*time.Millisecond)
	}
	assert.Equal(t, []*watched{hog}, stop, "the hog, at twice its budget, alone, was never stopped")
}

// A run that measured much at a checkpoint of the round (values its function's frames held)
// and ended with little in its globals leaves all it measured behind as garbage: its leaving
// must still hold the run left alone for a collection, not let it be stopped at once for the
// memory the other left (its growth by the heap is that memory). finished reported only the
// globals, so the run looked as if it had held little all along.
func TestRvlateARunThatMeasuredMuchThenEndedSmallIsWaitedFor(t *testing.T) {
	const limit = 64 << 20
	a, b := testRun(limit), testRun(limit)
	b.shared = func() map[any]struct{} { return nil }
	w := several(a, b)
	t0 := time.Now().Add(-time.Hour)
	heap := int64(2 * limit) // b's memory, seen by a's budget too
	require.Empty(t, w.sweep(t0, heap))
	report(w, a, 1<<10)
	report(w, b, limit*9/10) // at a checkpoint, its frames' values
	b.finished(nil)          // its program ended; its globals hold nothing
	w.leave(b, t0.Add(time.Millisecond))
	assert.Empty(t, w.sweep(t0.Add(2*time.Millisecond), heap), "a stopped for the memory b left")
}

// The same with two runs left: they were judged at once by the heap, b's garbage and all, and
// both stopped (nothing they measured explained it).
func TestRvlateTwoRunsLeftAfterOneThatMeasuredMuchAreNotStoppedForIt(t *testing.T) {
	const limit = 64 << 20
	a, c, b := testRun(limit), testRun(limit), testRun(limit)
	b.shared = func() map[any]struct{} { return nil }
	w := several(a, c, b)
	t0 := time.Now().Add(-time.Hour)
	heap := int64(2 * limit)
	require.Empty(t, w.sweep(t0, heap))
	report(w, a, 1<<10)
	report(w, c, 1<<10)
	report(w, b, limit*9/10)
	collected(w, t0)
	w.gcRunning = true // the test plays the collections
	b.finished(nil)
	w.leave(b, t0.Add(3*time.Millisecond))
	assert.Empty(t, w.sweep(t0.Add(4*time.Millisecond), heap), "stopped for the memory b left")
}
