package bolt

import (
	"errors"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

// restock stages a new stock count for one item, by its key: a change that reads nothing else.
func restock(t *testing.T, s *Store, id string, n int64) *store.Pending {
	v := s.Stage()
	_, err := tbl(t, v, "inventory").Update(table.Row{"quantity_in_stock": n}, table.Query{Where: where("item_id", id)})
	require.NoError(t, err)
	return v.Pending()
}

// notHeld reports whether the write lock is free: reads and dry runs go on.
func notHeld(t *testing.T, s *Store) bool {
	if !assert.True(t, s.mu.TryRLock(), "verify runs under the store's write lock: every read waits for the rules") {
		return false
	}
	s.mu.RUnlock()
	return true
}

// An apply's verify (the domain's rules) runs outside the write lock; when a table it read is
// committed to meanwhile, it runs again under the lock and sees the table as the commit joins it.
func TestApplyVerifiesOutsideTheWriteLock(t *testing.T) {
	s := openAt(t, t.TempDir())
	p := restock(t, s, "SG001", 5)
	other := s.Stage()
	_, err := tbl(t, other, "transactions").Insert(table.Row{"customer_name": "Bob", "transaction_summary": "a gift card",
		"transaction_amount": 10.0, "balance_after_transaction": 10.0, "timestamp": "2025-01-02T10:00:00"})
	require.NoError(t, err)
	otherP := other.Pending()

	var lasts []any
	verify := func(cs table.ChangeSet, c store.Committed) error {
		first := len(lasts) == 0
		if first && !notHeld(t, s) {
			return errors.New("held")
		}
		assert.Len(t, cs["inventory"].Updated, 1)
		last, ok, err := c.LastRow("transactions")
		require.NoError(t, err)
		require.True(t, ok)
		lasts = append(lasts, last["transaction_id"])
		if first {
			require.NoError(t, s.ApplyPending(bg, otherP, nil), "another apply commits meanwhile")
		}
		return nil
	}
	require.NoError(t, s.ApplyPending(bg, p, verify))
	require.Len(t, lasts, 2, "the table verify read moved: it runs again")
	assert.NotEqual(t, lasts[0], lasts[1])
	row, ok := committed(t, s, "transactions", lasts[1])
	require.True(t, ok)
	assert.Equal(t, "Bob", row["customer_name"])
	row, _ = committed(t, s, "inventory", "SG001")
	assert.Equal(t, int64(5), row["quantity_in_stock"])

	// Nothing it read moved: it runs once.
	lasts = nil
	require.NoError(t, s.ApplyPending(bg, restock(t, s, "SG001", 6), func(cs table.ChangeSet, c store.Committed) error {
		lasts = append(lasts, nil)
		notHeld(t, s)
		_, _, err := c.LastRow("transactions")
		return err
	}))
	assert.Len(t, lasts, 1)
}

// A row the changes replace, committed to while verify runs, is a conflict under the lock, as
// before verify: nothing is written.
func TestApplyRevalidatesAfterVerify(t *testing.T) {
	s := openAt(t, t.TempDir())
	p := restock(t, s, "SG001", 5)
	other := restock(t, s, "SG001", 7)
	err := s.ApplyPending(bg, p, func(table.ChangeSet, store.Committed) error {
		if !notHeld(t, s) {
			return errors.New("held")
		}
		require.NoError(t, s.ApplyPending(bg, other, nil))
		return nil
	})
	require.ErrorIs(t, err, store.ErrConflict)
	row, _ := committed(t, s, "inventory", "SG001")
	assert.Equal(t, int64(7), row["quantity_in_stock"])
}
