package contracts_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/table"
)

func TestLoad(t *testing.T) {
	assert.Equal(t, []string{"inventory", "library"}, contracts.Names())

	d := loadInventory(t)
	assert.Equal(t, "inventory", d.Name)
	assert.Equal(t, []string{"success", "no_match", "insufficient_stock", "invalid_request", "unsupported_intent"}, d.Contract.Statuses)
	assert.Equal(t, "success", d.Contract.WriteStatus)
	assert.Equal(t, 2, d.Contract.MaxSentences)
	assert.Equal(t, 400, d.Contract.MaxChars)

	_, err := contracts.Load("bakery")
	assert.ErrorContains(t, err, `no built-in domain "bakery" (have inventory, library)`)
}

func TestDescribe(t *testing.T) {
	docs := loadInventory(t).Describe()
	var names []string
	for _, doc := range docs {
		names = append(names, doc.Name)
		assert.NotEmpty(t, doc.Doc, doc.Name)
		assert.NotContains(t, doc.Doc, "\n", doc.Name)
	}
	assert.Equal(t, []string{
		"answer_text", "STATUS", "status_permits_writes",
		"only_inventory_and_transactions", "no_deletions", "no_new_items", "keys_immutable", "only_stock_changes",
		"stock_non_negative", "ledger_append_only", "one_transaction_per_item", "balance_chain", "register_never_negative",
	}, names)
	assert.Contains(t, docs[0].Doc, "at most 2 sentences and 400 characters")
	assert.Equal(t, "STATUS: one of success, no_match, insufficient_stock, invalid_request, unsupported_intent", docs[1].Doc)
	assert.Equal(t, `nothing may be written unless STATUS is "success"`, docs[2].Doc)
	assert.Equal(t, "contract", docs[0].Kind)
	assert.Equal(t, "ledger_per_item", docs[10].Kind)
}

func TestKinds(t *testing.T) {
	ks := contracts.Kinds()
	require.Len(t, ks, len(contracts.KindNames()))
	for _, k := range ks {
		assert.NotEmpty(t, k.Doc, k.Name)
	}
	// The embedded domain uses every kind, so each is exercised by the policy tests; the starlark
	// kind has its own (TestStarlarkRules, and engine's TestInvariantsInStarlark).
	used := map[string]bool{"starlark": true}
	for _, r := range loadInventory(t).Rules {
		used[r.Kind] = true
	}
	for _, k := range contracts.KindNames() {
		assert.True(t, used[k], "kind %s is not used by the inventory domain", k)
	}
}

