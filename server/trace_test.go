package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/llm/llmtest"
	"github.com/starplan/starplan/telemetry"
	"github.com/starplan/starplan/telemetry/tracetest"
)

// tracedFixture is a fixture whose engine exports its runs' spans over OTLP/HTTP to a receiver.
func tracedFixture(t *testing.T) (*fixture, *tracetest.Receiver) {
	return tracedFixtureWith(t, Options{})
}

// tracedFixtureWith is tracedFixture with the server's options.
func tracedFixtureWith(t *testing.T, opts Options) (*fixture, *tracetest.Receiver) {
	tp, rcv := tracedProvider(t)
	f := newFixture(t, opts)
	stop := f.eng.Observe(telemetry.NewTracing(tp).Observe)
	t.Cleanup(stop)
	return f, rcv
}

// tracedProvider is a tracer provider exporting each span as it ends, over OTLP/HTTP, to a
// receiver.
func tracedProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.Receiver) {
	rcv := tracetest.NewReceiver(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.URL+"/v1/traces"))
	require.NoError(t, err)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { assert.NoError(t, tp.Shutdown(context.Background())) })
	return tp, rcv
}

const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

// postTraced posts body to path with the caller's traceparent.
func postTraced(t *testing.T, f *fixture, path string, body any) response {
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", f.web.URL+path, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := f.web.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, body: out, header: resp.Header}
}

// one requires exactly one span and returns it.
func one(t *testing.T, spans []*tracepb.Span, what string) *tracepb.Span {
	t.Helper()
	require.Len(t, spans, 1, what)
	return spans[0]
}

