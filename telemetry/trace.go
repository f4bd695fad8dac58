// Package telemetry makes starplan's runs visible: OpenTelemetry traces (trace*.go) built from
// the engine's lifecycle hook (engine.Observer), so every transport (CLI, HTTP, MCP) gets them.
package telemetry

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
)

// TracesConfigured reports whether the standard OTEL_* variables ask for traces: an OTLP
// endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT) or
// OTEL_TRACES_EXPORTER=otlp, and neither OTEL_TRACES_EXPORTER=none nor OTEL_SDK_DISABLED=true.
func TracesConfigured(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Tracing turns the engine's lifecycle events into spans: a span per run (starplan.run) with a
// child per phase (check, execute, contract), and a span per apply or conflict. A run's span is a
// child of the span in the context of the call that started it (a caller's traceparent).
type Tracing struct {
	tp     *sdktrace.TracerProvider // nil when the provider is not ours to shut down
	tracer trace.Tracer
	mu     sync.Mutex
	runs   map[string]trace.Span // runs started and not yet at their verdict
	// pending are the span contexts of the last runs that ended pending (at most keepPending, the
	// oldest forgotten first), so an apply with no caller's span joins its run's trace.
	pending map[string]trace.SpanContext
	order   []string
}

// keepPending is how many pending runs' span contexts Tracing keeps for their applies.
const keepPending = 1024

// StartTracing starts tracing as the OTEL_* variables say, exporting OTLP over HTTP; nil (and no
// cost: register no observer) when they do not ask for traces. It sets the global tracer
// provider and the W3C trace-context propagator, so otelhttp clients join the run's trace.
// getenv is the environment (the CLI's, which a relayed command gets from its client); the
// exporter reads the other OTEL_EXPORTER_OTLP_* variables (headers, timeout) from the process's.
func StartTracing(ctx context.Context, getenv func(string) string) (*Tracing, error) {
	if !TracesConfigured(getenv) {
		return nil, nil
	}
	var opts []otlptracehttp.Option
	if u := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); u != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	} else if u := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); u != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(u, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("starting the OTLP trace exporter (check OTEL_EXPORTER_OTLP_*): %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(serviceName(getenv))))
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t := NewTracing(tp)
	t.tp = tp
	return t, nil
}

// serviceName is OTEL_SERVICE_NAME, or starplan. (resource.Default reads it too; ours is the
// fallback that replaces the SDK's unknown_service.)
func serviceName(getenv func(string) string) string {
	if s := getenv("OTEL_SERVICE_NAME"); s != "" {
		return s
	}
	return "starplan"
}

// NewTracing traces runs with tp's tracer (a test's provider).
func NewTracing(tp trace.TracerProvider) *Tracing {
	return &Tracing{tracer: tp.Tracer("github.com/starplan/starplan/telemetry"), runs: map[string]trace.Span{}, pending: map[string]trace.SpanContext{}}
}

// Shutdown flushes the spans not yet exported and stops the exporter; nil-safe.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// The names of the spans.
const (
	SpanRun     = "starplan.run"
	SpanCheck   = "starplan.check"   // extract, a worker's wait, rewrite and check: its children
	SpanExecute = "starplan.execute" // the plan ran (isolated: its result's trip back included)
	// The children of a check's span, the runner's phases up to the run (engine.Event.Phases),
	// in order: finding the program in the reply, waiting for a free worker and the worker
	// readying itself (an isolated run: the worker rewrites and checks the program), the text checks and Python-ism rewrite, the
	// static check (parse, checks, memory guards, compile; a lookup when the check cache
	// answered). One that did not happen has no span.
	SpanExtract     = "starplan.check.extract"
	SpanWorkerWait  = "starplan.check.worker_wait"
	SpanWorkerSetup = "starplan.check.worker_setup" // the worker readying itself: limits, a new domain's environment
	SpanRewrite     = "starplan.check.rewrite"
	SpanStaticCheck = "starplan.check.static"
	SpanDiff        = "starplan.diff"     // the change set: each changed row before and after (before contract)
	SpanContract    = "starplan.contract" // the output contract and the policy
	SpanApply       = "starplan.apply"    // an apply: its conflict check and commit
	// The children of an apply's span, its steps in the store (engine.Event.ApplySteps), in
	// order: the conflict check (under bbolt, once before the policy and once, under the write
	// lock, after), the domain's rules against the committed rows, the commit.
	SpanConflictCheck = "starplan.apply.conflict_check"
	SpanApplyPolicy   = "starplan.apply.policy"
	SpanCommit        = "starplan.apply.commit"
	SpanModel         = "starplan.model" // the model call that wrote the run's plan (ask), before its check
	SpanReject        = "starplan.reject"
)

// Observe is the engine.Observer that makes the spans.
func (t *Tracing) Observe(ctx context.Context, ev engine.Event) {
	switch {
	case ev.Type == engine.EventStarted:
		// A run whose plan a model wrote (ask) begins with that call: its span covers the call,
		// a child span of its own, ended as the run starts.
		start, call := ev.Time, time.Duration(0)
		if ev.Model != nil {
			call = time.Duration(ev.Model.LatencyMS * float64(time.Millisecond))
			start = ev.Time.Add(-call)
		}
		_, span := t.tracer.Start(ctx, SpanRun, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attribute.String("starplan.run_id", ev.RunID), attribute.String("starplan.origin", ev.Origin)))
		if m := ev.Model; m != nil {
			_, ms := t.tracer.Start(trace.ContextWithSpan(ctx, span), SpanModel, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(
					attribute.String("gen_ai.operation.name", "chat"),
					attribute.String("gen_ai.request.model", m.Model),
					attribute.Int("gen_ai.usage.input_tokens", m.PromptTokens),
					attribute.Int("gen_ai.usage.output_tokens", m.CompletionTokens),
					attribute.Int("starplan.attempt", m.Attempt),
					attribute.String("starplan.run_id", ev.RunID)))
			if m.Replan > 0 {
				ms.SetAttributes(attribute.Int("starplan.replan", m.Replan))
			}
			ms.End(trace.WithTimestamp(ev.Time))
		}
		if ev.Domain != "" {
			span.SetAttributes(attribute.String("starplan.domain", ev.Domain))
		}
		if ev.ParentRunID != "" {
			span.SetAttributes(attribute.String("starplan.parent_run_id", ev.ParentRunID))
		}
		t.mu.Lock()
		t.runs[ev.RunID] = span
		t.mu.Unlock()
		if sc := span.SpanContext(); sc.IsSampled() {
			engine.NoteTraceID(ctx, sc.TraceID().String())
		}
	case ev.Type == engine.EventChecked, ev.Type == engine.EventRan, ev.Type == engine.EventContract:
		t.mu.Lock()
		run := t.runs[ev.RunID]
		t.mu.Unlock()
		if run == nil {
			return
		}
		pctx := trace.ContextWithSpan(ctx, run)
		start := ev.Time.Add(-ev.Duration)
		switch {
		case ev.Type == engine.EventChecked && ev.Outcome == engine.OutcomeCheckFailed:
			// The runner's call was the check (its Duration).
			cctx, span := t.tracer.Start(pctx, SpanCheck, trace.WithTimestamp(start), trace.WithAttributes(attrs(ev)...))
			t.checkPhases(cctx, start, ev)
			end(span, ev)
		case ev.Type == engine.EventRan:
			// The runner's call (its Duration) was the check, then the run: checked, which came
			// before, said nothing of its time.
			checked := min(ev.Phases.Checked(), ev.Duration)
			cctx, span := t.tracer.Start(pctx, SpanCheck, trace.WithTimestamp(start),
				trace.WithAttributes(attrs(engine.Event{Type: engine.EventChecked, RunID: ev.RunID, Origin: ev.Origin})...))
			t.checkPhases(cctx, start, ev)
			span.End(trace.WithTimestamp(start.Add(checked)))
			_, span = t.tracer.Start(pctx, SpanExecute, trace.WithTimestamp(start.Add(checked)), trace.WithAttributes(attrs(ev)...))
			end(span, ev)
		case ev.Type == engine.EventContract:
			_, diff := t.tracer.Start(pctx, SpanDiff, trace.WithTimestamp(start.Add(-ev.Diff)),
				trace.WithAttributes(attribute.String("starplan.run_id", ev.RunID), attribute.Int("starplan.rows_written", ev.RowsWritten)))
			diff.End(trace.WithTimestamp(start))
			_, span := t.tracer.Start(pctx, SpanContract, trace.WithTimestamp(start), trace.WithAttributes(attrs(ev)...))
			end(span, ev)
		}
	case ev.Type == engine.EventApplied, ev.Type == engine.EventConflict,
		ev.Type == engine.EventFailed && ev.State == engine.StatePending: // an apply starplan itself failed: the run stays pending
		t.mu.Lock()
		run, ok := t.pending[ev.RunID]
		t.mu.Unlock()
		var opts []trace.SpanStartOption
		if ok && trace.SpanContextFromContext(ctx).IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: run})) // the caller's trace, linked to the run's
		} else if ok {
			ctx = trace.ContextWithSpanContext(ctx, run) // no caller's span: a child of the run's
		}
		start := ev.Time.Add(-ev.Duration)
		actx, span := t.tracer.Start(ctx, SpanApply, append(opts, trace.WithTimestamp(start), trace.WithAttributes(attrs(ev)...))...)
		span.SetAttributes(attribute.String("starplan.state", ev.State))
		t.applySteps(actx, start, ev)
		if ev.Err != nil {
			span.RecordError(ev.Err)
		}
		end(span, ev)
	case ev.Verdict() || ev.Type == engine.EventFailed:
		t.mu.Lock()
		run := t.runs[ev.RunID]
		delete(t.runs, ev.RunID)
		if run != nil && ev.Type == engine.EventPending {
			t.keep(ev.RunID, run.SpanContext())
		}
		t.mu.Unlock()
		if run == nil {
			return
		}
		run.SetAttributes(attrs(ev)...)
		run.SetAttributes(attribute.String("starplan.state", ev.State))
		if ev.Err != nil {
			run.RecordError(ev.Err)
		}
		end(run, ev)
	case ev.Type == engine.EventRejected:
		_, span := t.tracer.Start(ctx, SpanReject, trace.WithTimestamp(ev.Time), trace.WithAttributes(attrs(ev)...))
		span.End(trace.WithTimestamp(ev.Time))
	}
}

