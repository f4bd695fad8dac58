package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/bolt"
)

// On a store servers share, another server may write a run's record between this server's read
// of it for an apply and the apply's commit, and leave it pending (an approval short of those
// needed). This server's apply decides again on the run as stored; when the run keeps changing
// it answers 409 run-changed with a hint to look again, never 500.

// rvrace2Shared is one server's handle on a bolt store that servers share: their lock on the
// audit log's chain is one mutex, and meanwhile (this server's only) runs before each of its
// takes: another server's write between this server's read of a run and its decision's commit.
type rvrace2Shared struct {
	*bolt.Store
	mu        *sync.Mutex
	meanwhile *func()
	hookMu    *sync.Mutex
}

func (s rvrace2Shared) LockSys(context.Context, string) (func(), error) {
	if s.meanwhile != nil {
		s.hookMu.Lock()
		f := *s.meanwhile
		s.hookMu.Unlock()
		if f != nil {
			f()
		}
	}
	s.mu.Lock()
	return s.mu.Unlock, nil
}

// rvrace2Servers is a server (f) and another server's engine (b) on one shared bolt store over
// the inventory domain with the given approval object; before sets what b does before each of
// f's takes of the chain's lock (nil: nothing).
func rvrace2Servers(t *testing.T, approval string) (f *fixture, b *engine.Engine, before func(func())) {
	t.Helper()
	st, err := bolt.Open(t.TempDir(), bolt.Options{Domain: approvalDomain(t, approval)})
	require.NoError(t, err)
	lock, hookMu := &sync.Mutex{}, &sync.Mutex{}
	var meanwhile func()
	eng, err := engine.New(rvrace2Shared{Store: st, mu: lock, meanwhile: &meanwhile, hookMu: hookMu}, engine.Options{})
	require.NoError(t, err)
	srv, err := New(eng, Options{Token: testToken})
	require.NoError(t, err)
	web := httptest.NewServer(srv.Handler())
	b, err = engine.New(rvrace2Shared{Store: st, mu: lock}, engine.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		srv.Drain()
		web.Close()
		assert.NoError(t, b.Close())
		assert.NoError(t, eng.Close())
		assert.NoError(t, st.Close())
	})
	before = func(f func()) {
		hookMu.Lock()
		meanwhile = f
		hookMu.Unlock()
	}
	return &fixture{t: t, st: st, eng: eng, srv: srv, web: web}, b, before
}

// approveOn records by's approval of run id on engine e (another server).
func approveOn(t *testing.T, e *engine.Engine, id, by string) {
	t.Helper()
	_, err := e.ApplyWith(context.Background(), id, engine.ApplyOptions{Origin: "serve:http", By: access.Principal{Name: by, Role: access.Approver}})
	require.NoError(t, err)
}

// Two approvals needed: bob's apply over HTTP read the run before alice's approval on the other
// server committed. It is decided again and applies the run with both: 200, not 500.
func TestRvrace2ApplyAfterAnApprovalElsewhereOverHTTP(t *testing.T) {
	t.Parallel()
	f, b, before := rvrace2Servers(t, `{"required_approvals": 2}`)
	agent, bob := f.token("agent", access.Proposer, 0), f.token("bob", access.Approver, 0)
	stock := f.committed("inventory", "SG002")["quantity_in_stock"].(int64)
	run := f.proposeAs(agent, 1)
	_, err := f.eng.Record(run.RunID) // stored: the other server sees it
	require.NoError(t, err)
	before(func() {
		before(nil)
		approveOn(t, b, run.RunID, "alice")
	})
	r := f.applyAs(bob, run)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var doc RunDocument
	r.decode(t, &doc)
	assert.Equal(t, StateApplied, doc.State)
	assert.Equal(t, []string{"alice", "bob"}, doc.ApprovedBy, "alice's approval stands")
	assert.Equal(t, stock-1, f.committed("inventory", "SG002")["quantity_in_stock"])
}

// The other server approves before every commit of this server's: its apply gives up and
// answers 409 run-changed (HTTP and MCP), saying to look at the run again; nothing of it is
// recorded, the other server's approvals stand.
func TestRvrace2ApplyThatKeepsLosingIsRefusedWithRunChanged(t *testing.T) {
	t.Parallel()
	f, b, before := rvrace2Servers(t, `{"required_approvals": 9}`)
	agent, bob := f.token("agent", access.Proposer, 0), f.token("bob", access.Approver, 0)
	stock := f.committed("inventory", "SG002")["quantity_in_stock"]
	run := f.proposeAs(agent, 1)
	_, err := f.eng.Record(run.RunID)
	require.NoError(t, err)
	n := 0
	before(func() {
		n++
		approveOn(t, b, run.RunID, fmt.Sprintf("p%d", n))
	})

	r := f.applyAs(bob, run)
	assert.Equal(t, http.StatusConflict, r.status, string(r.body))
	assert.Equal(t, CodeRunChanged, r.errorCode(t))
	var eb ErrorBody
	r.decode(t, &eb)
	assert.Contains(t, eb.Error.Message, "changed on another server")
	assert.Contains(t, eb.Error.Hint, "GET /v1/runs/"+run.RunID)
	tries := n
	assert.Greater(t, tries, 1, "decided again before giving up")

	res := call(t, mcpAs(t, f, bob, nil), "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, nil)
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(text(res), CodeRunChanged+": "), text(res))
	assert.Contains(t, text(res), "show_run")
	before(nil)

	doc, err := f.srv.Show(run.RunID)
	require.NoError(t, err)
	assert.Equal(t, StatePending, doc.State)
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("p%d", i))
	}
	assert.Equal(t, want, doc.ApprovedBy, "the other server's approvals stand, none of bob's")
	assert.Equal(t, 2*tries, n, "the MCP apply tried as often")
	assert.Equal(t, stock, f.committed("inventory", "SG002")["quantity_in_stock"], "nothing was applied")
	rep, err := f.eng.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// A rejection that keeps losing the same way answers 409 run-changed too, not 500 internal nor
// the already-applied that any other refusal of a rejection maps to; nothing of it is stored.
func TestRvrace2RejectionThatKeepsLosingIsRefusedWithRunChanged(t *testing.T) {
	t.Parallel()
	f, b, before := rvrace2Servers(t, `{"required_approvals": 9}`)
	agent, bob := f.token("agent", access.Proposer, 0), f.token("bob", access.Approver, 0)
	run := f.proposeAs(agent, 1)
	_, err := f.eng.Record(run.RunID)
	require.NoError(t, err)
	n := 0
	before(func() {
		n++
		approveOn(t, b, run.RunID, fmt.Sprintf("p%d", n))
	})
	r := f.callWith(bob, "POST", "/v1/runs/"+run.RunID+"/reject", RejectRequest{Feedback: "no"})
	before(nil)
	assert.Equal(t, http.StatusConflict, r.status, string(r.body))
	assert.Equal(t, CodeRunChanged, r.errorCode(t))
	assert.Greater(t, n, 1, "checked again before giving up")
	doc, err := f.srv.Show(run.RunID)
	require.NoError(t, err)
	assert.Equal(t, StatePending, doc.State, "not rejected")
	rep, err := f.eng.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}
