package builtins

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
