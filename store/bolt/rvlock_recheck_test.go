package bolt

import (
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
	t.Skip("rvlock: walkRange (reads.go) walks every index candidate of a predicate read, not only its range [From, To]; fix pending")
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
