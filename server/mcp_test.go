package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

// bearer adds the token to every request of an MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpClient connects the SDK's own client to the fixture over an in-memory pipe (what stdio
// carries) or over streamable HTTP.
func mcpClient(t *testing.T, f *fixture, overHTTP bool) *mcp.ClientSession {
	t.Helper()
	return mcpClientWith(t, f, overHTTP, nil, "")
}

// label names a subtest after a protocol version.
func label(version string) string {
	if version == "" {
		return "latest"
	}
	return version
}

// mcpClientWith is mcpClient with the client's options (its elicitation and progress handlers)
// and a protocol version ("" for the SDK's latest).
func mcpClientWith(t *testing.T, f *fixture, overHTTP bool, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx := testContext(t)
	client := mcp.NewClient(&mcp.Implementation{Name: "starplan-test", Version: "1"}, opts)
	var transport mcp.Transport
	if overHTTP {
		transport = &mcp.StreamableClientTransport{
			Endpoint:   f.web.URL + MCPPath,
			HTTPClient: &http.Client{Transport: bearer{testToken, f.web.Client().Transport}},
			MaxRetries: -1,
		}
	} else {
		serverSide, clientSide := mcp.NewInMemoryTransports()
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f.srv.RunMCP(sctx, serverSide) }()
		t.Cleanup(func() { cancel(); <-done })
		transport = clientSide
	}
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its structured content into out (when non-nil).
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "a tool's failure is a tool error, never a protocol error")
	if out != nil && res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, out))
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

func TestMCPOverStdioPipe(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	mcpFlow(t, f, mcpClient(t, f, false))
}

func TestMCPOverStreamableHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	mcpFlow(t, f, mcpClient(t, f, true))
}

func TestMCPOverHTTPNeedsTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	client := mcp.NewClient(&mcp.Implementation{Name: "starplan-test", Version: "1"}, nil)
	_, err := client.Connect(testContext(t), &mcp.StreamableClientTransport{
		Endpoint: f.web.URL + MCPPath, HTTPClient: &http.Client{Transport: bearer{"wrong-token-wrong-token", f.web.Client().Transport}}, MaxRetries: -1,
	}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Unauthorized")
}

// mcpFlow drives describe → run_plan → apply_run (wrong digest refused, the second apply
// idempotent) → reject_run → show_run and list_runs, and a conflict, as a model's client would.
func mcpFlow(t *testing.T, f *fixture, cs *mcp.ClientSession) {
	tools, err := cs.ListTools(testContext(t), nil)
	require.NoError(t, err)
	byName := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
		assert.NotNil(t, tool.OutputSchema, "%s has an output schema", tool.Name)
		assert.NotNil(t, tool.InputSchema, "%s has an input schema", tool.Name)
		require.NotNil(t, tool.Annotations, tool.Name)
	}
	for _, name := range []string{"describe", "check_plan", "run_plan", "apply_run", "reject_run", "list_runs", "show_run"} {
		assert.Contains(t, byName, name)
	}
	apply := byName["apply_run"].Annotations
	require.NotNil(t, apply.DestructiveHint)
	assert.True(t, *apply.DestructiveHint)
	assert.True(t, apply.IdempotentHint)
	assert.False(t, apply.ReadOnlyHint)
	assert.True(t, byName["describe"].Annotations.ReadOnlyHint)
	for _, helper := range []string{"inventory_tbl", "transactions_tbl", "get_current_balance", "next_transaction_id", "STATUS"} {
		assert.Contains(t, byName["run_plan"].Description, helper, "run_plan's description carries the helper reference")
	}

	var d Description
	res := call(t, cs, "describe", map[string]any{}, &d)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, "inventory", d.Domain)
	assert.Len(t, d.Tables, 2)

	var rep CheckReport
	res = call(t, cs, "check_plan", CheckRequest{Program: "answer_text = nope"}, &rep)
	require.False(t, res.IsError, text(res))
	assert.False(t, rep.OK)
	assert.NotEmpty(t, rep.Diagnostics)

	var run RunDocument
	res = call(t, cs, "run_plan", RunRequest{Program: example(t, "02_purchase_wayfarer.star"), Request: "Purchase 3 Wayfarer sunglasses for customer Alice."}, &run)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, StatePending, run.State)
	assert.Equal(t, "success", run.Status)
	require.NotEmpty(t, run.Digest)
	ledger := f.count("transactions")

	res = call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: "sha256:0000"}, nil)
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), CodeDigestMismatch)
	assert.Equal(t, int64(6), f.committed("inventory", "SG002")["quantity_in_stock"], "a wrong digest writes nothing")

	var applied, again RunDocument
	res = call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, &applied)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, StateApplied, applied.State)
	res = call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, &again)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, applied, again, "the second apply answers with the first result")
	assert.Equal(t, int64(3), f.committed("inventory", "SG002")["quantity_in_stock"])
	assert.Equal(t, ledger+1, f.count("transactions"), "written once")

	var other, rejected RunDocument
	res = call(t, cs, "run_plan", RunRequest{Program: purchase("Aviator", 2, "Bob")}, &other)
	require.False(t, res.IsError, text(res))
	res = call(t, cs, "reject_run", RejectInput{RunID: other.RunID, Feedback: "Bob wants Round ones"}, &rejected)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, StateRejected, rejected.State)
	assert.Equal(t, OriginMCP, rejected.Decision.Origin)
	res = call(t, cs, "apply_run", ApplyInput{RunID: other.RunID, Digest: other.Digest}, nil)
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), CodeRejected)

	var shown RunDocument
	res = call(t, cs, "show_run", RunRef{RunID: other.RunID}, &shown)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, "Bob wants Round ones", shown.Decision.Feedback)
	res = call(t, cs, "show_run", RunRef{RunID: "r_0000000000"}, nil)
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), CodeUnknownRun)

	var list RunList
	res = call(t, cs, "list_runs", ListInput{State: StateRejected}, &list)
	require.False(t, res.IsError, text(res))
	require.Len(t, list.Runs, 1)
	assert.Equal(t, other.RunID, list.Runs[0].ID)

	// A conflict is a tool error that still carries the run, with its diagnostics.
	var a, b, conflict RunDocument
	call(t, cs, "run_plan", RunRequest{Program: purchase("Aviator", 1, "Ann")}, &a)
	call(t, cs, "run_plan", RunRequest{Program: purchase("Aviator", 1, "Cy")}, &b)
	res = call(t, cs, "apply_run", ApplyInput{RunID: a.RunID, Digest: a.Digest}, nil)
	require.False(t, res.IsError, text(res))
	res = call(t, cs, "apply_run", ApplyInput{RunID: b.RunID, Digest: b.Digest}, &conflict)
	assert.True(t, res.IsError)
	assert.Equal(t, StateConflict, conflict.State)
	assert.Equal(t, engine.OutcomeConflict, conflict.Outcome)

	// Missing required arguments are refused by the schema before the tool runs.
	res = call(t, cs, "apply_run", map[string]any{"run_id": a.RunID}, nil)
	assert.True(t, res.IsError)
}

// run_plan takes a JSON step plan through the SDK's own client too.
func TestMCPRunPlanJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	cs := mcpClient(t, f, false)
	var doc RunDocument
	res := call(t, cs, "run_plan", map[string]any{"plan_json": map[string]any{"steps": []any{
		map[string]any{"id": "n", "tool": "inventory_tbl.count"},
		map[string]any{"id": "done", "tool": "respond", "args": map[string]any{"status": "success", "answer_text": map[string]any{"$expr": "'%d styles' % n"}}},
	}}}, &doc)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, "6 styles", doc.AnswerText)
}
