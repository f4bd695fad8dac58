package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

var (
	agent = access.Principal{Name: "agent", Role: access.Proposer}
	alice = access.Principal{Name: "alice", Role: access.Approver}
	bob   = access.Principal{Name: "bob", Role: access.Approver}
	carol = access.Principal{Name: "carol", Role: access.Approver}
	root  = access.Principal{Name: "admin", Role: access.Admin}
)

// stockDomain is a one-table domain whose policy.json has the given "approval" object ("" for
// none) and whose invariants.star is needsPerson.
func stockDomain(t *testing.T, approval, needsPerson string) *store.Domain {
	t.Helper()
	policy := `{"name": "stock",
		"contract": {"statuses": ["success", "refused"], "write_status": "success", "answer_max_sentences": 2, "answer_max_chars": 200},
		"rules": [{"name": "no_deletions", "kind": "no_deletes", "doc": "no row is removed"}]`
	if approval != "" {
		policy += `, "approval": ` + approval
	}
	fs := fstest.MapFS{
		"domain.json": {Data: []byte(`{"name": "stock", "tables": [{"name": "items", "key": "id", "fields": [
			{"name": "id", "type": "string", "required": true, "read_only": true},
			{"name": "qty", "type": "int", "required": true}]}]}`)},
		"seed.json":   {Data: []byte(`{"items": [{"id": "A", "qty": 5}, {"id": "B", "qty": 5}, {"id": "C", "qty": 5}]}`)},
		"policy.json": {Data: []byte(policy + "}")},
	}
	if needsPerson != "" {
		fs["invariants.star"] = &fstest.MapFile{Data: []byte(needsPerson)}
	}
	dom, errs := LoadDomain(fs)
	require.Empty(t, errs)
	return dom
}

// setQty is a plan that sets qty of the listed items.
func setQty(qty int, ids ...string) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "items_tbl.update({\"qty\": %d}, {\"id\": %q})\n", qty, id)
	}
	b.WriteString("STATUS, answer_text = \"success\", \"Done.\"\n")
	return b.String()
}

func propose(t *testing.T, e *Engine, by access.Principal, plan string) *Result {
	t.Helper()
	res, err := e.Run(context.Background(), Request{Reply: plan, By: by})
	require.NoError(t, err)
	require.True(t, res.Pending, res.Diagnostics.String())
	return res
}

// requireRefused asserts that err is an *ApprovalError with code.
func requireRefused(t *testing.T, err error, code string) *ApprovalError {
	t.Helper()
	var ae *ApprovalError
	require.True(t, errors.As(err, &ae), "want an *ApprovalError, got %v", err)
	assert.Equal(t, code, ae.Code)
	return ae
}

func applyBy(e *Engine, id string, by access.Principal) (*Result, error) {
	return e.ApplyWith(context.Background(), id, ApplyOptions{Origin: "test", By: by})
}

