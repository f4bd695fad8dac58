package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/store"
)

// On a store servers share, an apply or an approval on server a reads the run, then commits
// under the chain's lock; server b may write the run's record in between and leave it pending
// (an approval short of those needed; the record of its own failed apply). a's commit then finds
// the record it read is not the run's last (decidedElsewhere). That is a race, not a failure:
// a decides again on the run as stored now, as an apply made then would, a few times, and when
// the run keeps changing it answers a refusal the caller can repeat (errcode.RunChanged). It
// never queues a failed apply's record for it, and the other server's write stays.

// rvrace2Lock is server a's lock on the shared chain: every decision's commit takes it first,
// after the decision read the run. meanwhile, while set, runs before each take: another
// server's write between a's read and a's commit.
type rvrace2Lock struct {
	store.SysSerializer
	mu        sync.Mutex
	meanwhile func()
}

func (l *rvrace2Lock) LockSys(ctx context.Context, coll string) (func(), error) {
	l.mu.Lock()
	f := l.meanwhile
	l.mu.Unlock()
	if f != nil {
		f()
	}
	return l.SysSerializer.LockSys(ctx, coll)
}

// before sets what runs before each of a's next takes of the lock (nil: nothing).
func (l *rvrace2Lock) before(f func()) {
	l.mu.Lock()
	l.meanwhile = f
	l.mu.Unlock()
}

// rvrace2Open is rvrejOpen over the stock domain with the given approval object, with a's lock
// on the chain in the test's hand, and a proposal of the agent made on b and stored.
func rvrace2Open(t *testing.T, backend, approval string) (*rvrejServers, *rvrace2Lock, string) {
	t.Helper()
	s := rvrejOpen(t, backend, stockDomain(t, approval, ""))
	lock := &rvrace2Lock{SysSerializer: s.sa.lock}
	s.sa.lock = lock
	r := propose(t, s.b, agent, setQty(1, "A"))
	require.NoError(t, s.b.audit.flush())
	return s, lock, r.RunID
}

// applyFrom is applyBy from origin.
func applyFrom(e *Engine, id string, by access.Principal, origin string) (*Result, error) {
	return e.ApplyWith(context.Background(), id, ApplyOptions{Origin: origin, By: by})
}

// rvrace2Events are the chain's entries of run id, "event by who", in order.
func rvrace2Events(t *testing.T, e *Engine, id string) []string {
	t.Helper()
	entries, err := e.Store().ListSys(ChainCollection)
	require.NoError(t, err)
	var out []string
	for _, d := range entries {
		if d.ID == chainHeadID {
			continue
		}
		var en ChainEntry
		require.NoError(t, json.Unmarshal(d.JSON, &en))
		if en.RunID == id {
			out = append(out, en.Event+" by "+en.By)
		}
		for _, r := range en.Records {
			if r.RunID == id {
				out = append(out, r.Event+" by "+r.By)
			}
		}
	}
	return out
}

// Two approvals needed: bob's on a, read before alice's on b committed, is one of two as read;
// its commit finds alice's. Decided again, bob's approval completes the two: the run is
// applied, with both, as bob's apply made after alice's would.
func TestRvrace2ApprovalLosesToAnApprovalThenApplies(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, lock, id := rvrace2Open(t, backend, `{"required_approvals": 2}`)
			lock.before(func() {
				lock.before(nil)
				_, err := applyBy(s.b, id, alice)
				require.NoError(t, err)
			})
			res, err := applyBy(s.a, id, bob)
			require.NoError(t, err)
			assert.True(t, res.Applied)
			assert.Equal(t, []string{"alice", "bob"}, res.ApprovedBy)
			rec := s.stored(t, id)
			assert.True(t, rec.Applied)
			assert.Equal(t, []string{"alice", "bob"}, rec.ApprovedBy, "alice's approval stands")
			assert.Equal(t, int64(1), row(t, s.sa, "items", "A")["qty"])
			assert.False(t, s.a.queuedHere(id), "a queued no record of a failed apply")
			assert.Equal(t, []string{"proposed by agent", "approved by alice", "approved by bob"}, rvrace2Events(t, s.a, id))
			s.verified(t)
		})
	}
}

// Three approvals needed: bob's on a loses to alice's on b; decided again it is the second of
// three, recorded beside alice's, and the run still waits (not applied on two).
func TestRvrace2ApprovalLosesToAnApprovalThenIsRecorded(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, lock, id := rvrace2Open(t, backend, `{"required_approvals": 3}`)
			lock.before(func() {
				lock.before(nil)
				_, err := applyBy(s.b, id, alice)
				require.NoError(t, err)
			})
			res, err := applyBy(s.a, id, bob)
			require.NoError(t, err)
			assert.False(t, res.Applied)
			assert.True(t, res.Pending)
			assert.Equal(t, []string{"alice", "bob"}, res.ApprovedBy)
			rec := s.stored(t, id)
			assert.True(t, rec.Pending)
			assert.Equal(t, []string{"alice", "bob"}, rec.ApprovedBy)
			assert.Equal(t, int64(5), row(t, s.sa, "items", "A")["qty"], "two of three approvals apply nothing")
			s.verified(t)
		})
	}
}

