package builtins

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/starplan/starplan/table"
)

// Memory the process takes for every run while a run is under way (a store's table read into
// memory by the run's walk) is not the run's growth; while such a load is under way its
// estimate stands in, and a heap below the start is not taken for the run's new starting point.
func TestBudgetLeavesOutSharedMemory(t *testing.T) {
	b := &Budget{Limit: 100, shared: table.Shared()}
	b.baseline.Store(1000)
	assert.Equal(t, int64(50), b.Growth(1050))

	table.AddShared(500) // a table read into memory: the heap grows by it
	defer table.AddShared(-500)
	assert.Equal(t, int64(50), b.Growth(1550), "the table is not the run's")

	end := table.BeginShared(2000) // a load under way, estimated high
	assert.Equal(t, int64(0), b.Growth(1600))
	assert.Equal(t, int64(1000), b.baseline.Load(), "an estimate does not lower the starting point")
	end(300)
	assert.Equal(t, int64(50), b.Growth(1850), "800 shared since the start: 1850 - 800 - 1000")
}