// Four eyes by default: an approver cannot apply its own proposal, another can; a proposer
// cannot apply at all; an admin and the local user may apply their own.
func TestApprovalFourEyes(t *testing.T) {
	e := domainEngine(t, stockDomain(t, "", ""))

	res := propose(t, e, alice, setQty(1, "A"))
	assert.Equal(t, "alice", res.ProposedBy)
	assert.Equal(t, 1, res.ApprovalsNeeded, "a pending run says what it awaits")
	_, err := applyBy(e, res.RunID, alice)
	ae := requireRefused(t, err, errcode.ApprovalRequired)
	assert.Contains(t, ae.Problem, "not its proposer")
	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.True(t, rec.Pending, "a refused apply changes nothing")
	assert.Empty(t, rec.ApprovedBy)

	applied, err := applyBy(e, res.RunID, bob)
	require.NoError(t, err)
	assert.True(t, applied.Applied)
	assert.Equal(t, []string{"bob"}, applied.ApprovedBy)
	assert.Equal(t, "alice", applied.ProposedBy)
	rec, err = e.Record(res.RunID)
	require.NoError(t, err)
	assert.Equal(t, Who{ProposedBy: "alice", ApprovedBy: []string{"bob"}}, rec.Who)

	res = propose(t, e, agent, setQty(2, "A"))
	_, err = applyBy(e, res.RunID, agent)
	requireRefused(t, err, errcode.ApprovalRequired)
	_, err = applyBy(e, res.RunID, access.Principal{Name: "other-agent", Role: access.Proposer})
	requireRefused(t, err, errcode.ApprovalRequired)

	res = propose(t, e, root, setQty(3, "A"))
	applied, err = applyBy(e, res.RunID, root)
	require.NoError(t, err, "an admin may approve its own run by default")
	assert.Equal(t, []string{"admin"}, applied.ApprovedBy)

	local := access.Local()
	res, err = e.Run(context.Background(), Request{Reply: setQty(4, "A")}) // the CLI: no By
	require.NoError(t, err)
	assert.Equal(t, local.Name, res.ProposedBy)
	applied, err = e.Apply(context.Background(), res.RunID)
	require.NoError(t, err, "exec's [y/N] and apply: the local user approves its own run")
	assert.Equal(t, []string{local.Name}, applied.ApprovedBy)

	// exec --apply: applied at once by the local user; a proposer's run with Apply stays pending.
	res, err = e.Run(context.Background(), Request{Reply: setQty(5, "A"), Apply: true})
	require.NoError(t, err)
	assert.True(t, res.Applied)
	res, err = e.Run(context.Background(), Request{Reply: setQty(6, "A"), Apply: true, By: agent})
	require.NoError(t, err)
	assert.False(t, res.Applied)
	assert.True(t, res.Pending)
}

// Under "four_eyes": "always", nobody applies their own run: not an admin, not the local user.
func TestApprovalFourEyesAlways(t *testing.T) {
	e := domainEngine(t, stockDomain(t, `{"four_eyes": "always"}`, ""))
	res := propose(t, e, root, setQty(1, "A"))
	_, err := applyBy(e, res.RunID, root)
	ae := requireRefused(t, err, errcode.ApprovalRequired)
	assert.Contains(t, ae.Problem, "four_eyes always")

	res, err = e.Run(context.Background(), Request{Reply: setQty(1, "B")})
	require.NoError(t, err)
	_, err = e.Apply(context.Background(), res.RunID)
	requireRefused(t, err, errcode.ApprovalRequired)
	applied, err := applyBy(e, res.RunID, bob)
	require.NoError(t, err)
	assert.True(t, applied.Applied)
}

// With required_approvals 2, the first approval is recorded and the run waits; the same
// approver cannot count twice; the second applies it.
func TestApprovalRequiresNApprovers(t *testing.T) {
	e := domainEngine(t, stockDomain(t, `{"required_approvals": 2}`, ""))
	dump := func() string {
		var b strings.Builder
		require.NoError(t, e.Store().(*bolt.Store).Dump(&b))
		return b.String()
	}
	seeded := dump()
	res := propose(t, e, agent, setQty(1, "A"))
	assert.Equal(t, 2, res.ApprovalsNeeded)

	first, err := applyBy(e, res.RunID, bob)
	require.NoError(t, err)
	assert.False(t, first.Applied)
	assert.True(t, first.Pending)
	assert.Equal(t, []string{"bob"}, first.ApprovedBy)
	assert.Equal(t, 2, first.ApprovalsNeeded)
	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.True(t, rec.Pending)
	assert.Equal(t, []string{"bob"}, rec.ApprovedBy)
	assert.Equal(t, seeded, dump(), "nothing written after one approval of two")

	_, err = applyBy(e, res.RunID, bob)
	re := requireRefused(t, err, errcode.ApprovalRequired)
	assert.Contains(t, re.Problem, "already approved")

	applied, err := applyBy(e, res.RunID, carol)
	require.NoError(t, err)
	assert.True(t, applied.Applied)
	assert.Equal(t, []string{"bob", "carol"}, applied.ApprovedBy)
	assert.NotEqual(t, seeded, dump())
	assert.Equal(t, 2, applied.ApprovalsNeeded)
}

