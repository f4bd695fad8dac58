package contracts_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/table"
)

func TestPolicy(t *testing.T) {
	d := loadInventory(t)
	const ok = "Done, enjoy your sunglasses."
	tests := []struct {
		name      string
		status    string
		changes   table.ChangeSet
		committed contracts.Committed // default: seeded
		want      []string
		mention   []string // substrings the messages or hints must contain
	}{
		// Correct runs, from ../shared/eval/lab-requests.jsonl.
		{name: "read only (lab-01)", status: "success", want: []string{}},
		{name: "insufficient stock writes nothing (lab-07)", status: "insufficient_stock", changes: table.ChangeSet{}, want: []string{}},
		{name: "purchase (lab-04)", status: "success",
			changes: order(ups(stock("SG002", 3)), txn("TXN002", 285, 785)), want: []string{}},
		{name: "return (lab-02)", status: "success",
			changes: order(ups(stock("SG001", 25)), txn("TXN002", -160, 340)), want: []string{}},
		{name: "two-item order (lab-05)", status: "success",
			changes: order(ups(stock("SG005", 7), stock("SG001", 22)), txn("TXN002", 180, 680), txn("TXN003", 80, 760)),
			want:    []string{}},
		{name: "two-item order, transactions in the other order", status: "success",
			changes: order(ups(stock("SG005", 7), stock("SG001", 22)), txn("TXN002", 80, 580), txn("TXN003", 180, 760)),
			want:    []string{}},
		{name: "two items of the same price", status: "success",
			changes: order(ups(stock("SG005", 9), stock("SG001", 24)), txn("TXN002", 60, 560), txn("TXN003", -80, 480)),
			want:    []string{}},
		{name: "float noise far below a cent", status: "success",
			changes: order(ups(stock("SG002", 3)), txn("TXN002", 0.1*2850, 500+0.1*2850)), want: []string{}},
		{name: "a fraction of a cent off is refused (it would add up row after row)", status: "success",
			changes: order(ups(stock("SG002", 3)), txn("TXN002", 285.004, 785.004)),
			want:    []string{contracts.CodeLedgerAmount, contracts.CodeLedgerMissing, contracts.CodeBalanceChain},
			mention: []string{"285.004", "not a whole number of cents", "785.004"}},
		{name: "first transaction of an empty ledger", status: "success", committed: contracts.LastRows{},
			changes: order(ups(stock("SG005", 7)), txn("TXN001", 180, 180)), want: []string{}},

		// The ledger, one mistake at a time.
		{name: "one transaction for the whole order", status: "success",
			changes: order(ups(stock("SG005", 7), stock("SG001", 22)), txn("TXN002", 260, 760)),
			want:    []string{contracts.CodeLedgerWholeOrder},
			mention: []string{"TXN002", "260.00", `"SG001" 80.00`, `"SG005" 180.00`, "one transactions row per item"}},
		{name: "a total row besides the item rows", status: "success",
			changes: order(ups(stock("SG005", 7), stock("SG001", 22)),
				txn("TXN002", 180, 680), txn("TXN003", 80, 760), txn("TXN004", 260, 1020)),
			want:    []string{contracts.CodeLedgerWholeOrder},
			mention: []string{"TXN004", "remove"}},
		{name: "one transaction per unit", status: "success",
			changes: order(ups(stock("SG005", 7)), txn("TXN002", 60, 560), txn("TXN003", 60, 620), txn("TXN004", 60, 680)),
			want:    []string{contracts.CodeLedgerPerUnit},
			mention: []string{`"TXN002", "TXN003", "TXN004"`, "one per unit", "180.00"}},
		{name: "one transaction per unit of a return", status: "success",
			changes: order(ups(stock("SG001", 25)), txn("TXN002", -80, 420), txn("TXN003", -80, 340)),
			want:    []string{contracts.CodeLedgerPerUnit},
			mention: []string{"-160.00"}},
		{name: "a return recorded as a sale", status: "success",
			changes: order(ups(stock("SG001", 25)), txn("TXN002", 160, 660)),
			want:    []string{contracts.CodeLedgerSign},
			mention: []string{"-160.00", "return"}},
		{name: "a sale recorded as a return", status: "success",
			changes: order(ups(stock("SG002", 3)), txn("TXN002", -285, 215)),
			want:    []string{contracts.CodeLedgerSign},
			mention: []string{"285.00", "sale"}},
		{name: "wrong amount", status: "success",
			changes: order(ups(stock("SG005", 7)), txn("TXN002", 170, 670)),
			want:    []string{contracts.CodeLedgerAmount},
			mention: []string{"170.00", "180.00", "10 → 7"}},
		{name: "amount a cent off", status: "success",
			changes: order(ups(stock("SG002", 3)), txn("TXN002", 284.99, 784.99)),
			want:    []string{contracts.CodeLedgerAmount},
			mention: []string{"284.99", "285.00"}},
		{name: "item without a transaction", status: "success",
			changes: order(ups(stock("SG001", 22))),
			want:    []string{contracts.CodeLedgerMissing},
			mention: []string{`"SG001"`, "80.00"}},
		{name: "second item without a transaction", status: "success",
			changes: order(ups(stock("SG005", 7), stock("SG001", 22)), txn("TXN002", 180, 680)),
			want:    []string{contracts.CodeLedgerMissing},
			mention: []string{`"SG001"`}},
		{name: "transaction without a stock change", status: "success",
			changes: order(nil, txn("TXN002", 80, 580)),
			want:    []string{contracts.CodeLedgerUnmatched},
			mention: []string{"TXN002", "no inventory row changes"}},
		{name: "extra transaction beside a correct one", status: "success",
			changes: order(ups(stock("SG001", 22)), txn("TXN002", 80, 580), txn("TXN003", 5, 585)),
			want:    []string{contracts.CodeLedgerUnmatched},
			mention: []string{"TXN003", `"SG001" needs 80.00`}},
		{name: "amount is not a number", status: "success",
			changes: order(ups(stock("SG001", 22)), table.Row{"transaction_id": "TXN002", "transaction_amount": "80", "balance_after_transaction": 580.0}),
			want:    []string{contracts.CodeLedgerAmount, contracts.CodeLedgerMissing}},
		{name: "broken balance chain", status: "success",
			changes: order(ups(stock("SG005", 7), stock("SG001", 22)), txn("TXN002", 180, 680), txn("TXN003", 80, 580)),
			want:    []string{contracts.CodeBalanceChain},
			mention: []string{"TXN003", "760.00", `680.00 of "TXN002"`}},
		{name: "balance ignores the committed balance", status: "success",
			changes: order(ups(stock("SG002", 3)), txn("TXN002", 285, 285)),
			want:    []string{contracts.CodeBalanceChain},
			mention: []string{`500.00 of "TXN001"`, "785.00"}},
		{name: "a new transaction before the committed ones", status: "success",
			changes: order(ups(stock("SG002", 3)), txn("TXN000", 285, 785)),
			want:    []string{contracts.CodeLedgerOrder},
			mention: []string{"TXN000", "TXN001"}},

		// The other rules.
		{name: "negative stock", status: "success",
			changes: order(ups(stock("SG003", -2)), txn("TXN002", 350, 850)),
			want:    []string{contracts.CodeNegativeValue},
			mention: []string{"quantity_in_stock", "-2"}},
		{name: "deleted item", status: "success",
			changes: table.ChangeSet{"inventory": {Key: "item_id", Deleted: []table.Row{seedInventory["SG006"]}}},
			want:    []string{contracts.CodeDeleteNotAllowed},
			mention: []string{`"SG006"`}},
		{name: "deleted transaction", status: "success",
			changes: table.ChangeSet{"transactions": {Key: "transaction_id", Deleted: []table.Row{txn001}}},
			want:    []string{contracts.CodeDeleteNotAllowed, contracts.CodeAppendOnly}},
		{name: "changed existing transaction", status: "success",
			changes: table.ChangeSet{"transactions": {Key: "transaction_id", Updated: []table.Update{{
				Key: "TXN001", Before: txn001, After: table.Row{"transaction_id": "TXN001", "transaction_amount": 500.0, "balance_after_transaction": 600.0},
				Fields: []string{"balance_after_transaction"},
			}}}},
			want:    []string{contracts.CodeAppendOnly},
			mention: []string{"balance_after_transaction", "TXN001"}},
		{name: "change to another table", status: "success",
			changes: table.ChangeSet{"customers": {Key: "id", Inserted: []table.Row{{"id": "C1", "name": "Alice"}}}},
			want:    []string{contracts.CodeTableNotAllowed},
			mention: []string{"customers", "inventory, transactions"}},
		{name: "key change", status: "success",
			changes: order(ups(edit("SG001", table.Row{"item_id": "SG009"}))),
			want:    []string{contracts.CodeKeyChanged},
			mention: []string{`"SG001"`, `"SG009"`}},
		{name: "price change", status: "success",
			changes: order(ups(edit("SG001", table.Row{"price": 70.0}))),
			want:    []string{contracts.CodeFieldImmutable},
			mention: []string{"price", "only quantity_in_stock"}},
		{name: "new item", status: "success",
			changes: table.ChangeSet{"inventory": {Key: "item_id", Inserted: []table.Row{{"item_id": "SG007", "name": "Clubmaster", "quantity_in_stock": int64(3), "price": 90.0}}}},
			want:    []string{contracts.CodeInsertNotAllowed}},
		{name: "writes under insufficient_stock", status: "insufficient_stock",
			changes: order(ups(stock("SG003", 0)), txn("TXN002", 210, 710)),
			want:    []string{contracts.CodeWritesNotAllowed},
			mention: []string{`"insufficient_stock"`, "changes rows (inventory: 1 updated; transactions: 1 inserted)", `only STATUS "success"`}},
		{name: "writes under an invalid STATUS are the STATUS's problem", status: "sucess",
			changes: order(ups(stock("SG002", 3)), txn("TXN002", 285, 785)),
			want:    []string{contracts.CodeStatusInvalid}},
		{name: "several mistakes at once", status: "success",
			changes: order(ups(stock("SG003", -2), edit("SG001", table.Row{"price": 1.0})), txn("TXN002", 9, 9)),
			want: []string{contracts.CodeFieldImmutable, contracts.CodeNegativeValue,
				contracts.CodeLedgerAmount, contracts.CodeBalanceChain}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			committed := tt.committed
			if committed == nil {
				committed = seeded
			}
			got, err := d.Check(contracts.Input{Globals: globals(tt.status, ok), Changes: tt.changes, Committed: committed})
			require.NoError(t, err)
			assert.Equal(t, tt.want, codes(got), "diagnostics:\n%s", got)
			assertWellFormed(t, got)
			text := got.String()
			for _, m := range tt.mention {
				assert.Contains(t, text, m)
			}
		})
	}
}

