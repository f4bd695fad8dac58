package telemetry

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/telemetry/tracetest"
)

// demoEngine is an engine over a fresh demo store, plans run in process; observe, when set,
// hears its runs.
func demoEngine(b *testing.B, observe engine.Observer) *engine.Engine {
	b.Helper()
	st, err := bolt.Open(b.TempDir(), bolt.Options{})
	require.NoError(b, err)
	e, err := engine.New(st, engine.Options{Observe: observe})
	require.NoError(b, err)
	b.Cleanup(func() {
		e.Close()
		st.Close()
	})
	return e
}

// BenchmarkDryRunMetrics is the overhead of serve's observers on a dry run (the lab's two-item
// purchase through Engine.Run, audit record included), as a paired comparison on one engine:
// every iteration runs the purchase with no observer, with the metrics observer, and with the
// log observer (info, text, to io.Discard), in rotating order, the observer added and removed
// outside the timed call, so all sides see the same store and machine state. It reports each
// side's mean and the observers' overhead in percent. Target: none measurable for the metrics
// (their work is a few atomic adds and map reads under a read lock per step, BenchmarkObserve).
//
//	go test ./telemetry -run '^$' -bench DryRunMetrics -benchtime 3000x -count 6
func BenchmarkDryRunMetrics(b *testing.B) {
	m := NewMetrics(MetricsOptions{Domain: "inventory"})
	logger, err := NewLogger(io.Discard, "text", "info")
	require.NoError(b, err)
	logs := NewLogs(logger)
	e := demoEngine(b, nil)
	sides := []engine.Observer{nil, m.Observe, logs.Observe} // off, metrics, logs
	reply, err := os.ReadFile(filepath.Join("..", "testdata", "examples", "03_two_item_order.star"))
	require.NoError(b, err)
	req := engine.Request{Reply: string(reply), UserRequest: "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses.", Origin: "bench"}
	ctx := context.Background()
	res, err := e.Run(ctx, req)
	require.NoError(b, err)
	require.True(b, res.Pending, res.Diagnostics.String())
	spent := make([]time.Duration, len(sides))
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for j := range sides {
			side := (n + j) % len(sides)
			stop := func() {}
			if sides[side] != nil {
				stop = e.Observe(sides[side])
			}
			start := time.Now()
			if _, err := e.Run(ctx, req); err != nil {
				b.Fatal(err)
			}
			spent[side] += time.Since(start)
			stop()
		}
		n++
	}
	off := float64(spent[0]) / float64(n)
	b.ReportMetric(off/1e3, "off-µs")
	b.ReportMetric(100*(float64(spent[1])/float64(n)/off-1), "metrics-overhead-%")
	b.ReportMetric(100*(float64(spent[2])/float64(n)/off-1), "logs-overhead-%")
}

// BenchmarkObserve is each observer alone, over the steps of one accepted dry run: the metrics,
// the log at info (one line, text, to io.Discard), and the traces (the spans made and ended, each
// handed synchronously to an exporter that drops it: the caller's share of BenchmarkDryRunTraces,
// without the OTLP encoding and post the batcher does in its own goroutine).
func BenchmarkObserve(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracing := NewTracing(tp)
	m := NewMetrics(MetricsOptions{Domain: "inventory"})
	logger, err := NewLogger(io.Discard, "text", "info")
	require.NoError(b, err)
	logs := NewLogs(logger)
	steps := []engine.Event{
		{Type: engine.EventStarted, RunID: "r", Origin: "exec"},
		{Type: engine.EventChecked, RunID: "r", Origin: "exec"},
		{Type: engine.EventRan, RunID: "r", Origin: "exec", Outcome: engine.OutcomeOK, Duration: time.Millisecond, Steps: 100},
		{Type: engine.EventContract, RunID: "r", Origin: "exec", Outcome: engine.OutcomeOK, Duration: 50 * time.Microsecond},
		{Type: engine.EventPending, RunID: "r", Origin: "exec", Outcome: engine.OutcomeOK, State: engine.StatePending, Duration: 2 * time.Millisecond},
	}
	ctx := context.Background()
	for _, side := range []struct {
		name string
		obs  engine.Observer
	}{{"metrics", m.Observe}, {"logs", logs.Observe}, {"traces", tracing.Observe}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, ev := range steps {
					side.obs(ctx, ev)
				}
			}
		})
	}
}

// BenchmarkDryRunTraces is what traces add to a dry run (the purchase of BenchmarkDryRunMetrics),
// paired the same way on one engine: every iteration runs it with no observer and with the
// tracing observer, exporting OTLP/HTTP through the SDK's batching processor to a receiver in
// this process (tracetest), in alternating order. It reports the untraced mean and what the
// traces add, per run in µs and in percent. The export happens in the batcher's goroutine, so on
// a busy machine part of its cost lands on the other side's runs too.
//
//	go test ./telemetry -run '^$' -bench DryRunTraces -benchtime 2000x -count 6
//
// Figures (2026-11-28, 2 cores shared with other builds, so noisy): off 763 µs, traces add a
// median 156 µs a run (8 to 382 µs over 6 runs of 1000), the receiver's decoding in this process
// included; of that the observer's own share on the run's goroutine is about 12 µs and 64
// allocations (BenchmarkObserve/traces).
func BenchmarkDryRunTraces(b *testing.B) {
	rcv := tracetest.NewReceiver(b)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.URL+"/v1/traces"))
	require.NoError(b, err)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := NewTracing(tp)
	e := demoEngine(b, nil)
	reply, err := os.ReadFile(filepath.Join("..", "testdata", "examples", "03_two_item_order.star"))
	require.NoError(b, err)
	req := engine.Request{Reply: string(reply), UserRequest: "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses.", Origin: "bench"}
	ctx := context.Background()
	res, err := e.Run(ctx, req)
	require.NoError(b, err)
	require.True(b, res.Pending, res.Diagnostics.String())
	var spent [2]time.Duration // off, traces
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for j := range 2 {
			side := (n + j) % 2
			stop := func() {}
			if side == 1 {
				stop = e.Observe(tr.Observe)
			}
			start := time.Now()
			if _, err := e.Run(ctx, req); err != nil {
				b.Fatal(err)
			}
			spent[side] += time.Since(start)
			stop()
		}
		n++
	}
	require.NoError(b, tp.ForceFlush(ctx))
	require.NotEmpty(b, rcv.Named(SpanRun, ""), "the spans reached the receiver")
	off, on := float64(spent[0])/float64(n), float64(spent[1])/float64(n)
	b.ReportMetric(off/1e3, "off-µs")
	b.ReportMetric((on-off)/1e3, "traces-added-µs")
	b.ReportMetric(100*(on/off-1), "traces-overhead-%")
}

// discard is a span exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