const minimal = `{"name": "x", "contract": {"statuses": ["success"], "write_status": "success", "answer_max_sentences": 2, "answer_max_chars": 400}, "rules": [%s]}`

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"not JSON", `{`, "decoding domain"},
		{"unknown field", `{"name": "x", "colour": 1}`, `unknown field "colour"`},
		{"trailing data", `{"name": "x", "contract": {"statuses": ["a"], "answer_max_sentences": 1, "answer_max_chars": 1}} {}`, "trailing data"},
		{"no name", `{"contract": {"statuses": ["a"]}}`, "name is empty"},
		{"no statuses", `{"name": "x", "contract": {"answer_max_sentences": 1, "answer_max_chars": 1}}`, "statuses is empty"},
		{"duplicate status", `{"name": "x", "contract": {"statuses": ["a", "a"], "answer_max_sentences": 1, "answer_max_chars": 1}}`, "duplicate value"},
		{"write status not allowed", `{"name": "x", "contract": {"statuses": ["a"], "write_status": "b", "answer_max_sentences": 1, "answer_max_chars": 1}}`, `write_status "b"`},
		{"no limits", `{"name": "x", "contract": {"statuses": ["a"]}}`, "must be > 0"},
		{"unknown kind", fmtRules(`{"name": "r", "doc": "d", "kind": "no_delete"}`), `unknown kind "no_delete"`},
		{"missing param", fmtRules(`{"name": "r", "doc": "d", "kind": "append_only"}`), `missing parameter "table"`},
		{"unknown param", fmtRules(`{"name": "r", "doc": "d", "kind": "append_only", "params": {"table": "t", "tabel": "t"}}`), `unknown parameter tabel (known: table)`},
		{"mistyped param", fmtRules(`{"name": "r", "doc": "d", "kind": "only_tables", "params": {"tables": "t"}}`), `"tables" must be a non-empty list`},
		{"empty string param", fmtRules(`{"name": "r", "doc": "d", "kind": "append_only", "params": {"table": ""}}`), `"table" must be a non-empty string`},
		{"duplicate rule", fmtRules(`{"name": "r", "doc": "d", "kind": "no_deletes"}, {"name": "r", "doc": "d", "kind": "no_deletes"}`), `rule "r": duplicate name`},
		{"rule named like a contract item", fmtRules(`{"name": "STATUS", "doc": "d", "kind": "no_deletes"}`), `duplicate name`},
		{"multi-line doc", fmtRules(`{"name": "r", "doc": "a\nb", "kind": "no_deletes"}`), "one non-empty line"},
		{"unnamed rule", fmtRules(`{"doc": "d", "kind": "no_deletes"}`), "rule 1: name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := contracts.Parse(strings.NewReader(tt.json))
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func fmtRules(rules string) string { return strings.Replace(minimal, "%s", rules, 1) }

// A domain built by hand rather than by Parse is an error, not a silent pass.
func TestCheckUnresolvedRule(t *testing.T) {
	d := &contracts.Domain{Name: "x", Contract: contracts.Contract{Statuses: []string{"success"}, MaxSentences: 1, MaxChars: 10},
		Rules: []contracts.Rule{{Name: "r", Doc: "d", Kind: "no_deletes"}}}
	_, err := d.Check(contracts.Input{Globals: globals("success", "Hi.")})
	assert.ErrorContains(t, err, "not validated")
}

// Another domain brings its own file and reuses the kinds with its own tables and fields: a
// bakery whose ledger is "sales" with "amount" and "till".
const bakery = `{
  "name": "bakery",
  "contract": {"statuses": ["done", "sold_out"], "write_status": "done", "answer_max_sentences": 1, "answer_max_chars": 80},
  "rules": [
    {"name": "tables", "kind": "only_tables", "doc": "cakes and sales only", "params": {"tables": ["cakes", "sales"]}},
    {"name": "per_cake", "kind": "ledger_per_item", "doc": "one sale per cake", "params":
      {"stock_table": "cakes", "stock_field": "left", "price_field": "cost", "ledger_table": "sales", "amount_field": "amount"}},
    {"name": "till", "kind": "balance_chain", "doc": "the till adds up", "params":
      {"ledger_table": "sales", "amount_field": "amount", "balance_field": "till"}}
  ]
}`

func TestOtherDomain(t *testing.T) {
	d, err := contracts.Parse(strings.NewReader(bakery))
	require.NoError(t, err)
	cake := table.Row{"id": int64(7), "left": int64(4), "cost": 2.5}
	sold := table.Row{"id": int64(7), "left": int64(2), "cost": 2.5}
	cs := table.ChangeSet{
		"cakes": {Key: "id", Updated: []table.Update{{Key: int64(7), Before: cake, After: sold, Fields: []string{"left"}}}},
		"sales": {Key: "n", Inserted: []table.Row{{"n": int64(1), "amount": 5.0, "till": 5.0}}},
	}
	in := contracts.Input{Globals: map[string]any{"STATUS": "done", "answer_text": "Two cakes sold."}, Changes: cs, Committed: contracts.LastRows{}}
	got, err := d.Check(in)
	require.NoError(t, err)
	assert.Empty(t, got, "%s", got)

	in.Globals = map[string]any{"STATUS": "sold_out", "answer_text": "Two cakes sold. Thanks."}
	cs["sales"].Inserted = []table.Row{{"n": int64(1), "amount": 2.5, "till": 2.5}, {"n": int64(2), "amount": 2.5, "till": 5.0}}
	got, err = d.Check(in)
	require.NoError(t, err)
	assert.Equal(t, []string{contracts.CodeAnswerSentences, contracts.CodeWritesNotAllowed, contracts.CodeLedgerPerUnit}, codes(got),
		"%s", got)
	assert.Contains(t, got.String(), "sales")
	assert.Contains(t, got.String(), "cost")
}

func BenchmarkCheckTwoItemOrder(b *testing.B) {
	d := loadInventory(b)
	in := contracts.Input{
		Globals:   globals("success", "Your order of 3 Classic and 1 Aviator sunglasses is confirmed for $260.00. Thank you!"),
		Changes:   order(ups(stock("SG005", 7), stock("SG001", 22)), txn("TXN002", 180, 680), txn("TXN003", 80, 760)),
		Committed: seeded,
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := d.Check(in)
		if err != nil || len(got) != 0 {
			b.Fatal(err, got)
		}
	}
}

// Kinds with an optional table list apply to those tables only.
func TestScopedKinds(t *testing.T) {
	d, err := contracts.Parse(strings.NewReader(fmtRules(`
		{"name": "keep_a", "doc": "rows of a stay", "kind": "no_deletes", "params": {"tables": ["a"]}},
		{"name": "a_keys", "doc": "keys of a stay", "kind": "key_immutable", "params": {"tables": ["a"]}}`)))
	require.NoError(t, err)
	rename := func() *table.TableChanges {
		return &table.TableChanges{Key: "k", Deleted: []table.Row{{"k": "x"}},
			Updated: []table.Update{{Key: "y", Before: table.Row{"k": "y"}, After: table.Row{"k": "z"}, Fields: []string{"k"}}}}
	}
	got, err := d.Check(contracts.Input{Globals: map[string]any{"STATUS": "success", "answer_text": "Ok."},
		Changes: table.ChangeSet{"a": rename(), "b": rename()}})
	require.NoError(t, err)
	assert.Equal(t, []string{contracts.CodeDeleteNotAllowed, contracts.CodeKeyChanged}, codes(got), "%s", got)
	assert.NotContains(t, got.String(), " b row")
}

func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/starplan/starplan/contracts").Output()
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(out)) {
		assert.False(t, strings.HasPrefix(pkg, "go.starlark.net"), pkg)
		assert.NotEqual(t, "github.com/starplan/starplan/store", pkg)
		if strings.HasPrefix(pkg, "github.com/starplan/starplan/") {
			assert.Contains(t, []string{"github.com/starplan/starplan/contracts", "github.com/starplan/starplan/table",
				"github.com/starplan/starplan/diag", "github.com/starplan/starplan/domains", "github.com/starplan/starplan/internal/spell", "github.com/starplan/starplan/internal/termsafe"}, pkg)
		}
	}
}