func TestTracesOfADryRunAnApplyAndAConflictOverHTTP(t *testing.T) {
	t.Parallel()
	f, rcv := tracedFixture(t)

	r := postTraced(t, f, "/v1/runs", RunRequest{Program: purchase("Aviator", 1, "Cy"), Request: "one Aviator"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var c RunDocument
	r.decode(t, &c)
	d := f.run(purchase("Aviator", 1, "Di"), "") // no traceparent: a trace of its own

	// The dry run: a span per run, a child of the caller's span, with its phases under it.
	run := one(t, rcv.Named(telemetry.SpanRun, c.RunID), "the run's span")
	assert.Equal(t, callerTrace, hex.EncodeToString(run.TraceId), "the caller's trace")
	assert.Equal(t, callerSpan, hex.EncodeToString(run.ParentSpanId), "a child of the caller's span")
	assert.Equal(t, "pending", tracetest.Attr(run, "starplan.state"))
	assert.Equal(t, "ok", tracetest.Attr(run, "starplan.outcome"))
	assert.Equal(t, f.st.Domain().Name, tracetest.Attr(run, "starplan.domain"))
	assert.NotEmpty(t, tracetest.Attr(run, "starplan.domain"))
	for _, phase := range []string{telemetry.SpanCheck, telemetry.SpanExecute, telemetry.SpanContract} {
		s := one(t, rcv.Named(phase, c.RunID), phase)
		assert.Equal(t, run.TraceId, s.TraceId, phase)
		assert.Equal(t, run.SpanId, s.ParentSpanId, "%s is a child of the run", phase)
		assert.LessOrEqual(t, run.StartTimeUnixNano, s.StartTimeUnixNano, phase)
		assert.LessOrEqual(t, s.EndTimeUnixNano, run.EndTimeUnixNano, phase)
	}
	execute := one(t, rcv.Named(telemetry.SpanExecute, c.RunID), "")
	assert.NotEmpty(t, tracetest.Attr(execute, "starplan.outcome"))
	// The check's span holds the runner's phases before the run, one after the other (in process
	// no worker is waited for), and the run follows it.
	check := one(t, rcv.Named(telemetry.SpanCheck, c.RunID), "")
	phases := rcv.Children(check)
	assert.Equal(t, []string{telemetry.SpanExtract, telemetry.SpanRewrite, telemetry.SpanStaticCheck}, tracetest.Names(phases))
	checkPhasesInOrder(t, check, phases)
	assert.LessOrEqual(t, check.EndTimeUnixNano, execute.StartTimeUnixNano, "the run after its check")
	// The change set is made after the run, before the contract's check.
	diff := one(t, rcv.Named(telemetry.SpanDiff, c.RunID), "the diff's span")
	contract := one(t, rcv.Named(telemetry.SpanContract, c.RunID), "")
	assert.Equal(t, run.SpanId, diff.ParentSpanId, "a child of the run")
	assert.LessOrEqual(t, execute.EndTimeUnixNano, diff.StartTimeUnixNano)
	assert.LessOrEqual(t, diff.EndTimeUnixNano, contract.StartTimeUnixNano)
	written, _ := tracetest.IntAttr(diff, "starplan.rows_written")
	assert.Positive(t, written, "the sale's rows")
	read, ok := tracetest.IntAttr(execute, "starplan.rows_read")
	assert.True(t, ok, "the execute span says how many rows the run read")
	assert.GreaterOrEqual(t, read, int64(1), "the sale reads at least the item it sells")
	other := one(t, rcv.Named(telemetry.SpanRun, d.RunID), "the other run's span")
	assert.NotEqual(t, callerTrace, hex.EncodeToString(other.TraceId), "no traceparent, no caller's trace")
	assert.Empty(t, other.ParentSpanId)

	// The apply, in the caller's trace; then the other run's apply conflicts.
	require.Equal(t, http.StatusOK, postTraced(t, f, "/v1/runs/"+c.RunID+"/apply", ApplyRequest{Digest: c.Digest}).status)
	applied := one(t, rcv.Named(telemetry.SpanApply, c.RunID), "the apply's span")
	assert.Equal(t, callerTrace, hex.EncodeToString(applied.TraceId))
	assert.Equal(t, callerSpan, hex.EncodeToString(applied.ParentSpanId), "a child of the caller's span")
	require.Len(t, applied.Links, 1, "linked to its run")
	assert.Equal(t, run.SpanId, applied.Links[0].SpanId)
	assert.Equal(t, "applied", tracetest.Attr(applied, "starplan.state"))
	assert.Equal(t, tracepb.Status_STATUS_CODE_UNSET, applied.GetStatus().GetCode())
	// Its steps in the store are its children, in order, inside it: the conflict check first,
	// the commit last, every step passed.
	steps := rcv.Children(applied)
	require.NotEmpty(t, steps, "the apply's steps")
	assert.Equal(t, telemetry.SpanConflictCheck, steps[0].Name)
	assert.Equal(t, telemetry.SpanCommit, steps[len(steps)-1].Name)
	assert.Len(t, rcv.Named(telemetry.SpanCommit, c.RunID), 1, "one commit")
	for i, s := range steps {
		assert.Equal(t, applied.TraceId, s.TraceId, s.Name)
		assert.Equal(t, "ok", tracetest.Attr(s, "starplan.outcome"), s.Name)
		assert.Equal(t, tracepb.Status_STATUS_CODE_UNSET, s.GetStatus().GetCode(), s.Name)
		assert.LessOrEqual(t, applied.StartTimeUnixNano, s.StartTimeUnixNano, "%s inside the apply", s.Name)
		assert.LessOrEqual(t, s.StartTimeUnixNano, s.EndTimeUnixNano, s.Name)
		assert.LessOrEqual(t, s.EndTimeUnixNano, applied.EndTimeUnixNano, "%s inside the apply", s.Name)
		if i > 0 {
			assert.LessOrEqual(t, steps[i-1].EndTimeUnixNano, s.StartTimeUnixNano, "%s after %s", s.Name, steps[i-1].Name)
		}
	}

	require.Equal(t, http.StatusConflict, postTraced(t, f, "/v1/runs/"+d.RunID+"/apply", ApplyRequest{Digest: d.Digest}).status)
	conflict := one(t, rcv.Named(telemetry.SpanApply, d.RunID), "the conflict's span")
	assert.Equal(t, "conflict", tracetest.Attr(conflict, "starplan.state"))
	assert.Equal(t, "conflict", tracetest.Attr(conflict, "starplan.codes"))
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, conflict.GetStatus().GetCode())
	// The conflict check found it: its span (the last of the apply's) says so; nothing committed.
	steps = rcv.Children(conflict)
	require.NotEmpty(t, steps, "the conflict's steps")
	found := steps[len(steps)-1]
	assert.Equal(t, telemetry.SpanConflictCheck, found.Name)
	assert.Equal(t, "conflict", tracetest.Attr(found, "starplan.outcome"))
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, found.GetStatus().GetCode())
	assert.NotEmpty(t, found.GetStatus().GetMessage(), "the conflict's message")
	assert.LessOrEqual(t, conflict.StartTimeUnixNano, found.StartTimeUnixNano)
	assert.LessOrEqual(t, found.EndTimeUnixNano, conflict.EndTimeUnixNano)
	assert.Empty(t, rcv.Named(telemetry.SpanCommit, d.RunID), "a conflict commits nothing")
}

