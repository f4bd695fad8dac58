package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/llm/llmtest"
)

// A reviewer's rejection, with feedback, asks the model again: it sees the request, its plan and
// the feedback; the new run links to the rejected one. A chain of replans ends at MaxReplans.
func TestReplanAfterRejection(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	purchase := tagged(example(t, "02_purchase_wayfarer.star"))
	srv := llmtest.NewServer(t, llmtest.Always(llmtest.Reply(purchase)))
	client, err := llm.New(srv.Config())
	require.NoError(t, err)

	first, err := e.Ask(ctx, client, AskRequest{Question: purchaseQuestion})
	require.NoError(t, err)
	require.True(t, first.Pending)

	_, err = e.Replan(ctx, client, first.RunID, AskRequest{})
	var re *RunError
	require.ErrorAs(t, err, &re, "a run nobody rejected has no feedback to plan from")

	_, _, err = e.Reject(ctx, first.RunID, "Alice is a member: write her name as 'Alice (member)'.", "test")
	require.NoError(t, err)
	second, err := e.Replan(ctx, client, first.RunID, AskRequest{})
	require.NoError(t, err)
	require.True(t, second.Pending, second.Diagnostics.String())
	msgs := srv.Requests()[1].Messages
	require.Len(t, msgs, 4)
	assert.Contains(t, msgs[1].Content, purchaseQuestion)
	assert.Equal(t, llm.RoleAssistant, msgs[2].Role)
	assert.Contains(t, msgs[2].Content, "<execute_python>", "the plan it wrote")
	assert.Contains(t, msgs[3].Content, "rejected")
	assert.Contains(t, msgs[3].Content, `"Alice is a member: write her name as 'Alice (member)'."`, "the feedback, quoted")
	rec, err := e.Record(second.RunID)
	require.NoError(t, err)
	assert.Equal(t, first.RunID, rec.Model.ParentRunID)
	assert.Equal(t, 1, rec.Model.Replan)
	assert.Equal(t, purchaseQuestion, rec.Request)

	last := second
	for i := 2; i <= MaxReplans; i++ {
		_, _, err = e.Reject(ctx, last.RunID, "no", "test")
		require.NoError(t, err)
		last, err = e.Replan(ctx, client, last.RunID, AskRequest{})
		require.NoError(t, err)
	}
	_, _, err = e.Reject(ctx, last.RunID, "still no", "test")
	require.NoError(t, err)
	_, err = e.Replan(ctx, client, last.RunID, AskRequest{})
	require.ErrorAs(t, err, &re)
	assert.True(t, strings.Contains(re.Problem, "chain of 3 replans"), re.Problem)

	plain, err := e.Run(ctx, Request{Reply: purchase, Origin: "exec"})
	require.NoError(t, err)
	_, _, err = e.Reject(ctx, plain.RunID, "no", "test")
	require.NoError(t, err)
	_, err = e.Replan(ctx, client, plain.RunID, AskRequest{})
	require.ErrorAs(t, err, &re, "a run no model wrote cannot be replanned")
}

// Only the accepted end of a chain is replanned: rejecting its failed attempts does not multiply
// the model calls (found in review: 120 calls from one question).
func TestReplanOnlyFromAnAcceptedRun(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	srv := llmtest.NewServer(t, llmtest.Reply(tagged("try:\n    pass\nexcept:\n    pass")), llmtest.Always(llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star")))))
	client, err := llm.New(srv.Config())
	require.NoError(t, err)
	res, err := e.Ask(ctx, client, AskRequest{Question: purchaseQuestion})
	require.NoError(t, err)
	require.Len(t, res.Attempts, 2)
	failed := res.Attempts[0].RunID
	_, _, err = e.Reject(ctx, failed, "no", "test")
	require.NoError(t, err)
	calls := len(srv.Requests())
	_, err = e.Replan(ctx, client, failed, AskRequest{})
	var re *RunError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, re.Problem, "only an accepted plan")
	assert.Equal(t, calls, len(srv.Requests()), "no model call")
}
