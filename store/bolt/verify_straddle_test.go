package bolt

import (
	"errors"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

// A verify that runs outside the write lock reads each table at its own moment: two reads of two
// tables can straddle another commit and see a state the store never held. A refusal based on
// such a mix must not stand (the apply refused "against the data as it is now" is marked
// conflicted for good by the engine): the store must run verify again under the write lock, as
// it does when verify passed and a table it read moved.
func TestAVerifyRefusalOnReadsThatStraddleACommitIsCheckedAgain(t *testing.T) {
	s := openAt(t, t.TempDir())
	lastInv, ok, err := s.Stage().LastRow("inventory")
	require.NoError(t, err)
	require.True(t, ok)
	lastTx, ok, err := s.Stage().LastRow("transactions")
	require.NoError(t, err)
	require.True(t, ok)
	invKey, txKey := lastInv["item_id"], lastTx["transaction_id"]

	p := restock(t, s, "SG001", 5)

	// Another apply that changes both tables in one commit.
	other := s.Stage()
	_, err = tbl(t, other, "inventory").Update(table.Row{"quantity_in_stock": int64(999)}, table.Query{Where: where("item_id", invKey)})
	require.NoError(t, err)
	_, err = tbl(t, other, "transactions").Insert(table.Row{"customer_name": "Bob", "transaction_summary": "a gift card",
		"transaction_amount": 10.0, "balance_after_transaction": 10.0, "timestamp": "2025-01-02T10:00:00"})
	require.NoError(t, err)
	otherP := other.Pending()

	calls := 0
	verify := func(cs table.ChangeSet, c store.Committed) error {
		calls++
		inv, _, err := c.LastRow("inventory")
		if err != nil {
			return err
		}
		if calls == 1 {
			require.NoError(t, s.ApplyPending(bg, otherP, nil), "another apply commits between verify's two reads")
		}
		tx, _, err := c.LastRow("transactions")
		if err != nil {
			return err
		}
		// A rule that is true of every state the store held (before the other commit and after
		// it) and false only of the torn mix of the two.
		if inv["quantity_in_stock"] != int64(999) && tx["transaction_id"] != txKey {
			return errors.New("torn read: inventory before the other commit, transactions after it")
		}
		return nil
	}
	require.NoError(t, s.ApplyPending(bg, p, verify),
		"verify refused a state the store never held; it should run again under the write lock")
}