// An auto_apply rule lets a proposer apply a small change and names itself; a larger one is
// refused with the rule's reason and waits for a person.
func TestApprovalAutoApply(t *testing.T) {
	e := domainEngine(t, stockDomain(t, `{"auto": [{"name": "small", "doc": "one row at most", "kind": "auto_apply", "params": {"max_rows_written": 1, "tables": ["items"]}}]}`, ""))
	res := propose(t, e, agent, setQty(1, "A"))
	assert.Empty(t, res.AutoApprovedByRule, "never decided at the dry run")
	applied, err := applyBy(e, res.RunID, agent)
	require.NoError(t, err)
	assert.True(t, applied.Applied)
	assert.Equal(t, "small", applied.AutoApprovedByRule)
	assert.Empty(t, applied.ApprovedBy)

	res = propose(t, e, agent, setQty(1, "B", "C"))
	_, err = applyBy(e, res.RunID, agent)
	ae := requireRefused(t, err, errcode.ApprovalRequired)
	assert.Contains(t, ae.Problem, "small: changes 2 rows, more than 1")
	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.True(t, rec.Pending)
	assert.Empty(t, rec.AutoApprovedByRule)
	applied, err = applyBy(e, res.RunID, bob)
	require.NoError(t, err)
	assert.Equal(t, []string{"bob"}, applied.ApprovedBy)
	assert.Empty(t, applied.AutoApprovedByRule)
}

// needs_person in invariants.star decides at apply, on the change set being committed: None lets
// a run through, a string keeps it for a person and is the reason given.
func TestApprovalNeedsPerson(t *testing.T) {
	e := domainEngine(t, stockDomain(t, `{"auto": [{"name": "routine", "doc": "small quantities", "kind": "needs_person"}]}`, `
def needs_person(changes):
    for u in changes.get("items", {}).get("updated", []):
        if u["after"]["qty"] > 10:
            return "item %s goes above 10" % u["key"]
    return None
`))
	res := propose(t, e, agent, setQty(7, "A"))
	applied, err := applyBy(e, res.RunID, agent)
	require.NoError(t, err)
	assert.Equal(t, "routine", applied.AutoApprovedByRule)

	res = propose(t, e, agent, setQty(20, "B"))
	_, err = applyBy(e, res.RunID, agent)
	ae := requireRefused(t, err, errcode.ApprovalRequired)
	assert.Contains(t, ae.Problem, "routine: item B goes above 10")

	// The predicate sees the change set of the apply, never only the dry run's.
	var calls []table.ChangeSet
	require.NoError(t, e.Policy().BindNeedsPerson(map[string]contracts.NeedsPerson{
		"needs_person": func(_ context.Context, cs table.ChangeSet) (string, error) {
			calls = append(calls, cs)
			return "", nil
		}}))
	res = propose(t, e, agent, setQty(3, "C"))
	assert.Empty(t, calls, "not called at the dry run")
	_, err = applyBy(e, res.RunID, agent)
	require.NoError(t, err)
	require.NotEmpty(t, calls)
	assert.Equal(t, 1, calls[len(calls)-1].Rows())
	assert.Equal(t, []any{"C"}, []any{calls[len(calls)-1]["items"].Updated[0].Key})
}

// A run older than pending_ttl answers run-expired; it can still be rejected.
func TestApprovalPendingTTL(t *testing.T) {
	clk := &clock{now: fixedNow}
	st, err := bolt.Open(t.TempDir(), bolt.Options{Domain: stockDomain(t, `{"pending_ttl": "24h"}`, "")})
	require.NoError(t, err)
	e, err := New(st, Options{Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.Close()); assert.NoError(t, st.Close()) })

	fresh := propose(t, e, agent, setQty(1, "A"))
	old := propose(t, e, agent, setQty(1, "B"))
	clk.advance(23 * time.Hour)
	_, err = applyBy(e, fresh.RunID, bob)
	require.NoError(t, err, "within the ttl")
	clk.advance(2 * time.Hour)
	rec, err := e.Record(old.RunID)
	require.NoError(t, err)
	assert.True(t, e.Expired(rec))
	_, err = applyBy(e, old.RunID, bob)
	requireRefused(t, err, errcode.RunExpired)
	runs, err := e.Runs()
	require.NoError(t, err)
	states := map[string]string{}
	for _, r := range runs {
		states[r.ID] = r.State
	}
	assert.Equal(t, map[string]string{fresh.RunID: StateApplied, old.RunID: StateExpired}, states)
	doc, err := e.Show(old.RunID)
	require.NoError(t, err)
	assert.Equal(t, StateExpired, doc.State, "the run's one document says it expired")
	d, recorded, err := e.RejectWith(context.Background(), old.RunID, RejectOptions{Feedback: "too old", Origin: "test", By: bob})
	require.NoError(t, err)
	assert.True(t, recorded)
	assert.Equal(t, "bob", d.By)
	rec, err = e.Record(old.RunID)
	require.NoError(t, err)
	assert.Equal(t, "bob", rec.RejectedBy)
}

