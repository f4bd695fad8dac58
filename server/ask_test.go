package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/llm/llmtest"
)

// modelFixture is a server whose model is the scripted OpenAI-compatible test server, through
// the real client.
func modelFixture(t *testing.T, steps ...llmtest.Step) (*fixture, *llmtest.Server) {
	t.Helper()
	srv := llmtest.NewServer(t, steps...)
	client, err := llm.New(srv.Config())
	require.NoError(t, err)
	return newFixture(t, Options{Model: client}), srv
}

func tagged(program string) string { return "<execute_python>\n" + program + "\n</execute_python>" }

// POST /v1/ask has the model plan; a rejection with feedback asks it again, in the background,
// and the new run arrives on the event stream linked to the rejected one.
func TestAskThenRejectReplans(t *testing.T) {
	t.Parallel()
	f, model := modelFixture(t, llmtest.Always(llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star")))))
	events := f.subscribe(testContext(t), nil)
	events.untilSubscribed()

	r := f.call("POST", "/v1/ask", AskRequest{Request: "Purchase 3 Wayfarer sunglasses for customer Alice."})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var first RunDocument
	r.decode(t, &first)
	assert.Equal(t, StatePending, first.State)
	assert.Equal(t, "ask", first.Origin)

	r = f.call("POST", "/v1/runs/"+first.RunID+"/reject", RejectRequest{Feedback: "Alice pays with her member discount: 10% off."})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	var replanned Event
	for ev, ok := events.next(); ok; ev, ok = events.next() {
		if ev.Type == EventFinished && ev.ParentRunID == first.RunID {
			replanned = ev
			break
		}
	}
	require.NotEmpty(t, replanned.RunID, "a finished event for the replanned run")
	assert.Equal(t, StatePending, replanned.State)
	reqs := model.Requests()
	require.Len(t, reqs, 2)
	assert.Contains(t, reqs[1].LastUser(), "member discount", "the model read the feedback")

	rec, err := f.eng.Record(replanned.RunID)
	require.NoError(t, err)
	assert.Equal(t, first.RunID, rec.Model.ParentRunID)
	assert.Equal(t, 1, rec.Model.Replan)
}

// POST /v1/ask answers with every model round (attempts), as `starplan ask --json` prints
// them: the same engine.Attempt documents, the last one the answered run.
func TestAskReturnsTheAttempts(t *testing.T) {
	t.Parallel()
	f, _ := modelFixture(t, llmtest.Reply(tagged("answer_text = nope")), llmtest.Always(llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star")))))
	r := f.call("POST", "/v1/ask", AskRequest{Request: "Purchase 3 Wayfarer sunglasses for customer Alice."})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc struct {
		RunID    string            `json:"run_id"`
		Attempts []json.RawMessage `json:"attempts"`
	}
	r.decode(t, &doc)
	require.Len(t, doc.Attempts, 2, "the repaired plan and the first one: %s", r.body)
	var attempts []engine.Attempt
	for _, raw := range doc.Attempts {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields() // the shape ask --json prints, field for field
		var a engine.Attempt
		require.NoError(t, dec.Decode(&a))
		attempts = append(attempts, a)
	}
	assert.NotEqual(t, engine.OutcomeOK, attempts[0].Outcome)
	assert.NotEmpty(t, attempts[0].Diagnostics, "the first attempt says why it was repaired")
	assert.Equal(t, engine.OutcomeOK, attempts[1].Outcome)
	assert.Equal(t, doc.RunID, attempts[1].RunID, "the last attempt is the answered run")
	assert.NotEmpty(t, attempts[1].Model)
}

func TestAskWithoutAModel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.call("POST", "/v1/ask", AskRequest{Request: "hi"})
	assert.Equal(t, http.StatusNotImplemented, r.status)
	assert.Equal(t, CodeNoModel, r.errorCode(t))

	doc := f.run(example(t, "02_purchase_wayfarer.star"), "x")
	r = f.call("POST", "/v1/runs/"+doc.RunID+"/reject", RejectRequest{Feedback: "no"})
	require.Equal(t, http.StatusOK, r.status)
	runs, err := f.eng.Runs()
	require.NoError(t, err)
	assert.Len(t, runs, 1, "a run no model wrote is not replanned")
}

// The model that cannot be reached is a 502 with the model's code, and the stream says failed.
func TestAskModelUnavailable(t *testing.T) {
	t.Parallel()
	f, _ := modelFixture(t, llmtest.Always(llmtest.Status(401)))
	r := f.call("POST", "/v1/ask", AskRequest{Request: "hi"})
	assert.Equal(t, http.StatusBadGateway, r.status)
	assert.Equal(t, CodeModel, r.errorCode(t))
	assert.True(t, strings.Contains(string(r.body), "model call 1 failed"), "%s", r.body)
}

// reject_run through the SDK's MCP client replans a run the model wrote, as the HTTP API does.
func TestMCPRejectReplans(t *testing.T) {
	t.Parallel()
	f, _ := modelFixture(t, llmtest.Always(llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star")))))
	events := f.subscribe(testContext(t), nil)
	events.untilSubscribed()
	first, err := f.srv.Ask(testContext(t), AskRequest{Request: "Purchase 3 Wayfarer sunglasses for customer Alice."}, OriginMCP)
	require.NoError(t, err)
	cs := mcpClient(t, f, false)
	res := call(t, cs, "reject_run", map[string]any{"run_id": first.RunID, "feedback": "Bill it to Alice's shop account."}, nil)
	require.False(t, res.IsError, text(res))
	for ev, ok := events.next(); ok; ev, ok = events.next() {
		if ev.Type == EventFinished && ev.ParentRunID == first.RunID {
			rec, err := f.eng.Record(ev.RunID)
			require.NoError(t, err)
			assert.Equal(t, 1, rec.Model.Replan, "the first replan")
			assert.Less(t, rec.Model.Replan, engine.MaxReplans)
			return
		}
	}
	t.Fatal("the stream ended before the replanned run finished")
}

// A rejection after Drain records, and starts nothing that would outlive the server.
func TestNoReplanAfterDrain(t *testing.T) {
	t.Parallel()
	f, model := modelFixture(t, llmtest.Always(llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star")))))
	doc, err := f.srv.Ask(testContext(t), AskRequest{Request: "Purchase 3 Wayfarer sunglasses for customer Alice."}, OriginHTTP)
	require.NoError(t, err)
	f.srv.Drain()
	_, err = f.srv.Reject(testContext(t), doc.RunID, "no", OriginHTTP)
	require.NoError(t, err)
	f.srv.background.Wait()
	assert.Len(t, model.Requests(), 1, "no replan started after Drain")
}
