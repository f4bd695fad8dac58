package contracts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/table"
)

// The register balance, computed from the committed balance and the new amounts, never goes
// below zero; the balance field the plan wrote does not matter (balance_chain judges that).
func TestNonNegativeBalance(t *testing.T) {
	d := loadInventory(t)
	check := func(cs table.ChangeSet) []string {
		t.Helper()
		ds, err := d.Check(contracts.Input{Globals: globals("success", "Done."), Changes: cs, Committed: seeded})
		require.NoError(t, err)
		return codes(ds)
	}
	// A return of 7 Sport (7 × 110 = 770) from a register holding 500.
	cs := order(ups(stock("SG004", 18)), txn("TXN002", -770, -270))
	assert.Equal(t, []string{contracts.CodeBalanceNegative}, check(cs))
	ds, err := d.Check(contracts.Input{Globals: globals("success", "Done."), Changes: cs, Committed: seeded})
	require.NoError(t, err)
	assert.Contains(t, ds[0].Message, `new transactions row "TXN002" (transaction_amount -770.00) takes the balance from 500.00 to -270.00; it must stay >= 0`)
	// The same return with a balance field that hides it: the chain and the floor both report.
	assert.Equal(t, []string{contracts.CodeBalanceChain, contracts.CodeBalanceNegative}, check(order(ups(stock("SG004", 18)), txn("TXN002", -770, 30))))
	// Down to exactly zero is allowed: returns of 4 Aviator (320) and 3 Classic (180).
	assert.Empty(t, check(order(ups(stock("SG001", 27), stock("SG005", 13)), txn("TXN002", -320, 180), txn("TXN003", -180, 0))))
	// Order matters: a refund that dips below zero before a sale restores it is refused.
	codes := check(order(ups(stock("SG004", 1), stock("SG006", 16)), txn("TXN002", -720, -220), txn("TXN003", 1100, 880)))
	assert.Contains(t, codes, contracts.CodeBalanceNegative)
}

// Integers are compared exactly: at 2^53 a float64 cannot tell n from n+1, and a stock change
// would then need no transaction.
func TestIntegersAreComparedExactly(t *testing.T) {
	d := loadInventory(t)
	const big = int64(1) << 53
	before := table.Row{"item_id": "SG001", "name": "Aviator", "quantity_in_stock": big + 1, "price": 80.0}
	after := table.Row{"item_id": "SG001", "name": "Aviator", "quantity_in_stock": big, "price": 80.0}
	cs := table.ChangeSet{"inventory": &table.TableChanges{Key: "item_id", Updated: []table.Update{
		{Key: "SG001", Before: before, After: after, Fields: []string{"quantity_in_stock"}},
	}}}
	ds, err := d.Check(contracts.Input{Globals: globals("success", "Done."), Changes: cs, Committed: seeded})
	require.NoError(t, err)
	require.Len(t, ds, 1, ds.String())
	assert.Equal(t, contracts.CodeLedgerMissing, ds[0].Code)
	assert.Contains(t, ds[0].Message, "9007199254740993 → 9007199254740992, down 1")

	// An int key that changes by one beyond 2^53 is a changed key.
	dk, err := contracts.Parse(strings.NewReader(`{"name": "k", "contract": {"statuses": ["success"], "write_status": "success",
		"answer_max_sentences": 1, "answer_max_chars": 10}, "rules": [{"name": "keys", "kind": "key_immutable", "doc": "keys stay"}]}`))
	require.NoError(t, err)
	cs = table.ChangeSet{"t": &table.TableChanges{Key: "id", Updated: []table.Update{
		{Key: big + 1, Before: table.Row{"id": big + 1}, After: table.Row{"id": big}, Fields: []string{"id"}},
	}}}
	ds, err = dk.Check(contracts.Input{Globals: globals("success", "Done."), Changes: cs})
	require.NoError(t, err)
	require.Len(t, ds, 1, ds.String())
	assert.Equal(t, contracts.CodeKeyChanged, ds[0].Code)
}