// checkPhases makes a child span of the check's (in ctx, begun at start) for each of the
// runner's phases up to the run that happened, one after the other.
func (t *Tracing) checkPhases(ctx context.Context, start time.Time, ev engine.Event) {
	at := start
	for _, p := range [...]struct {
		name string
		d    time.Duration
	}{{SpanExtract, ev.Phases.Extract}, {SpanWorkerWait, ev.Phases.Wait}, {SpanWorkerSetup, ev.Phases.Setup}, {SpanRewrite, ev.Phases.Rewrite}, {SpanStaticCheck, ev.Phases.Check}} {
		if p.d <= 0 {
			continue
		}
		_, span := t.tracer.Start(ctx, p.name, trace.WithTimestamp(at), trace.WithAttributes(attribute.String("starplan.run_id", ev.RunID)))
		at = at.Add(p.d)
		span.End(trace.WithTimestamp(at))
	}
}

// stepSpans names the span of each step of an apply in the store.
var stepSpans = map[string]string{store.StepCheck: SpanConflictCheck, store.StepVerify: SpanApplyPolicy, store.StepCommit: SpanCommit}

// applySteps makes a child span of the apply's (in ctx, begun at start) for each of its steps in
// the store, at its time; a step that ended the apply (a conflict, a rule's refusal, a failure)
// is an error with the apply's message.
func (t *Tracing) applySteps(ctx context.Context, start time.Time, ev engine.Event) {
	for _, st := range ev.ApplySteps {
		name := stepSpans[st.Step]
		if name == "" {
			name = SpanApply + "." + st.Step
		}
		at := start.Add(st.Offset)
		_, span := t.tracer.Start(ctx, name, trace.WithTimestamp(at),
			trace.WithAttributes(attribute.String("starplan.run_id", ev.RunID), attribute.String("starplan.outcome", st.Result)))
		if st.Result != "ok" {
			span.SetStatus(codes.Error, ev.Message)
		}
		span.End(trace.WithTimestamp(at.Add(st.Duration)))
	}
}

