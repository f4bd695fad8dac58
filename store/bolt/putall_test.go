package bolt

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

// A commit of many rows published at once leaves a resident table exactly as publishing them one by
// one does: rows, key order, the highest generated key, and lookups through indexes rebuilt
// afterwards.
func TestPutAllIsPutOneByOne(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	s := openTemp(t)
	sc := s.schemas["inventory"]
	rng := rand.New(rand.NewPCG(1, 2))
	row := func(i int) table.Row {
		r, err := sc.ValidateRow(table.Row{"item_id": fmt.Sprintf("SG%03d", i), "name": fmt.Sprintf("Style %d", i%50),
			"quantity_in_stock": int64(i % 7), "price": float64(i%90) + 0.5})
		require.NoError(t, err)
		return r
	}
	build := func() *resident {
		var recs []*rec
		for i := 1; i <= 3000; i += 2 {
			recs = append(recs, &rec{key: fmt.Sprintf("SG%03d", i), row: row(i), ver: 1, id: fmt.Sprint(i)})
		}
		mt := newResident(sc, recs)
		mt.lookup("name", "Style 3") // an index and a column exist before the commit
		mt.column("price")
		return mt
	}
	// Inserts between and after the rows, replacements, and deletions (the highest key too).
	var entries []putEntry
	for _, i := range rng.Perm(4000) {
		k := i + 1
		switch {
		case k == 2999 || k%10 == 3:
			entries = append(entries, putEntry{key: fmt.Sprintf("SG%03d", k)})
		case k%2 == 0 || k%10 == 5 || k > 3000:
			entries = append(entries, putEntry{key: fmt.Sprintf("SG%03d", k), row: row(k + 1), id: "n" + fmt.Sprint(k)})
		}
	}
	require.Greater(t, len(entries), bulkPut)
	one, all := build(), build()
	for _, e := range entries {
		one.put(e.key, e.row, 2, e.id)
	}
	all.putAll(entries, 2)

	keysOf := func(mt *resident) []any {
		var ks []any
		for _, r := range mt.order {
			ks = append(ks, r.key)
		}
		return ks
	}
	assert.Equal(t, keysOf(one), keysOf(all))
	assert.True(t, slices.IsSortedFunc(all.order, func(a, b *rec) int { return table.CompareKeys(a.key, b.key) }))
	assert.Equal(t, len(one.rows), len(all.rows))
	for k, r := range one.rows {
		a, ok := all.rows[k] // not require.Contains: it walks the map's keys for each row
		require.True(t, ok, "%v", k)
		assert.Equal(t, r.row, a.row)
		assert.Equal(t, r.ver, a.ver)
	}
	assert.Equal(t, one.scanMaxNum(), all.scanMaxNum())
	for _, name := range []string{"Style 3", "Style 4", "Style 49"} {
		a, _ := one.lookup("name", name)
		b, _ := all.lookup("name", name)
		assert.Equal(t, len(a), len(b), name)
	}
	assert.Equal(t, one.column("price"), all.column("price"))

	// Deleting the highest generated key finds the next one.
	entries = entries[:0]
	for i := 1; i <= 2999; i += 2 {
		e := putEntry{key: fmt.Sprintf("SG%03d", i), row: row(i + 2), id: "r"}
		if i == 2999 {
			e.row = nil
		}
		entries = append(entries, e)
	}
	require.Greater(t, len(entries), bulkPut)
	all = build()
	all.putAll(entries, 3)
	assert.Equal(t, int64(2997), all.scanMaxNum())
	assert.Len(t, all.order, 1499)
}