func assertWellFormed(t *testing.T, l diag.List) {
	t.Helper()
	for _, d := range l {
		assert.Equal(t, diag.StageContract, d.Stage, d.Code)
		assert.NotEmpty(t, d.Message, d.Code)
		assert.NotEmpty(t, d.Hint, d.Code)
		assert.Zero(t, d.Line, d.Code)
	}
}

// Every lab request that writes, played as a correct change set, passes the policy.
func TestPolicyLabExpectations(t *testing.T) {
	d := loadInventory(t)
	cases := []struct {
		id      string
		after   map[string]int64
		amounts []float64
		balance float64
	}{
		{"lab-02", map[string]int64{"SG001": 25}, []float64{-160}, 340},
		{"lab-04", map[string]int64{"SG002": 3}, []float64{285}, 785},
		{"lab-05", map[string]int64{"SG005": 7, "SG001": 22}, []float64{180, 80}, 760},
		{"lab-09", map[string]int64{"SG004": 1}, []float64{1100}, 1600},
		{"lab-11", map[string]int64{"SG001": 21}, []float64{160}, 660},
		{"lab-13", map[string]int64{"SG001": 20}, []float64{240}, 740},
		{"lab-14", map[string]int64{"SG004": 13}, []float64{-220}, 280},
		{"lab-21", map[string]int64{"SG004": 12}, []float64{-110}, 390},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			var updates []table.Update
			for id, n := range c.after {
				updates = append(updates, stock(id, n))
			}
			var txns []table.Row
			bal := 500.0
			for i, a := range c.amounts {
				bal += a
				txns = append(txns, txn("TXN00"+string(rune('2'+i)), a, bal))
			}
			require.InDelta(t, c.balance, bal, 0.001)
			got, err := d.Check(contracts.Input{Globals: globals("success", "Done."), Changes: order(updates, txns...), Committed: seeded})
			require.NoError(t, err)
			assert.Empty(t, got, "%s", got)
		})
	}
}

