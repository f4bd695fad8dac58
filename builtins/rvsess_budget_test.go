package builtins

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"
)

var rvsessSink []byte

// rvsess: the mid-size sum's collection (collectIfOver) bounds a run's garbage to a budget past
// the heap its last forced collection left, whatever the watchdog's and the collector's pace.
// That heap may hold values of others (another run's, in a serve process) which a collection
// of someone else's frees afterwards: the next forced collection must then come a budget past
// the heap as it is now, not past the one those values held up. Without that, a run's garbage
// grew by what the others had held plus a budget before its own thread collected (here 16 MiB
// of others' values: no forced collection in 8 MiB of garbage under a 2 MiB budget).
func TestRvsessMidSumCollectsABudgetPastTheHeapAsItIsNow(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // the collector is held: only forced collections run
	thread := &starlark.Thread{}
	runtime.GC()
	b := NewBudget(2 << 20)
	SetBudget(thread, b)
	others := make([][]byte, 256) // 16 MiB another run holds while this one makes its sums
	for i := range others {
		others[i] = make([]byte, 64<<10)
	}
	for range CheckThreshold / MidCharge { // one sum: the heap is over the budget: a forced collection
		require.NoError(t, Charge(thread, "repeating a string", MidCharge))
	}
	require.Greater(t, b.collected.Load(), int64(8<<20), "the collection left the others' values on the heap")
	runtime.KeepAlive(others) // held until here
	others = nil
	runtime.GC() // someone else's collection frees them
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 128 { // 8 MiB of this run's garbage, results of 64 KiB
		rvsessSink = make([]byte, 64<<10)
		require.NoError(t, Charge(thread, "repeating a string", 64<<10))
	}
	runtime.ReadMemStats(&after)
	assert.GreaterOrEqual(t, after.NumForcedGC-before.NumForcedGC, uint32(1),
		"the run's garbage passed a budget over the heap as it is now: its sums collect")
}
