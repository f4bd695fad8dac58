package server

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/llm/llmtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

// approvalFixture is a server over the built-in inventory domain whose policy.json carries the
// given "approval" object, on a clock the test moves.
func approvalFixture(t *testing.T, approval string) (*fixture, *testClock) {
	t.Helper()
	clk := &testClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	st, err := bolt.Open(t.TempDir(), bolt.Options{Domain: approvalDomain(t, approval)})
	require.NoError(t, err)
	eng, err := engine.New(st, engine.Options{Now: clk.now})
	require.NoError(t, err)
	srv, err := New(eng, Options{Token: testToken, Now: clk.now})
	require.NoError(t, err)
	web := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Drain()
		web.Close()
		assert.NoError(t, eng.Close())
		assert.NoError(t, st.Close())
	})
	return &fixture{t: t, st: st, eng: eng, srv: srv, web: web}, clk
}

// approvalDomain is the built-in inventory domain whose policy.json carries the given
// "approval" object.
func approvalDomain(t *testing.T, approval string) *store.Domain {
	t.Helper()
	dir, ok := domains.Builtin(domains.Inventory)
	require.True(t, ok)
	files := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(dir, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(dir, path)
		if path == "policy.json" && err == nil {
			var p map[string]any
			require.NoError(t, json.Unmarshal(data, &p))
			var a any
			require.NoError(t, json.Unmarshal([]byte(approval), &a))
			p["approval"] = a
			data, err = json.Marshal(p)
		}
		files[path] = &fstest.MapFile{Data: data}
		return err
	}))
	dom, errs := engine.LoadDomain(files)
	require.Empty(t, errs)
	return dom
}

// proposeAs dry-runs a sale of qty Wayfarers with token and returns the pending run.
func (f *fixture) proposeAs(token string, qty int) *RunDocument {
	f.t.Helper()
	r := f.callWith(token, "POST", "/v1/runs", RunRequest{Program: purchase("Wayfarer", qty, "Alice"), Request: "a sale"})
	require.Equal(f.t, http.StatusOK, r.status, string(r.body))
	var doc RunDocument
	r.decode(f.t, &doc)
	require.Equal(f.t, StatePending, doc.State, string(r.body))
	return &doc
}

func (f *fixture) applyAs(token string, doc *RunDocument) response {
	f.t.Helper()
	return f.callWith(token, "POST", "/v1/runs/"+doc.RunID+"/apply", ApplyRequest{Digest: doc.Digest})
}

// Four eyes over HTTP: an approver cannot apply what it proposed (403 approval-required, nothing
// written), another approver can; the admin may apply its own run unless four_eyes is "always".
func TestFourEyesOverHTTP(t *testing.T) {
	t.Parallel()
	f, _ := approvalFixture(t, `{}`)
	alice, bob := f.token("alice", access.Approver, 0), f.token("bob", access.Approver, 0)
	stock := f.committed("inventory", "SG002")["quantity_in_stock"]

	own := f.proposeAs(alice, 1)
	assert.Equal(t, "alice", own.ProposedBy)
	r := f.applyAs(alice, own)
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.Equal(t, CodeApprovalRequired, r.errorCode(t))
	assert.Equal(t, stock, f.committed("inventory", "SG002")["quantity_in_stock"], "a refused apply writes nothing")
	r = f.applyAs(bob, own)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var doc RunDocument
	r.decode(t, &doc)
	assert.Equal(t, StateApplied, doc.State)
	assert.Equal(t, []string{"bob"}, doc.ApprovedBy)

	adminsOwn := f.proposeAs(testToken, 1)
	assert.Equal(t, http.StatusOK, f.applyAs(testToken, adminsOwn).status, "by default an admin may approve its own run")

	g, _ := approvalFixture(t, `{"four_eyes": "always"}`)
	run := g.proposeAs(testToken, 1)
	r = g.applyAs(testToken, run)
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.Equal(t, CodeApprovalRequired, r.errorCode(t), "four_eyes always: not even the admin")
}

