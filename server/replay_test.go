package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
)

// POST /v1/runs/{id}/replay runs a recorded run again and says whether it gives the recorded
// result; an unknown run is a 404, and a replay writes nothing.
func TestReplayOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	doc := f.run(example(t, "02_purchase_wayfarer.star"), "Purchase 3 Wayfarer sunglasses for customer Alice.")
	ledger := f.count("transactions")

	r := f.call("POST", "/v1/runs/"+doc.RunID+"/replay", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var rep engine.ReplayReport
	r.decode(t, &rep)
	assert.True(t, rep.Identical, "%v", rep.Differences)
	assert.Equal(t, doc.RunID, rep.RunID)
	assert.Equal(t, ledger, f.count("transactions"), "a replay writes nothing")
	assert.Equal(t, int64(6), f.committed("inventory", "SG002")["quantity_in_stock"])

	r = f.call("POST", "/v1/runs/r_0000000000/replay", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Equal(t, CodeUnknownRun, r.errorCode(t))

	noProgram := f.run("I cannot write a plan for that.", "hello")
	r = f.call("POST", "/v1/runs/"+noProgram.RunID+"/replay", nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	assert.Equal(t, CodeNotReplayable, r.errorCode(t))
}

// A JSON step plan is accepted where a reply or a program is: checked, run as a dry run with its
// digest, and applied like any run; the compiled program comes back as the run's program.
func TestPlanJSONOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	plan := map[string]any{"steps": []any{
		map[string]any{"id": "item", "tool": "inventory_tbl.get", "args": []any{map[string]any{"name": map[string]any{"$ieq": "aviator"}}}},
		map[string]any{"id": "done", "tool": "respond", "args": map[string]any{
			"status": "success", "answer_text": map[string]any{"$expr": "'We have %d Aviator.' % item['quantity_in_stock']"}}},
	}}
	r := f.call("POST", "/v1/check", map[string]any{"plan_json": plan})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var rep CheckReport
	r.decode(t, &rep)
	assert.True(t, rep.OK, "%v", rep.Diagnostics)

	r = f.call("POST", "/v1/runs", map[string]any{"plan_json": plan, "request": "How many Aviator?"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(t, &doc)
	assert.Equal(t, "We have 23 Aviator.", doc.AnswerText)
	assert.Contains(t, doc.Program, "item = inventory_tbl.get(")

	bad := map[string]any{"steps": []any{map[string]any{"id": "x", "tool": "inventory_tbl.drop"}}}
	r = f.call("POST", "/v1/check", map[string]any{"plan_json": bad})
	require.Equal(t, http.StatusOK, r.status)
	r.decode(t, &rep)
	assert.False(t, rep.OK)
	require.NotEmpty(t, rep.Diagnostics)
	assert.Equal(t, "plan-json-unknown-tool", rep.Diagnostics[0].Code)

	r = f.call("POST", "/v1/runs", map[string]any{"plan_json": plan, "program": "x = 1"})
	assert.Equal(t, http.StatusBadRequest, r.status)

	r = f.call("GET", "/v1/describe", nil)
	require.Equal(t, http.StatusOK, r.status)
	var d Description
	r.decode(t, &d)
	assert.Contains(t, d.PlanTools, "transactions_tbl.insert")
}

// A damaged audit record does not take the run list down: the others list, and the damaged one is
// named apart.
func TestListNamesUnreadableRecordsApart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	doc := f.run(example(t, "01_round_under_100.star"), "round?")
	require.NoError(t, f.st.PutSysDocs(testContext(t), store.SysDoc{Collection: engine.AuditCollection, ID: "r_bad",
		Value: map[string]any{"time": "yesterday"}, Index: &store.SysIndex{Order: "0", Group: engine.StateDone}}))
	r := f.call("GET", "/v1/runs", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var list RunList
	r.decode(t, &list)
	require.Len(t, list.Runs, 1)
	assert.Equal(t, doc.RunID, list.Runs[0].ID)
	assert.Equal(t, []string{"r_bad"}, list.Unreadable)
}

// A plan_json's numbers reach the compiler as the client wrote them.
func TestPlanJSONKeepsNumbers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	body := `{"plan_json": {"steps": [{"id": "a", "tool": "inventory_tbl.search", "args": [{"price": {"$in": [10.0, 9007199254740993, 1e2]}}]},
	  {"id": "done", "tool": "respond", "args": {"status": "success", "answer_text": "ok"}}]}}`
	r := f.call("POST", "/v1/runs", body) // a string body is sent as it is
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(t, &doc)
	assert.Contains(t, doc.Program, `[10.0, 9007199254740993, 1e2]`)
}
