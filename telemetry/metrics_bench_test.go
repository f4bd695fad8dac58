package telemetry

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/bolt"
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

// BenchmarkDryRunMetrics is the overhead of the metrics observer on a dry run (the lab's
// two-item purchase through Engine.Run, audit record included), as a paired comparison: every
// iteration runs the purchase once on an engine without observers and once on one whose runs
// feed Metrics (in alternating order), so both see the same machine state. It reports each
// side's mean and the overhead in percent. Target: none measurable (the observer's work is a
// few atomic adds and map reads under a read lock per step).
//
//	go test ./telemetry -run '^$' -bench DryRunMetrics -benchtime 5000x -count 6
func BenchmarkDryRunMetrics(b *testing.B) {
	m := NewMetrics(MetricsOptions{Domain: "inventory"})
	engines := [2]*engine.Engine{demoEngine(b, nil), demoEngine(b, m.Observe)} // off, on
	reply, err := os.ReadFile(filepath.Join("..", "testdata", "examples", "03_two_item_order.star"))
	require.NoError(b, err)
	req := engine.Request{Reply: string(reply), UserRequest: "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses.", Origin: "bench"}
	ctx := context.Background()
	for _, e := range engines {
		res, err := e.Run(ctx, req)
		require.NoError(b, err)
		require.True(b, res.Pending, res.Diagnostics.String())
	}
	var spent [2]time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for j := range 2 {
			side := (n + j) % 2
			start := time.Now()
			if _, err := engines[side].Run(ctx, req); err != nil {
				b.Fatal(err)
			}
			spent[side] += time.Since(start)
		}
		n++
	}
	off, on := float64(spent[0])/float64(n), float64(spent[1])/float64(n)
	b.ReportMetric(off/1e3, "off-µs")
	b.ReportMetric(on/1e3, "on-µs")
	b.ReportMetric(100*(on/off-1), "overhead-%")
}

// BenchmarkObserve is the metrics observer alone, over the steps of one accepted dry run.
func BenchmarkObserve(b *testing.B) {
	m := NewMetrics(MetricsOptions{Domain: "inventory"})
	steps := []engine.Event{
		{Type: engine.EventStarted, RunID: "r", Origin: "exec"},
		{Type: engine.EventChecked, RunID: "r", Origin: "exec"},
		{Type: engine.EventRan, RunID: "r", Origin: "exec", Outcome: engine.OutcomeOK, Duration: time.Millisecond, Steps: 100},
		{Type: engine.EventContract, RunID: "r", Origin: "exec", Outcome: engine.OutcomeOK, Duration: 50 * time.Microsecond},
		{Type: engine.EventPending, RunID: "r", Origin: "exec", Outcome: engine.OutcomeOK, State: engine.StatePending, Duration: 2 * time.Millisecond},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range steps {
			m.Observe(ctx, ev)
		}
	}
}
