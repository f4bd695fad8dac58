package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
// found by the store's check before the commit's turn; its record is written afterwards, and an
// apply that does not conflict still waits for the writer (its record is in its commit).
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
