package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A decision (an apply, an approval, a rejection) is made on the record it read. On a store
// servers share, another server may write the run's record between that read and the
// decision's commit; the decision must not then write its record over the other's (an approval
// gone; a chain entry reading a record that is not the run's last: runs verify reports it).

// rvrejConflicted is a run of two approvals, alice's given, whose data moved: a's apply (bob's
// approval completes them) found the conflict and queued its record; b's (carol's) found it
// too and its record is in the store. a's queued record is stale: the run's last record is b's.
func rvrejConflicted(t *testing.T, backend string) (*rvrejServers, string) {
	t.Helper()
	s := rvrejOpen(t, backend, stockDomain(t, `{"required_approvals": 2}`, ""))
	r := propose(t, s.b, agent, setQty(1, "A"))
	_, err := applyBy(s.b, r.RunID, alice)
	require.NoError(t, err)
	require.NoError(t, s.b.audit.flush())
	setItem(t, s.sa, "A", 9)
	res, err := applyBy(s.a, r.RunID, bob)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome)
	res, err = applyBy(s.b, r.RunID, carol)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome)
	require.NoError(t, s.b.audit.flush())
	require.True(t, s.a.queuedHere(r.RunID))
	return s, r.RunID
}

// a rejects the run while its stale conflict record is still queued: the rejection reads that
// record, and its commit would write it after the queue, which drops the stale record. The
// rejection must not be written on a record the log will not hold: its commit fails, the queue
// is written (the stale record dropped), and the rejection, checked again, is written on the
// run's record as the store holds it (b's).
func TestRvrejRejectionOnADroppedQueuedRecord(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, id := rvrejConflicted(t, backend)
			_, recorded, err := s.a.RejectWith(context.Background(), id, RejectOptions{Feedback: "no", By: root})
			require.NoError(t, err)
			assert.True(t, recorded)
			assert.False(t, s.a.queuedHere(id))
			rec := s.stored(t, id)
			assert.Equal(t, "admin", rec.RejectedBy)
			assert.Equal(t, []string{"alice", "carol"}, rec.ApprovedBy, "b's conflict record, rejected")
			s.verified(t)
		})
	}
}

// a reads the run for a rejection from its queue (the stale conflict record); a's batch drops
// that record before the rejection commits. The rejection is checked again against the store.
func TestRvrejRejectionAfterItsReadWasDropped(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, id := rvrejConflicted(t, backend)
			ctx := context.Background()
			r := &rejection{ctx: ctx, runID: id, opts: RejectOptions{Feedback: "no", By: root}}
			s.a.applyMu.Lock()
			require.True(t, s.a.rejectCheck(r))
			require.NoError(t, s.a.audit.flush()) // the stale record dropped
			s.a.commitRejections([]*rejection{r})
			for !r.done && s.a.rejectionQueued(r) {
				s.a.rejectQueuedLocked()
			}
			s.a.applyMu.Unlock()
			require.True(t, r.done)
			require.NoError(t, r.err)
			rec := s.stored(t, id)
			assert.Equal(t, "admin", rec.RejectedBy)
			assert.Equal(t, []string{"alice", "carol"}, rec.ApprovedBy, "b's conflict record, rejected")
			s.verified(t)
		})
	}
}

// Two servers record an approval of one run of three at once: a read the run before b's
// approval committed. a's must not write the run back with its approval alone (b's gone).
func TestRvrejApprovalsOnTwoServersAtOnce(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s := rvrejOpen(t, backend, stockDomain(t, `{"required_approvals": 3}`, ""))
			r := propose(t, s.b, agent, setQty(1, "A"))
			require.NoError(t, s.b.audit.flush())
			s.a.applyMu.Lock()
			rec, err := s.a.decisionRecord(r.RunID) // a's apply, as ApplyWith reads the run
			require.NoError(t, err)
			_, err = applyBy(s.b, r.RunID, alice)
			require.NoError(t, err)
			err = s.a.decideApply(context.Background(), rec, rec.Result(), bob)
			s.a.applyMu.Unlock()
			assert.ErrorIs(t, err, errDecidedElsewhere, "a's approval answers that the run moved on")
			assert.Equal(t, []string{"alice"}, s.stored(t, r.RunID).ApprovedBy, "b's approval stands")
			_, err = applyBy(s.a, r.RunID, bob) // again: on the run as it is now
			require.NoError(t, err)
			assert.Equal(t, []string{"alice", "bob"}, s.stored(t, r.RunID).ApprovedBy)
			s.verified(t)
		})
	}
}
