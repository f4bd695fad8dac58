package engine

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/internal/errcode"
)

// A rejection on a that loses to b's approvals maxDecideTries times, and on its last try to b's
// apply (the approval that completes the run's): the run is applied, and a's rejection answers
// what a rejection of an applied run answers (already applied), not that the run changed
// elsewhere: that refusal invites a retry that can only be refused again.
func TestRvlateRejectionLosingToAnApplyAnswersAlreadyApplied(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, lock, id := rvrace2Open(t, backend, fmt.Sprintf(`{"required_approvals": %d}`, maxDecideTries+1))
			n := 0
			lock.before(func() {
				n++
				_, err := applyBy(s.b, id, access.Principal{Name: fmt.Sprintf("p%d", n), Role: access.Approver})
				require.NoError(t, err)
			})
			_, recorded, err := s.a.RejectWith(context.Background(), id, RejectOptions{Feedback: "no", By: bob})
			lock.before(nil)
			assert.False(t, recorded)
			require.Equal(t, maxDecideTries+1, n)
			require.True(t, s.stored(t, id).Applied, "b's last approval applied the run")
			var re *RunError
			require.ErrorAs(t, err, &re)
			assert.NotEqual(t, errcode.RunChanged, re.Code, "%v", err)
			assert.Contains(t, re.Problem, "already applied")
			_, decided, err := s.a.Decision(id)
			require.NoError(t, err)
			assert.False(t, decided)
			s.verified(t)
		})
	}
}

// Two rejections on a, taken in one group: b approves the first run before each of a's commits,
// the second nobody touches. The first is refused (run changed); the second, whose run did not
// change, is recorded: it was refused too, told its run had changed on another server.
func TestRvlateInnocentRejectionInALosingGroupIsRecorded(t *testing.T) {
	for _, backend := range rvrejBackends {
		t.Run(backend, func(t *testing.T) {
			s, lock, hot := rvrace2Open(t, backend, fmt.Sprintf(`{"required_approvals": %d}`, 2*maxDecideTries+4))
			calm := propose(t, s.b, agent, setQty(3, "A")).RunID
			require.NoError(t, s.b.audit.flush())
			n := 0
			lock.before(func() {
				n++
				if n <= maxDecideTries+1 {
					_, err := applyBy(s.b, hot, access.Principal{Name: fmt.Sprintf("p%d", n), Role: access.Approver})
					require.NoError(t, err)
				}
			})
			type answer struct {
				recorded bool
				err      error
			}
			answers := map[string]chan answer{hot: make(chan answer, 1), calm: make(chan answer, 1)}
			s.a.applyMu.Lock() // both queued before either is taken: one group
			for id, ch := range answers {
				go func() {
					_, recorded, err := s.a.RejectWith(context.Background(), id, RejectOptions{Feedback: "no", By: bob})
					ch <- answer{recorded, err}
				}()
			}
			for {
				s.a.rejections.mu.Lock()
				queued := len(s.a.rejections.queue)
				s.a.rejections.mu.Unlock()
				if queued == 2 {
					break
				}
				runtime.Gosched()
			}
			s.a.applyMu.Unlock()
			h, c := <-answers[hot], <-answers[calm]
			lock.before(nil)

			var re *RunError
			require.ErrorAs(t, h.err, &re)
			assert.Equal(t, errcode.RunChanged, re.Code)
			assert.False(t, h.recorded)
			require.NoError(t, c.err, "the run nobody else touched")
			assert.True(t, c.recorded)
			_, decided, err := s.a.Decision(calm)
			require.NoError(t, err)
			assert.True(t, decided)
			_, decided, err = s.a.Decision(hot)
			require.NoError(t, err)
			assert.False(t, decided)
			s.verified(t)
		})
	}
}
