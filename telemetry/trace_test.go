package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	sdktracetest "go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
)

// An apply starplan itself failed (the store's error: the run stays pending) is an apply span in
// error, a child of its run's span, with the error recorded and the step the store failed at;
// before, it made no span at all (the failed event was taken for a dry run's and its run was
// gone). The engine's side of such a failure cannot be made with a real store without damaging
// it, so the events are the engine's, written here.
func TestAFailedApplyIsASpanInError(t *testing.T) {
	exp := sdktracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := NewTracing(tp)
	ctx := context.Background()
	at := time.Now()
	tr.Observe(ctx, engine.Event{Type: engine.EventStarted, Time: at, RunID: "r1", Origin: "exec"})
	tr.Observe(ctx, engine.Event{Type: engine.EventPending, Time: at.Add(time.Millisecond), RunID: "r1", Origin: "exec",
		Outcome: engine.OutcomeOK, State: engine.StatePending, Duration: time.Millisecond})
	failure := errors.New("applying run r1: apply: disk full")
	tr.Observe(ctx, engine.Event{Type: engine.EventFailed, Time: at.Add(5 * time.Millisecond), RunID: "r1", Origin: "apply",
		Outcome: engine.OutcomeOK, State: engine.StatePending, Duration: 2 * time.Millisecond, Message: failure.Error(), Err: failure,
		ApplySteps: []engine.ApplyStep{{Step: store.StepCheck, Duration: 100 * time.Microsecond, Result: "ok"},
			{Step: store.StepCommit, Offset: time.Millisecond, Duration: 500 * time.Microsecond, Result: "error"}}})

	byName := map[string]sdktracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	run, apply := byName[SpanRun], byName[SpanApply]
	require.NotEmpty(t, apply.Name, "the failed apply's span")
	assert.Equal(t, run.SpanContext.SpanID(), apply.Parent.SpanID(), "a child of its run's span")
	assert.Equal(t, codes.Error, apply.Status.Code)
	require.NotEmpty(t, apply.Events, "the error recorded")
	assert.Equal(t, "exception", apply.Events[0].Name)
	commit := byName[SpanCommit]
	assert.Equal(t, apply.SpanContext.SpanID(), commit.Parent.SpanID())
	assert.Equal(t, codes.Error, commit.Status.Code, "the step the store failed at")
	assert.Equal(t, codes.Unset, byName[SpanConflictCheck].Status.Code)
	assert.Equal(t, apply.StartTime.Add(time.Millisecond), commit.StartTime)
}