// checkPhasesInOrder asserts that the phases lie inside the check's span one after the other,
// each its own run's.
func checkPhasesInOrder(t *testing.T, check *tracepb.Span, phases []*tracepb.Span) {
	t.Helper()
	at := check.StartTimeUnixNano
	for _, p := range phases {
		assert.Equal(t, tracetest.Attr(check, "starplan.run_id"), tracetest.Attr(p, "starplan.run_id"), p.Name)
		assert.LessOrEqual(t, at, p.StartTimeUnixNano, "%s after the phase before it", p.Name)
		assert.Less(t, p.StartTimeUnixNano, p.EndTimeUnixNano, "%s took time", p.Name)
		at = p.EndTimeUnixNano
	}
	assert.LessOrEqual(t, at, check.EndTimeUnixNano, "the phases end inside the check")
}

// traced is an http.RoundTripper that sends the caller's traceparent with every request.
type traced struct{ next http.RoundTripper }

func (tr traced) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	return tr.next.RoundTrip(r)
}

func TestTracesOfAnMCPRunOverStreamableHTTPAreChildrenOfTheCallersSpan(t *testing.T) {
	t.Parallel()
	f, rcv := tracedFixture(t)
	client := mcp.NewClient(&mcp.Implementation{Name: "starplan-test", Version: "1"}, nil)
	cs, err := client.Connect(testContext(t), &mcp.StreamableClientTransport{
		Endpoint:   f.web.URL + MCPPath,
		HTTPClient: &http.Client{Transport: traced{bearer{testToken, f.web.Client().Transport}}},
		MaxRetries: -1,
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })

	run := dryRunPurchase(t, cs, "three Wayfarers")
	span := one(t, rcv.Named(telemetry.SpanRun, run.RunID), "the run's span")
	assert.Equal(t, callerTrace, hex.EncodeToString(span.TraceId), "the caller's trace")
	assert.Equal(t, callerSpan, hex.EncodeToString(span.ParentSpanId), "a child of the caller's span")
	assert.Equal(t, "pending", tracetest.Attr(span, "starplan.state"))
}

// BenchmarkTracedDryRun: the HTTP dry run of BenchmarkHTTPDryRun (one client) with traces off
// (no observer: the default) and on (the observer, a batching OTLP/HTTP exporter to a receiver in
// process), alternated so both see the same machine load.
func BenchmarkTracedDryRun(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "traces=off", true: "traces=on"}[on], func(b *testing.B) {
			f := newFixture(b, Options{})
			if on {
				rcv := tracetest.NewReceiver(b)
				exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.URL+"/v1/traces"))
				require.NoError(b, err)
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				b.Cleanup(f.eng.Observe(telemetry.NewTracing(tp).Observe))
			}
			body, err := json.Marshal(RunRequest{Program: purchase("Aviator", 1, "Bench"), Request: "one Aviator"})
			require.NoError(b, err)
			client := &http.Client{Transport: &http.Transport{}}
			for b.Loop() {
				benchRequest(b, client, f.web.URL+"/v1/runs", body)
			}
		})
	}
}

