package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/starplan/starplan/llm/llmtest"
	"github.com/starplan/starplan/telemetry"
	"github.com/starplan/starplan/telemetry/tracetest"
)

// A repaired ask with OTEL_EXPORTER_OTLP_ENDPOINT set exports a span tree per attempt, flushed
// before the command returns: the first attempt failed its check, the second repairs it.
func TestAskExportsTracesWhenOTELAsks(t *testing.T) {
	t.Parallel()
	rcv := tracetest.NewReceiver(t)
	srv := llmtest.NewServer(t, llmtest.Reply("<execute_python>\ntry:\n    x = 1\nexcept:\n    x = 2\n</execute_python>"), reply(t, "02_purchase_wayfarer.star"))
	env := map[string]string{"OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": llmtest.APIKey, "STARPLAN_MODEL": llmtest.Model, "NO_COLOR": "1",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_SERVICE_NAME": "starplan-test"}
	var out, errb bytes.Buffer
	ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(k string) string { return env[k] }}
	code := Main([]string{"--db", newSession(t).dir, "ask", "--json", "Purchase 3 Wayfarer sunglasses for customer Alice."}, ios)
	require.Equal(t, ExitOK, code, out.String()+errb.String())

	var model int
	for _, s := range rcv.Spans() {
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT && strings.HasPrefix(s.Name, "HTTP POST") || s.Name == "POST" {
			model++
		}
	}
	assert.Equal(t, 2, model, "a client span per model request (otelhttp)")
	runs := rcv.Named(telemetry.SpanRun, "")
	require.Len(t, runs, 2, "a span per attempt")
	first, second := runs[0], runs[1]
	if tracetest.Attr(first, "starplan.parent_run_id") != "" {
		first, second = second, first
	}
	assert.Equal(t, "check_failed", tracetest.Attr(first, "starplan.outcome"))
	assert.Equal(t, "python-try", tracetest.Attr(first, "starplan.codes"))
	assert.Equal(t, "failed", tracetest.Attr(first, "starplan.state"))
	check := rcv.Named(telemetry.SpanCheck, tracetest.Attr(first, "starplan.run_id"))
	require.Len(t, check, 1)
	assert.Equal(t, first.SpanId, check[0].ParentSpanId)
	assert.Empty(t, rcv.Named(telemetry.SpanExecute, tracetest.Attr(first, "starplan.run_id")), "a plan that failed its check never ran")
	// ask runs its plans in a worker: the check's phases are extraction, the wait for a worker,
	// its readying itself (it then rewrites and checks); the try statement fails the static check.
	assert.Equal(t, []string{telemetry.SpanExtract, telemetry.SpanWorkerWait, telemetry.SpanWorkerSetup, telemetry.SpanRewrite, telemetry.SpanStaticCheck},
		tracetest.Names(rcv.Children(check[0])), "the failed check's phases")

	assert.Equal(t, tracetest.Attr(first, "starplan.run_id"), tracetest.Attr(second, "starplan.parent_run_id"), "the repair names the run it repairs")
	assert.Equal(t, "pending", tracetest.Attr(second, "starplan.state"))
	for _, phase := range []string{telemetry.SpanCheck, telemetry.SpanExecute, telemetry.SpanContract} {
		s := rcv.Named(phase, tracetest.Attr(second, "starplan.run_id"))
		require.Len(t, s, 1, phase)
		assert.Equal(t, second.SpanId, s[0].ParentSpanId, phase)
	}
	check = rcv.Named(telemetry.SpanCheck, tracetest.Attr(second, "starplan.run_id"))
	phases := rcv.Children(check[0])
	assert.Equal(t, []string{telemetry.SpanExtract, telemetry.SpanWorkerWait, telemetry.SpanWorkerSetup, telemetry.SpanRewrite, telemetry.SpanStaticCheck}, tracetest.Names(phases))
	at := check[0].StartTimeUnixNano
	for _, p := range phases {
		assert.LessOrEqual(t, at, p.StartTimeUnixNano, "%s after the phase before it", p.Name)
		at = p.EndTimeUnixNano
	}
	assert.LessOrEqual(t, at, check[0].EndTimeUnixNano, "the phases end inside the check")
	execute := rcv.Named(telemetry.SpanExecute, tracetest.Attr(second, "starplan.run_id"))
	assert.LessOrEqual(t, check[0].EndTimeUnixNano, execute[0].StartTimeUnixNano, "the run after its check")
}

// Without OTEL_* nothing is started: no observer, no exporter.
func TestTracesAreOffUnlessOTELAsks(t *testing.T) {
	t.Parallel()
	for env, on := range map[string]bool{"": false, "OTEL_TRACES_EXPORTER=none OTEL_EXPORTER_OTLP_ENDPOINT=http://x": false,
		"OTEL_SDK_DISABLED=true OTEL_TRACES_EXPORTER=otlp": false, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://x": true, "OTEL_TRACES_EXPORTER=otlp": true} {
		vars := map[string]string{}
		for _, kv := range strings.Fields(env) {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
		assert.Equal(t, on, telemetry.TracesConfigured(func(k string) string { return vars[k] }), env)
	}
}

// exec --apply: the apply's span is a child of the run's (no caller's span to join).
func TestExecApplyTracesTheApplyUnderTheRun(t *testing.T) {
	t.Parallel()
	rcv := tracetest.NewReceiver(t)
	var out, errb bytes.Buffer
	ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb,
		Getenv: func(k string) string {
			return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.URL + "/v1/traces"}[k]
		}}
	code := Main([]string{"--db", newSession(t).dir, "--in-process", "exec", "--apply", example("02_purchase_wayfarer.star")}, ios)
	require.Equal(t, ExitOK, code, out.String()+errb.String())

	run := rcv.Named(telemetry.SpanRun, "")
	require.Len(t, run, 1)
	apply := rcv.Named(telemetry.SpanApply, tracetest.Attr(run[0], "starplan.run_id"))
	require.Len(t, apply, 1)
	assert.Equal(t, run[0].TraceId, apply[0].TraceId, "the run's trace")
	assert.Equal(t, run[0].SpanId, apply[0].ParentSpanId, "a child of the run's span")
	assert.Equal(t, "applied", tracetest.Attr(apply[0], "starplan.state"))
}

// An ask whose model call fails leaves no run, so no run span: the call is a starplan.model span
// in error, with the error's kind. Not parallel: the model's spans go through the global tracer
// provider, which each traced command sets.
func TestAskTracesAFailedModelCall(t *testing.T) {
	rcv := tracetest.NewReceiver(t)
	srv := llmtest.NewServer(t, llmtest.Always(llmtest.Status(401)))
	env := map[string]string{"OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": llmtest.APIKey, "STARPLAN_MODEL": llmtest.Model, "NO_COLOR": "1",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}
	var out, errb bytes.Buffer
	ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(k string) string { return env[k] }}
	code := Main([]string{"--db", newSession(t).dir, "--in-process", "ask", "Purchase 3 Wayfarer sunglasses for customer Alice."}, ios)
	require.Equal(t, ExitModel, code, out.String()+errb.String())

	calls := rcv.Named(telemetry.SpanModel, "")
	require.Len(t, calls, 1, "the failed call's span, flushed before the command returned")
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, calls[0].GetStatus().GetCode())
	assert.Equal(t, "auth", tracetest.Attr(calls[0], "error.type"))
	assert.Equal(t, llmtest.Model, tracetest.Attr(calls[0], "gen_ai.request.model"))
	assert.Empty(t, rcv.Named(telemetry.SpanRun, ""), "no run")
}
