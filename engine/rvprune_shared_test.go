package engine

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/pg"
)

// rvTwoServers opens two engines on one throw-away PostgreSQL database (servers that share it).
func rvTwoServers(t *testing.T, clk *clock) (a, b *Engine) {
	t.Helper()
	if os.Getenv(pgtest.EnvDSN) == "" {
		t.Skip("no PostgreSQL: .ci/run go test ./engine -run RvPrune runs it")
	}
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	ps, err := pg.Create(ctx, dsn, store.Inventory(), pg.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { ps.Close() })
	ps2, err := pg.Open(ctx, dsn, pg.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { ps2.Close() })
	a, err = New(ps, Options{Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b, err = New(ps2, Options{Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return a, b
}

// A server rejects an old pending run while another prunes with --pending: the rejection read
// the run before the prune's step removed it and commits after. It must not write the run's
// record back (a record the checkpoint counts as pruned, put back: runs verify and db check
// then report the log damaged for good); it finds the run gone, as a rejection after the
// prune would.
func TestRvPruneRejectionAfterSharedPruneWritesNoRecordBack(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: fixedNow}
	a, b := rvTwoServers(t, clk)
	res, err := a.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	require.NoError(t, a.audit.flush())
	_, err = a.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	require.NoError(t, a.audit.flush())
	clk.advance(40 * 24 * time.Hour)
	_, err = a.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	require.NoError(t, a.audit.flush())

	// b checks its rejection (the run is pending), as RejectWith does, then a prunes.
	r := &rejection{ctx: ctx, runID: res.RunID, opts: RejectOptions{Feedback: "no", By: alice}}
	b.applyMu.Lock()
	require.True(t, b.rejectCheck(r))
	rep, err := a.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour, Pending: true})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Removed)
	b.commitRejections([]*rejection{r})
	for !r.done && b.rejectionQueued(r) {
		b.rejectQueuedLocked()
	}
	b.applyMu.Unlock()
	require.True(t, r.done)
	var re *RunError
	assert.ErrorAs(t, r.err, &re, "the run is gone: its rejection finds no run")
	var raw json.RawMessage
	ok, err := a.st.GetSys(auditCollection, res.RunID, &raw)
	require.NoError(t, err)
	assert.False(t, ok, "the pruned run's record stays pruned")
	vrep, err := a.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, vrep.Problems)
}

// Two servers on one PostgreSQL database prune at once, in steps of one run, each one's steps
// interleaved with the other's whole prune and with its runs, rejections and applies; runs of
// identical times straddle every step boundary (the cursor is the index entry, order and id).
// Every old settled run goes once, no pending one goes, and the log verifies (runs verify and
// db check).
func TestRvPruneTwoServersPruneAtOnce(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: fixedNow}
	a, b := rvTwoServers(t, clk)
	run := func(e *Engine, name string) string {
		t.Helper()
		res, err := e.Run(ctx, Request{Reply: example(t, name)})
		require.NoError(t, err)
		require.NoError(t, e.audit.flush())
		return res.RunID
	}
	var settled, pending []string
	for i := range 12 { // the clock stands still: every run has the same time
		e := a
		if i%2 == 1 {
			e = b
		}
		if i%4 == 3 {
			pending = append(pending, run(e, "02_purchase_wayfarer.star"))
		} else {
			settled = append(settled, run(e, "01_round_under_100.star"))
		}
	}
	_, _, err := b.RejectWith(ctx, pending[0], RejectOptions{Feedback: "no", By: alice})
	require.NoError(t, err)
	settled, pending = append(settled, pending[0]), pending[1:]
	clk.advance(40 * 24 * time.Hour)
	month := PruneOptions{OlderThan: 30 * 24 * time.Hour}
	a.pruneBatch, b.pruneBatch = 1, 1
	var aSteps, bSteps int
	var fresh []string
	b.pruneStepped = func() {
		bSteps++
		fresh = append(fresh, run(a, "01_round_under_100.star"))
	}
	a.pruneStepped = func() {
		aSteps++
		switch aSteps {
		case 1:
			rep, err := b.Prune(ctx, month) // the rest, while a is between two steps
			assert.NoError(t, err)
			assert.NotZero(t, rep.Removed)
		case 2:
			_, err := b.Apply(ctx, pending[1]) // an old pending run applied: it stays
			assert.NoError(t, err)
		}
		fresh = append(fresh, run(b, "01_round_under_100.star"))
	}
	rep, err := a.Prune(ctx, month)
	require.NoError(t, err)
	assert.NotZero(t, rep.Removed)
	assert.NotZero(t, aSteps)
	assert.NotZero(t, bSteps)
	assert.ElementsMatch(t, append(append([]string{}, pending...), fresh...), ids(t, a),
		"every old settled run pruned, once; the pending ones (one applied meanwhile) and the new ones kept")
	rep, err = b.Prune(ctx, month)
	require.NoError(t, err)
	assert.Zero(t, rep.Removed)
	require.NoError(t, b.Close())
	assert.Equal(t, "[]", rvBoth(t, rvBackends()[1], a))
}