// A tool call carrying the caller's trace context in _meta (over stdio there are no headers)
// makes its run a child of the caller's span; a call without one starts a trace of its own.
func TestTracesOfAnMCPCallWithMetaTraceparent(t *testing.T) {
	t.Parallel()
	f, rcv := tracedFixture(t)
	cs := mcpAs(t, f, testToken, nil)
	var doc RunDocument
	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{
		Meta:      mcp.Meta{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"},
		Name:      "run_plan",
		Arguments: RunRequest{Program: purchase("Aviator", 1, "Meta"), Request: "one Aviator"},
	})
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &doc))
	span := one(t, rcv.Named(telemetry.SpanRun, doc.RunID), "the run's span")
	assert.Equal(t, callerTrace, hex.EncodeToString(span.TraceId), "the caller's trace")
	assert.Equal(t, callerSpan, hex.EncodeToString(span.ParentSpanId), "a child of the caller's span")

	var plain RunDocument
	res = call(t, cs, "run_plan", RunRequest{Program: purchase("Aviator", 1, "Plain"), Request: "one Aviator"}, &plain)
	require.False(t, res.IsError, text(res))
	other := one(t, rcv.Named(telemetry.SpanRun, plain.RunID), "the other run's span")
	assert.NotEqual(t, callerTrace, hex.EncodeToString(other.TraceId), "no _meta, no caller's trace")
	assert.Empty(t, other.ParentSpanId)
}

