package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/planjson"
)

// wayfarerPlan is the lab's "Purchase 3 Wayfarer for Alice" as a plan-and-execute planner would
// write it: steps, results referred to by id.
const wayfarerPlan = `{"steps": [
  {"id": "item", "tool": "inventory_tbl.get", "args": [{"name": {"$ieq": "wayfarer"}}]},
  {"id": "sold", "tool": "inventory_tbl.update",
   "args": [{"quantity_in_stock": {"$expr": "item['quantity_in_stock'] - 3"}}, {"$ref": "item"}]},
  {"id": "sale", "tool": "transactions_tbl.insert", "depends_on": ["sold"], "args": [{
     "transaction_id": {"$expr": "next_transaction_id(transactions_tbl)"},
     "customer_name": "Alice", "transaction_summary": "Purchase of 3 x Wayfarer",
     "transaction_amount": {"$expr": "item['price'] * 3"},
     "balance_after_transaction": {"$expr": "get_current_balance(transactions_tbl) + item['price'] * 3"},
     "timestamp": {"$expr": "now()"}}]},
  {"id": "done", "tool": "respond", "depends_on": ["sale"],
   "args": {"status": "success", "answer_text": {"$expr": "f\"Sold 3 Wayfarer to Alice for ${item['price'] * 3:.2f}.\""}}}
]}`

// A JSON step plan goes through the same check, run, contract, diff and approval as a written
// one; the compiled program is kept with the run, the plan as its reply.
func TestRunPlanJSON(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{PlanJSON: json.RawMessage(wayfarerPlan), UserRequest: "Purchase 3 Wayfarer for Alice", Origin: "test"})
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.True(t, res.Pending)
	assert.Equal(t, "Sold 3 Wayfarer to Alice for $285.00.", res.AnswerText)
	assert.Contains(t, res.Program, "sold = inventory_tbl.update(")
	assert.Equal(t, 2, res.Changes.Rows())

	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.JSONEq(t, wayfarerPlan, rec.Reply, "the plan as the planner sent it")
	assert.Equal(t, res.Program, rec.Program, "and the program that ran")

	applied, err := e.Apply(ctx, res.RunID)
	require.NoError(t, err)
	assert.True(t, applied.Applied)

	bad, err := e.Run(ctx, Request{PlanJSON: json.RawMessage(`{"steps": [{"id": "x", "tool": "inventory_tbl.delete_all"}]}`)})
	require.NoError(t, err)
	assert.Equal(t, OutcomeCheckFailed, bad.Outcome)
	require.Len(t, bad.Diagnostics, 1)
	assert.Equal(t, planjson.CodeUnknownTool, bad.Diagnostics[0].Code)
	_, err = e.Record(bad.RunID)
	assert.NoError(t, err, "a plan that does not compile is in the audit log too")

	_, err = e.Run(ctx, Request{Reply: "x = 1", PlanJSON: json.RawMessage(wayfarerPlan)})
	assert.Error(t, err, "a reply or a plan, not both")
}

func TestPlanToolsNameTableMethodsAndHelpers(t *testing.T) {
	e, _ := newEngine(t)
	assert.Subset(t, e.planTools, []string{"inventory_tbl.get", "transactions_tbl.insert", "inventory_tbl.update", "get_current_balance", "next_transaction_id", "now"})
	assert.NotContains(t, e.planTools, "len", "language builtins are reached through $expr")
}

// A compiled plan runs as compiled: text in it that looks like a reply's tag is a string, not a
// block to extract.
func TestPlanJSONRunsAsCompiled(t *testing.T) {
	e, _ := newEngine(t)
	res, err := e.Run(context.Background(), Request{PlanJSON: json.RawMessage(`{"steps": [
	  {"id": "n", "tool": "inventory_tbl.count"},
	  {"id": "done", "tool": "respond", "args": {"status": "success", "answer_text": {"$expr": "'<execute_python>x = 1</execute_python> %d' % n"}}}
	]}`)})
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "<execute_python>x = 1</execute_python> 6", res.AnswerText)
}
