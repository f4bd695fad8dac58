package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRejectMakesAPendingRunUnapplicable(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	require.True(t, res.Pending)

	d, recorded, err := e.Reject(ctx, res.RunID, "Alice wanted 2, not 3", "test")
	require.NoError(t, err)
	assert.True(t, recorded)
	assert.Equal(t, DecisionRejected, d.Decision)
	assert.Equal(t, "Alice wanted 2, not 3", d.Feedback)
	assert.Equal(t, fixedNow, d.Time)

	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.False(t, rec.Pending, "a rejected run is no longer pending")
	assert.Nil(t, rec.Writes, "its writes are dropped")

	_, err = e.Apply(ctx, res.RunID)
	var re *RunError
	require.True(t, errors.As(err, &re), "%v", err)
	assert.Contains(t, re.Problem, "rejected")
	wayfarer := row(t, e.Store(), "inventory", "SG002")
	assert.Equal(t, int64(6), wayfarer["quantity_in_stock"], "nothing was written")

	again, recorded, err := e.Reject(ctx, res.RunID, "second thoughts", "test")
	require.NoError(t, err)
	assert.False(t, recorded, "the first decision stands")
	assert.Equal(t, d.Feedback, again.Feedback)

	all, err := e.Decisions()
	require.NoError(t, err)
	assert.Len(t, all, 1)
	assert.Equal(t, d.Feedback, all[res.RunID].Feedback)
}

func TestRejectRefusesAppliedAndUnknownRuns(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), Apply: true})
	require.NoError(t, err)
	require.True(t, res.Applied)

	_, _, err = e.Reject(ctx, res.RunID, "too late", "test")
	var re *RunError
	require.True(t, errors.As(err, &re), "%v", err)
	assert.Contains(t, re.Problem, "already applied")
	_, found, err := e.Decision(res.RunID)
	require.NoError(t, err)
	assert.False(t, found, "a refused rejection records nothing")

	_, _, err = e.Reject(ctx, "r_0000000000", "", "test")
	require.True(t, errors.As(err, &re), "%v", err)
}

func TestRejectBoundsTheFeedback(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	d, _, err := e.Reject(ctx, res.RunID, strings.Repeat("x", 3*MaxFeedback), "test")
	require.NoError(t, err)
	assert.LessOrEqual(t, len(d.Feedback), MaxFeedback+len("…")+64)
	assert.Less(t, len(d.Feedback), 3*MaxFeedback)
}