// The run document records the trace of a traced run: the dry run's answer, GET /v1/runs/{id}
// and MCP show_run give the trace id of its span, from the audit record (so after a restart
// too); an untraced server's runs have none.
func TestTheRunDocumentRecordsItsTrace(t *testing.T) {
	t.Parallel()
	f, rcv := tracedFixture(t)
	r := postTraced(t, f, "/v1/runs", RunRequest{Program: purchase("Aviator", 1, "Tr"), Request: "one Aviator"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(t, &doc)
	span := one(t, rcv.Named(telemetry.SpanRun, doc.RunID), "the run's span")
	assert.Equal(t, hex.EncodeToString(span.TraceId), doc.TraceID, "the dry run's answer")
	assert.Equal(t, callerTrace, doc.TraceID)

	r = f.call("GET", "/v1/runs/"+doc.RunID, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var shown RunDocument
	r.decode(t, &shown)
	assert.Equal(t, doc.TraceID, shown.TraceID, "GET /v1/runs/{id}, from the audit record")
	var mdoc RunDocument
	res := call(t, mcpAs(t, f, testToken, nil), "show_run", RunRef{RunID: doc.RunID}, &mdoc)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, doc.TraceID, mdoc.TraceID, "show_run")

	g := newFixture(t, Options{})
	plain := g.run(purchase("Aviator", 1, "Un"), "")
	assert.Empty(t, plain.TraceID, "no traces, no trace id")
	assert.NotContains(t, string(g.call("GET", "/v1/runs/"+plain.RunID, nil).body), "trace_id")
}

// An ask's run begins with the model call that wrote its plan: a starplan.model span under the
// run's span (in the caller's trace), with the model, the attempt and the tokens; the repaired
// attempt is its own run, with attempt 2.
func TestTheModelCallIsASpanOfItsRun(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t, llmtest.Reply(tagged("answer_text = nope")), llmtest.Always(llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star")))))
	client, err := llm.New(model.Config())
	require.NoError(t, err)
	f, rcv := tracedFixtureWith(t, Options{Model: client})

	r := postTraced(t, f, "/v1/ask", AskRequest{Request: "Purchase 3 Wayfarer sunglasses for customer Alice."})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(t, &doc)
	run := one(t, rcv.Named(telemetry.SpanRun, doc.RunID), "the answered run's span")
	assert.Equal(t, callerTrace, hex.EncodeToString(run.TraceId))
	call := one(t, rcv.Named(telemetry.SpanModel, doc.RunID), "its model call")
	assert.Equal(t, run.SpanId, call.ParentSpanId, "a child of the run")
	assert.Equal(t, run.StartTimeUnixNano, call.StartTimeUnixNano, "the run begins with the call")
	assert.LessOrEqual(t, call.EndTimeUnixNano, run.EndTimeUnixNano)
	assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, call.Kind)
	assert.NotEmpty(t, tracetest.Attr(call, "gen_ai.request.model"))
	attempt, _ := tracetest.IntAttr(call, "starplan.attempt")
	assert.Equal(t, int64(2), attempt, "the repaired plan is the second attempt")
	in, ok := tracetest.IntAttr(call, "gen_ai.usage.input_tokens")
	assert.True(t, ok && in > 0, "the prompt's tokens")
	out, ok := tracetest.IntAttr(call, "gen_ai.usage.output_tokens")
	assert.True(t, ok && out > 0, "the reply's tokens")

	plain := f.run(purchase("Aviator", 1, "No model"), "")
	assert.Empty(t, rcv.Named(telemetry.SpanModel, plain.RunID), "a plan that came without a model call has no model span")
}

// A model call that fails leaves no run, so no lifecycle event: the model wrapped by
// telemetry.TraceModel makes it a starplan.model span of its own, in the caller's trace, in
// error with the error's kind; and there is no run span.
func TestAFailedModelCallIsASpanInError(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t, llmtest.Status(401), llmtest.Always(llmtest.Reply(tagged(example(t, "02_purchase_wayfarer.star")))))
	client, err := llm.New(model.Config())
	require.NoError(t, err)
	tp, rcv := tracedProvider(t)
	f := newFixture(t, Options{Model: telemetry.TraceModel(tp, client.Model(), client)})
	t.Cleanup(f.eng.Observe(telemetry.NewTracing(tp).Observe))

	r := postTraced(t, f, "/v1/ask", AskRequest{Request: "Purchase 3 Wayfarer sunglasses for customer Alice."})
	require.Equal(t, http.StatusBadGateway, r.status, "%s", r.body)
	call := one(t, rcv.Named(telemetry.SpanModel, ""), "the failed call's span")
	assert.Equal(t, callerTrace, hex.EncodeToString(call.TraceId), "the caller's trace")
	assert.Equal(t, callerSpan, hex.EncodeToString(call.ParentSpanId), "a child of the caller's span")
	assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, call.Kind)
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, call.GetStatus().GetCode())
	assert.Equal(t, "auth", tracetest.Attr(call, "error.type"))
	assert.Equal(t, client.Model(), tracetest.Attr(call, "gen_ai.request.model"))
	assert.LessOrEqual(t, call.StartTimeUnixNano, call.EndTimeUnixNano)
	assert.Empty(t, rcv.Named(telemetry.SpanRun, ""), "no run was made")

	// A call that succeeds is its run's span's child only, not traced twice.
	r = postTraced(t, f, "/v1/ask", AskRequest{Request: "Purchase 3 Wayfarer sunglasses for customer Alice."})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(t, &doc)
	run := one(t, rcv.Named(telemetry.SpanRun, doc.RunID), "the run's span")
	ok := one(t, rcv.Named(telemetry.SpanModel, doc.RunID), "its call")
	assert.Equal(t, run.SpanId, ok.ParentSpanId)
	assert.Len(t, rcv.Named(telemetry.SpanModel, ""), 2, "the failed call and the run's, no other")
}
