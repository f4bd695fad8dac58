package engine

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/store/pg"
	"github.com/starplan/starplan/table"
)

// A queued rewrite is a run's record that an apply queues (auditLog.add) for a later batch,
// written without a decision's checks: the record of a conflict (the data moved) or of a failed
// apply (still pending). On a store several servers share, another server may decide the run
// between the queueing and the batch: the batch must not write the stale record over that
// decision (the run then looked pending again, or conflicted, its rejection, apply or approval
// gone from its record, and runs verify reported the decision's entry as reading a record that
// was not the run's last).

// rvrejStore is one server's store of a database servers share: its lock on the chain is the
// shared one, and failNext makes its next apply fail with an error of starplan's own (a lost
// connection): the apply writes nothing and queues the run's record, still pending.
type rvrejStore struct {
	store.Store
	lock     store.SysSerializer
	failNext atomic.Bool
}

func (s *rvrejStore) LockSys(ctx context.Context, coll string) (func(), error) {
	return s.lock.LockSys(ctx, coll)
}

func (s *rvrejStore) ApplyPending(ctx context.Context, p *store.Pending, verify store.Verify, extra ...store.SysDoc) error {
	if s.failNext.CompareAndSwap(true, false) {
		return errors.New("the connection to the database was lost")
	}
	return s.Store.ApplyPending(ctx, p, verify, extra...)
}

// rvrejServers are two servers, a and b, on one store: a bbolt store shared under one lock
// (sharedStore), or two connections to one throw-away PostgreSQL database. a's audit log keeps
// what it queues until a flush. check runs runs verify and db check and returns their problems.
type rvrejServers struct {
	a, b   *Engine
	sa, sb *rvrejStore
	check  func(t *testing.T) []ChainProblem
}

func rvrejOpen(t *testing.T, backend string, dom *store.Domain) *rvrejServers {
	t.Helper()
	ctx := context.Background()
	s := &rvrejServers{}
	var closeStores func()
	switch backend {
	case "bolt":
		dir := t.TempDir()
		st, err := bolt.Open(dir, bolt.Options{Domain: dom})
		require.NoError(t, err)
		lock := sharedStore{st, &sync.Mutex{}}
		s.sa, s.sb = &rvrejStore{Store: st, lock: lock}, &rvrejStore{Store: st, lock: lock}
		closeStores = func() { st.Close() }
		s.check = func(t *testing.T) []ChainProblem {
			require.NoError(t, s.a.Close())
			require.NoError(t, s.b.Close())
			require.NoError(t, st.Close())
			v := NewChainVerifier()
			rep, err := bolt.Check(dir, v.CheckOptions())
			require.NoError(t, err)
			require.True(t, rep.OK(), "db check: %v", rep.Problems)
			return v.Report().Problems
		}
	case "pg":
		if os.Getenv(pgtest.EnvDSN) == "" {
			t.Skip("no PostgreSQL: .ci/run go test ./engine -run Rvrej runs it")
		}
		dsn := pgtest.DSN(t)
		ps, err := pg.Create(ctx, dsn, dom, pg.Options{})
		require.NoError(t, err)
		ps2, err := pg.Open(ctx, dsn, pg.Options{})
		require.NoError(t, err)
		s.sa, s.sb = &rvrejStore{Store: ps, lock: ps}, &rvrejStore{Store: ps2, lock: ps2}
		closeStores = func() { ps.Close(); ps2.Close() }
		s.check = func(t *testing.T) []ChainProblem {
			require.NoError(t, s.a.audit.flush())
			require.NoError(t, s.b.audit.flush())
			v := NewChainVerifier()
			rep, err := ps.Check(ctx, v.CheckOptions())
			require.NoError(t, err)
			require.True(t, rep.OK(), "db check: %v", rep.Problems)
			return v.Report().Problems
		}
	}
	var err error
	s.a, err = New(s.sa, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	s.a.audit.linger = time.Hour // before anything is queued: a's records wait for a flush
	s.b, err = New(s.sb, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	t.Cleanup(func() {
		s.a.Close()
		s.b.Close()
		closeStores()
	})
	return s
}

// verified asserts that runs verify and db check find nothing wrong.
func (s *rvrejServers) verified(t *testing.T) {
	t.Helper()
	rep, err := s.a.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, rep.Problems, "runs verify")
	assert.Empty(t, s.check(t), "db check")
}

// stored is the run's record as the store holds it.
func (s *rvrejServers) stored(t *testing.T, id string) *RunRecord {
	t.Helper()
	rec, err := s.a.storedRecord(id)
	require.NoError(t, err)
	return rec
}

// setItem commits qty to item id of the stock domain, by another writer: every run that read
// or changed the row conflicts.
func setItem(t *testing.T, st store.Store, id string, qty int) {
	t.Helper()
	ctx := context.Background()
	sg := st.StageFor(ctx, store.RunLimits{})
	tb, ok := sg.Table("items")
	require.True(t, ok)
	n, err := tb.Update(table.Row{"qty": int64(qty)}, table.Query{Where: map[string]any{"id": id}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, st.ApplyPending(ctx, sg.Pending(), nil))
}

var rvrejBackends = []string{"bolt", "pg"}

// A finds R's data moved and queues R's conflict record; B rejects R before A's batch. The
// rejection stands: the record says rejected, by whom, and the chain verifies.
func TestRvrejQueuedConflictAfterRejectionElsewhere(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s := rvrejOpen(t, backend, stockDomain(t, "", ""))
			r := propose(t, s.b, agent, setQty(1, "A"))
			require.NoError(t, s.b.audit.flush())
			setItem(t, s.sa, "A", 9)
			res, err := applyBy(s.a, r.RunID, bob)
			require.NoError(t, err)
			require.Equal(t, OutcomeConflict, res.Outcome)
			require.True(t, s.a.queuedHere(r.RunID), "a's conflict record waits in its queue")

			_, recorded, err := s.b.RejectWith(context.Background(), r.RunID, RejectOptions{Feedback: "no", By: carol})
			require.NoError(t, err)
			require.True(t, recorded, "b read the run pending: its rejection is recorded")
			require.NoError(t, s.a.audit.flush())

			rec := s.stored(t, r.RunID)
			assert.Equal(t, "carol", rec.RejectedBy, "the rejection's record stands")
			assert.Equal(t, StateRejected, recordState(rec))
			s.verified(t)
		})
	}
}