// keep remembers a pending run's span context; t.mu is held.
func (t *Tracing) keep(runID string, sc trace.SpanContext) {
	if _, ok := t.pending[runID]; ok {
		return
	}
	if len(t.order) >= keepPending {
		delete(t.pending, t.order[0])
		t.order = t.order[1:]
	}
	t.pending[runID] = sc
	t.order = append(t.order, runID)
}

// end ends span at ev's time, an error when the step refused or failed.
func end(span trace.Span, ev engine.Event) {
	if ev.Err != nil || ev.Type == engine.EventConflict || ev.Type == engine.EventFailed ||
		ev.Outcome != "" && ev.Outcome != engine.OutcomeOK {
		span.SetStatus(codes.Error, ev.Message)
	}
	span.End(trace.WithTimestamp(ev.Time))
}

// attrs are ev's attributes: the run, who made it, and what the step found.
func attrs(ev engine.Event) []attribute.KeyValue {
	kv := []attribute.KeyValue{attribute.String("starplan.run_id", ev.RunID)}
	if ev.Origin != "" {
		kv = append(kv, attribute.String("starplan.origin", ev.Origin))
	}
	if ev.Outcome != "" {
		kv = append(kv, attribute.String("starplan.outcome", string(ev.Outcome)))
	}
	if ev.Steps != 0 {
		kv = append(kv, attribute.Int64("starplan.steps", int64(ev.Steps)))
	}
	if ev.Limit != "" {
		kv = append(kv, attribute.String("starplan.limit", string(ev.Limit)))
	}
	if ev.RowsRead != 0 {
		kv = append(kv, attribute.Int("starplan.rows_read", ev.RowsRead))
	}
	if ev.RowsWritten != 0 {
		kv = append(kv, attribute.Int("starplan.rows_written", ev.RowsWritten))
	}
	if ev.Scans != 0 {
		kv = append(kv, attribute.Int("starplan.scans", ev.Scans))
	}
	if len(ev.Codes) > 0 {
		kv = append(kv, attribute.StringSlice("starplan.codes", ev.Codes))
	}
	if ev.By != "" {
		kv = append(kv, attribute.String("starplan.by", ev.By))
	}
	if ev.Rule != "" {
		kv = append(kv, attribute.String("starplan.rule", ev.Rule))
	}
	return kv
}