// Approval rules are validated when the policy is parsed, and describe lists them.
func TestApprovalRulesParse(t *testing.T) {
	base := `{"name": "d", "contract": {"statuses": ["ok"], "answer_max_sentences": 1, "answer_max_chars": 10}, "rules": [], "approval": %s}`
	for approval, want := range map[string]string{
		`{"required_approvals": -1}`:                                  "required_approvals",
		`{"required_approvals": 11}`:                                  "required_approvals",
		`{"four_eyes": "never"}`:                                      "four_eyes",
		`{"pending_ttl": "soon"}`:                                     "pending_ttl",
		`{"pending_ttl": "-1h"}`:                                      "pending_ttl",
		`{"quorum": 2}`:                                               "unknown field",
		`{"auto": [{"name": "a", "doc": "d", "kind": "yolo"}]}`:       "unknown kind",
		`{"auto": [{"name": "a", "doc": "d", "kind": "auto_apply"}]}`: "max_rows_written",
		`{"auto": [{"name": "a", "doc": "d", "kind": "auto_apply", "params": {"max_rows_written": 0}}]}`:                   "max_rows_written",
		`{"auto": [{"name": "a", "doc": "d", "kind": "auto_apply", "params": {"max_rows": 2}}]}`:                           "max_rows_written",
		`{"auto": [{"name": "a", "doc": "", "kind": "needs_person"}]}`:                                                     "doc",
		`{"auto": [{"name": "a", "doc": "d", "kind": "needs_person"}, {"name": "a", "doc": "d", "kind": "needs_person"}]}`: "duplicate",
	} {
		_, err := contracts.Parse(strings.NewReader(fmt.Sprintf(base, approval)))
		require.Error(t, err, approval)
		assert.Contains(t, err.Error(), want, approval)
	}
	d, err := contracts.Parse(strings.NewReader(fmt.Sprintf(base, `{"required_approvals": 2, "pending_ttl": "7d", "auto": [{"name": "small", "doc": "tiny changes", "kind": "auto_apply", "params": {"max_rows_written": 2}}]}`)))
	require.NoError(t, err)
	assert.Equal(t, 7*24*time.Hour, d.Approval.TTL())
	docs := d.DescribeApproval()
	require.Len(t, docs, 3)
	assert.Contains(t, docs[0].Doc, "2 distinct approvers")
	assert.Contains(t, docs[1].Doc, "7d")
	assert.Equal(t, contracts.RuleDoc{Name: "small", Kind: "auto_apply", Doc: "tiny changes"}, docs[2])

	// Across files: a needs_person function invariants.star lacks, a table the domain lacks.
	fs := fstest.MapFS{}
	for name, text := range stockDomain(t, "", "").Definition {
		fs[name] = &fstest.MapFile{Data: []byte(text)}
	}
	p := strings.TrimSuffix(strings.TrimSpace(string(fs["policy.json"].Data)), "}") +
		`, "approval": {"auto": [{"name": "np", "doc": "d", "kind": "needs_person"}, {"name": "s", "doc": "d", "kind": "auto_apply", "params": {"max_rows_written": 1, "tables": ["itemz"]}}]}}`
	fs["policy.json"] = &fstest.MapFile{Data: []byte(p)}
	fs["invariants.star"] = &fstest.MapFile{Data: []byte("def other(changes):\n    return None\n")}
	_, errs := LoadDomain(fs)
	joined := fmt.Sprint(errs)
	assert.Contains(t, joined, `names table "itemz"`)
	assert.Contains(t, joined, "needs_person")
}

