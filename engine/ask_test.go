package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/llm/llmtest"
)

// askWith runs Ask against a scripted OpenAI-compatible server through the real go-openai
// client.
func askWith(t *testing.T, e *Engine, cfg func(*llm.Config), req AskRequest, steps ...llmtest.Step) (*Result, *llmtest.Server, error) {
	t.Helper()
	srv := llmtest.NewServer(t, steps...)
	c := srv.Config()
	if cfg != nil {
		cfg(&c)
	}
	client, err := llm.New(c)
	require.NoError(t, err)
	res, err := e.Ask(context.Background(), client, req)
	return res, srv, err
}

func tagged(program string) string {
	return "Here is my plan.\n<execute_python>\n" + program + "\n</execute_python>"
}

const purchaseQuestion = "Purchase 3 Wayfarer sunglasses for customer Alice."

func TestAskFirstTry(t *testing.T) {
	e, _ := newEngine(t)
	res, srv, err := askWith(t, e, nil, AskRequest{Question: purchaseQuestion}, llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star"))))
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.True(t, res.Pending)
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, llmtest.Model, res.Attempts[0].Model)
	assert.Positive(t, res.Attempts[0].PromptTokens)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.Len(t, reqs[0].Messages, 2)
	assert.Equal(t, llm.RoleSystem, reqs[0].Messages[0].Role)
	assert.Contains(t, reqs[0].Messages[0].Content, "inventory_tbl", "the prompt names the helpers")
	assert.Contains(t, reqs[0].LastUser(), purchaseQuestion)
	require.NotNil(t, reqs[0].Temperature, "temperature 0 is sent")
	assert.Equal(t, 0.0, *reqs[0].Temperature)

	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	require.NotNil(t, rec.Model)
	assert.Equal(t, 1, rec.Model.Attempt)
	assert.Equal(t, "ask", rec.Origin)
}

func TestAskPythonismsAndFencedReply(t *testing.T) {
	e, _ := newEngine(t)
	reply := "```python\nimport math\nrows = inventory_tbl.search({\"price\": {\"$lt\": 100}})\nbest = None\nfor r in rows:\n    if best is None or r[\"price\"] < best[\"price\"]:\n        best = r\nSTATUS = \"success\"\nanswer_text = f\"The cheapest is {best['name']} at ${best['price']:.2f}.\"\n```"
	res, _, err := askWith(t, e, nil, AskRequest{Question: "What is your cheapest pair?"}, llmtest.Reply(reply))
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "The cheapest is Classic at $60.00.", res.AnswerText)
	assert.NotEmpty(t, res.Rewrites)
	assert.Len(t, res.Attempts, 1)
}

func TestAskRepairsOnceThenTwice(t *testing.T) {
	bad := tagged("try:\n    item = inventory_tbl.get({\"name\": \"Wayfarer\"})\nexcept:\n    item = None\n")
	runtimeBad := tagged("item = inventory_tbl.get({\"name\": \"Butterfly\"})\nSTATUS = \"success\"\nanswer_text = \"We have \" + str(item[\"quantity_in_stock\"]) + \".\"\n")
	good := tagged(example(t, "02_purchase_wayfarer.star"))

	e, _ := newEngine(t)
	res, srv, err := askWith(t, e, nil, AskRequest{Question: purchaseQuestion}, llmtest.Reply(bad), llmtest.Reply(good))
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	require.Len(t, res.Attempts, 2)
	assert.Equal(t, OutcomeCheckFailed, res.Attempts[0].Outcome)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	require.Len(t, reqs[1].Messages, 4, "system, question, the failed reply, the repair request")
	assert.Equal(t, llm.RoleAssistant, reqs[1].Messages[2].Role)
	repair := reqs[1].LastUser()
	assert.Contains(t, repair, "python-try")
	assert.Contains(t, repair, "try:", "the failed program is sent back")

	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.Equal(t, res.Attempts[0].RunID, rec.Model.ParentRunID)

	e2, _ := newEngine(t)
	res, _, err = askWith(t, e2, nil, AskRequest{Question: purchaseQuestion}, llmtest.Reply(bad), llmtest.Reply(runtimeBad), llmtest.Reply(good))
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome)
	require.Len(t, res.Attempts, 3)
	assert.Equal(t, OutcomeRuntimeError, res.Attempts[1].Outcome)
	// Failed attempts never reach the store: only the accepted one is pending.
	assert.Equal(t, int64(6), row(t, e2.Store(), "inventory", "SG002")["quantity_in_stock"])
}