// required_approvals 2: the first approval is recorded and the run waits (nothing written); the
// same approver does not count twice; the second applies it.
func TestTwoApprovalsOverHTTP(t *testing.T) {
	t.Parallel()
	f, _ := approvalFixture(t, `{"required_approvals": 2}`)
	agent := f.token("agent", access.Proposer, 0)
	alice, bob := f.token("alice", access.Approver, 0), f.token("bob", access.Approver, 0)
	stock := f.committed("inventory", "SG002")["quantity_in_stock"]

	run := f.proposeAs(agent, 1)
	assert.Equal(t, 2, run.ApprovalsNeeded)
	r := f.applyAs(alice, run)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var first RunDocument
	r.decode(t, &first)
	assert.Equal(t, StatePending, first.State)
	assert.Equal(t, []string{"alice"}, first.ApprovedBy)
	assert.Equal(t, stock, f.committed("inventory", "SG002")["quantity_in_stock"], "one approval of two writes nothing")
	r = f.applyAs(alice, run)
	assert.Equal(t, http.StatusForbidden, r.status, "one approver counts once")
	assert.Equal(t, CodeApprovalRequired, r.errorCode(t))
	assert.Contains(t, string(r.body), "alice already approved it")
	r = f.applyAs(bob, run)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var doc RunDocument
	r.decode(t, &doc)
	assert.Equal(t, StateApplied, doc.State)
	assert.Equal(t, []string{"alice", "bob"}, doc.ApprovedBy)
}

// An auto rule lets a proposer apply a small change (the answer names the rule) and not a larger
// one, judged on the change set committed; without auto rules a proposer is refused at once.
func TestAutoRuleLetsAProposerApplySmallChanges(t *testing.T) {
	t.Parallel()
	f, _ := approvalFixture(t, `{"auto": [{"name": "small_sale", "doc": "at most two rows", "kind": "auto_apply", "params": {"max_rows_written": 2, "tables": ["inventory", "transactions"]}}]}`)
	agent := f.token("agent", access.Proposer, 0)

	small := f.proposeAs(agent, 1) // one stock row and one ledger row
	r := f.applyAs(agent, small)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var doc RunDocument
	r.decode(t, &doc)
	assert.Equal(t, StateApplied, doc.State)
	assert.Equal(t, "small_sale", doc.AutoApprovedByRule)

	two := f.callWith(agent, "POST", "/v1/runs", RunRequest{Program: example(t, "03_two_item_order.star"), Request: "two items"})
	require.Equal(t, http.StatusOK, two.status, string(two.body))
	var big RunDocument
	two.decode(t, &big)
	require.Equal(t, StatePending, big.State)
	require.Greater(t, big.Changes.Rows(), 2)
	before := f.committed("inventory", "SG001")["quantity_in_stock"]
	r = f.applyAs(agent, &big)
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.Equal(t, CodeForbiddenRole, r.errorCode(t), "a proposer whose change no rule lets through")
	assert.Contains(t, string(r.body), "no auto-approval rule")
	assert.Equal(t, before, f.committed("inventory", "SG001")["quantity_in_stock"], "nothing written")

	g, _ := approvalFixture(t, `{}`)
	agent = g.token("agent", access.Proposer, 0)
	r = g.applyAs(agent, g.proposeAs(agent, 1))
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.Equal(t, CodeForbiddenRole, r.errorCode(t))
}

