package bolt

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

// Reads that depend on rows being absent: each run reads something, another run's commit
// changes what that read would find without touching a row the run was handed, and the apply
// must conflict. Each case also has a commit that must not conflict, so that predicate reads
// are not just "any change to the table".
func TestPredicateReadConflicts(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	lastTxn := func(t *testing.T, v table.View) {
		find(t, tbl(t, v, "transactions"), table.Query{Reverse: true, Limit: 1})
	}
	insertTxn := func(key string) func(t *testing.T, v table.View) {
		return func(t *testing.T, v table.View) {
			_, err := tbl(t, v, "transactions").Insert(txnRow(key, 1))
			require.NoError(t, err)
		}
	}
	for _, tc := range []struct {
		name     string
		read     func(t *testing.T, v table.View)
		conflict func(t *testing.T, v table.View) // a commit that changes what read finds
		harmless func(t *testing.T, v table.View) // a commit to the same table that does not
	}{
		{
			name:     "the last row of the ledger",
			read:     lastTxn,
			conflict: insertTxn("TXN900"),
			harmless: func(t *testing.T, v table.View) { update(t, v, "SG001", table.Row{"price": 81}) },
		},
		{
			name: "a search that matched nothing",
			read: func(t *testing.T, v table.View) {
				assert.Empty(t, find(t, tbl(t, v, "inventory"), table.Query{Where: where("name", "Pilot")}))
			},
			conflict: func(t *testing.T, v table.View) { insertItemNamed(t, v, "SG007", "Pilot") },
			harmless: func(t *testing.T, v table.View) { insertItemNamed(t, v, "SG007", "Cat Eye") },
		},
		{
			name: "a search by an indexed field that matched nothing",
			read: func(t *testing.T, v table.View) {
				assert.Empty(t, find(t, tbl(t, v, "inventory"), table.Query{Where: where("quantity_in_stock", 999)}))
			},
			conflict: func(t *testing.T, v table.View) { update(t, v, "SG002", table.Row{"quantity_in_stock": 999}) },
			harmless: func(t *testing.T, v table.View) { update(t, v, "SG002", table.Row{"quantity_in_stock": 998}) },
		},
		{
			name: "a limited search covers only the rows up to where it stopped",
			read: func(t *testing.T, v table.View) {
				rows := find(t, tbl(t, v, "inventory"), table.Query{Where: map[string]any{"price": map[string]any{"$lt": 1000}}, Limit: 2})
				require.Equal(t, []any{"SG001", "SG002"}, keys(t, rows, "item_id"))
			},
			conflict: func(t *testing.T, v table.View) { update(t, v, "SG002", table.Row{"price": 1001}) },
			harmless: func(t *testing.T, v table.View) { update(t, v, "SG005", table.Row{"price": 1001}) },
		},
		{
			name: "a count",
			read: func(t *testing.T, v table.View) {
				n, err := tbl(t, v, "inventory").Count(table.Query{Where: map[string]any{"price": map[string]any{"$lt": 100}}})
				require.NoError(t, err)
				require.Positive(t, n)
			},
			conflict: func(t *testing.T, v table.View) { update(t, v, "SG004", table.Row{"price": 50}) },
			harmless: func(t *testing.T, v table.View) { update(t, v, "SG001", table.Row{"quantity_in_stock": 1}) },
		},
		{
			name:     "the number of rows (count() with no filter, len())",
			read:     func(t *testing.T, v table.View) { require.Equal(t, 1, tbl(t, v, "transactions").Len()) },
			conflict: insertTxn("TXN002"),
		},
		{
			name: "a generated key",
			read: func(t *testing.T, v table.View) {
				k, err := tbl(t, v, "transactions").Insert(table.Row{"customer_name": "Ann", "transaction_amount": 1.0,
					"balance_after_transaction": 501.0, "timestamp": "2025-01-02T10:00:00"})
				require.NoError(t, err)
				require.Equal(t, "TXN002", k)
			},
			conflict: insertTxn("TXN050"),
		},
		{
			name: "the rows an update matched",
			read: func(t *testing.T, v table.View) {
				n, err := tbl(t, v, "inventory").Update(table.Row{"quantity_in_stock": 0}, table.Query{Where: map[string]any{"price": map[string]any{"$gt": 100}}})
				require.NoError(t, err)
				require.Positive(t, n)
			},
			conflict: func(t *testing.T, v table.View) { update(t, v, "SG005", table.Row{"price": 150}) },
		},
		{
			// A table's walks share one record (stageTable.readObs): each is noted whole.
			name: "the first of two walks of a table, the later one shorter",
			read: func(t *testing.T, v table.View) {
				assert.Len(t, find(t, tbl(t, v, "inventory"), table.Query{Where: map[string]any{"price": map[string]any{"$gt": 100}}}), 2)
				assert.Empty(t, find(t, tbl(t, v, "inventory"), table.Query{Where: where("name", "Pilot")}))
			},
			conflict: func(t *testing.T, v table.View) { update(t, v, "SG004", table.Row{"price": 50}) },
			harmless: func(t *testing.T, v table.View) { update(t, v, "SG001", table.Row{"quantity_in_stock": 1}) },
		},
		{
			name: "the first of two walks of a table, the later one longer",
			read: func(t *testing.T, v table.View) {
				assert.Empty(t, find(t, tbl(t, v, "inventory"), table.Query{Where: where("name", "Pilot")}))
				assert.Len(t, find(t, tbl(t, v, "inventory"), table.Query{Where: map[string]any{"price": map[string]any{"$gt": 100}}}), 2)
			},
			conflict: func(t *testing.T, v table.View) { insertItemNamed(t, v, "SG007", "Pilot") },
			harmless: func(t *testing.T, v table.View) { update(t, v, "SG001", table.Row{"quantity_in_stock": 1}) },
		},
		{
			name: "a function filter reads every candidate",
			read: func(t *testing.T, v table.View) {
				q := table.Query{Where: where("name", "Moon"), Match: func(r table.Row) (bool, error) { return r["price"].(float64) > 1000, nil }}
				assert.Empty(t, find(t, tbl(t, v, "inventory"), q))
			},
			conflict: func(t *testing.T, v table.View) { update(t, v, "SG006", table.Row{"price": 2000}) },
			harmless: func(t *testing.T, v table.View) { update(t, v, "SG001", table.Row{"price": 2000}) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			try := func(other func(t *testing.T, v table.View), roundTrip bool) error {
				s := openTemp(t)
				v := s.Stage()
				tc.read(t, v)
				if len(tbl(t, v, "inventory").(*stageTable).writes) == 0 {
					update(t, v, "SG003", table.Row{"quantity_in_stock": 3}) // something to apply
				}
				p := v.Pending()
				if roundTrip { // as the audit log keeps it, applied by another process
					raw, err := json.Marshal(p)
					require.NoError(t, err)
					p = new(store.Pending)
					require.NoError(t, json.Unmarshal(raw, p))
				}
				o := s.Stage()
				other(t, o)
				require.NoError(t, o.Apply(bg))
				before := dumpString(t, s)
				err := s.ApplyPending(bg, p, nil)
				if err != nil {
					assert.Equal(t, before, dumpString(t, s), "a refused apply writes nothing")
				}
				return err
			}
			for _, rt := range []bool{false, true} {
				err := try(tc.conflict, rt)
				require.ErrorIs(t, err, store.ErrConflict, "round trip %v", rt)
				var ce *store.ConflictError
				require.ErrorAs(t, err, &ce)
				t.Log(ce.Conflicts[0].String())
				if tc.harmless != nil {
					assert.NoError(t, try(tc.harmless, rt), "round trip %v", rt)
				}
			}
		})
	}
}

func insertItemNamed(t *testing.T, v table.View, id, name string) {
	t.Helper()
	_, err := tbl(t, v, "inventory").Insert(table.Row{"item_id": id, "name": name, "quantity_in_stock": 1, "price": 10.0})
	require.NoError(t, err)
}

// A plan that reads the same thing in a loop records one read, and a plan that reads without end
// makes the run depend on the whole table rather than growing its record.
func TestPredicateReadsStayBounded(t *testing.T) {
	s := openTemp(t)
	v := s.Stage()
	tx := tbl(t, v, "transactions")
	for range 1000 {
		find(t, tx, table.Query{Reverse: true, Limit: 1})
	}
	require.Len(t, v.Pending().Reads, 1)
	for i := range store.MaxPredReads + 1 {
		find(t, tx, table.Query{Where: where("customer_name", fmt.Sprint("c", i))})
	}
	assert.Equal(t, []store.PendingRead{{Table: "transactions", All: true, Version: 1}}, v.Pending().Reads)
}
