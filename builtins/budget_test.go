package builtins

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"

	"github.com/starplan/starplan/table"
)

// Memory the process takes for every run while a run is under way (a store's table read into
// memory by the run's walk) is not the run's growth.
func TestBudgetLeavesOutSharedMemory(t *testing.T) {
	b := &Budget{Limit: 100, shared: table.Shared()}
	b.baseline.Store(1000)
	assert.Equal(t, int64(50), b.Growth(1050))

	table.AddShared(500) // a table read into memory: the heap grows by it
	assert.Equal(t, int64(50), b.Growth(1550), "the table is not the run's")
	table.AddShared(-500) // ignored: memory let go lowers the heap by itself
	assert.Equal(t, int64(50), b.Growth(1550))
	assert.Equal(t, int64(0), b.Growth(1000), "a table let go lowers the heap")

	later := &Budget{Limit: 100, shared: table.Shared()}
	later.baseline.Store(1500)
	assert.Equal(t, int64(20), later.Growth(1520), "a run that began after the load is charged from there")
}

// A result that stops growing between two of its meter's questions is asked about as a whole
// before the plan gets it. Without a budget the cap is NoBudgetCap: a result asked about at 60
// MiB is next asked about at 75 MiB, so one that ends at 70 MiB was let through unasked (and
// TestReChargesResults' 2 MB re.sub passed a 1 MiB budget whenever the run held nothing when
// it was first asked about at 1 MiB).
func TestMeterSettlesTheFinishedSize(t *testing.T) {
	thread := new(starlark.Thread)
	m := newMeter(thread, "test result")
	require.NoError(t, m.grow(60<<20))
	require.NoError(t, m.grow(70<<20), "between two questions")
	err := m.settle(70 << 20)
	var me *MemoryError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, int64(70<<20), me.Bytes)
	assert.Equal(t, int64(NoBudgetCap), me.Limit)

	m = newMeter(thread, "test result")
	require.NoError(t, m.grow(60<<20))
	assert.NoError(t, m.settle(60<<20), "the size last asked about is not asked again")
	assert.NoError(t, m.settle(63<<20), "a finished size under the cap")
}

// Mid-size results (MidCharge up to CheckThreshold) are never refused: over a heap that other
// values keep past the budget (another run's, in one process), a run making them goes on, and
// the collections its sums force are one per budget of growth, not one per sum.
func TestMidSizeResultsAreNotRefusedAndCollectOncePerBudget(t *testing.T) {
	thread := &starlark.Thread{}
	runtime.GC() // the budget's baseline holds no garbage a collection below would free
	b := NewBudget(1 << 20)
	SetBudget(thread, b)
	held := make([][]byte, 64) // 4 MiB that stay live: the budget's heap is over its limit
	for i := range held {
		held[i] = make([]byte, 64<<10)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 1024 { // 8 MiB of results of 8 KiB, made elsewhere: eight sums of CheckThreshold
		require.NoError(t, Charge(thread, "repeating a string", 8<<10))
	}
	runtime.ReadMemStats(&after)
	forced := after.NumForcedGC - before.NumForcedGC
	assert.GreaterOrEqual(t, forced, uint32(1), "the first sum over the budget collects")
	assert.LessOrEqual(t, forced, uint32(4), "then not again until the heap grows by a budget more (eight without that)")
	runtime.KeepAlive(held)
}