// A's apply of R fails (starplan's own error) and queues R's record, still pending; B rejects R
// before A's batch. R must not look pending again (its writes back: an approver could apply a
// rejected run, or a page list it as awaiting review).
func TestRvrejQueuedFailedApplyAfterRejectionElsewhere(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s := rvrejOpen(t, backend, stockDomain(t, "", ""))
			r := propose(t, s.b, agent, setQty(1, "A"))
			require.NoError(t, s.b.audit.flush())
			s.sa.failNext.Store(true)
			_, err := applyBy(s.a, r.RunID, bob)
			require.ErrorContains(t, err, "connection to the database was lost")
			require.True(t, s.a.queuedHere(r.RunID), "a's record of the failed apply waits in its queue")

			_, recorded, err := s.b.RejectWith(context.Background(), r.RunID, RejectOptions{Feedback: "no", By: carol})
			require.NoError(t, err)
			require.True(t, recorded)
			require.NoError(t, s.a.audit.flush())

			rec := s.stored(t, r.RunID)
			assert.False(t, rec.Pending, "a rejected run is not pending again")
			assert.Nil(t, rec.Writes)
			assert.Equal(t, "carol", rec.RejectedBy)
			_, err = applyBy(s.a, r.RunID, bob)
			assert.Error(t, err, "a rejected run is never applied")
			assert.Equal(t, int64(5), row(t, s.sa, "items", "A")["qty"], "the data is as before")
			s.verified(t)
		})
	}
}

// A's apply of R fails and queues R's record, still pending; B applies R before A's batch. The
// apply stays in the log: R is not pending again (its writes back), and the chain verifies.
func TestRvrejQueuedFailedApplyAfterApplyElsewhere(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s := rvrejOpen(t, backend, stockDomain(t, "", ""))
			r := propose(t, s.b, agent, setQty(1, "A"))
			require.NoError(t, s.b.audit.flush())
			s.sa.failNext.Store(true)
			_, err := applyBy(s.a, r.RunID, bob)
			require.Error(t, err)
			require.True(t, s.a.queuedHere(r.RunID))

			res, err := applyBy(s.b, r.RunID, carol)
			require.NoError(t, err)
			require.True(t, res.Applied)
			require.NoError(t, s.a.audit.flush())

			rec := s.stored(t, r.RunID)
			assert.True(t, rec.Applied, "the apply's record stands")
			assert.False(t, rec.Pending)
			assert.Equal(t, []string{"carol"}, rec.ApprovedBy)
			_, err = applyBy(s.a, r.RunID, bob)
			var re *RunError
			assert.ErrorAs(t, err, &re, "applied already")
			s.verified(t)
		})
	}
}

