package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/llm"
)

// TraceModel returns next with its failed calls traced. A model call that fails leaves no run
// behind (engine.Ask returns a *engine.ModelError), so no lifecycle event tells of it: it is a
// starplan.model span of its own here, a child of the span in the call's context (a caller's
// traceparent), with an error status, the model's name and the error's kind (error.type, as
// ModelErrorKind classifies it). A call that succeeds is left to its run's span (the started
// event's starplan.model child), so it is not traced twice. tp nil: the global provider, looked
// up at each call (StartTracing sets it; with traces off it is a no-op one, but then a caller
// need not wrap at all).
func TraceModel(tp trace.TracerProvider, model string, next engine.Model) engine.Model {
	return &tracedModel{tp: tp, model: model, next: next}
}

type tracedModel struct {
	tp    trace.TracerProvider
	model string
	next  engine.Model
}

func (m *tracedModel) Complete(ctx context.Context, msgs []llm.Message) (llm.Reply, error) {
	began := time.Now()
	rep, err := m.next.Complete(ctx, msgs)
	if err == nil {
		return rep, nil
	}
	tp := m.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	_, span := tp.Tracer("github.com/starplan/starplan/telemetry").Start(ctx, SpanModel, trace.WithTimestamp(began), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", m.model),
			attribute.String("error.type", ModelErrorKind(err))))
	span.SetStatus(codes.Error, "the model call failed: "+ModelErrorKind(err))
	span.End()
	return rep, err
}
