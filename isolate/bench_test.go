package isolate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// The speed targets of isolation are carried by these benchmarks, never by tests:
//
//	go test ./isolate -run '^$' -bench . -count 5
//
// With a warm pool, the lab's two-item purchase plan costs at most 300 µs more at the median
// than in process (compare p50-µs of BenchmarkTwoItemOrder/isolated and /in_process); a cold
// worker starts in at most 20 ms; the 100k-row search + sum plan isolated takes at most 1.5
// times as long as in process.

// runner is what the benchmarks compare: the pool, or engine.InProcess.
func runners(b *testing.B, st *store.Store) map[string]engine.Runner {
	return map[string]engine.Runner{
		"in_process": engine.InProcess(engine.NewEnv(engine.Schemas(st))),
		"isolated":   newPool(b, Options{Warm: 1, MaxWorkers: 1, Env: benchEnv()}),
	}
}

// loop runs job on r until the benchmark ends, each time on a fresh stage, and reports the
// median run in µs (p50-µs) besides the mean.
func loop(b *testing.B, st *store.Store, r engine.Runner, j engine.Job) {
	j.View = st.Stage()
	res := r.Run(bg, j) // warm up: the worker's environment for these schemas
	require.Equal(b, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	var times []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		j.View = st.Stage()
		start := time.Now()
		r.Run(bg, j)
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1000, "p50-µs")
}

func BenchmarkTwoItemOrder(b *testing.B) {
	src, err := os.ReadFile("../testdata/examples/03_two_item_order.star")
	require.NoError(b, err)
	st := openStore(b)
	j := engine.Job{Reply: string(src), Inputs: map[string]any{"user_request": "3 classic and 1 aviator"},
		Now: fixedNow, Globals: []string{"STATUS", "answer_text"}}
	for _, name := range []string{"in_process", "isolated"} {
		b.Run(name, func(b *testing.B) { loop(b, st, runners(b, st)[name], j) })
	}
}

// BenchmarkColdStart is the start of one worker, until it reports ready.
func BenchmarkColdStart(b *testing.B) {
	p := newPool(b, Options{Warm: 1, MaxWorkers: 2})
	b.ResetTimer()
	for b.Loop() {
		p.slots <- struct{}{}
		w, err := p.start()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		p.discard(w, killDiscard)
		<-w.exited
		b.StartTimer()
	}
}

// BenchmarkSearchSum100k: a dict-filtered search of a 100,000-row inventory plus a Starlark sum
// over the matches (about 25,000 rows cross the pipe).
func BenchmarkSearchSum100k(b *testing.B) {
	st := bigStore(b, 100_000)
	j := engine.Job{Reply: `rows = inventory_tbl.search({"price": {"$lt": 100}, "quantity_in_stock": {"$gt": 10}})
total = sum([r["price"] for r in rows])
answer_text = "We have %d styles worth $%d." % (len(rows), total)
STATUS = "success"
`, Now: fixedNow, Globals: []string{"answer_text"}}
	for _, name := range []string{"in_process", "isolated"} {
		b.Run(name, func(b *testing.B) { loop(b, st, runners(b, st)[name], j) })
	}
}

// bigStore opens a store whose inventory has n rows (the demo's six, then generated ones), as
// engine's benchmark does.
func bigStore(b *testing.B, n int) *store.Store {
	b.Helper()
	st := openStore(b)
	rng := rand.New(rand.NewSource(1))
	rows := make([]map[string]any, 0, n)
	for i := 7; i <= n; i++ {
		rows = append(rows, map[string]any{
			"item_id":           fmt.Sprintf("SG%06d", i),
			"name":              fmt.Sprintf("Style %d", i),
			"description":       "Generated frames for the benchmark.",
			"quantity_in_stock": rng.Intn(40),
			"price":             float64(20 + rng.Intn(180)),
		})
	}
	// In chunks: the store's JSON import locates each record's line from the start of the input.
	for chunk := range slices.Chunk(rows, 5000) {
		var buf bytes.Buffer
		require.NoError(b, json.NewEncoder(&buf).Encode(chunk))
		_, err := st.Import(bg, "inventory", &buf, store.JSON, store.Upsert)
		require.NoError(b, err)
	}
	return st
}

func benchEnv() []string {
	if v := os.Getenv("ISOLATE_BENCH_ENV"); v != "" {
		return []string{v}
	}
	return nil
}

// benchRows are 32,000 rows shaped like the inventory's, about what the 100k search returns.
func benchRows() ([]table.Row, []string) {
	rows := make([]table.Row, 32_000)
	for i := range rows {
		rows[i] = table.Row{"item_id": fmt.Sprintf("SG%06d", i), "name": fmt.Sprintf("Style %d", i),
			"description": "Generated frames for the benchmark.", "quantity_in_stock": int64(i % 40), "price": float64(20 + i%80)}
	}
	return rows, []string{"item_id", "name", "description", "quantity_in_stock", "price"}
}

// BenchmarkRowsEncode is the pool's cost per row of a search's answer.
func BenchmarkRowsEncode(b *testing.B) {
	rows, shape := benchRows()
	var e encoder
	for b.Loop() {
		e.reset(msgReply)
		if err := e.rows(rows, shape); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rows)), "ns/row")
}

// BenchmarkRowsDecode is the worker's cost per row of a search's answer: most of it is the
// one Go map per row that table.Row is.
func BenchmarkRowsDecode(b *testing.B) {
	rows, shape := benchRows()
	var e encoder
	e.reset(msgReply)
	require.NoError(b, e.rows(rows, shape))
	b.ReportAllocs()
	for b.Loop() {
		d := newDecoder(e.buf[5:])
		if d.rows(); d.err != nil {
			b.Fatal(d.err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rows)), "ns/row")
}
