package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

func TestRejectMakesAPendingRunUnapplicable(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	require.True(t, res.Pending)

	d, recorded, err := e.Reject(ctx, res.RunID, "Alice wanted 2, not 3", "test")
	require.NoError(t, err)
	assert.True(t, recorded)
	assert.Equal(t, DecisionRejected, d.Decision)
	assert.Equal(t, "Alice wanted 2, not 3", d.Feedback)
	assert.Equal(t, fixedNow, d.Time)

	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.False(t, rec.Pending, "a rejected run is no longer pending")
	assert.Nil(t, rec.Writes, "its writes are dropped")

	_, err = e.Apply(ctx, res.RunID)
	var re *RunError
	require.True(t, errors.As(err, &re), "%v", err)
	assert.Contains(t, re.Problem, "rejected")
	wayfarer := row(t, e.Store(), "inventory", "SG002")
	assert.Equal(t, int64(6), wayfarer["quantity_in_stock"], "nothing was written")

	again, recorded, err := e.Reject(ctx, res.RunID, "second thoughts", "test")
	require.NoError(t, err)
	assert.False(t, recorded, "the first decision stands")
	assert.Equal(t, d.Feedback, again.Feedback)

	all, err := e.Decisions()
	require.NoError(t, err)
	assert.Len(t, all, 1)
	assert.Equal(t, d.Feedback, all[res.RunID].Feedback)
}

func TestRejectRefusesAppliedAndUnknownRuns(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), Apply: true})
	require.NoError(t, err)
	require.True(t, res.Applied)

	_, _, err = e.Reject(ctx, res.RunID, "too late", "test")
	var re *RunError
	require.True(t, errors.As(err, &re), "%v", err)
	assert.Contains(t, re.Problem, "already applied")
	_, found, err := e.Decision(res.RunID)
	require.NoError(t, err)
	assert.False(t, found, "a refused rejection records nothing")

	_, _, err = e.Reject(ctx, "r_0000000000", "", "test")
	require.True(t, errors.As(err, &re), "%v", err)
}

func TestRejectBoundsTheFeedback(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	d, _, err := e.Reject(ctx, res.RunID, strings.Repeat("x", 3*MaxFeedback), "test")
	require.NoError(t, err)
	assert.LessOrEqual(t, len(d.Feedback), MaxFeedback+len("…")+64)
	assert.Less(t, len(d.Feedback), 3*MaxFeedback)
}

// sysPuts is a store that counts the PutSysDocs calls that write a decision, and fails them
// while fail is set.
type sysPuts struct {
	store.Store
	mu        sync.Mutex
	decisions int // PutSysDocs calls that write a decision
	applies   int // ApplyPending calls
	carried   int // ApplyPending calls that write a decision
	fail      error
	panics    bool // GetSys panics (a rejection's check)
}

func (s *sysPuts) GetSys(coll, id string, v any) (bool, error) {
	s.mu.Lock()
	panics := s.panics
	s.mu.Unlock()
	if panics && coll == decisionCollection {
		panic("injected")
	}
	return s.Store.GetSys(coll, id, v)
}

func (s *sysPuts) ApplyPending(ctx context.Context, p *store.Pending, verify store.Verify, extra ...store.SysDoc) error {
	s.mu.Lock()
	fail := s.fail
	s.applies++
	for _, d := range extra {
		if d.Collection == decisionCollection {
			s.carried++
			break
		}
	}
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	return s.Store.ApplyPending(ctx, p, verify, extra...)
}

func (s *sysPuts) PutSysDocs(ctx context.Context, docs ...store.SysDoc) error {
	s.mu.Lock()
	fail := s.fail
	for _, d := range docs {
		if d.Collection == decisionCollection {
			s.decisions++
			break
		}
	}
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	return s.Store.PutSysDocs(ctx, docs...)
}

// queuedRejections runs a RejectWith of each of ids while the test holds the apply lock, so
// that all of them are queued before any is decided, and returns their answers.
func queuedRejections(t *testing.T, e *Engine, ids ...string) []*rejection {
	t.Helper()
	out := make([]*rejection, len(ids))
	var wg sync.WaitGroup
	e.applyMu.Lock()
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &rejection{runID: id}
			r.d, r.recorded, r.err = e.RejectWith(context.Background(), id, RejectOptions{Feedback: fmt.Sprint("no ", i), Origin: "test"})
			out[i] = r
		}()
	}
	for { // wait until every one is queued, behind the lock
		e.rejections.mu.Lock()
		n := len(e.rejections.queue)
		e.rejections.mu.Unlock()
		if n == len(ids) {
			break
		}
		runtime.Gosched()
	}
	e.applyMu.Unlock()
	wg.Wait()
	return out
}

