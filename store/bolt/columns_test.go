package bolt

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/fstest"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var numbersDomain = fstest.MapFS{"domain.json": {Data: []byte(`{
	"name": "numbers",
	"tables": [{
		"name": "nums",
		"key": "id",
		"fields": [
			{"name": "id", "type": "int"},
			{"name": "i", "type": "int"},
			{"name": "f", "type": "float"},
			{"name": "s", "type": "string"}
		]
	}]
}`)}}

func randNum(rng *rand.Rand) any {
	switch rng.IntN(8) {
	case 0:
		return nil
	case 1:
		return int64(1)<<53 + int64(rng.IntN(3)) // beyond float64's exact ints
	case 2:
		return -int64(1)<<53 - int64(rng.IntN(3))
	}
	return int64(rng.IntN(21) - 10)
}

func randFloat(rng *rand.Rand) any {
	switch rng.IntN(6) {
	case 0:
		return nil
	case 1:
		return float64(rng.IntN(21)-10) + 0.5
	}
	return float64(rng.IntN(21) - 10)
}

func randOperand(rng *rand.Rand) any {
	switch rng.IntN(6) {
	case 0:
		return float64(rng.IntN(21)-10) + 0.5
	case 1:
		return int64(1)<<53 + 1 // not exactly a float64: the columns must leave it to the filter
	case 2:
		return float64(rng.IntN(21) - 10)
	}
	return int64(rng.IntN(21) - 10)
}

func randWhere(rng *rand.Rand) map[string]any {
	w := map[string]any{}
	ops := []string{"$lt", "$lte", "$gt", "$gte", "$eq", "$ne", "$in"}
	for _, f := range []string{"i", "f"} {
		if rng.IntN(3) == 0 {
			continue
		}
		m := map[string]any{}
		for range 1 + rng.IntN(2) {
			op := ops[rng.IntN(len(ops))]
			if op == "$in" {
				m[op] = []any{randOperand(rng), randOperand(rng)}
			} else {
				m[op] = randOperand(rng)
			}
		}
		w[f] = m
	}
	switch rng.IntN(5) {
	case 0:
		w["s"] = map[string]any{"$startswith": "a"}
	case 1:
		w["$or"] = []any{map[string]any{"i": map[string]any{"$gt": 0}}, map[string]any{"s": "b"}}
	case 2:
		w["i"] = int64(rng.IntN(21) - 10) // a plain equality: answered from the hash index
	}
	return w
}

// TestColumnPrefilterAgreesWithMatch checks, over random data and random filters, that a Find
// using the numeric columns returns exactly the rows the compiled filter matches, also with the
// run's own changes in the overlay and in reverse order.
func TestColumnPrefilterAgreesWithMatch(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	d, err := store.LoadDomain(numbersDomain)
	require.NoError(t, err)
	s, err := Open(t.TempDir(), Options{Domain: d})
	require.NoError(t, err)
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	v := s.Stage()
	nums := tbl(t, v, "nums")
	for id := range minColumnScan + 500 {
		_, err := nums.Insert(table.Row{"id": id, "i": randNum(rng), "f": randFloat(rng), "s": string(rune('a' + rng.IntN(3)))})
		require.NoError(t, err)
	}
	require.NoError(t, v.Apply(bg))

	check := func(v *Stage, reverse bool) {
		nums := tbl(t, v, "nums")
		all := find(t, nums, table.Query{Reverse: reverse})
		for range testtier.Size(100, 300) { // random filters per check (five checks)
			w := randWhere(rng)
			m, err := table.Compile(nums.Schema(), w)
			require.NoError(t, err, "%v", w)
			want := []any{}
			for _, r := range all {
				if m.Match(r) {
					want = append(want, r["id"])
				}
			}
			got := keys(t, find(t, nums, table.Query{Where: w, Reverse: reverse}), "id")
			require.Equal(t, want, got, "where %v", w)
			n, err := nums.Count(table.Query{Where: w})
			require.NoError(t, err)
			require.Equal(t, len(want), n, "count where %v", w)
		}
	}
	check(s.Stage(), false)
	check(s.Stage(), true)

	v = s.Stage()
	nums = tbl(t, v, "nums")
	for range 50 {
		id := rng.IntN(minColumnScan + 500)
		_, err := nums.Update(table.Row{"i": randNum(rng), "f": randFloat(rng)}, table.Query{Where: map[string]any{"id": id}})
		require.NoError(t, err)
	}
	_, err = nums.Remove(table.Query{Where: map[string]any{"id": map[string]any{"$lt": 20}}})
	require.NoError(t, err)
	for id := range 20 {
		_, err := nums.Insert(table.Row{"id": 5000 + id, "i": randNum(rng), "f": randFloat(rng), "s": "a"})
		require.NoError(t, err)
	}
	check(v, false)
	check(v, true)

	// Columns follow applies.
	require.NoError(t, v.Apply(bg))
	check(s.Stage(), false)
}

func TestPrefilterFor(t *testing.T) {
	s := openTemp(t)
	mt := s.tables["inventory"]
	assert.Nil(t, mt.prefilterFor(map[string]any{"price": map[string]any{"$lt": 5}}), "small tables scan plainly")

	big := &resident{s: mt.s}
	for i := range minColumnScan {
		big.order = append(big.order, &rec{key: fmt.Sprint(i), row: table.Row{"price": float64(i)}})
	}
	p := big.prefilterFor(map[string]any{"price": map[string]any{"$lt": 100, "$gte": 10}})
	require.NotNil(t, p)
	assert.True(t, p.complete)
	assert.Len(t, p.conds, 2)
	pass, sure := p.check(50)
	assert.True(t, pass && sure)
	pass, _ = p.check(5)
	assert.False(t, pass)

	p = big.prefilterFor(map[string]any{"price": map[string]any{"$lt": 100}, "name": "x"})
	require.NotNil(t, p)
	assert.False(t, p.complete, "a condition the columns cannot check leaves the filter to decide")
	p = big.prefilterFor(map[string]any{"price": map[string]any{"$lt": int64(1)<<53 + 1}})
	assert.Nil(t, p, "an operand float64 cannot hold exactly is left to the filter")
	p = big.prefilterFor(map[string]any{"price": 5.0})
	assert.Nil(t, p, "plain equality goes to the hash index")
}
