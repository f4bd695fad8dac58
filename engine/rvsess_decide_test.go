package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rvsess: a decision made on a record that the deciding server itself still queues, which the
// batch of its own commit drops as stale (chain.withoutStaleRewrites), when nothing settled the
// run elsewhere: another server only wrote the run's record again (its own failed apply, an
// approval), and the run is still pending. The apply must be decided on the run as the store
// holds it; at 863934b it failed with errDecidedElsewhere, wrapped as a failure of starplan's
// own ("applying run ...: the run was decided by another server meanwhile": a 500, for a run
// nobody decided), and queued yet another stale record. Deciding again without writing the
// queue first cannot help: the failed commit puts the stale record back in the queue, and the
// next read of the run (decisionRecord, the queue first) reads it again.
// TestRvsessSharedStoreSequences found it (seed 98); rvrace2's change (main 294959b: decide
// again, the queue written first) fixed it before this review reported it.

// rvsessOwnStaleQueued: a's apply of R failed and queued R's record; b's apply of R failed too
// and b's record of it is in the store: a's queued record read R's record before b's.
func rvsessOwnStaleQueued(t *testing.T, backend string) (*rvrejServers, string) {
	t.Helper()
	s := rvrejOpen(t, backend, stockDomain(t, "", ""))
	r := propose(t, s.b, agent, setQty(1, "A"))
	require.NoError(t, s.b.audit.flush())
	s.sa.failNext.Store(true)
	_, err := applyBy(s.a, r.RunID, root)
	require.ErrorContains(t, err, "connection to the database was lost")
	require.True(t, s.a.queuedHere(r.RunID))
	s.sb.failNext.Store(true)
	_, err = s.b.ApplyWith(context.Background(), r.RunID, ApplyOptions{Origin: "other", By: root})
	require.ErrorContains(t, err, "connection to the database was lost")
	require.NoError(t, s.b.audit.flush())
	require.True(t, s.stored(t, r.RunID).Pending, "nobody settled the run")
	return s, r.RunID
}

// The apply is decided on the run as stored (it failed as starplan's own error before 294959b).
func TestRvsessApplyOnItsOwnStaleQueuedRecord(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, id := rvsessOwnStaleQueued(t, backend)
			res, err := applyBy(s.a, id, bob)
			require.NoError(t, err, "the run is pending and nobody decided it: the apply is decided on it as stored")
			assert.True(t, res.Applied)
			assert.True(t, s.stored(t, id).Applied)
			s.verified(t)
		})
	}
}

// The same for an approval that does not complete the
// run's approvals (writeRecord): errDecidedElsewhere, unwrapped. Here b's change is an approval
// (alice's, one of three), so the run did move on: an answer that it changed is right, but
// deciding again (as rvrace2 makes it) reads a's stale queued record again unless the queue is
// written first, and fails the same way every time.
func TestRvsessApprovalOnItsOwnStaleQueuedRecord(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s := rvrejOpen(t, backend, stockDomain(t, `{"required_approvals": 3}`, ""))
			r := propose(t, s.b, agent, setQty(1, "A"))
			require.NoError(t, s.b.audit.flush())
			// a: an apply that ran (an admin's) and failed, its record queued, still pending.
			s.a.applyMu.Lock()
			rec, err := s.a.decisionRecord(r.RunID)
			require.NoError(t, err)
			s.sa.failNext.Store(true)
			err = s.a.applyRecord(context.Background(), rec, rec.Result(), root, false, []string{"admin"})
			s.a.applyMu.Unlock()
			require.Error(t, err)
			require.True(t, s.a.queuedHere(r.RunID))
			_, err = applyBy(s.b, r.RunID, alice) // one approval of three, recorded
			require.NoError(t, err)

			_, err = applyBy(s.a, r.RunID, bob)
			require.NoError(t, err, "two approvals of three, on the run as stored")
			assert.Equal(t, []string{"alice", "bob"}, s.stored(t, r.RunID).ApprovedBy)
			s.verified(t)
		})
	}
}

// The contrast, which holds: a rejection in the same place writes the queue first and is
// checked again (commitRejections), and is recorded.
func TestRvsessRejectionOnItsOwnStaleQueuedRecord(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, id := rvsessOwnStaleQueued(t, backend)
			_, recorded, err := s.a.RejectWith(context.Background(), id, RejectOptions{Feedback: "no", By: carol})
			require.NoError(t, err)
			assert.True(t, recorded)
			assert.Equal(t, "carol", s.stored(t, id).RejectedBy)
			s.verified(t)
		})
	}
}
