package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
)

// A recorded run runs again to the same result: with its own now() (the clock has moved on
// since), its request and its limits. Once the data it read has changed, the replay says so.
func TestReplay(t *testing.T) {
	st := openStore(t, t.TempDir())
	clock := fixedNow
	e, err := New(st, Options{Now: func() time.Time { clock = clock.Add(time.Hour); return clock }})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close(); st.Close() })
	ctx := context.Background()

	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: "Purchase 3 Wayfarer sunglasses for customer Alice."})
	require.NoError(t, err)
	require.True(t, res.Pending)
	rep, err := e.Replay(ctx, res.RunID)
	require.NoError(t, err)
	assert.True(t, rep.Identical, "%v", rep.Differences)
	assert.Empty(t, rep.Result.RunID, "a replay is not a run of its own")
	assert.Equal(t, res.Changes, rep.Result.Changes, "the timestamp it wrote is the recorded now()")

	_, err = e.Apply(ctx, res.RunID)
	require.NoError(t, err)
	rep, err = e.Replay(ctx, res.RunID)
	require.NoError(t, err)
	assert.False(t, rep.Identical)
	assert.Contains(t, rep.Differences, "changes", "its own apply moved the stock it read")

	limited, err := e.Run(ctx, Request{Reply: "n = 0\nfor i in range(1000):\n    n += i\n", Limits: sandbox.Limits{MaxSteps: 50}})
	require.NoError(t, err)
	require.Equal(t, sandbox.LimitSteps, limited.Limit)
	rep, err = e.Replay(ctx, limited.RunID)
	require.NoError(t, err)
	assert.True(t, rep.Identical, "the recorded limits apply again: %v", rep.Differences)

	_, err = e.Replay(ctx, "r_0000000000")
	var re *RunError
	assert.ErrorAs(t, err, &re)
}

// A recorded program runs again as it was recorded: a tag inside one of its strings is text, not
// a block to extract (found in review: the replay ran only what followed the inner tag).
func TestReplayRunsTheRecordedProgramAsItIs(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	reply := "<execute_python>\ns = \"<execute_python>\"\nSTATUS = \"success\"\nanswer_text = \"tag: \" + s\n</execute_python>"
	res, err := e.Run(ctx, Request{Reply: reply})
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	rep, err := e.Replay(ctx, res.RunID)
	require.NoError(t, err)
	assert.True(t, rep.Identical, "%v", rep.Differences)
	assert.Equal(t, "tag: <execute_python>", rep.Result.AnswerText)
}