func TestAskGivesUpAndSaysWhy(t *testing.T) {
	e, _ := newEngine(t)
	bad := llmtest.Reply("I cannot write code, sorry.")
	res, srv, err := askWith(t, e, nil, AskRequest{Question: purchaseQuestion}, bad, bad, bad)
	require.NoError(t, err)
	assert.Equal(t, OutcomeCheckFailed, res.Outcome)
	assert.Len(t, res.Attempts, 3, "one try and the default two repairs")
	assert.Len(t, srv.Requests(), 3)
	last := res.Diagnostics[len(res.Diagnostics)-1]
	assert.Equal(t, CodeNoValidPlan, last.Code)
	assert.Contains(t, last.Message, "3 attempts")

	runs, err := e.Runs()
	require.NoError(t, err)
	assert.Len(t, runs, 3, "every attempt is in the audit log")

	// MaxRepairs bounds the loop; a negative value means no repair.
	e2, _ := newEngine(t)
	res, srv, err = askWith(t, e2, nil, AskRequest{Question: purchaseQuestion, MaxRepairs: -1}, bad)
	require.NoError(t, err)
	assert.Len(t, res.Attempts, 1)
	assert.Len(t, srv.Requests(), 1)
}

func TestAskApplies(t *testing.T) {
	e, _ := newEngine(t)
	res, _, err := askWith(t, e, nil, AskRequest{Question: purchaseQuestion, Apply: true}, llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star"))))
	require.NoError(t, err)
	require.True(t, res.Applied, res.Diagnostics.String())
	assert.Equal(t, int64(3), row(t, e.Store(), "inventory", "SG002")["quantity_in_stock"])
}

func TestAskRetriesRateLimits(t *testing.T) {
	e, _ := newEngine(t)
	res, srv, err := askWith(t, e, nil, AskRequest{Question: purchaseQuestion},
		llmtest.Status(429, "Retry-After: 1"), llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star"))))
	require.NoError(t, err)
	assert.Equal(t, OutcomeOK, res.Outcome)
	assert.Len(t, srv.Requests(), 2)
	assert.Equal(t, []time.Duration{time.Second}, srv.Waits())
}

func TestAskModelFailures(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*llm.Config)
		step llmtest.Step
		want string
	}{
		{"hung server", func(c *llm.Config) { c.Timeout = 100 * time.Millisecond }, llmtest.Hang(), "within 100ms"},
		{"malformed JSON", nil, llmtest.Raw("this is not json"), "not JSON"},
		{"empty choices", nil, llmtest.NoChoices(), "choices"},
		{"unauthorised", nil, llmtest.Status(401), "OPENAI_API_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t)
			_, _, err := askWith(t, e, tt.cfg, AskRequest{Question: purchaseQuestion}, tt.step)
			var me *ModelError
			require.ErrorAs(t, err, &me)
			assert.Contains(t, strings.ToLower(err.Error()), strings.ToLower(tt.want))
		})
	}
}

// The messages that count attempts and rows agree with the number.
func TestCountsInMessagesAgree(t *testing.T) {
	assert.Equal(t, "the model produced no valid plan in its one attempt, which ended as check_failed", noValidPlan(1, OutcomeCheckFailed))
	assert.Equal(t, "the model produced no valid plan in 3 attempts; the last one ended as check_failed", noValidPlan(3, OutcomeCheckFailed))
	assert.Equal(t, "1 changed row", changedRows(1))
	assert.Equal(t, "0 changed rows", changedRows(0))
}
