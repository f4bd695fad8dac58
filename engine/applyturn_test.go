package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// waitDone waits for done, failing the test when it does not come: what it waits for is
// blocked (a lock the test holds) and would otherwise hang the suite.
func waitDone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: still waiting after a minute (blocked behind what the test holds)", what)
	}
}

// TestAConflictIsAnsweredWithoutTheAuditWriter: an apply whose data moved is answered with its
// conflict while the audit writer is busy (the test holds its lock, as a batch's commit does),
// found by the store's check before the commit's turn; its record is written afterwards, with
// the commit of the next apply (which does not conflict, and commits once the writer is free).
func TestAConflictIsAnsweredWithoutTheAuditWriter(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	ids := pendingRuns(t, e, 2)
	_, err := e.Apply(ctx, ids[0]) // ids[1] buys the same row: it now conflicts
	require.NoError(t, err)
	other, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)

	e.audit.writeMu.Lock() // a batch's commit under way
	var once sync.Once
	unlock := func() { once.Do(e.audit.writeMu.Unlock) }
	t.Cleanup(unlock) // on a failure too: the engine's close writes the queue
	var res *Result
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = e.Apply(ctx, ids[1])
	}()
	waitDone(t, done, "the conflicting apply")
	require.NoError(t, err)
	assert.Equal(t, OutcomeConflict, res.Outcome)
	assert.False(t, res.Applied)

	applied := make(chan struct{})
	go func() {
		defer close(applied)
		_, err := e.Apply(ctx, other.RunID)
		assert.NoError(t, err)
	}()
	unlock()
	waitDone(t, applied, "the apply that commits")

	rec, err := e.Record(ids[1])
	require.NoError(t, err)
	assert.Equal(t, OutcomeConflict, rec.Outcome)
	assert.False(t, rec.Pending)
	rec, err = e.Record(other.RunID)
	require.NoError(t, err)
	assert.True(t, rec.Applied)
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
}

// TestAListingShowsAQueuedConflictWithoutACommit: a run whose dry run and conflict are both
// still queued is listed once, in its last state, without a commit of the queue (each conflict
// made the next listing commit it); the page is the one a listing after the commit shows.
func TestAListingShowsAQueuedConflictWithoutACommit(t *testing.T) {
	e := tailEngine(t) // the test's batches are its own
	ctx := context.Background()
	_, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), Apply: true}) // a stored run
	require.NoError(t, err)
	require.Empty(t, e.audit.tail())
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	require.True(t, res.Pending)
	// The row it buys moves under it, by another writer: nothing of the log is written.
	sg := e.st.StageFor(ctx, store.RunLimits{})
	tb, ok := sg.Table("inventory")
	require.True(t, ok)
	n, err := tb.Update(table.Row{"quantity_in_stock": int64(1000)}, table.Query{Where: map[string]any{"item_id": "SG002"}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, e.st.ApplyPending(ctx, sg.Pending(), nil))
	res, err = e.Apply(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome)
	require.Len(t, e.audit.tail(), 2, "the dry run and its conflict, queued")

	commits := e.audit.commits.Load()
	page, err := e.ListRuns(ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, commits, e.audit.commits.Load(), "no commit")
	assert.Len(t, e.audit.tail(), 2)
	require.Len(t, page.Runs, 2)
	assert.Equal(t, res.RunID, page.Runs[0].ID)
	assert.Equal(t, StateConflict, page.Runs[0].State)
	pending, err := e.ListRuns(ListOptions{State: StatePending})
	require.NoError(t, err)
	assert.Empty(t, pending.Runs)

	require.NoError(t, e.audit.flush())
	after, err := e.ListRuns(ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.Count, page.Count)
	assert.Equal(t, after.States, page.States)
	assert.Equal(t, after.Bytes, page.Bytes)
	require.Len(t, after.Runs, 2)
	for i := range after.Runs {
		assert.Equal(t, after.Runs[i].ID, page.Runs[i].ID)
		assert.Equal(t, after.Runs[i].State, page.Runs[i].State)
	}
}
