package contracts_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/table"
)

// The demo store of ../shared/eval/seed-store.json (descriptions left out).
var seedInventory = map[string]table.Row{
	"SG001": {"item_id": "SG001", "name": "Aviator", "quantity_in_stock": int64(23), "price": 80.0},
	"SG002": {"item_id": "SG002", "name": "Wayfarer", "quantity_in_stock": int64(6), "price": 95.0},
	"SG003": {"item_id": "SG003", "name": "Mystique", "quantity_in_stock": int64(3), "price": 70.0},
	"SG004": {"item_id": "SG004", "name": "Sport", "quantity_in_stock": int64(11), "price": 110.0},
	"SG005": {"item_id": "SG005", "name": "Classic", "quantity_in_stock": int64(10), "price": 60.0},
	"SG006": {"item_id": "SG006", "name": "Moon", "quantity_in_stock": int64(10), "price": 120.0},
}

var txn001 = table.Row{
	"transaction_id": "TXN001", "customer_name": "OPENING_BALANCE",
	"transaction_summary": "Daily opening register balance",
	"transaction_amount":  500.0, "balance_after_transaction": 500.0, "timestamp": "2025-01-01T09:00:00",
}

// seeded is the committed state of a freshly seeded store, as the checks read it.
var seeded = contracts.LastRows{"transactions": txn001, "inventory": seedInventory["SG006"]}

func loadInventory(tb testing.TB) *contracts.Domain {
	tb.Helper()
	d, err := contracts.Load("inventory")
	require.NoError(tb, err)
	return d
}

// edit returns an update of a seeded inventory row with the given fields changed.
func edit(id string, fields table.Row) table.Update {
	before := seedInventory[id]
	after := maps.Clone(before)
	var changed []string
	for k, v := range fields {
		after[k] = v
		changed = append(changed, k)
	}
	slices.Sort(changed)
	return table.Update{Key: id, Before: before, After: after, Fields: changed}
}

// stock returns an update of a seeded item's quantity_in_stock to n.
func stock(id string, n int64) table.Update {
	return edit(id, table.Row{"quantity_in_stock": n})
}

func txn(id string, amount, balance float64) table.Row {
	return table.Row{
		"transaction_id": id, "customer_name": "Walk-in", "transaction_summary": "sale",
		"transaction_amount": amount, "balance_after_transaction": balance, "timestamp": "2025-01-02T10:00:00",
	}
}

// order builds a change set of inventory updates (sorted by key, as a staged view lists them)
// and new transactions.
func order(updates []table.Update, txns ...table.Row) table.ChangeSet {
	cs := table.ChangeSet{}
	if len(updates) > 0 {
		slices.SortFunc(updates, func(a, b table.Update) int { return table.CompareKeys(a.Key, b.Key) })
		cs["inventory"] = &table.TableChanges{Key: "item_id", Updated: updates}
	}
	if len(txns) > 0 {
		cs["transactions"] = &table.TableChanges{Key: "transaction_id", Inserted: txns}
	}
	return cs
}

func ups(u ...table.Update) []table.Update { return u }

func globals(status, answer string) map[string]any {
	return map[string]any{"STATUS": status, "answer_text": answer}
}

func codes(l diag.List) []string {
	out := []string{}
	for _, d := range l {
		out = append(out, d.Code)
	}
	return out
}
