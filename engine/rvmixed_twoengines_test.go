package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store/bolt"
)

// TestRvmixedTwoEnginesApplyTheSameRuns: two engines on one bbolt store (each its own apply
// lock, so each one's check before the commit's turn races the other's commit) apply every run
// at once, a run a round. Each run is applied at most once, in the data exactly once; a run one engine applied
// is never recorded as a conflict by the other (it answers "already applied", as a later apply
// would: settledElsewhere); the log shows each run's answer; runs verify and db check are clean.
func TestRvmixedTwoEnginesApplyTheSameRuns(t *testing.T) {
	dir := t.TempDir()
	a := rvmixedEngine(t, dir)
	b, err := New(a.st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	ctx := context.Background()
	reply := example(t, "02_purchase_wayfarer.star")
	before := row(t, a.st, "inventory", "SG002")["quantity_in_stock"].(int64)
	n := testtier.Size(8, 100)
	var ids []string
	type answer struct {
		applied, conflict bool
		err               error
	}
	answers := make([][2]answer, n)
	for i := range n { // a run a round, applied by both at once
		res, err := a.Run(ctx, Request{Reply: reply})
		require.NoError(t, err)
		ids = append(ids, res.RunID)
		require.NoError(t, a.audit.flush()) // the other engine reads it from the store
		var wg sync.WaitGroup
		for k, e := range []*Engine{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.Apply(ctx, ids[i])
				if err != nil {
					answers[i][k] = answer{err: err}
					return
				}
				answers[i][k] = answer{applied: res.Applied, conflict: res.Outcome == OutcomeConflict}
			}()
		}
		wg.Wait()
	}
	require.NoError(t, b.Close())

	applied := 0
	for i, id := range ids {
		x, y := answers[i][0], answers[i][1]
		for _, an := range []answer{x, y} {
			var re *RunError
			if an.err != nil {
				assert.True(t, errors.As(an.err, &re), "run %s: %v", id, an.err)
			}
		}
		assert.False(t, x.applied && y.applied, "run %s applied twice", id)
		assert.False(t, (x.applied && y.conflict) || (y.applied && x.conflict), "run %s applied by one engine, a conflict by the other", id)
		doc, err := a.Show(id)
		require.NoError(t, err)
		if x.applied || y.applied {
			applied++
			assert.Equal(t, StateApplied, doc.State, id)
		} else {
			assert.Equal(t, StateConflict, doc.State, "run %s: %+v %+v", id, x, y)
		}
	}
	assert.Equal(t, before-3*int64(applied), row(t, a.st, "inventory", "SG002")["quantity_in_stock"].(int64))
	t.Logf("runs %d, applied %d", n, applied)
	rvmixedVerifyAndCheck(t, a, dir)
}

// TestRvmixedTwoEnginesApplyAndRejectTheSameRun: on a store several engines share, one engine
// rejects a run while the other applies it. An apply and a rejection of one run must not both
// succeed (RejectWith), though each engine's apply lock orders only its own decisions: each
// decision's commit checks, under the chain's shared lock, that no other engine decided the run
// since (decidedElsewhere). Before, both succeeded for most runs (9 of 10 on two servers over
// one PostgreSQL database: TestRvmixedPGApplyOnOneServerRejectOnAnother), the data applied and
// the log saying rejected, or the other way round.
func TestRvmixedTwoEnginesApplyAndRejectTheSameRun(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	a, b := twoSharedEngines(t, st)
	ctx := context.Background()
	moveWayfarer(t, st, 100000) // stock for every purchase
	reply := example(t, "02_purchase_wayfarer.star")
	before := row(t, st, "inventory", "SG002")["quantity_in_stock"].(int64)
	both, applies := 0, 0
	for range testtier.Size(12, 200) {
		res, err := a.Run(ctx, Request{Reply: reply})
		require.NoError(t, err)
		require.True(t, res.Pending)
		require.NoError(t, a.audit.flush())
		var wg sync.WaitGroup
		var applied, rejected bool
		var aerr, rerr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			r, err := b.Apply(ctx, res.RunID)
			applied, aerr = err == nil && r.Applied, err
		}()
		go func() {
			defer wg.Done()
			_, rec, err := a.Reject(ctx, res.RunID, "no", "test")
			rejected, rerr = err == nil && rec, err
		}()
		wg.Wait()
		var re *RunError
		for _, err := range []error{aerr, rerr} {
			if err != nil {
				assert.True(t, errors.As(err, &re), "%v", err)
			}
		}
		if applied && rejected {
			both++
		}
		if applied {
			applies++
		}
		require.NoError(t, a.audit.flush())
		require.NoError(t, b.audit.flush())
		doc, err := a.Show(res.RunID)
		require.NoError(t, err)
		if applied {
			assert.Equal(t, StateApplied, doc.State, "the log says what the data holds")
		} else {
			assert.Equal(t, StateRejected, doc.State)
		}
	}
	assert.Zero(t, both, "runs both applied and rejected")
	assert.Equal(t, before-3*int64(applies), row(t, st, "inventory", "SG002")["quantity_in_stock"].(int64))
	rep, err := a.VerifyChain()
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

// TestRvmixedTwoEnginesApproveAndRejectTheSameRun: on a store several engines share, one
// engine records the first of two approvals of a run while the other rejects it. The approval
// must not write the run back as pending over the rejection (a later apply would then find it
// pending): it answers as a later one would, the rejection's record standing.
func TestRvmixedTwoEnginesApproveAndRejectTheSameRun(t *testing.T) {
	st, err := bolt.Open(t.TempDir(), bolt.Options{Domain: stockDomain(t, `{"required_approvals": 2}`, "")})
	require.NoError(t, err)
	a, b := twoSharedEngines(t, st)
	ctx := context.Background()
	lost := 0
	for range testtier.Size(12, 200) {
		res := propose(t, a, agent, setQty(1, "A"))
		require.NoError(t, a.audit.flush())
		var wg sync.WaitGroup
		var rejected bool
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := applyBy(b, res.RunID, bob) // the first of two approvals
			var re *RunError
			if err != nil {
				assert.True(t, errors.As(err, &re), "%v", err)
			}
		}()
		go func() {
			defer wg.Done()
			_, rec, err := a.RejectWith(ctx, res.RunID, RejectOptions{Feedback: "no", By: carol})
			rejected = err == nil && rec
		}()
		wg.Wait()
		require.True(t, rejected, "a rejection of a run waiting for approvals is recorded")
		require.NoError(t, b.audit.flush())
		rec, err := a.Record(res.RunID)
		require.NoError(t, err)
		if rec.Pending {
			lost++ // the approval wrote the run back as pending over the rejection
		}
	}
	assert.Zero(t, lost, "rejections lost under an approval")
}

// twoSharedEngines are two engines over st shared as servers share a PostgreSQL database
// (sharedStore, approval_test.go), closed with st at the test's end.
func twoSharedEngines(t *testing.T, st *bolt.Store) (a, b *Engine) {
	t.Helper()
	shared := sharedStore{st, &sync.Mutex{}}
	var engines [2]*Engine
	for i := range engines {
		e, err := New(shared, Options{Now: func() time.Time { return fixedNow }})
		require.NoError(t, err)
		engines[i] = e
	}
	t.Cleanup(func() {
		for _, e := range engines {
			e.Close()
		}
		st.Close()
	})
	return engines[0], engines[1]
}
