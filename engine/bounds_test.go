package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/llm/llmtest"
)

// Whatever a plan does, its result stays bounded and says what it cut.
func TestResultsAreBounded(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()

	// A check that finds 150 problems lists 99 of them and says how many more there were.
	res, err := e.Run(ctx, Request{Reply: "x = 1\n" + strings.Repeat("del x\n", 150)})
	require.NoError(t, err)
	require.Equal(t, OutcomeCheckFailed, res.Outcome)
	require.Len(t, res.Diagnostics, MaxDiagnostics)
	last := res.Diagnostics[MaxDiagnostics-1]
	assert.Equal(t, CodeMoreDiagnostics, last.Code)
	assert.Equal(t, "and 51 more diagnostics, left out", last.Message)
	assert.Contains(t, res.Truncated, "diagnostics")

	// A message that quotes what the plan built is cut.
	res, err = e.Run(ctx, Request{Reply: `fail("x" * 200000)`})
	require.NoError(t, err)
	require.Equal(t, OutcomeRuntimeError, res.Outcome)
	assert.LessOrEqual(t, len(res.Diagnostics[0].Message), MaxMessage+64)
	assert.Contains(t, res.Diagnostics[0].Message, "[cut: ")
	assert.Contains(t, res.Truncated, "diagnostic messages")

	// So is an answer far beyond the contract.
	res, err = e.Run(ctx, Request{Reply: `
STATUS = "no_match"
answer_text = "é" * 100000`})
	require.NoError(t, err)
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	assert.LessOrEqual(t, len(res.AnswerText), MaxAnswer+64)
	assert.Contains(t, res.Truncated, "answer_text")
	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(rec.AnswerText), MaxAnswer+64, "the audit record keeps the bounded result")
}

// A repair round quotes at most MaxRepairQuote of a failed reply back to the model.
func TestRepairQuotesABoundedReply(t *testing.T) {
	e, _ := newEngine(t)
	flood := tagged(strings.Repeat("# padding\n", 30_000) + "x = undefined_name")
	_, srv, err := askWith(t, e, nil, AskRequest{Question: purchaseQuestion, MaxRepairs: 1},
		llmtest.Reply(flood), llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star"))))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	quoted := 0
	for _, m := range reqs[1].Messages[2:] {
		quoted += len(m.Content)
	}
	// The reply itself, and the program with line numbers (at most 4.5 times its bytes, for
	// one-character lines), plus the diagnostics.
	assert.LessOrEqual(t, quoted, MaxRepairQuote+5*MaxRepairQuote/2+8<<10)
	assert.Greater(t, len(flood), 4*MaxRepairQuote)
}
