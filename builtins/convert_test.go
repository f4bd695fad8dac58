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

// mappingOnly is a dict seen only as a starlark.IterableMapping: ToGo's general path.
type mappingOnly struct{ *starlark.Dict }

// TestToGoDictMatchesTheMappingPath: a dict converted by walking its entries in place is what
// the general mapping path (Items) makes of it, errors included.
func TestToGoDictMatchesTheMappingPath(t *testing.T) {
	inner := starlark.NewDict(2)
	require.NoError(t, inner.SetKey(starlark.String("$ieq"), starlark.String("Classic")))
	require.NoError(t, inner.SetKey(starlark.String("n"), starlark.Float(2.5)))
	d := starlark.NewDict(4)
	require.NoError(t, d.SetKey(starlark.String("name"), inner))
	require.NoError(t, d.SetKey(starlark.String("qty"), starlark.MakeInt(3)))
	require.NoError(t, d.SetKey(starlark.String("tags"), starlark.NewList([]starlark.Value{starlark.None, starlark.True})))
	got, err := ToGo(d)
	require.NoError(t, err)
	want, err := ToGo(mappingOnly{d})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, map[string]any{"name": map[string]any{"$ieq": "Classic", "n": 2.5}, "qty": int64(3), "tags": []any{nil, true}}, got)

	require.NoError(t, d.SetKey(starlark.MakeInt(7), starlark.String("x")))
	_, err = ToGo(d)
	_, werr := ToGo(mappingOnly{d})
	require.Error(t, err)
	assert.Equal(t, werr.Error(), err.Error())
	assert.Contains(t, err.Error(), "dict key 7 is a int")
}
