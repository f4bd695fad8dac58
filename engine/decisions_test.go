package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

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
	decisions int
	fail      error
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