func pendingRuns(t *testing.T, e *Engine, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		res, err := e.Run(context.Background(), Request{Reply: example(t, "02_purchase_wayfarer.star")})
		require.NoError(t, err)
		require.True(t, res.Pending)
		ids = append(ids, res.RunID)
	}
	return ids
}

// TestQueuedRejectionsCommitTogether: rejections waiting for the apply lock are written in one
// commit, each decided as it would be alone: of two rejections of one run, the first is recorded
// and the second answers with its decision (the serial outcome), and the log verifies.
func TestQueuedRejectionsCommitTogether(t *testing.T) {
	e, _ := newEngine(t)
	ids := pendingRuns(t, e, 3)
	puts := &sysPuts{Store: e.st}
	e.st = puts
	got := queuedRejections(t, e, ids[0], ids[1], ids[0], ids[2])
	for i, r := range got {
		require.NoError(t, r.err, "rejection %d", i)
	}
	assert.True(t, got[1].recorded)
	assert.True(t, got[3].recorded)
	// The two rejections of ids[0] queued in either order: the first is recorded, the second
	// finds its decision.
	assert.True(t, got[0].recorded != got[2].recorded, "exactly one of two rejections of a run is recorded")
	assert.Equal(t, got[0].d.Feedback, got[2].d.Feedback)
	assert.Equal(t, 1, puts.decisions, "one commit for the group")
	all, err := e.Decisions()
	require.NoError(t, err)
	assert.Len(t, all, 3)
	assert.Equal(t, got[0].d.Feedback, all[ids[0]].Feedback)
	for _, id := range ids {
		rec, err := e.Record(id)
		require.NoError(t, err)
		assert.False(t, rec.Pending, id)
		assert.NotEmpty(t, rec.RejectedBy, id)
	}
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
}

// TestAFailedRejectionGroupFailsEveryMember: when a group's commit fails, every rejection of
// it answers the error and none is written; each can be made again.
func TestAFailedRejectionGroupFailsEveryMember(t *testing.T) {
	e, _ := newEngine(t)
	ids := pendingRuns(t, e, 3)
	puts := &sysPuts{Store: e.st, fail: errors.New("disk full")}
	e.st = puts
	for i, r := range queuedRejections(t, e, ids...) {
		require.Error(t, r.err, "rejection %d", i)
		assert.Contains(t, r.err.Error(), "disk full")
		assert.False(t, r.recorded)
	}
	assert.Equal(t, 1, puts.decisions, "one commit for the group")
	all, err := e.Decisions()
	require.NoError(t, err)
	assert.Empty(t, all, "nothing written")
	for _, id := range ids {
		rec, err := e.Record(id)
		require.NoError(t, err)
		assert.True(t, rec.Pending, id)
	}
	puts.fail = nil
	for i, r := range queuedRejections(t, e, ids...) {
		require.NoError(t, r.err, "rejection %d", i)
		assert.True(t, r.recorded)
	}
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
}

// queue queues a rejection of each of ids, as RejectWith does before it waits for the apply lock.
func queue(e *Engine, ids ...string) []*rejection {
	var out []*rejection
	e.rejections.mu.Lock()
	defer e.rejections.mu.Unlock()
	for _, id := range ids {
		r := &rejection{ctx: context.Background(), runID: id, opts: RejectOptions{Feedback: "no", Origin: "test"}}
		e.rejections.queue = append(e.rejections.queue, r)
		out = append(out, r)
	}
	return out
}

// TestAnApplyCarriesQueuedRejections: rejections queued when an apply takes the lock are
// written in its commit, and a rejection of the run being applied is not: it waits, and then
// finds the run applied (the serial outcome; both succeeded when it rode along).
func TestAnApplyCarriesQueuedRejections(t *testing.T) {
	e, _ := newEngine(t)
	ids := pendingRuns(t, e, 3)
	puts := &sysPuts{Store: e.st}
	e.st = puts
	rs := queue(e, ids[1], ids[0], ids[2])
	res, err := e.Apply(context.Background(), ids[0])
	require.NoError(t, err)
	require.True(t, res.Applied)
	assert.Equal(t, 1, puts.applies)
	assert.Equal(t, 1, puts.carried, "the rejections ride in the apply's commit")
	assert.Equal(t, 0, puts.decisions)
	for _, r := range []*rejection{rs[0], rs[2]} {
		require.True(t, r.done)
		require.NoError(t, r.err)
		assert.True(t, r.recorded)
	}
	require.False(t, rs[1].done, "the rejection of the run applied waits for the next group")
	e.applyMu.Lock()
	e.rejectQueuedLocked()
	e.applyMu.Unlock()
	require.True(t, rs[1].done)
	var re *RunError
	require.True(t, errors.As(rs[1].err, &re), "%v", rs[1].err)
	assert.Contains(t, re.Problem, "already applied")
	all, err := e.Decisions()
	require.NoError(t, err)
	assert.Len(t, all, 2)
	assert.Nil(t, all[ids[0]])
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
}

