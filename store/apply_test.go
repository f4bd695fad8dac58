package store

import (
	"testing"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A write that ends where it started becomes a read, a row read at the version the run replaced
// is left to its write, and everything comes in key order.
func TestAddTable(t *testing.T) {
	p := NewPending("d")
	writes := []PendingWrite{
		{Table: "t", Key: "K10", Base: 3, Before: table.Row{"a": int64(1)}, Row: table.Row{"a": int64(2)}},
		{Table: "t", Key: "K9", Base: 0}, // inserted then removed
		{Table: "t", Key: "K2", Base: 4, Before: table.Row{"a": int64(1)}, Row: table.Row{"a": int64(1)}}, // back to its values
	}
	p.AddTable("t", writes, []PendingRead{{Table: "t", Pred: "count", N: 1}}, false, 0, map[any]int64{"K10": 3, "K20": 5, "K3": 0})
	assert.Equal(t, []PendingWrite{{Table: "t", Key: "K10", Base: 3, Before: table.Row{"a": int64(1)}, Row: table.Row{"a": int64(2)}}}, p.Writes)
	assert.Equal(t, []PendingRead{
		{Table: "t", Key: "K2", Version: 4},
		{Table: "t", Key: "K9", Version: 0},
		{Table: "t", Pred: "count", N: 1},
		{Table: "t", Key: "K3", Version: 0},
		{Table: "t", Key: "K20", Version: 5},
	}, p.Reads)

	p = NewPending("d")
	p.AddTable("t", nil, []PendingRead{{Table: "t", Pred: "count"}}, true, 7, nil)
	assert.Equal(t, []PendingRead{{Table: "t", All: true, Version: 7}}, p.Reads, "a read of the whole table replaces its predicates")
}

func TestCheckPendingRefuses(t *testing.T) {
	sc, err := CompileSchema(&table.Schema{Name: "t", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeString}}})
	require.NoError(t, err)
	schemas := map[string]*Schema{"t": sc}
	noPred := func(*Schema, PendingRead) (int, error) { return 0, nil }
	for want, p := range map[string]*Pending{
		"for the e domain":  {Domain: "e"},
		`unknown table "u"`: {Writes: []PendingWrite{{Table: "u", Key: "a"}}},
		"is written twice":  {Writes: []PendingWrite{{Table: "t", Key: "a"}, {Table: "t", Key: "a"}}},
		"carries key":       {Writes: []PendingWrite{{Table: "t", Key: "a", Row: table.Row{"id": "b"}}}},
		`unknown table "v"`: {Reads: []PendingRead{{Table: "v", Key: "a"}}},
	} {
		_, _, err := CheckPending(p, "d", schemas, noPred)
		assert.ErrorContains(t, err, want)
	}
	ws, rs, err := CheckPending(&Pending{Domain: "d", Writes: []PendingWrite{{Table: "t", Key: "a", Row: table.Row{"id": "a"}}}, Reads: []PendingRead{{Table: "t", Pred: "count"}, {Table: "t", All: true, Pred: "count", Version: 2}}}, "d", schemas, func(*Schema, PendingRead) (int, error) { return 5, nil })
	require.NoError(t, err)
	assert.Equal(t, "a", ws[0].Key)
	require.Len(t, rs, 2)
	assert.Equal(t, 5, *rs[0].Pred)
	assert.Nil(t, rs[1].Pred, "a read of the whole table is no predicate")
}

func TestAddPredConflicts(t *testing.T) {
	got := AddPredConflicts([]Conflict{{Table: "a", Key: "k"}}, []Conflict{{Table: "a", Read: "x"}, {Table: "b", Read: "y"}})
	assert.Equal(t, []Conflict{{Table: "a", Key: "k"}, {Table: "b", Read: "y"}}, got)
}