// bob approves on both servers at once: a's approval, decided again, finds bob's own and is
// refused as a second approval by bob is (approval-required), with the run as b left it.
func TestRvrace2ApprovalLosesToTheSameApproversOwn(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, lock, id := rvrace2Open(t, backend, `{"required_approvals": 2}`)
			lock.before(func() {
				lock.before(nil)
				_, err := applyBy(s.b, id, bob)
				require.NoError(t, err)
			})
			_, err := applyBy(s.a, id, bob)
			ae := requireRefused(t, err, errcode.ApprovalRequired)
			assert.Contains(t, ae.Problem, "bob already approved it")
			assert.Equal(t, []string{"bob"}, s.stored(t, id).ApprovedBy)
			s.verified(t)
		})
	}
}

// bob's approval completes alice's as a read it; b's apply of the run (carol's, from another
// origin) fails before a commits and writes the run's record again, still pending. a's apply
// is not a failure of a's: decided again, it applies the run; a queues no record of a failed
// apply (which the next batch would drop as stale) and answers no error.
func TestRvrace2ApplyLosesToAFailedApplyElsewhere(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, lock, id := rvrace2Open(t, backend, `{"required_approvals": 2}`)
			_, err := applyBy(s.b, id, alice)
			require.NoError(t, err)
			lock.before(func() {
				lock.before(nil)
				s.sb.failNext.Store(true)
				_, err := applyFrom(s.b, id, carol, "serve:http")
				require.ErrorContains(t, err, "connection to the database was lost")
				require.NoError(t, s.b.audit.flush())
			})
			var mu sync.Mutex
			var told []EventType // what a's observers hear (a server's events)
			stop := s.a.Observe(func(_ context.Context, ev Event) {
				mu.Lock()
				told = append(told, ev.Type)
				mu.Unlock()
			})
			res, err := applyBy(s.a, id, bob)
			stop()
			require.NoError(t, err)
			assert.True(t, res.Applied)
			mu.Lock()
			assert.Equal(t, []EventType{EventApplied}, told, "a's apply did not fail")
			mu.Unlock()
			rec := s.stored(t, id)
			assert.True(t, rec.Applied)
			assert.Equal(t, []string{"alice", "bob"}, rec.ApprovedBy)
			assert.Equal(t, int64(1), row(t, s.sa, "items", "A")["qty"])
			assert.False(t, s.a.queuedHere(id), "a queued no record of a failed apply")
			assert.Equal(t, []string{"proposed by agent", "approved by alice", "recorded by carol", "approved by bob"}, rvrace2Events(t, s.a, id))
			s.verified(t)
		})
	}
}

// b writes the run's record again before every commit of a's (approvals of ever more people;
// failed applies from ever other origins): a's decision gives up after maxDecideTries more
// tries with a *RunError of errcode.RunChanged, and has written and queued nothing; every
// write of b's stands.
func TestRvrace2DecisionThatKeepsLosingIsRefused(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			for _, tc := range []struct {
				name      string
				approval  string
				before    func(s *rvrejServers, id string) // once
				meanwhile func(t *testing.T, s *rvrejServers, id string, n int)
				want      []string // the run's approvals in the end
			}{
				{"approval", fmt.Sprintf(`{"required_approvals": %d}`, maxDecideTries+3), nil,
					func(t *testing.T, s *rvrejServers, id string, n int) {
						_, err := applyBy(s.b, id, access.Principal{Name: fmt.Sprintf("p%d", n), Role: access.Approver})
						require.NoError(t, err)
					},
					[]string{"p1", "p2", "p3", "p4"}},
				{"apply", `{"required_approvals": 2}`,
					func(s *rvrejServers, id string) {
						_, err := applyBy(s.b, id, alice)
						require.NoError(t, err)
					},
					func(t *testing.T, s *rvrejServers, id string, n int) {
						s.sb.failNext.Store(true)
						_, err := applyFrom(s.b, id, carol, fmt.Sprintf("origin %d", n))
						require.Error(t, err)
						require.NoError(t, s.b.audit.flush())
					},
					[]string{"alice"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					s, lock, id := rvrace2Open(t, backend, tc.approval)
					if tc.before != nil {
						tc.before(s, id)
					}
					n := 0
					lock.before(func() {
						n++
						tc.meanwhile(t, s, id, n)
					})
					_, err := applyBy(s.a, id, bob)
					lock.before(nil)
					var re *RunError
					require.ErrorAs(t, err, &re)
					assert.Equal(t, errcode.RunChanged, re.Code)
					assert.Contains(t, re.Problem, "changed on another server")
					assert.Equal(t, maxDecideTries+1, n, "a tried once, then maxDecideTries times more")
					assert.False(t, s.a.queuedHere(id), "a queued no record of a failed apply")
					rec := s.stored(t, id)
					assert.True(t, rec.Pending)
					assert.Equal(t, tc.want, rec.ApprovedBy, "b's writes stand, nothing of bob's")
					assert.Equal(t, int64(5), row(t, s.sa, "items", "A")["qty"])
					s.verified(t)
				})
			}
		})
	}
}

