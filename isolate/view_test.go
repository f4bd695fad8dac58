package isolate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// everyCall uses every table helper, with dict and function filters, reads and writes.
const everyCall = `
inv = inventory_tbl
n = len(inv)
c = inv.count({"price": {"$lt": 100}})
cf = inv.count(lambda r: r["price"] < 100)
call = inv.count()
cheap = [r["item_id"] for r in inv.search({"price": {"$lt": 100}})]
cheapf = [r["item_id"] for r in inv.search(lambda r: r["price"] < 100)]
rows = inv.all()
kinds = [type(rows[0]["quantity_in_stock"]), type(rows[0]["price"])]
low = inv.get(lambda r: r["quantity_in_stock"] < 5)
byname = inv.get({"name": {"$ieq": "wayfarer"}})
k = inv.get_by_key("SG002")
missing = inv.get_by_key("SG999")
u1 = inv.update({"price": 99.5}, {"item_id": "SG001"})
u2 = inv.update({"quantity_in_stock": 1}, lambda r: r["price"] > 100)
u3 = inv.update({"quantity_in_stock": 2}, lambda r: False)
rm = inv.remove(lambda r: r["name"] == "Mystique")
key = inv.insert({"item_id": "SG100", "name": "New", "quantity_in_stock": 4, "price": 10})
after = inv.get_by_key("SG100")
txn = next_transaction_id(transactions_tbl)
bal = get_current_balance(transactions_tbl)
transactions_tbl.insert({"transaction_id": txn, "customer_name": "Ann", "transaction_summary": "test",
    "transaction_amount": 10.0, "balance_after_transaction": bal + 10, "timestamp": now()})
newest = transactions_tbl.get(lambda r: True)
print(n, c, cf, len(rows), u1, u2, u3, rm, key, txn, bal)
STATUS = "success"
answer_text = "done"
`

// parityPlans are plans whose isolated result must equal the in-process one: the lab's examples
// and plans that use every table call or fail inside one.
func parityPlans(t *testing.T) map[string]string {
	plans := map[string]string{
		"every_call":           everyCall,
		"unknown_where_field":  `rows = inventory_tbl.search({"pricee": {"$lt": 100}})`,
		"bad_operator":         `rows = inventory_tbl.search({"price": {"$lesser": 100}})`,
		"invalid_insert":       `inventory_tbl.insert({"item_id": "SG101", "name": "X", "quantity_in_stock": -1, "price": 1.0})`,
		"change_the_key":       `inventory_tbl.update({"item_id": "SG777"}, {"item_id": "SG001"})`,
		"key_of_wrong_kind":    `inventory_tbl.get_by_key(1)`,
		"where_func_fails":     `inventory_tbl.search(lambda r: r["nope"] > 1)`,
		"update_func_fails":    `inventory_tbl.update({"price": 1.0}, lambda r: 1 / 0)`,
		"unknown_update_field": `inventory_tbl.update({"colour": "red"}, lambda r: False)`,
		"duplicate_insert":     `inventory_tbl.insert({"item_id": "SG001", "name": "X", "quantity_in_stock": 1, "price": 1.0})`,
		// Extraction fails: the pool answers without a worker, and must answer as in process.
		"no_program":   "Sorry, I cannot look that up.",
		"two_programs": "<execute_python>a = 1</execute_python>\n<execute_python>b = 2</execute_python>",
	}
	files, err := filepath.Glob("../testdata/examples/*.star")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		plans[strings.TrimSuffix(filepath.Base(f), ".star")] = string(src)
	}
	return plans
}

// TestParity: isolated and in process, a plan sees the same data and produces the same result
// and the same staged changes; the reads the parent records are the same, or (for function
// filters, whose candidates cross the pipe) more.
func TestParity(t *testing.T) {
	p := newPool(t, Options{})
	for name, src := range parityPlans(t) {
		t.Run(name, func(t *testing.T) {
			stIn, stIso := openStore(t), openStore(t)
			jIn, stageIn := job(stIn, src, sandbox.Limits{})
			jIso, stageIso := job(stIso, src, sandbox.Limits{})
			want := mustEnv(t, stIn).Run(bg, jIn)
			got := p.Run(bg, jIso)
			if want.Outcome != sandbox.OutcomeOK {
				want.Globals = nil // a failed run's half-set globals do not cross
			}
			want.Duration, got.Duration = 0, 0
			want.Phases, got.Phases = sandbox.Phases{}, sandbox.Phases{} // times, too
			if want.Outcome == sandbox.OutcomeLimitExceeded {
				// Where a memory guard stops a plan depends on the heap it started from.
				assert.Equal(t, want.Limit, got.Limit)
				require.NotEmpty(t, got.Diagnostics)
				assert.Equal(t, want.Diagnostics[0].Code, got.Diagnostics[0].Code)
				want.Diagnostics, got.Diagnostics, want.Steps, got.Steps = nil, nil, 0, 0
			}
			assert.Equal(t, want, got)
			assert.Equal(t, stageIn.ChangeSet(), stageIso.ChangeSet())

			pIn, pIso := stageIn.Pending(), stageIso.Pending()
			assert.Equal(t, pIn.Writes, pIso.Writes)
			if !strings.Contains(src, "lambda") {
				assert.Equal(t, pIn.Reads, pIso.Reads)
			}
			for _, r := range pIn.Reads {
				assert.True(t, covered(r, pIso.Reads), "the isolated run recorded the read of %+v", r)
			}
		})
	}
}