// A's apply of R fails and queues R's record (pending, no approval); B records the first of R's
// two approvals (as decideApply does when an approval does not complete them) before A's batch.
// The approval stays in R's record.
func TestRvrejQueuedFailedApplyAfterApprovalElsewhere(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s := rvrejOpen(t, backend, stockDomain(t, `{"required_approvals": 2}`, ""))
			r := propose(t, s.b, agent, setQty(1, "A"))
			require.NoError(t, s.b.audit.flush())
			// a: an apply that ran (an admin's, or an auto rule's) and failed.
			s.a.applyMu.Lock()
			rec, err := s.a.decisionRecord(r.RunID)
			require.NoError(t, err)
			s.sa.failNext.Store(true)
			err = s.a.applyRecord(context.Background(), rec, rec.Result(), root, false, []string{"admin"})
			s.a.applyMu.Unlock()
			require.Error(t, err)
			require.True(t, s.a.queuedHere(r.RunID))

			_, err = applyBy(s.b, r.RunID, alice) // one approval of two: recorded, the run waits
			require.NoError(t, err)
			require.Equal(t, []string{"alice"}, s.stored(t, r.RunID).ApprovedBy)
			require.NoError(t, s.a.audit.flush())

			got := s.stored(t, r.RunID)
			assert.True(t, got.Pending)
			assert.Equal(t, []string{"alice"}, got.ApprovedBy, "the approval stays in the record")
			s.verified(t)
		})
	}
}

// A and B both find R's data moved; B's conflict record is written first. A's, queued from the
// record A read (pending), would chain a read of a record that is no longer R's last.
func TestRvrejQueuedConflictAfterConflictElsewhere(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s := rvrejOpen(t, backend, stockDomain(t, "", ""))
			r := propose(t, s.b, agent, setQty(1, "A"))
			require.NoError(t, s.b.audit.flush())
			setItem(t, s.sa, "A", 9)
			res, err := applyBy(s.a, r.RunID, bob)
			require.NoError(t, err)
			require.Equal(t, OutcomeConflict, res.Outcome)
			res, err = applyBy(s.b, r.RunID, carol)
			require.NoError(t, err)
			require.Equal(t, OutcomeConflict, res.Outcome)
			require.NoError(t, s.b.audit.flush())
			require.NoError(t, s.a.audit.flush())

			assert.Equal(t, StateConflict, recordState(s.stored(t, r.RunID)))
			s.verified(t)
		})
	}
}

// A run applied as it runs (Request.Apply) whose apply fails has no record in the store yet:
// its record, queued still pending, is its first. The batch must write it (it read no record,
// so no other server can have decided or pruned what it read).
func TestRvrejRunAppliedAsItRunsFailsKeepsItsRecord(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s := rvrejOpen(t, backend, stockDomain(t, "", ""))
			s.sa.failNext.Store(true)
			_, err := s.a.Run(context.Background(), Request{Reply: setQty(1, "A"), By: root, Apply: true})
			require.Error(t, err)
			require.NoError(t, s.a.audit.flush())

			runs, err := s.b.Runs()
			require.NoError(t, err)
			require.Len(t, runs, 1, "the run stays in the log")
			assert.True(t, runs[0].Pending, "and can be applied later")
			s.verified(t)
		})
	}
}

// On a store one process holds (bbolt: its file lock keeps serve and the CLI apart), the
// engine's apply lock orders its decisions, and a decision reads the newest record, queued
// ones first, and commits after the queue: a rejection after a queued conflict writes after it.
func TestRvrejOneProcessRejectsAfterItsQueuedConflict(t *testing.T) {
	st, err := bolt.Open(t.TempDir(), bolt.Options{Domain: stockDomain(t, "", "")})
	require.NoError(t, err)
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close(); st.Close() })
	e.audit.linger = time.Hour
	r := propose(t, e, agent, setQty(1, "A"))
	require.NoError(t, e.audit.flush())
	setItem(t, st, "A", 9)
	res, err := applyBy(e, r.RunID, bob)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome)
	_, recorded, err := e.RejectWith(context.Background(), r.RunID, RejectOptions{Feedback: "no", By: carol})
	require.NoError(t, err)
	require.True(t, recorded)
	require.NoError(t, e.audit.flush())
	rec, err := e.storedRecord(r.RunID)
	require.NoError(t, err)
	assert.Equal(t, "carol", rec.RejectedBy)
	assert.Equal(t, OutcomeConflict, rec.Outcome)
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// recordState is the state a run's record says on its own (rejected: it names who rejected it).
func recordState(r *RunRecord) string {
	return stateOf(r.Applied, r.RejectedBy != "", r.Pending, r.Outcome)
}