// TestRejectionsOfAnApplyThatWritesNothing: an apply that conflicts writes nothing, and the
// rejections it took commit on their own; one whose commit fails fails them all too, and
// changes nothing.
func TestRejectionsOfAnApplyThatWritesNothing(t *testing.T) {
	e, _ := newEngine(t)
	ids := pendingRuns(t, e, 6)
	_, err := e.Apply(context.Background(), ids[4]) // the others now conflict: they buy the same row
	require.NoError(t, err)
	stock := row(t, e.Store(), "inventory", "SG002")["quantity_in_stock"]
	puts := &sysPuts{Store: e.st}
	e.st = puts
	rs := queue(e, ids[1])
	res, err := e.Apply(context.Background(), ids[0])
	require.NoError(t, err)
	assert.Equal(t, OutcomeConflict, res.Outcome)
	require.True(t, rs[0].done)
	require.NoError(t, rs[0].err)
	assert.True(t, rs[0].recorded)
	assert.Equal(t, 1, puts.carried, "tried in the apply's commit")
	assert.Equal(t, 1, puts.decisions, "then committed on their own")

	puts.carried, puts.decisions, puts.fail = 0, 0, errors.New("disk full")
	rs = queue(e, ids[3], ids[5])
	_, err = e.Apply(context.Background(), ids[2])
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk full")
	for i := range rs {
		require.True(t, rs[i].done)
		require.Error(t, rs[i].err)
		assert.Contains(t, rs[i].err.Error(), "disk full")
	}
	assert.Equal(t, 1, puts.carried, "tried in the apply's commit")
	assert.Equal(t, 1, puts.decisions, "then on their own")
	puts.fail = nil
	all, err := e.Decisions()
	require.NoError(t, err)
	assert.Len(t, all, 1, "the failed group wrote nothing")
	assert.Equal(t, stock, row(t, e.Store(), "inventory", "SG002")["quantity_in_stock"])
	for _, id := range []string{ids[2], ids[3], ids[5]} {
		rec, err := e.Record(id)
		require.NoError(t, err)
		assert.True(t, rec.Pending, id)
	}
}

// TestRejectionsTakenByAPanickingHolder: a rejection taken for a group whose holder of the apply
// lock panicked is answered with an error, not waited for forever (the queue no longer holds
// it, so no later holder would answer it).
func TestRejectionsTakenByAPanickingHolder(t *testing.T) {
	e, _ := newEngine(t)
	ids := pendingRuns(t, e, 1)
	puts := &sysPuts{Store: e.st, panics: true}
	e.st = puts
	answer := make(chan error, 1)
	e.applyMu.Lock()
	go func() {
		_, _, err := e.RejectWith(context.Background(), ids[0], RejectOptions{Feedback: "no"})
		answer <- err
	}()
	for !slices.ContainsFunc(queueOf(e), func(r *rejection) bool { return r.runID == ids[0] }) {
		runtime.Gosched()
	}
	func() { // a holder of the lock takes it and panics in its check
		defer func() { require.NotNil(t, recover()) }()
		e.rejectQueuedLocked()
	}()
	puts.mu.Lock()
	puts.panics = false
	puts.mu.Unlock()
	e.applyMu.Unlock()
	select {
	case err := <-answer:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "panic")
	case <-time.After(30 * time.Second): // only a hang: the waiter never returns
		t.Fatal("the rejection waits forever for a group that panicked")
	}
	_, recorded, err := e.RejectWith(context.Background(), ids[0], RejectOptions{Feedback: "no"})
	require.NoError(t, err, "made again, it goes through")
	assert.True(t, recorded)
}

func queueOf(e *Engine) []*rejection {
	e.rejections.mu.Lock()
	defer e.rejections.mu.Unlock()
	return slices.Clone(e.rejections.queue)
}
