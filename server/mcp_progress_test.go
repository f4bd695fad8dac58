package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// progressLog collects a client's progress notifications.
type progressLog chan *mcp.ProgressNotificationParams

func (l progressLog) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	l <- req.Params
}

// next waits for the next notification; the test's context bounds the wait.
func (l progressLog) next(t *testing.T, ctx context.Context) *mcp.ProgressNotificationParams {
	t.Helper()
	select {
	case p := <-l:
		return p
	case <-ctx.Done():
		t.Fatal("no progress notification")
		return nil
	}
}

// event decodes the event a progress notification carries in its _meta.
func (l progressLog) event(t *testing.T, p *mcp.ProgressNotificationParams) Event {
	t.Helper()
	raw, err := json.Marshal(p.Meta[progressEventKey])
	require.NoError(t, err)
	var e Event
	require.NoError(t, json.Unmarshal(raw, &e))
	return e
}

func callWithToken(t *testing.T, cs *mcp.ClientSession, tool string, args any, token any, out any) *mcp.CallToolResult {
	t.Helper()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if token != nil {
		params.SetProgressToken(token)
	}
	res, err := cs.CallTool(testContext(t), params)
	require.NoError(t, err)
	if out != nil && res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, out))
	}
	return res
}

func TestMCPRunAndApplyReportProgress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		version  string
		overHTTP bool
	}{{"", false}, {"", true}, {"2025-11-25", false}, {"2025-11-25", true}} {
		t.Run(label(c.version)+map[bool]string{false: "/pipe", true: "/http"}[c.overHTTP], func(t *testing.T) {
			ctx := testContext(t)
			f := newFixture(t, Options{})
			log := make(progressLog, 64)
			cs := mcpClientWith(t, f, c.overHTTP, &mcp.ClientOptions{ProgressNotificationHandler: log.handler}, c.version)

			var run RunDocument
			res := callWithToken(t, cs, "run_plan", RunRequest{Program: example(t, "02_purchase_wayfarer.star")}, "run-1", &run)
			require.False(t, res.IsError, text(res))

			started := log.next(t, ctx)
			assert.Equal(t, "run-1", started.ProgressToken)
			assert.Equal(t, 1.0, started.Progress)
			assert.Equal(t, "started "+run.RunID, started.Message, "the engine names the run from its start")
			assert.Equal(t, EventStarted, log.event(t, started).Type)

			finished := log.next(t, ctx)
			assert.Equal(t, "run-1", finished.ProgressToken)
			assert.Equal(t, 2.0, finished.Progress, "progress increases")
			assert.Equal(t, "finished "+run.RunID+": outcome ok, state pending, 2 rows", finished.Message)
			e := log.event(t, finished)
			assert.Equal(t, EventFinished, e.Type)
			assert.Equal(t, run.RunID, e.RunID)
			assert.Equal(t, run.Digest, e.Digest)
			assert.Equal(t, log.event(t, started).RequestID, e.RequestID)
			assert.NotZero(t, e.ID, "the event as /v1/events sends it")

			res = callWithToken(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, 7, nil)
			require.False(t, res.IsError, text(res))
			applied := log.next(t, ctx)
			assert.EqualValues(t, 7, applied.ProgressToken)
			assert.Equal(t, "applied "+run.RunID+": outcome ok, state applied, 2 rows", applied.Message)
			assert.Equal(t, EventApplied, log.event(t, applied).Type)
		})
	}
}

// Without a progress token a call sends no progress. A call with a token follows it on the same
// session; its notifications must be the first to arrive, as notifications reach the client in
// the order they are sent and the first call's would have been sent before its result.
func TestMCPNoProgressWithoutAToken(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	f := newFixture(t, Options{})
	log := make(progressLog, 64)
	cs := mcpClientWith(t, f, false, &mcp.ClientOptions{ProgressNotificationHandler: log.handler}, "")

	var run RunDocument
	res := callWithToken(t, cs, "run_plan", RunRequest{Program: example(t, "02_purchase_wayfarer.star")}, nil, &run)
	require.False(t, res.IsError, text(res))
	res = callWithToken(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, nil, nil)
	require.False(t, res.IsError, text(res))

	res = callWithToken(t, cs, "run_plan", RunRequest{Program: purchase("Aviator", 1, "Bob")}, "marker", nil)
	require.False(t, res.IsError, text(res))
	for _, want := range []string{EventStarted, EventFinished} {
		p := log.next(t, ctx)
		assert.Equal(t, "marker", p.ProgressToken, "%s: a notification of a call without a token", p.Message)
		assert.Equal(t, want, log.event(t, p).Type)
	}
}

// A progress message is one line: an event's message (an error, a plan's diagnostic, which may
// quote data) is escaped and cut.
func TestProgressMessageIsOneLine(t *testing.T) {
	t.Parallel()
	msg := progressMessage(Event{Type: EventFailed, RunID: "r_1", State: StateConflict, Code: "conflict",
		Message: "row SG002 moved: \x1b]0;owned\x07\nname " + strings.Repeat("x", 300)})
	assert.True(t, strings.HasPrefix(msg, `failed r_1: state conflict, code conflict, row SG002 moved: \x1b]0;owned\x07\nname xxx`), msg)
	assert.NotContains(t, msg, "\x1b")
	assert.NotContains(t, msg, "\n")
	assert.Less(t, len(msg), 250, "the message is cut")
}