// A run older than pending_ttl answers 403 run-expired and shows as expired; it can still be
// rejected.
func TestExpiredRunOverHTTP(t *testing.T) {
	t.Parallel()
	f, clk := approvalFixture(t, `{"pending_ttl": "24h"}`)
	agent, bob := f.token("agent", access.Proposer, 0), f.token("bob", access.Approver, 0)
	run := f.proposeAs(agent, 1)
	clk.add(25 * time.Hour)
	r := f.applyAs(bob, run)
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.Equal(t, CodeRunExpired, r.errorCode(t))
	var doc RunDocument
	f.callWith(bob, "GET", "/v1/runs/"+run.RunID, nil).decode(t, &doc)
	assert.Equal(t, engine.StateExpired, doc.State)
	r = f.callWith(bob, "POST", "/v1/runs/"+run.RunID+"/reject", RejectRequest{Feedback: "too old"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	r.decode(t, &doc)
	assert.Equal(t, StateRejected, doc.State)
	assert.Equal(t, "bob", doc.RejectedBy)
	assert.True(t, strings.Contains(string(f.callWith(bob, "GET", "/v1/runs/"+run.RunID, nil).body), `"rejected_by":"bob"`))
}

// A replanned run is its question's proposer's, whoever rejected the run before it: an approver
// who asks, then rejects its own run with feedback, cannot approve the model's next plan as if
// the server had proposed it (review: it was recorded as local:<user>, and the approver applied
// it); a pinned agent's replanned run keeps the agent and its subject.
func TestAReplannedRunKeepsItsProposer(t *testing.T) {
	t.Parallel()
	f, _ := modelFixture(t, llmtest.Always(llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star")))))
	bob, _, err := f.srv.tokens.CreateFor(context.Background(), "bob", access.Approver, 0, "")
	require.NoError(t, err)
	agent, _, err := f.srv.tokens.CreateFor(context.Background(), "agent-c1", access.Proposer, 0, "C1")
	require.NoError(t, err)
	events := f.subscribe(testContext(t), nil)
	events.untilSubscribed()

	replanned := func(tok string) *engine.RunRecord {
		r := f.callWith(tok, "POST", "/v1/ask", AskRequest{Request: "Purchase 3 Wayfarer sunglasses for customer Alice."})
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var first RunDocument
		r.decode(t, &first)
		r = f.callWith(tok, "POST", "/v1/runs/"+first.RunID+"/reject", RejectRequest{Feedback: "same again please"})
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		for ev, ok := events.next(); ok; ev, ok = events.next() {
			if ev.Type == EventFinished && ev.ParentRunID == first.RunID {
				rec, err := f.eng.Record(ev.RunID)
				require.NoError(t, err)
				return rec
			}
		}
		t.Fatal("no replanned run")
		return nil
	}

	rec := replanned(bob)
	assert.Equal(t, "bob", rec.ProposedBy)
	doc, err := f.eng.Show(rec.ID)
	require.NoError(t, err)
	r := f.callWith(bob, "POST", "/v1/runs/"+rec.ID+"/apply", ApplyRequest{Digest: doc.Digest})
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "approval-required")
	assert.Equal(t, int64(6), f.committed("inventory", "SG002")["quantity_in_stock"], "nothing was applied")

	rec = replanned(agent)
	assert.Equal(t, "agent-c1", rec.ProposedBy)
	assert.Equal(t, "C1", rec.Subject)
}

// Four eyes over MCP, as over HTTP: an approver's apply_run of its own run is a tool error with
// approval-required and writes nothing; another approver's applies it.
func TestFourEyesOverMCP(t *testing.T) {
	t.Parallel()
	f, _ := approvalFixture(t, `{}`)
	alice, bob := f.token("alice", access.Approver, 0), f.token("bob", access.Approver, 0)
	stock := f.committed("inventory", "SG002")["quantity_in_stock"]

	as := mcpAs(t, f, alice, nil)
	var own RunDocument
	res := call(t, as, "run_plan", RunRequest{Program: purchase("Wayfarer", 1, "Alice"), Request: "a sale"}, &own)
	require.False(t, res.IsError, text(res))
	require.Equal(t, StatePending, own.State)
	assert.Equal(t, "alice", own.ProposedBy)

	res = call(t, as, "apply_run", ApplyInput{RunID: own.RunID, Digest: own.Digest}, nil)
	require.True(t, res.IsError, "the proposer cannot approve its own run")
	assert.True(t, strings.HasPrefix(text(res), CodeApprovalRequired+": "), text(res))
	assert.Equal(t, stock, f.committed("inventory", "SG002")["quantity_in_stock"], "a refused apply writes nothing")

	var doc RunDocument
	res = call(t, mcpAs(t, f, bob, nil), "apply_run", ApplyInput{RunID: own.RunID, Digest: own.Digest}, &doc)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, StateApplied, doc.State)
	assert.Equal(t, []string{"bob"}, doc.ApprovedBy)
}