type failingCommitted struct{}

func (failingCommitted) LastRow(string) (table.Row, bool, error) {
	return nil, false, errors.New("disk on fire")
}

func TestCheckCommittedErrors(t *testing.T) {
	d := loadInventory(t)
	cs := order(ups(stock("SG002", 3)), txn("TXN002", 285, 785))
	in := contracts.Input{Globals: globals("success", "Done."), Changes: cs}

	_, err := d.Check(in)
	assert.ErrorContains(t, err, "Committed is nil")

	in.Committed = failingCommitted{}
	_, err = d.Check(in)
	assert.ErrorContains(t, err, "disk on fire")
	assert.ErrorContains(t, err, `rule "balance_chain"`)

	in.Committed = contracts.LastRows{"transactions": {"transaction_id": "TXN001", "balance_after_transaction": "lots"}}
	_, err = d.Check(in)
	assert.ErrorContains(t, err, "not a number")

	// A run without new transactions never reads committed data.
	in = contracts.Input{Globals: globals("success", "We have it.")}
	got, err := d.Check(in)
	require.NoError(t, err)
	assert.Empty(t, got)
}

// CheckState holds a whole state to the rules a state can break, and ignores the rules that
// speak of a change (a state "inserts" into the append-only ledger and changes stock without
// ledger rows, which are no faults of a state).
func TestCheckState(t *testing.T) {
	d := loadInventory(t)
	ledger := func(rows ...table.Row) table.ChangeSet {
		return table.ChangeSet{
			"inventory":    {Key: "item_id", Inserted: []table.Row{{"item_id": "SG001", "name": "Aviator", "quantity_in_stock": int64(3), "price": 80.0}}},
			"transactions": {Key: "transaction_id", Inserted: rows},
		}
	}
	row := func(id string, amount, balance float64) table.Row {
		return table.Row{"transaction_id": id, "customer_name": "c", "transaction_summary": "s", "transaction_amount": amount, "balance_after_transaction": balance, "timestamp": "t"}
	}
	ds, err := d.CheckState(ledger(row("TXN001", 500, 500), row("TXN002", 80, 580)))
	require.NoError(t, err)
	assert.Empty(t, ds, "a sound state")

	ds, err = d.CheckState(ledger(row("TXN001", 500, 500), row("TXN002", 80, 590)))
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	assert.Equal(t, contracts.CodeBalanceChain, ds[0].Code)

	ds, err = d.CheckState(ledger(row("TXN001", 500, 500), row("TXN002", -600, -100)))
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	assert.Equal(t, contracts.CodeBalanceNegative, ds[0].Code)
}