// Every kind says which of its parameters name tables and fields, and CheckSchema finds each
// name a domain's tables lack.
func TestCheckSchema(t *testing.T) {
	for _, k := range contracts.Kinds() {
		for _, p := range strings.Split(strings.NewReplacer("[", "", "]", "").Replace(k.Params), ", ") {
			assert.True(t, contracts.KindRefersTo(k.Name, p), "kind %s: parameter %s is not in refs", k.Name, p)
		}
	}
	d := loadInventory(t)
	fields := map[string][]string{
		"inventory":    {"item_id", "name", "description", "quantity_in_stock", "price"},
		"transactions": {"transaction_id", "customer_name", "transaction_summary", "transaction_amount", "balance_after_transaction", "timestamp"},
	}
	assert.Empty(t, d.CheckSchema(fields))

	fields["stock"] = fields["inventory"]
	delete(fields, "inventory")
	fields["transactions"] = []string{"transaction_id", "amount", "balance_after_transaction"}
	var msgs []string
	for _, err := range d.CheckSchema(fields) {
		msgs = append(msgs, err.Error())
	}
	assert.Contains(t, msgs, `rule "only_inventory_and_transactions": tables names table "inventory", which the domain does not have`)
	assert.Contains(t, strings.Join(msgs, "\n"), `rule "balance_chain": amount_field names field "transaction_amount", which table transactions does not have`)
	assert.Len(t, msgs, 8, "every rule that names a missing table or field")
}

// A starlark rule reports what its function finds, under the rule's name, and a domain whose
// rule names a function nobody bound refuses to bind and to check.
func TestStarlarkRules(t *testing.T) {
	d, err := contracts.Parse(strings.NewReader(fmt.Sprintf(minimal,
		`{"name": "pending_only", "kind": "starlark", "doc": "only a pending order is cancelled", "params": {"function": "check_cancel"}}`)))
	require.NoError(t, err)
	assert.Equal(t, []string{"check_cancel"}, d.InvariantFunctions())
	in := contracts.Input{Globals: map[string]any{contracts.StatusGlobal: "success", contracts.AnswerGlobal: "Done."},
		Changes: table.ChangeSet{"orders": {Key: "id", Updated: []table.Update{{Key: "o1"}}}}}
	_, err = d.Check(in)
	assert.ErrorContains(t, err, "not bound")
	assert.ErrorContains(t, d.BindInvariants(nil), "names the function check_cancel")

	var seen table.ChangeSet
	require.NoError(t, d.BindInvariants(map[string]contracts.Invariant{"check_cancel": func(_ context.Context, cs table.ChangeSet, _ table.View) ([]contracts.Finding, error) {
		seen = cs
		return []contracts.Finding{{Message: "order o1 is shipped; it cannot be cancelled", Hint: "cancel only pending orders"}}, nil
	}}))
	ds, err := d.Check(in)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, "pending_only", ds[0].Code)
	assert.Equal(t, "cancel only pending orders", ds[0].Hint)
	assert.Equal(t, in.Changes, seen)
}

// The starlark rules are bounded together: at most MaxStarlarkRules of them, and one deadline
// for all, which each function is given.
func TestStarlarkRulesAreBounded(t *testing.T) {
	var rules []string
	for i := range contracts.MaxStarlarkRules + 1 {
		rules = append(rules, fmt.Sprintf(`{"name": "r%d", "kind": "starlark", "doc": "d", "params": {"function": "f"}}`, i))
	}
	_, err := contracts.Parse(strings.NewReader(fmt.Sprintf(minimal, strings.Join(rules, ", "))))
	assert.ErrorContains(t, err, "at most 16 are allowed")

	d, err := contracts.Parse(strings.NewReader(fmt.Sprintf(minimal, rules[0])))
	require.NoError(t, err)
	require.NoError(t, d.BindInvariants(map[string]contracts.Invariant{"f": func(ctx context.Context, _ table.ChangeSet, _ table.View) ([]contracts.Finding, error) {
		return nil, ctx.Err()
	}}))
	ds, err := d.Check(contracts.Input{Globals: map[string]any{contracts.StatusGlobal: "success", contracts.AnswerGlobal: "Done."},
		Deadline: time.Now().Add(-time.Second)})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Contains(t, ds[0].Message, "deadline exceeded")
}