// Every record write is chained; an edit of a record through the store's API, an edited entry
// and a removed last entry are each found and named.
func TestAuditChainVerifiesAndFindsTampering(t *testing.T) {
	e := domainEngine(t, stockDomain(t, "", ""))
	ctx := context.Background()
	a := propose(t, e, agent, setQty(1, "A"))
	b := propose(t, e, agent, setQty(2, "B"))
	c := propose(t, e, agent, setQty(3, "C"))
	_, err := applyBy(e, a.RunID, bob)
	require.NoError(t, err)
	_, _, err = e.RejectWith(ctx, b.RunID, RejectOptions{Feedback: "no", By: alice})
	require.NoError(t, err)

	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
	assert.Equal(t, 3, rep.Records)
	assert.NotEmpty(t, rep.HeadHash)

	// The entries name who did what: the start, the three queued proposals (in one batch entry,
	// or in more when the audit writer's linger ended between them: that depends on the
	// machine's speed, so the batches are counted, not assumed), an approval, a rejection.
	entries, err := e.Store().ListSys(ChainCollection)
	require.NoError(t, err)
	var events, proposed []string
	n := 0
	for _, d := range entries {
		if d.ID == chainHeadID {
			continue
		}
		n++
		var en ChainEntry
		require.NoError(t, json.Unmarshal(d.JSON, &en))
		switch en.Event {
		case ChainBatch:
			for _, r := range en.Records {
				proposed = append(proposed, r.Event+" "+r.RunID+" by "+r.By)
			}
		case ChainProposed:
			proposed = append(proposed, en.Event+" "+en.RunID+" by "+en.By)
		default:
			events = append(events, en.Event+" by "+en.By)
		}
	}
	assert.Equal(t, n, rep.Entries)
	assert.Equal(t, []string{"start by ", "approved by bob", "rejected by alice"}, events)
	assert.Equal(t, []string{"proposed " + a.RunID + " by agent", "proposed " + b.RunID + " by agent", "proposed " + c.RunID + " by agent"}, proposed)

	// A record edited through the system-document API: the store's own digests agree with it,
	// the chain does not.
	rec, err := e.Record(c.RunID)
	require.NoError(t, err)
	rec.ProposedBy = "alice"
	require.NoError(t, e.Store().PutSysDocs(ctx, recordDoc(rec, false)))
	rep, err = e.VerifyChain()
	require.NoError(t, err)
	require.False(t, rep.OK())
	assert.Equal(t, c.RunID, rep.Problems[0].RunID)
	assert.Contains(t, rep.Problems[0].Message, "edited after it was written")
}

// Another process on the same store (a second server on one PostgreSQL database) appends to the
// chain between this engine's writes: the engine's next entries follow the other's instead of
// replacing them, and the chain stays whole.
func TestAuditChainFollowsAnotherWriter(t *testing.T) {
	e := domainEngine(t, stockDomain(t, "", ""))
	ctx := context.Background()
	a := propose(t, e, agent, setQty(1, "A"))
	require.NoError(t, e.audit.flush())

	other, err := loadChain(ctx, e.Store(), fixedNow) // as another process would, after the first write
	require.NoError(t, err)
	for i := range 3 {
		rec := synthRecord(90000 + i)
		rec.Time = fixedNow // a run of now, so the chain must hold its entry
		put := func(docs []store.SysDoc) error { return e.Store().PutSysDocs(ctx, docs...) }
		require.NoError(t, other.write(fixedNow, put, link{doc: recordDoc(rec, false), event: ChainProposed, by: func() string { return "other" }}))
	}

	b := propose(t, e, agent, setQty(2, "B"))
	_, err = applyBy(e, a.RunID, bob)
	require.NoError(t, err)
	_, _, err = e.RejectWith(ctx, b.RunID, RejectOptions{Feedback: "no", By: alice})
	require.NoError(t, err)

	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
	assert.Equal(t, 5, rep.Records)
	assert.Equal(t, 8, rep.Entries, "start, a, the other's three, b, a's approval, b's rejection")
}

