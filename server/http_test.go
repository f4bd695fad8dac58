package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

func TestDryRunThenApplyOnceWithTheDigest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	doc := f.run(example(t, "02_purchase_wayfarer.star"), "Purchase 3 Wayfarer sunglasses for customer Alice.")
	assert.Equal(t, engine.OutcomeOK, doc.Outcome)
	assert.Equal(t, StatePending, doc.State)
	assert.True(t, doc.Pending)
	assert.Equal(t, "success", doc.Status)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, doc.Digest)
	want, err := Digest(doc.Changes)
	require.NoError(t, err)
	assert.Equal(t, want, doc.Digest)
	ledger := f.count("transactions")

	// The audit log gives back the same change set, so the same digest.
	r := f.call("GET", "/v1/runs/"+doc.RunID, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var shown RunDocument
	r.decode(t, &shown)
	assert.Equal(t, doc.Digest, shown.Digest)
	assert.Equal(t, OriginHTTP, shown.Origin)
	assert.Equal(t, "Purchase 3 Wayfarer sunglasses for customer Alice.", shown.Request)

	// A digest that is not the run's writes nothing.
	other := strings.Replace(doc.Digest, doc.Digest[len(doc.Digest)-1:], "x", 1)
	r = f.call("POST", "/v1/runs/"+doc.RunID+"/apply", ApplyRequest{Digest: other})
	assert.Equal(t, http.StatusPreconditionFailed, r.status)
	assert.Equal(t, CodeDigestMismatch, r.errorCode(t))
	r = f.call("POST", "/v1/runs/"+doc.RunID+"/apply", ApplyRequest{})
	assert.Equal(t, CodeDigestMismatch, r.errorCode(t), "an empty digest is a wrong one")
	assert.Equal(t, int64(6), f.committed("inventory", "SG002")["quantity_in_stock"])

	first := f.call("POST", "/v1/runs/"+doc.RunID+"/apply", ApplyRequest{Digest: doc.Digest})
	require.Equal(t, http.StatusOK, first.status, "%s", first.body)
	var applied RunDocument
	first.decode(t, &applied)
	assert.Equal(t, StateApplied, applied.State)
	assert.True(t, applied.Applied)
	assert.NotNil(t, applied.AppliedAt)
	assert.Equal(t, int64(3), f.committed("inventory", "SG002")["quantity_in_stock"])
	assert.Equal(t, ledger+1, f.count("transactions"))

	// Applying again answers with the first result and writes nothing.
	second := f.call("POST", "/v1/runs/"+doc.RunID+"/apply", ApplyRequest{Digest: doc.Digest})
	require.Equal(t, http.StatusOK, second.status)
	assert.JSONEq(t, string(first.body), string(second.body))
	assert.Equal(t, int64(3), f.committed("inventory", "SG002")["quantity_in_stock"])
	assert.Equal(t, ledger+1, f.count("transactions"))

	// A wrong digest is refused even for an applied run: it is not the same request.
	r = f.call("POST", "/v1/runs/"+doc.RunID+"/apply", ApplyRequest{Digest: other})
	assert.Equal(t, http.StatusPreconditionFailed, r.status)
}

func TestApplyConflictIsA409WithTheRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	a := f.run(purchase("Aviator", 1, "Ann"), "one Aviator")
	b := f.run(purchase("Aviator", 1, "Bob"), "one Aviator")
	require.Equal(t, StatePending, a.State)
	require.Equal(t, StatePending, b.State)

	r := f.call("POST", "/v1/runs/"+a.RunID+"/apply", ApplyRequest{Digest: a.Digest})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	stock := f.committed("inventory", "SG001")["quantity_in_stock"]

	conflict := f.call("POST", "/v1/runs/"+b.RunID+"/apply", ApplyRequest{Digest: b.Digest})
	require.Equal(t, http.StatusConflict, conflict.status, "%s", conflict.body)
	var doc RunDocument
	conflict.decode(t, &doc)
	assert.Equal(t, StateConflict, doc.State)
	assert.Equal(t, engine.OutcomeConflict, doc.Outcome)
	assert.False(t, doc.Applied)
	require.NotEmpty(t, doc.Diagnostics)
	assert.Equal(t, "apply", string(doc.Diagnostics[0].Stage))
	assert.Equal(t, stock, f.committed("inventory", "SG001")["quantity_in_stock"], "nothing was written")

	again := f.call("POST", "/v1/runs/"+b.RunID+"/apply", ApplyRequest{Digest: b.Digest})
	assert.Equal(t, http.StatusConflict, again.status)
	assert.JSONEq(t, string(conflict.body), string(again.body), "a conflict is answered the same way every time")
}

