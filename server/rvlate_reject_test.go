package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
)

// A rejection over HTTP that loses to the other server's approvals, the last of which (the
// fourth: the engine checks a group again three times) applies the run: 409 already-applied,
// as a rejection of an applied run answers, not run-changed (a retry can only be refused).
func TestRvlateRejectionLosingToAnApplyElsewhereAnswersAlreadyApplied(t *testing.T) {
	t.Parallel()
	f, b, before := rvrace2Servers(t, `{"required_approvals": 4}`)
	agent, bob := f.token("agent", access.Proposer, 0), f.token("bob", access.Approver, 0)
	run := f.proposeAs(agent, 1)
	_, err := f.eng.Record(run.RunID)
	require.NoError(t, err)
	n := 0
	before(func() {
		n++
		if n <= 4 {
			approveOn(t, b, run.RunID, fmt.Sprintf("p%d", n))
		}
	})
	r := f.callWith(bob, "POST", "/v1/runs/"+run.RunID+"/reject", RejectRequest{Feedback: "no"})
	before(nil)
	require.Equal(t, 4, n, "the fourth approval, which applied the run, came before the last try")
	assert.Equal(t, http.StatusConflict, r.status, string(r.body))
	assert.Equal(t, CodeAlreadyApplied, r.errorCode(t))
	doc, err := f.srv.Show(run.RunID)
	require.NoError(t, err)
	assert.Equal(t, StateApplied, doc.State)
	rep, err := f.eng.VerifyChain()
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}