// sharedStore is a store that several processes (here: chains) append to, with the lock such a
// store has across processes (store.SysSerializer), held in mu.
type sharedStore struct {
	store.Store
	mu *sync.Mutex
}

func (s sharedStore) LockSys(context.Context, string) (func(), error) {
	s.mu.Lock()
	return s.mu.Unlock, nil
}

// TestAChainedWriteThatWaitsIsNotOvertaken: on a store several processes append to, a chained
// write whose store write is slow (an apply waiting for its rows' locks) still lands while
// another process appends without pause: it holds the store's lock on the chain. Without the
// lock every try found its numbers taken by the other's appends, and after maxChainAttempts the
// write failed (an apply on one of two servers answered 500 under load).
func TestAChainedWriteThatWaitsIsNotOvertaken(t *testing.T) {
	e := domainEngine(t, stockDomain(t, "", ""))
	ctx := context.Background()
	propose(t, e, agent, setQty(1, "A"))
	require.NoError(t, e.audit.flush())
	shared := sharedStore{Store: e.Store(), mu: &sync.Mutex{}}
	slow, err := loadChain(ctx, shared, fixedNow)
	require.NoError(t, err)
	fast, err := loadChain(ctx, shared, fixedNow)
	require.NoError(t, err)
	write := func(c *chain, seq int, wait time.Duration) error {
		rec := synthRecord(seq)
		rec.Time = fixedNow
		return c.write(fixedNow, func(docs []store.SysDoc) error {
			time.Sleep(wait)
			return e.Store().PutSysDocs(ctx, docs...)
		}, link{doc: recordDoc(rec, false), event: ChainProposed, by: func() string { return "other" }})
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() { // the other process, appending without pause
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := write(fast, 80000+i, 0); err != nil {
				done <- err
				return
			}
		}
	}()
	for i := range 3 {
		require.NoError(t, write(slow, 70000+i, 20*time.Millisecond), "the slow write %d", i)
	}
	close(stop)
	require.NoError(t, <-done)
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
}

func TestAuditChainFindsEditedAndRemovedEntries(t *testing.T) {
	e := domainEngine(t, stockDomain(t, "", ""))
	ctx := context.Background()
	a := propose(t, e, agent, setQty(1, "A"))
	require.NoError(t, e.audit.flush()) // an entry of its own (a batch entry: TestChainBatchEntryDamage)
	propose(t, e, agent, setQty(1, "B"))
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)

	var en ChainEntry
	ok, err := e.Store().GetSys(ChainCollection, chainID(2), &en)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, a.RunID, en.RunID)
	en.By = "someone-else"
	require.NoError(t, e.Store().PutSys(ctx, ChainCollection, chainID(2), en))
	rep, err = e.VerifyChain()
	require.NoError(t, err)
	require.False(t, rep.OK())
	assert.Equal(t, int64(2), rep.Problems[0].Seq)
	assert.Contains(t, rep.Problems[0].Message, "chain entry 2 does not match its hash")

	// Re-sealing the edited entry is not enough: the next one no longer links to it.
	en.seal()
	require.NoError(t, e.Store().PutSys(ctx, ChainCollection, chainID(2), en))
	rep, err = e.VerifyChain()
	require.NoError(t, err)
	require.False(t, rep.OK())
	assert.Contains(t, rep.Problems[0].Message, "entry 3 does not link to entry 2")

	// The last entry removed (here: the head moved back over it) is found too.
	e2 := domainEngine(t, stockDomain(t, "", ""))
	propose(t, e2, agent, setQty(1, "A"))
	require.NoError(t, e2.audit.flush())
	last := propose(t, e2, agent, setQty(1, "B"))
	require.NoError(t, e2.audit.flush())
	_, err = e2.Store().PruneSys(ctx, ChainCollection, func(d store.SysRecord) (bool, error) { return d.ID == chainID(3), nil })
	require.NoError(t, err)
	rep, err = e2.VerifyChain()
	require.NoError(t, err)
	require.False(t, rep.OK())
	msgs := fmt.Sprint(rep.Problems)
	assert.Contains(t, msgs, "head does not name its last entry")
	assert.Contains(t, msgs, last.RunID+" has a record but no chain entry")
}

