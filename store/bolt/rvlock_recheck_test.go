package bolt

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// rvlock: an attacker's review of the store's locks and bbolt read transactions under
// concurrent use (hangs, lock order, stalls of a commit that must grow the file).

// The re-check of a predicate read answered from an index reads only the candidates in the
// range the read walked. A run's "last row of this value" (a reverse Find with a limit, on an
// indexed field: the ledger's last transaction of a customer) read one row; its re-check, at
// apply and in the conflict check, walked every candidate of the value from the first, reading
// each document from the file, since walkRange went forward over all of them and only skipped
// those before the read's From. On a table read from the file that is a read of every row of
// the value, inside a bbolt read transaction, under the tables' write lock at apply: a stall of
// every run, and of a commit that must grow the file, for as long as it reads.
func TestRvlockRecheckOfAnIndexedReadReadsOnlyItsRange(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	const n = 1000 // "name" N0..N4, 200 rows each; "name" is a declared index
	s := openAt(t, bigInventory(t, n))
	mt := s.tables["inventory"]
	require.Nil(t, mt.res.Load(), "the table is read from the file")

	for i, reverse := range []bool{true, false} {
		sg := s.Stage()
		rows := find(t, tbl(t, sg, "inventory"), table.Query{Where: where("name", "N1"), Reverse: reverse, Limit: 1})
		require.Len(t, rows, 1)
		p := sg.Pending()

		// Another commit moves the table (a row of another value), so the read is re-checked.
		other := s.Stage()
		_, err := tbl(t, other, "inventory").Update(table.Row{"quantity_in_stock": int64(7 + i)}, table.Query{Where: where("item_id", "SG000102")})
		require.NoError(t, err)
		require.NoError(t, other.Apply(bg))

		before := mt.walked.Load()
		require.NoError(t, s.Conflicts(bg, p), "nothing the read saw moved")
		read := mt.walked.Load() - before
		t.Logf("reverse=%v read %d", reverse, read)
		assert.LessOrEqual(t, read, int64(2), "reverse=%v: the re-check of a read of one row of 200 candidates read %d rows from the file", reverse, read)

		// And it still finds a change in the range it read.
		mover := s.Stage()
		_, err = tbl(t, mover, "inventory").Update(table.Row{"price": int64(99 + i)}, table.Query{Where: where("item_id", rows[0]["item_id"])})
		require.NoError(t, err)
		require.NoError(t, mover.Apply(bg))
		assert.ErrorIs(t, s.Conflicts(bg, p), store.ErrConflict, "reverse=%v: the row the read returned changed", reverse)
	}
}

// The re-check that stops at the bounded end of a read's range still sees every move inside
// the range, and none outside it: for a read of the first row of a value (forward, its range
// ends at that row) and of its last (reverse, its range starts there), on a table read from the
// file and on one in memory, for a run that wrote nothing and for one that rewrote the row it
// then read. A move is an update of a row of the value, its removal, a new row of the value, or
// a row of another value given this one.
func TestRvlockRecheckOfAnIndexedReadSeesEveryMoveInItsRange(t *testing.T) {
	t.Parallel()
	const n = 1000 // item_id SG000100..SG001099, "name" N(i%5): N1 is SG000101, SG000106, ... SG001096
	type move struct {
		name   string
		change func(tb table.Table) error
	}
	update := func(key string, fields table.Row) func(tb table.Table) error {
		return func(tb table.Table) error {
			_, err := tb.Update(fields, table.Query{Where: where("item_id", key)})
			return err
		}
	}
	remove := func(key string) func(tb table.Table) error {
		return func(tb table.Table) error {
			_, err := tb.Remove(table.Query{Where: where("item_id", key)})
			return err
		}
	}
	insert := func(key string) func(tb table.Table) error {
		return func(tb table.Table) error {
			_, err := tb.Insert(table.Row{"item_id": key, "name": "N1", "quantity_in_stock": int64(1), "price": int64(1)})
			return err
		}
	}
	for _, dir := range []struct {
		reverse bool
		read    string // the row the read returns
		in, out []move
	}{
		{reverse: false, read: "SG000101",
			in: []move{
				{"its row updated", update("SG000101", table.Row{"price": int64(77)})},
				{"its row removed", remove("SG000101")},
				{"its row given another value", update("SG000101", table.Row{"name": "N2"})},
				{"a new row of the value before it", insert("SG000001")},
				{"a row before it given the value", update("SG000100", table.Row{"name": "N1"})},
			},
			out: []move{
				{"a later row of the value updated", update("SG000106", table.Row{"price": int64(77)})},
				{"a later row of the value removed", remove("SG001096")},
				{"a new row of the value after it", insert("SG999999")},
				{"a later row given the value", update("SG000102", table.Row{"name": "N1"})},
			}},
		{reverse: true, read: "SG001096",
			in: []move{
				{"its row updated", update("SG001096", table.Row{"price": int64(77)})},
				{"its row removed", remove("SG001096")},
				{"its row given another value", update("SG001096", table.Row{"name": "N2"})},
				{"a new row of the value after it", insert("SG999999")},
				{"a row after it given the value", update("SG001099", table.Row{"name": "N1"})},
			},
			out: []move{
				{"an earlier row of the value updated", update("SG001091", table.Row{"price": int64(77)})},
				{"an earlier row of the value removed", remove("SG000101")},
				{"a new row of the value before it", insert("SG000001")},
				{"an earlier row given the value", update("SG001095", table.Row{"name": "N1"})},
			}},
	} {
		for _, where_ := range []string{"file", "memory"} {
			for _, own := range []bool{false, true} {
				for _, mv := range append(append([]move(nil), dir.in...), dir.out...) {
					conflict := slices.ContainsFunc(dir.in, func(m move) bool { return m.name == mv.name })
					if own && mv.name == "its row updated" || own && mv.name == "its row removed" || own && mv.name == "its row given another value" {
						continue // a write over the run's own write conflicts whatever it read
					}
					t.Run(fmt.Sprintf("reverse=%v/%s/own=%v/%s", dir.reverse, where_, own, mv.name), func(t *testing.T) {
						t.Parallel()
						if where_ == "file" {
							onDisk(t, -1)
						} else {
							setResidency(t, 1<<20, -1)
						}
						s := openAt(t, bigInventory(t, n))
						mt := s.tables["inventory"]
						require.Equal(t, where_ == "memory", mt.res.Load() != nil)

						sg := s.Stage()
						inv := tbl(t, sg, "inventory")
						if own { // the run rewrote the row it then reads
							_, err := inv.Update(table.Row{"quantity_in_stock": int64(5)}, table.Query{Where: where("item_id", dir.read)})
							require.NoError(t, err)
						}
						rows := find(t, inv, table.Query{Where: where("name", "N1"), Reverse: dir.reverse, Limit: 1})
						require.Len(t, rows, 1)
						require.Equal(t, dir.read, rows[0]["item_id"])
						p := sg.Pending()

						other := s.Stage()
						require.NoError(t, mv.change(tbl(t, other, "inventory")))
						require.NoError(t, other.Apply(bg))
						err := s.Conflicts(bg, p)
						if conflict {
							assert.ErrorIs(t, err, store.ErrConflict, "a move inside the range the read walked")
						} else {
							assert.NoError(t, err, "a move outside the range the read walked")
						}
					})
				}
			}
		}
	}
}