// a's apply failed (a lost connection) and its record of that waits in a's queue; b's apply
// failed too, and b's record of it is stored. a's next apply reads the run from a's queue (its
// last version as a knows it), and its commit finds that record stale (the batch drops it):
// a decides again only after writing its queue, on the run as stored, and applies it.
func TestRvrace2ApplyOnItsOwnStaleQueuedRecord(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, _, id := rvrace2Open(t, backend, "")
			s.sa.failNext.Store(true)
			_, err := applyBy(s.a, id, bob)
			require.ErrorContains(t, err, "connection to the database was lost")
			require.True(t, s.a.queuedHere(id))
			s.sb.failNext.Store(true)
			_, err = applyFrom(s.b, id, carol, "serve:http")
			require.ErrorContains(t, err, "connection to the database was lost")
			require.NoError(t, s.b.audit.flush())

			res, err := applyBy(s.a, id, bob)
			require.NoError(t, err)
			assert.True(t, res.Applied)
			rec := s.stored(t, id)
			assert.True(t, rec.Applied)
			assert.Equal(t, []string{"bob"}, rec.ApprovedBy)
			assert.Equal(t, int64(1), row(t, s.sa, "items", "A")["qty"])
			assert.Equal(t, []string{"proposed by agent", "recorded by carol", "approved by bob"}, rvrace2Events(t, s.a, id), "a's stale record dropped")
			s.verified(t)
		})
	}
}

// The caller gave up (its context ended) while a's apply lost to b's approval: a does not
// decide again, answers the context's error and has written and queued nothing.
func TestRvrace2ApplyNotDecidedAgainForACallerGone(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, lock, id := rvrace2Open(t, backend, `{"required_approvals": 2}`)
			_, err := applyBy(s.b, id, alice)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			lock.before(func() {
				lock.before(nil)
				s.sb.failNext.Store(true)
				_, err := applyFrom(s.b, id, carol, "serve:http")
				require.Error(t, err)
				require.NoError(t, s.b.audit.flush())
				cancel()
			})
			_, err = s.a.ApplyWith(ctx, id, ApplyOptions{Origin: "test", By: bob})
			require.ErrorIs(t, err, context.Canceled)
			assert.False(t, s.a.queuedHere(id))
			rec := s.stored(t, id)
			assert.True(t, rec.Pending, "not applied")
			assert.Equal(t, []string{"alice"}, rec.ApprovedBy)
			s.verified(t)
		})
	}
}

// A rejection on a that keeps losing to b's approvals (each recorded between a's checks and its
// commit) is checked again maxDecideTries times, then refused as a lost apply is: a RunError of
// errcode.RunChanged (409 run-changed on the server), not "decided by another server
// meanwhile" (500 internal). b's approvals stand, nothing of a's rejection is stored.
func TestRvrace2RejectionThatKeepsLosingIsRefused(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, lock, id := rvrace2Open(t, backend, fmt.Sprintf(`{"required_approvals": %d}`, maxDecideTries+3))
			n := 0
			lock.before(func() {
				n++
				_, err := applyBy(s.b, id, access.Principal{Name: fmt.Sprintf("p%d", n), Role: access.Approver})
				require.NoError(t, err)
			})
			_, recorded, err := s.a.RejectWith(context.Background(), id, RejectOptions{Feedback: "no", By: bob})
			lock.before(nil)
			assert.False(t, recorded)
			var re *RunError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, errcode.RunChanged, re.Code)
			assert.Equal(t, maxDecideTries+1, n, "checked once, then maxDecideTries times more")
			rec := s.stored(t, id)
			assert.True(t, rec.Pending)
			assert.Equal(t, []string{"p1", "p2", "p3", "p4"}, rec.ApprovedBy)
			_, decided, err := s.a.Decision(id)
			require.NoError(t, err)
			assert.False(t, decided)
			s.verified(t)
		})
	}
}