// Pruning writes a checkpoint: what is left still verifies, and the chain shrinks.
func TestAuditChainPruneCheckpoint(t *testing.T) {
	e, clk := clockedEngine(t)
	ctx := context.Background()
	for range 3 {
		_, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
		require.NoError(t, err)
	}
	clk.advance(40 * 24 * time.Hour)
	kept, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	before, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, before.OK(), "%v", before.Problems)

	rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, 3, rep.Removed)
	after, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, after.OK(), "%v", after.Problems)
	assert.Equal(t, 1, after.Records)
	assert.Equal(t, 2, after.Entries, "the kept run's entry and the checkpoint")

	// And it goes on: a later apply chains after the checkpoint.
	_, err = e.ApplyWith(ctx, kept.RunID, ApplyOptions{By: bob})
	require.NoError(t, err)
	after, err = e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, after.OK(), "%v", after.Problems)
}

// The lifecycle names who acted: started its proposer, applied the approver (or the rule),
// rejected who rejected it; the history rebuilt from the log says the same.
func TestEventsNameThePrincipal(t *testing.T) {
	e := domainEngine(t, stockDomain(t, `{"auto": [{"name": "one_row", "doc": "one row at most", "kind": "auto_apply", "params": {"max_rows_written": 1}}]}`, ""))
	h := &heard{}
	defer e.Observe(h.observe)()
	by := func(evs []Event, typ EventType) (string, string) {
		for _, ev := range evs {
			if ev.Type == typ {
				return ev.By, ev.Rule
			}
		}
		t.Fatalf("no %s event in %v", typ, typesOf(evs))
		return "", ""
	}

	applied := propose(t, e, agent, setQty(1, "A", "B")) // two rows: no rule lets it through
	_, err := applyBy(e, applied.RunID, bob)
	require.NoError(t, err)
	auto := propose(t, e, agent, setQty(2, "A"))
	_, err = applyBy(e, auto.RunID, agent)
	require.NoError(t, err)
	rejected := propose(t, e, agent, setQty(3, "B"))
	_, _, err = e.RejectWith(context.Background(), rejected.RunID, RejectOptions{Feedback: "no", By: alice})
	require.NoError(t, err)
	live := h.take()

	for _, c := range []struct {
		id        string
		typ       EventType
		who, rule string
	}{
		{applied.RunID, EventStarted, "agent", ""},
		{applied.RunID, EventApplied, "bob", ""},
		{auto.RunID, EventApplied, "", "one_row"},
		{rejected.RunID, EventRejected, "alice", ""},
	} {
		var mine []Event
		for _, ev := range live {
			if ev.RunID == c.id {
				mine = append(mine, ev)
			}
		}
		who, rule := by(mine, c.typ)
		assert.Equal(t, c.who, who, "%s of %s, live", c.typ, c.id)
		assert.Equal(t, c.rule, rule, "%s of %s, live", c.typ, c.id)
		doc, err := e.Show(c.id)
		require.NoError(t, err)
		var recorded []Event
		for _, sev := range doc.Events {
			recorded = append(recorded, Event{Type: map[string]EventType{StreamStarted: EventStarted, StreamApplied: EventApplied, StreamRejected: EventRejected}[sev.Type], By: sev.By, Rule: sev.Rule})
		}
		who, rule = by(recorded, c.typ)
		assert.Equal(t, c.who, who, "%s of %s, recorded", c.typ, c.id)
		assert.Equal(t, c.rule, rule, "%s of %s, recorded", c.typ, c.id)
	}
}

// Opening a store without a chain writes nothing (commands that only read leave the file as it
// was); the chain's start is written with the first record, and the chain verifies.
func TestTheChainStartsWithTheFirstWrite(t *testing.T) {
	e, _ := newEngine(t)
	entries, err := e.Store().ListSys(ChainCollection)
	require.NoError(t, err)
	assert.Empty(t, entries, "opening wrote to the chain")
	_, err = e.Run(context.Background(), Request{Reply: `STATUS, answer_text = "success", "Nothing to do."`})
	require.NoError(t, err)
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
	assert.Equal(t, 2, rep.Entries, "the start and the run's entry")
	assert.Equal(t, 0, rep.Unchained)
}