// no_inserts and append_only take one table or a list of them, never both, never neither.
func TestTableListKinds(t *testing.T) {
	policy := func(params string) string {
		return `{"name": "d", "contract": {"statuses": ["success"], "write_status": "success", "answer_max_sentences": 1, "answer_max_chars": 100},
			"rules": [{"name": "r", "kind": "no_inserts", "doc": "no inserts", "params": ` + params + `}]}`
	}
	d, err := contracts.Parse(strings.NewReader(policy(`{"tables": ["a", "b"]}`)))
	require.NoError(t, err)
	in := contracts.Input{Globals: map[string]any{"STATUS": "success", "answer_text": "Done."}, Changes: table.ChangeSet{
		"b": {Key: "id", Inserted: []table.Row{{"id": "B1"}}},
		"c": {Key: "id", Inserted: []table.Row{{"id": "C1"}}},
	}}
	ds, err := d.Check(in)
	require.NoError(t, err)
	require.Len(t, ds, 1, "b is listed, c is not")
	assert.Equal(t, contracts.CodeInsertNotAllowed, ds[0].Code)
	assert.Contains(t, ds[0].Message, `inserts b row "B1"`)

	_, err = contracts.Parse(strings.NewReader(policy(`{"table": "a", "tables": ["b"]}`)))
	assert.ErrorContains(t, err, `give "table" or "tables", not both`)
	_, err = contracts.Parse(strings.NewReader(policy(`{}`)))
	assert.ErrorContains(t, err, `missing parameter "table"`)
}