// On a store servers share, an apply whose data moved queues its run's conflict record
// (auditLog.add), written with a later batch without the decision checks; a prune --pending on
// another server in between removes the run, still pending in the store. The batch wrote its
// record back, which the checkpoint counts pruned: runs verify and db check reported the log
// damaged for good. The batch now drops it (chain.withoutStaleRewrites).
func TestRvPruneQueuedConflictRecordAfterSharedPrune(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: fixedNow}
	a, b := rvTwoServers(t, clk)
	b.audit.linger = time.Hour // before any record is queued: the conflict record waits for a flush
	var p [2]string
	for i := range p {
		res, err := a.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")}) // each buys the same row
		require.NoError(t, err)
		require.NoError(t, a.audit.flush())
		p[i] = res.RunID
	}
	clk.advance(40 * 24 * time.Hour)
	_, err := b.Apply(ctx, p[0])
	require.NoError(t, err)
	res, err := b.Apply(ctx, p[1])
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome)
	rep, err := a.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour, Pending: true})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Removed, "p[1], pending in the store")
	_ = b.audit.flush() // its conflict record: refused, or written back
	var raw json.RawMessage
	ok, err := a.st.GetSys(auditCollection, p[1], &raw)
	require.NoError(t, err)
	assert.False(t, ok, "the pruned run's record stays pruned")
	vrep, err := a.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, vrep.Problems)
}

// pruneInConflictCheck is a PostgreSQL store whose conflict check before an apply's commit
// (store.ConflictChecker) first runs during: the moment between the apply's read of its run and
// its commit.
type pruneInConflictCheck struct {
	*pg.Store
	during func()
}

func (s *pruneInConflictCheck) Conflicts(ctx context.Context, p *store.Pending) error {
	if f := s.during; f != nil {
		s.during = nil
		f()
	}
	return nil
}

// A server applies an old pending run while another prunes with --pending: the prune removes
// the run after the apply read it, before its commit. The apply fails, writes nothing, and
// queues no record of the run to write later (its record back after the prune: the log then
// verifies damaged for good).
func TestRvPruneApplyAfterSharedPruneWritesNoRecordBack(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		t.Skip("no PostgreSQL: .ci/run go test ./engine -run RvPrune runs it")
	}
	ctx := context.Background()
	clk := &clock{now: fixedNow}
	dsn := pgtest.DSN(t)
	ps, err := pg.Create(ctx, dsn, store.Inventory(), pg.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { ps.Close() })
	ps2, err := pg.Open(ctx, dsn, pg.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { ps2.Close() })
	a, err := New(ps, Options{Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	hook := &pruneInConflictCheck{Store: ps2}
	b, err := New(hook, Options{Now: clk.Now})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })

	res, err := a.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	require.NoError(t, a.audit.flush())
	clk.advance(40 * 24 * time.Hour)
	hook.during = func() {
		rep, err := a.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour, Pending: true})
		assert.NoError(t, err)
		assert.Equal(t, 1, rep.Removed)
	}
	_, err = b.Apply(ctx, res.RunID)
	assert.Error(t, err, "the run went while the apply was on its way")
	require.NoError(t, b.audit.flush())
	var raw json.RawMessage
	ok, err := a.st.GetSys(auditCollection, res.RunID, &raw)
	require.NoError(t, err)
	assert.False(t, ok, "the pruned run's record stays pruned")
	vrep, err := a.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, vrep.Problems)
}
