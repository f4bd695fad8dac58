package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// clock is a test clock that can be moved on.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// clockedEngine is an engine over a fresh demo store whose clock the test moves.
func clockedEngine(t *testing.T) (*Engine, *clock) {
	t.Helper()
	clk := &clock{now: fixedNow}
	st := openStore(t, t.TempDir())
	e, err := New(st, Options{Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, e.Close())
		assert.NoError(t, st.Close())
	})
	return e, clk
}

func TestPruneRemovesOldRunsOnly(t *testing.T) {
	e, clk := clockedEngine(t)
	ctx := context.Background()
	run := func(name string) *Result {
		t.Helper()
		res, err := e.Run(ctx, Request{Reply: example(t, name)})
		require.NoError(t, err)
		return res
	}
	old := run("01_round_under_100.star")
	pending := run("02_purchase_wayfarer.star")
	rejected := run("02_purchase_wayfarer.star")
	_, _, err := e.Reject(ctx, rejected.RunID, "no", "test")
	require.NoError(t, err)
	appliedLate := run("03_two_item_order.star")
	clk.advance(20 * 24 * time.Hour)
	_, err = e.Apply(ctx, appliedLate.RunID) // its last step is 20 days after its run
	require.NoError(t, err)
	clk.advance(20 * 24 * time.Hour)
	recent := run("01_round_under_100.star")

	before, err := e.Runs()
	require.NoError(t, err)
	size := map[string]int{}
	for _, r := range before {
		size[r.ID] = r.Bytes
	}

	_, err = e.Prune(ctx, PruneOptions{})
	require.Error(t, err, "a zero age would remove everything")
	_, err = e.Prune(ctx, PruneOptions{OlderThan: -time.Hour})
	require.Error(t, err)

	rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Removed)
	assert.Equal(t, 1, rep.KeptPending)
	assert.Equal(t, clk.Now().Add(-30*24*time.Hour), rep.Before)
	assert.Greater(t, rep.Bytes, int64(size[old.RunID]+size[rejected.RunID]), "the records and the decision")
	left := ids(t, e)
	assert.ElementsMatch(t, []string{pending.RunID, appliedLate.RunID, recent.RunID}, left)
	decisions, err := e.Decisions()
	require.NoError(t, err)
	assert.Empty(t, decisions, "the rejected run's decision went with it")

	// The kept pending run keeps what an apply needs.
	rec, err := e.Record(pending.RunID)
	require.NoError(t, err)
	assert.True(t, rec.Pending)
	assert.NotNil(t, rec.Writes)
}

func TestPruneCanRemovePendingRuns(t *testing.T) {
	e, clk := clockedEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	require.True(t, res.Pending)
	clk.advance(time.Hour)

	rep, err := e.Prune(ctx, PruneOptions{OlderThan: 2 * time.Hour, Pending: true})
	require.NoError(t, err)
	assert.Zero(t, rep.Removed, "younger than the cut")
	rep, err = e.Prune(ctx, PruneOptions{OlderThan: time.Minute, Pending: true})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Removed)
	assert.Zero(t, rep.KeptPending)
	assert.Empty(t, ids(t, e))
	_, err = e.Apply(ctx, res.RunID)
	var re *RunError
	require.ErrorAs(t, err, &re)
}

func ids(t *testing.T, e *Engine) []string {
	t.Helper()
	runs, err := e.Runs()
	require.NoError(t, err)
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// A prune of a log whose runs were all recorded before the chain existed (an older starplan's,
// unchained) leaves a log that verifies: the chain has no entry naming a removed run, so the
// prune writes none, and the chain's first entry stays its start when a later run begins it.
// (A checkpoint written there named a start never written: runs verify and db check reported
// "not the start of the chain" and every kept record as "added outside starplan".)
func TestPruneOfAnUnchainedLogVerifies(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	var docs []store.SysDoc
	for i := range 6 {
		r := &RunRecord{ID: fmt.Sprintf("old_%d", i), Time: fixedNow.Add(-time.Duration(100-i) * 24 * time.Hour),
			Request: "an old run", Program: "answer_text = 'ok'\nSTATUS = 'success'\n", Outcome: OutcomeOK, Status: "success", Pending: i%3 == 0}
		docs = append(docs, store.SysDoc{Collection: AuditCollection, ID: r.ID, Value: r})
	}
	require.NoError(t, st.PutSysDocs(context.Background(), docs...))
	clk := &clock{now: fixedNow}
	e, err := New(st, Options{Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, e.Close())
		assert.NoError(t, st.Close())
	})
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
	require.Equal(t, 6, rep.Unchained)

	pr, err := e.Prune(context.Background(), PruneOptions{OlderThan: 30 * 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, 4, pr.Removed)
	rep, err = e.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, rep.Problems, "after the prune")
	assert.Equal(t, 2, rep.Unchained)

	_, err = e.Run(context.Background(), Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	rep, err = e.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, rep.Problems, "after a run began the chain")
	assert.Equal(t, 2, rep.Unchained)
}
