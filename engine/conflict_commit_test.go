package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An apply that finds a conflict does not write the audit queue before answering (it used to,
// a disk sync under the apply lock that held up every other apply and rejection; issue 32), and
// what must hold still holds: the conflict is the run's last version, in the queue at once and
// in the store once the queue is written, after the runs queued before it.
func TestAConflictingApplyDoesNotCommitTheQueue(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	dry := func() string {
		res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: "buy"})
		require.NoError(t, err)
		require.True(t, res.Pending, "%+v", res)
		return res.RunID
	}
	first, second := dry(), dry() // both read the same stock
	_, err := e.Apply(ctx, first)
	require.NoError(t, err)
	later := dry() // queued, not written
	commits := e.audit.commits.Load()

	res, err := e.Apply(ctx, second)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome, "%+v", res)
	assert.Equal(t, commits, e.audit.commits.Load(), "the conflict wrote nothing to the store")

	rec, err := e.readRecord(second)
	require.NoError(t, err)
	assert.Equal(t, OutcomeConflict, rec.Outcome, "a reader sees the conflict at once")
	_, err = e.Apply(ctx, second)
	var re *RunError
	require.ErrorAs(t, err, &re, "a second apply answers as the first")
	require.NotNil(t, re.Result)
	assert.Equal(t, OutcomeConflict, re.Result.Outcome)

	require.NoError(t, e.audit.flush())
	stored, err := e.storedRecord(second)
	require.NoError(t, err)
	assert.Equal(t, OutcomeConflict, stored.Outcome, "the conflict lands after the pending version it replaces")
	assert.False(t, stored.Pending)
	_, err = e.storedRecord(later)
	require.NoError(t, err, "the run queued before the conflict is written with it")
	ok, err := e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, ok.OK(), "%+v", ok)
}