// covered reports whether reads include r, or a read of r's whole table.
func covered(r store.PendingRead, reads []store.PendingRead) bool {
	for _, x := range reads {
		if x.Table == r.Table && (x.All || x.Key == r.Key) {
			return true
		}
	}
	return false
}

// TestTableCallsReachTheView: a plan's reads and writes land in the parent's stage; a read
// then makes the apply conflict when another run changed that row meanwhile.
func TestTableCallsReachTheView(t *testing.T) {
	p := newPool(t, Options{})
	st := openStore(t)
	j, stage := job(st, `
w = inventory_tbl.get_by_key("SG002")
inventory_tbl.update({"quantity_in_stock": 22}, {"item_id": "SG001"})
inventory_tbl.update({"price": 5.0}, lambda r: r["item_id"] == "SG003")
inventory_tbl.remove({"item_id": "SG004"})
key = transactions_tbl.insert({"customer_name": "Ann", "transaction_amount": 1.0,
    "balance_after_transaction": 1.0, "timestamp": now()})
`, sandbox.Limits{})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "TXN002", res.Globals["key"], "the key the parent's stage generated")

	cs := stage.ChangeSet()
	require.Contains(t, cs, "inventory")
	inv := cs["inventory"]
	require.Len(t, inv.Updated, 2)
	assert.Equal(t, int64(22), inv.Updated[0].After["quantity_in_stock"])
	assert.Equal(t, 5.0, inv.Updated[1].After["price"])
	require.Len(t, inv.Deleted, 1)
	assert.Equal(t, "SG004", inv.Deleted[0]["item_id"])
	require.Contains(t, cs, "transactions")
	require.Len(t, cs["transactions"].Inserted, 1)
	assert.Equal(t, fixedNow.Format("2006-01-02T15:04:05"), cs["transactions"].Inserted[0]["timestamp"])

	// Another run changes the row the plan only read; applying the plan's changes must conflict.
	other := st.Stage()
	tb, ok := other.Table("inventory")
	require.True(t, ok)
	_, err := tb.Update(table.Row{"price": 1.0}, table.Query{Where: map[string]any{"item_id": "SG002"}})
	require.NoError(t, err)
	require.NoError(t, st.ApplyPending(bg, other.Pending(), nil))
	assert.ErrorIs(t, st.ApplyPending(bg, stage.Pending(), nil), store.ErrConflict, "the read of SG002 was recorded in the parent's stage")
	_ = time.Second
}

// TestLargeSearchInParts: a search whose answer goes in several parts arrives whole and in
// order, and so does a function filter's candidate list.
func TestLargeSearchInParts(t *testing.T) {
	p := newPool(t, Options{})
	st := openStore(t)
	var rows []map[string]any
	for i := 7; i <= 2*findPart+100; i++ { // three parts: a first, a middle and a short last one
		rows = append(rows, map[string]any{"item_id": fmt.Sprintf("SG%05d", i), "name": fmt.Sprintf("Style %d", i), "quantity_in_stock": i % 7, "price": float64(i)})
	}
	b, err := json.Marshal(rows)
	require.NoError(t, err)
	_, err = st.Import(bg, "inventory", bytes.NewReader(b), bolt.JSON, bolt.Upsert)
	require.NoError(t, err)
	j, _ := job(st, `
rows = inventory_tbl.all()
ids = [r["item_id"] for r in rows]
odd = len(inventory_tbl.search(lambda r: r["quantity_in_stock"] % 2 == 1))
`, sandbox.Limits{})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	n := st.Stage()
	inv, _ := n.Table("inventory")
	all, err := inv.Find(table.Query{})
	require.NoError(t, err)
	ids := make([]any, len(all))
	for i, r := range all {
		ids[i] = r["item_id"]
	}
	assert.Equal(t, ids, res.Globals["ids"], "every row, in key order")
	want, err := inv.Count(table.Query{Match: func(r table.Row) (bool, error) { return r["quantity_in_stock"].(int64)%2 == 1, nil }})
	require.NoError(t, err)
	assert.Equal(t, int64(want), res.Globals["odd"])
}

// mustEnv is the environment of plans over st, its domain's helpers included.
func mustEnv(t testing.TB, st *bolt.Store) *sandbox.Env {
	t.Helper()
	env, err := engine.EnvOf(st)
	require.NoError(t, err)
	return env
}
