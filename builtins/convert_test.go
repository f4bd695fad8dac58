package builtins

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"

	"github.com/starplan/starplan/table"
)

func TestToGoBoundsSharedAndCyclicValues(t *testing.T) {
	// l = [l, l], forty times: 2^40 nodes if expanded.
	l := starlark.NewList([]starlark.Value{starlark.String("x")})
	for range 40 {
		l = starlark.NewList([]starlark.Value{l, l})
	}
	_, err := ToGo(l)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "value too large")

	// A dict that contains itself.
	d := starlark.NewDict(1)
	require.NoError(t, d.SetKey(starlark.String("self"), d))
	_, err = ToGo(d)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "contain itself")

	// Within the bounds, conversion is exact.
	v, err := ToGo(starlark.NewList([]starlark.Value{starlark.MakeInt(1), starlark.Tuple{starlark.String("a"), starlark.None}}))
	require.NoError(t, err)
	assert.Equal(t, []any{int64(1), []any{"a", nil}}, v)
}

// The budget's baseline only moves down: garbage that earlier runs left on the heap, freed by a
// collection during this run, must not become allowance.
func TestBudgetBaselineFollowsTheLowestHeap(t *testing.T) {
	b := &Budget{Limit: 100, shared: table.Shared()}
	b.baseline.Store(1000)
	assert.Equal(t, int64(50), b.Growth(1050))
	assert.Equal(t, int64(0), b.Growth(400), "the heap fell below the start")
	assert.Equal(t, int64(100), b.Growth(500), "growth counts from the lowest heap seen")
}