func TestRejectRecordsTheDecisionAndBlocksApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	doc := f.run(example(t, "02_purchase_wayfarer.star"), "Purchase 3 Wayfarer sunglasses for customer Alice.")

	r := f.call("POST", "/v1/runs/"+doc.RunID+"/reject", RejectRequest{Feedback: "Alice asked for 2."})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var rejected RunDocument
	r.decode(t, &rejected)
	assert.Equal(t, StateRejected, rejected.State)
	require.NotNil(t, rejected.Decision)
	assert.Equal(t, "Alice asked for 2.", rejected.Decision.Feedback)
	assert.Equal(t, OriginHTTP, rejected.Decision.Origin)
	assert.False(t, rejected.Pending)

	r = f.call("POST", "/v1/runs/"+doc.RunID+"/apply", ApplyRequest{Digest: doc.Digest})
	assert.Equal(t, http.StatusConflict, r.status)
	assert.Equal(t, CodeRejected, r.errorCode(t))
	assert.Equal(t, int64(6), f.committed("inventory", "SG002")["quantity_in_stock"])
	_, err := f.eng.Apply(t.Context(), doc.RunID)
	assert.Error(t, err, "the engine, which the CLI uses, refuses it too")

	again := f.call("POST", "/v1/runs/"+doc.RunID+"/reject", RejectRequest{Feedback: "other"})
	require.Equal(t, http.StatusOK, again.status)
	assert.JSONEq(t, string(mustJSON(t, rejected)), string(again.body), "the first decision stands")

	// An applied run cannot be rejected.
	ok := f.run(purchase("Aviator", 1, "Ann"), "one Aviator")
	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+ok.RunID+"/apply", ApplyRequest{Digest: ok.Digest}).status)
	r = f.call("POST", "/v1/runs/"+ok.RunID+"/reject", RejectRequest{Feedback: "too late"})
	assert.Equal(t, http.StatusConflict, r.status)
	assert.Equal(t, CodeAlreadyApplied, r.errorCode(t))
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestListRunsByState(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	pending := f.run(purchase("Aviator", 1, "Ann"), "")
	applied := f.run(purchase("Wayfarer", 1, "Bob"), "")
	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+applied.RunID+"/apply", ApplyRequest{Digest: applied.Digest}).status)
	rejected := f.run(purchase("Round", 1, "Cy"), "")
	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+rejected.RunID+"/reject", RejectRequest{Feedback: "no"}).status)
	done := f.run(example(t, "01_round_under_100.star"), "")
	failed := f.run("answer_text = undefined_name", "")
	assert.Equal(t, StateDone, done.State)
	assert.Equal(t, StateFailed, failed.State)

	ids := func(state string) []string {
		r := f.call("GET", "/v1/runs?state="+state, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var list RunList
		r.decode(t, &list)
		var out []string
		for _, s := range list.Runs {
			if state != "" {
				assert.Equal(t, state, s.State)
			}
			out = append(out, s.ID)
		}
		return out
	}
	assert.Equal(t, []string{pending.RunID}, ids(StatePending))
	assert.Equal(t, []string{applied.RunID}, ids(StateApplied))
	assert.Equal(t, []string{rejected.RunID}, ids(StateRejected))
	assert.Equal(t, []string{done.RunID}, ids(StateDone))
	assert.Equal(t, []string{failed.RunID}, ids(StateFailed))
	assert.Len(t, ids(""), 5)

	r := f.call("GET", "/v1/runs?limit=2", nil)
	var list RunList
	r.decode(t, &list)
	assert.Len(t, list.Runs, 2)
	assert.Equal(t, 5, list.Count, "the size is of the whole log")
	runs, err := f.eng.Runs()
	require.NoError(t, err)
	var size int64
	for _, s := range runs {
		require.Positive(t, s.Bytes)
		size += int64(s.Bytes)
	}
	assert.Equal(t, size, list.Bytes)

	assert.Equal(t, CodeBadRequest, f.call("GET", "/v1/runs?state=lost", nil).errorCode(t))
	assert.Equal(t, CodeBadRequest, f.call("GET", "/v1/runs?limit=x", nil).errorCode(t))
	assert.Equal(t, CodeBadRequest, f.call("GET", "/v1/runs?limit=100000", nil).errorCode(t))
	assert.Equal(t, map[string]int{StatePending: 1, StateApplied: 1, StateRejected: 1, StateDone: 1, StateFailed: 1}, list.States)

	// Pages of two, through next_cursor, list every run once, newest first.
	all := ids("")
	var paged []string
	cursor := ""
	for range 5 {
		r := f.call("GET", "/v1/runs?limit=2&cursor="+url.QueryEscape(cursor), nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var list RunList
		r.decode(t, &list)
		for _, s := range list.Runs {
			paged = append(paged, s.ID)
		}
		if cursor = list.NextCursor; cursor == "" {
			break
		}
	}
	assert.Equal(t, all, paged)
	r = f.call("GET", "/v1/runs?cursor=nonsense", nil)
	assert.Equal(t, CodeBadRequest, r.errorCode(t))
	assert.Contains(t, string(r.body), "next_cursor")
}

func TestCheckReportsEveryProblem(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.call("POST", "/v1/check", CheckRequest{Program: example(t, "02_purchase_wayfarer.star")})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var rep CheckReport
	r.decode(t, &rep)
	assert.True(t, rep.OK)
	assert.NotEmpty(t, rep.Rewrites, "the f-strings were rewritten")

	r = f.call("POST", "/v1/check", CheckRequest{Reply: "<execute_python>\ntry:\n    x = 1\nexcept:\n    pass\n</execute_python>"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	rep = CheckReport{}
	r.decode(t, &rep)
	assert.False(t, rep.OK)
	require.NotEmpty(t, rep.Diagnostics)
	assert.NotEmpty(t, rep.Diagnostics[0].Hint)
	runs, err := f.eng.Runs()
	require.NoError(t, err)
	assert.Empty(t, runs, "a check runs nothing")
}

func TestDescribeCarriesWhatAPlannerNeeds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.call("GET", "/v1/describe", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var d Description
	r.decode(t, &d)
	assert.Equal(t, "inventory", d.Domain)
	require.Len(t, d.Tables, 2)
	assert.Equal(t, "inventory", d.Tables[0].Name)
	assert.Equal(t, "inventory_tbl", d.Tables[0].Value)
	assert.Equal(t, 6, d.Tables[0].Rows)
	assert.NotNil(t, d.Tables[0].Field("quantity_in_stock"))
	helpers := map[string]bool{}
	for _, h := range d.Helpers {
		helpers[h.Name] = true
		assert.NotEmpty(t, h.Signature, h.Name)
	}
	for _, name := range []string{"inventory_tbl", "transactions_tbl", "get_current_balance", "next_transaction_id", "now", "user_request", "answer_text", "STATUS"} {
		assert.True(t, helpers[name], "describe lists %s", name)
	}
	assert.Contains(t, d.Contract.Statuses, "success")
	require.NotEmpty(t, d.Rules)
	assert.Contains(t, string(r.body), "one_transaction_per_item")
	assert.Contains(t, d.Reference, "inventory_tbl")
	assert.EqualValues(t, 10_000_000, d.Limits.MaxSteps)
	for _, name := range []string{"run_request", "check_request", "apply_request", "reject_request", "run", "check", "error"} {
		assert.Contains(t, d.Schemas, name)
	}
	// The run schema describes the result document's fields, the digest among them.
	props := d.Schemas["run"].(map[string]any)["properties"].(map[string]any)
	for _, field := range []string{"run_id", "outcome", "changes", "diagnostics", "digest", "state"} {
		assert.Contains(t, props, field)
	}
}

func TestErrorsHaveOneShapeAndTheirStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{MaxBody: 4 << 10})
	cases := []struct {
		name   string
		token  string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"no token", "", "GET", "/v1/describe", nil, 401, CodeUnauthorized},
		{"wrong token", "not-the-token-at-all", "GET", "/v1/describe", nil, 401, CodeUnauthorized},
		{"token prefix", testToken[:10], "GET", "/v1/runs", nil, 401, CodeUnauthorized},
		{"no token on MCP", "", "POST", "/mcp", `{}`, 401, CodeUnauthorized},
		{"no token on a run", "", "POST", "/v1/runs", RunRequest{Program: "x = 1"}, 401, CodeUnauthorized},
		{"body too large", testToken, "POST", "/v1/runs", RunRequest{Program: strings.Repeat("#", 8<<10)}, 413, CodeTooLarge},
		{"unknown run", testToken, "GET", "/v1/runs/r_0000000000", nil, 404, CodeUnknownRun},
		{"apply unknown run", testToken, "POST", "/v1/runs/r_0000000000/apply", ApplyRequest{Digest: "sha256:00"}, 404, CodeUnknownRun},
		{"reject unknown run", testToken, "POST", "/v1/runs/r_0000000000/reject", RejectRequest{}, 404, CodeUnknownRun},
		{"unknown path", testToken, "GET", "/v2/runs", nil, 404, CodeNotFound},
		{"wrong method", testToken, "DELETE", "/v1/runs", nil, 405, CodeMethod},
		{"not JSON", testToken, "POST", "/v1/runs", `{"program": `, 400, CodeBadRequest},
		{"empty body", testToken, "POST", "/v1/check", ``, 400, CodeBadRequest},
		{"unknown field", testToken, "POST", "/v1/runs", `{"programme": "x = 1"}`, 400, CodeBadRequest},
		{"two values", testToken, "POST", "/v1/runs", `{"program": "x = 1"} {}`, 400, CodeBadRequest},
		{"no program", testToken, "POST", "/v1/runs", RunRequest{Request: "hi"}, 400, CodeBadRequest},
		{"reply and program", testToken, "POST", "/v1/runs", RunRequest{Reply: "a", Program: "b"}, 400, CodeBadRequest},
		{"raised steps", testToken, "POST", "/v1/runs", RunRequest{Program: "x = 1", Limits: &Limits{MaxSteps: 1 << 40}}, 400, CodeBadLimits},
		{"raised time", testToken, "POST", "/v1/runs", RunRequest{Program: "x = 1", Limits: &Limits{TimeoutMS: 60_000}}, 400, CodeBadLimits},
		{"negative memory", testToken, "POST", "/v1/runs", RunRequest{Program: "x = 1", Limits: &Limits{MaxMemory: -1}}, 400, CodeBadLimits},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.callWith(c.token, c.method, c.path, c.body)
			assert.Equal(t, c.status, r.status, "%s", r.body)
			assert.Equal(t, "application/json; charset=utf-8", r.header.Get("Content-Type"))
			assert.Equal(t, c.code, r.errorCode(t))
			if c.status == 401 {
				assert.Equal(t, `Bearer realm="starplan"`, r.header.Get("WWW-Authenticate"))
			}
		})
	}
	runs, err := f.eng.Runs()
	require.NoError(t, err)
	assert.Empty(t, runs, "no refused request made a run")
}

func TestLowerLimitsApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	doc := f.run("n = 0\nfor i in range(100000):\n    n += i\nanswer_text = 'x'\nSTATUS = 'success'\n", "")
	require.Equal(t, engine.OutcomeOK, doc.Outcome, "%v", doc.Diagnostics)
	r := f.call("POST", "/v1/runs", RunRequest{Program: "n = 0\nfor i in range(100000):\n    n += i\nanswer_text = 'x'\nSTATUS = 'success'\n", Limits: &Limits{MaxSteps: 1000}})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var limited RunDocument
	r.decode(t, &limited)
	assert.Equal(t, engine.OutcomeLimitExceeded, limited.Outcome)
	assert.EqualValues(t, "steps", limited.Limit)
}

func TestLoopbackServerRefusesForeignHostNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	req, err := http.NewRequest("GET", f.web.URL+"/v1/describe", nil)
	require.NoError(t, err)
	req.Host = "attacker.example:80"
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := f.web.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	req.Host = "localhost"
	resp, err = f.web.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// A field declaration is recursive (a list's items, an object's fields), which jsonschema-go
// cannot infer: describe's output schema is derived with the nested declarations left open.
func TestDescriptionSchemaDescribesNestedFields(t *testing.T) {
	t.Parallel()
	sc, err := descriptionSchema()
	require.NoError(t, err)
	raw, err := json.Marshal(sc)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"items":{"type":"object","description":"a field declaration, of the same shape as this one"}`)
	assert.Contains(t, string(raw), `"max_bytes"`)
}
