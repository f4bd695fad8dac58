package isolate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// The speed targets of isolation are carried by these benchmarks, never by tests:
//
//	go test ./isolate -run '^$' -bench . -count 5
//
// With a warm pool, a new trivial plan costs at most 25 µs more at the median than in process
// (BenchmarkRoundTrip's µs-over-inproc: 29 µs on this 2-core machine under load, 21 µs when
// quieter; most of it is the kernel waking the worker on the other CPU), and the lab's two-item
// purchase plan at most 300 µs more (compare p50-µs of BenchmarkTwoItemOrder/isolated and
// /in_process); a cold
// worker starts in at most 20 ms; the 100k-row search + sum plan isolated takes at most 1.5
// times as long as in process (/isolated: the worker holds the rows from earlier runs;
// /isolated_uncached: every row crosses whole, as in a pool's first search of them).
// cpu-µs/op adds the workers' processor time to this process's: on a shared machine it is
// steadier than wall-clock time. To profile a worker, set ISOLATE_WORKER_CPUPROFILE to a
// named pipe (see profileEnv).

// runners are what the benchmarks compare: the pool, or the environment itself (in process).
func runners(b *testing.B, st *bolt.Store) map[string]sandbox.Runner {
	return map[string]sandbox.Runner{
		"in_process": mustEnv(b, st),
		"isolated":   newPool(b, Options{Warm: 1, MaxWorkers: 1}),
	}
}

// loop runs job on r until the benchmark ends, each time on a fresh stage, and reports the
// median run in µs (p50-µs) besides the mean.
func loop(b *testing.B, st *bolt.Store, r sandbox.Runner, j sandbox.Request) {
	j.View = st.Stage()
	res := r.Run(bg, j) // warm up: the worker's environment for these schemas
	require.Equal(b, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	var times []time.Duration
	cpu0 := cpuTime(b, r)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		j.View = st.Stage()
		start := time.Now()
		r.Run(bg, j)
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1000, "p50-µs")
	// Processor time of this process and of the pool's workers: on a shared machine it says
	// more than wall-clock time about what isolation costs.
	b.ReportMetric(float64((cpuTime(b, r)-cpu0).Microseconds())/float64(len(times)), "cpu-µs/op")
}

// cpuTime is the processor time used so far by this process and, for a pool, its workers.
func cpuTime(b *testing.B, r sandbox.Runner) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if p, ok := r.(*Pool); ok {
		p.mu.Lock()
		for w := range p.live {
			total += procCPU(w.cmd.Process.Pid)
		}
		p.mu.Unlock()
	}
	return total
}

// procCPU is a live process's user and system time, from /proc/<pid>/stat (in clock ticks of
// 10 ms; enough over a benchmark's thousands of runs).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func BenchmarkTwoItemOrder(b *testing.B) {
	src, err := os.ReadFile("../testdata/examples/03_two_item_order.star")
	require.NoError(b, err)
	st := openStore(b)
	j := sandbox.Request{Reply: string(src), Inputs: map[string]any{"user_request": "3 classic and 1 aviator"},
		Now: fixedNow, Globals: []string{"STATUS", "answer_text"}, Helpers: st.Domain().Definition[sandbox.HelpersFile]}
	for _, name := range []string{"in_process", "isolated"} {
		b.Run(name, func(b *testing.B) { loop(b, st, runners(b, st)[name], j) })
	}
}

// BenchmarkRoundTrip states the worker's round-trip target: a trivial plan (no table call)
// isolated costs at most 25 µs more at the median than in process. Each iteration runs the same
// new plan text (a literal varies, so no check cache answers: a model writes a new plan every
// time) in process and then isolated, alternating, so both medians come from the same moments
// of a shared machine; µs-over-inproc is their difference, p50-inproc-µs and p50-isolated-µs the
// medians themselves, and cpu-µs-over-inproc the processor time per run the worker round trip
// adds (this process's and the worker's).
//
//	go test ./isolate -run '^$' -bench BenchmarkRoundTrip -count 6
func BenchmarkRoundTrip(b *testing.B) {
	st := openStore(b)
	env := mustEnv(b, st)
	pool := newPool(b, Options{Warm: 1, MaxWorkers: 1})
	plan := func(i int) sandbox.Request {
		return sandbox.Request{
			Reply:  fmt.Sprintf("n = %d\nSTATUS = \"success\"\nanswer_text = \"plan %%d\" %% n\n", i),
			Inputs: map[string]any{"user_request": "a trivial plan"}, Now: fixedNow,
			Globals: []string{"STATUS", "answer_text"}, Helpers: st.Domain().Definition[sandbox.HelpersFile],
			View: st.Stage(),
		}
	}
	for _, r := range []sandbox.Runner{env, pool} { // warm up: the worker's environment
		res := r.Run(bg, plan(-1))
		require.Equal(b, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	}
	var in, iso []time.Duration
	var inCPU, isoCPU time.Duration
	// This process's processor time is read around each run (getrusage is exact and cheap); the
	// worker's only over the whole loop (/proc counts it in 10 ms ticks), all of it isolated.
	worker0 := cpuTime(b, pool) - cpuTime(b, env)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		for k, r := range []sandbox.Runner{env, pool} {
			j := plan(i)
			cpu0 := cpuTime(b, env)
			start := time.Now()
			res := r.Run(bg, j)
			took := time.Since(start)
			cpu := cpuTime(b, env) - cpu0
			if res.Outcome != sandbox.OutcomeOK {
				b.Fatal(res.Diagnostics.String())
			}
			if k == 0 {
				in, inCPU = append(in, took), inCPU+cpu
			} else {
				iso, isoCPU = append(iso, took), isoCPU+cpu
			}
		}
	}
	b.StopTimer()
	isoCPU += cpuTime(b, pool) - cpuTime(b, env) - worker0
	p50 := func(ts []time.Duration) float64 {
		slices.Sort(ts)
		return float64(ts[len(ts)/2].Nanoseconds()) / 1000
	}
	mean := func(ts []time.Duration) float64 {
		var t time.Duration
		for _, x := range ts {
			t += x
		}
		return float64(t.Nanoseconds()) / 1000 / float64(len(ts))
	}
	b.ReportMetric(mean(in), "mean-inproc-µs")
	b.ReportMetric(mean(iso), "mean-isolated-µs")
	pin, piso := p50(in), p50(iso)
	b.ReportMetric(pin, "p50-inproc-µs")
	b.ReportMetric(piso, "p50-isolated-µs")
	b.ReportMetric(piso-pin, "µs-over-inproc")
	b.ReportMetric(float64((isoCPU-inCPU).Microseconds())/float64(len(in)), "cpu-µs-over-inproc")
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
	j := sandbox.Request{Reply: `rows = inventory_tbl.search({"price": {"$lt": 100}, "quantity_in_stock": {"$gt": 10}})
total = sum([r["price"] for r in rows])
answer_text = "We have %d styles worth $%d." % (len(rows), total)
STATUS = "success"
`, Now: fixedNow, Globals: []string{"answer_text"}}
	for _, name := range []string{"in_process", "isolated"} {
		b.Run(name, func(b *testing.B) { loop(b, st, runners(b, st)[name], j) })
	}
	// Without the worker's row cache every matching row crosses whole, every run: the cost of
	// a first search over rows the worker has not seen.
	b.Run("isolated_uncached", func(b *testing.B) { loop(b, st, uncachedPool(b), j) })
}

// uncachedPool is a one-worker pool whose worker keeps no rows between calls.
func uncachedPool(b *testing.B) *Pool {
	p := newPool(b, Options{Warm: 1, MaxWorkers: 1})
	p.mu.Lock()
	p.noRowCache = true
	for w := range p.live {
		w.c.sent = nil // idle: no run reads it now
	}
	p.mu.Unlock()
	return p
}

// bigStore opens a store whose inventory has n rows (the demo's six, then generated ones), as
// engine's benchmark does.
func bigStore(b testing.TB, n int) *bolt.Store {
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
		_, err := st.Import(bg, "inventory", &buf, bolt.JSON, bolt.Upsert)
		require.NoError(b, err)
	}
	return st
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
		if err := e.rows(rows, shape, nil); err != nil {
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
	require.NoError(b, e.rows(rows, shape, nil))
	b.ReportAllocs()
	for b.Loop() {
		d := newDecoder(e.buf[5:])
		if d.rows(nil); d.err != nil {
			b.Fatal(d.err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rows)), "ns/row")
}

// BenchmarkTableCalls is a plan of 200 get_by_key calls: each is a round trip to the pool.
// Compare with BenchmarkTableCalls/empty_* to get the cost of one call.
func BenchmarkTableCalls(b *testing.B) {
	st := openStore(b)
	for _, plan := range []struct{ name, src string }{
		{"calls_200", "for i in range(200):\n    r = inventory_tbl.get_by_key('SG001')\n"},
		{"empty", "x = 1\n"},
	} {
		j := sandbox.Request{Reply: plan.src, Now: fixedNow, Globals: []string{}}
		for _, name := range []string{"in_process", "isolated"} {
			b.Run(plan.name+"_"+name, func(b *testing.B) { loop(b, st, runners(b, st)[name], j) })
		}
	}
}

// BenchmarkMessages encodes and decodes one run message and one done message, as every run
// does (record.go): the protocol's own cost, without the pipe or a worker.
func BenchmarkMessages(b *testing.B) {
	m := &runMsg{
		Job: sandbox.Request{
			Reply: "x = 1\nSTATUS = 'success'\nanswer_text = 'ok'\n", Inputs: map[string]any{"user_request": "3 classic and 1 aviator"},
			Globals: []string{"STATUS", "answer_text"},
			Limits:  sandbox.Limits{}.Effective(sandbox.Limits{}),
			Now:     fixedNow,
		},
		Names:   []string{"inventory", "transactions"},
		GoLimit: 1 << 30, MemCeiling: 1 << 30, DataLimit: 1 << 31, CPUSeconds: 12,
	}
	res := &sandbox.Result{
		Outcome: sandbox.OutcomeOK, Program: m.Job.Reply,
		Diagnostics: diag.List{{Stage: diag.StageCheck, Code: "c", Line: 1, Col: 2, Message: "m", Hint: "h"}},
		Stdout:      "hi\n",
		Rewrites:    []pycompat.Rewrite{{Line: 3, Rule: "r", Before: "b", After: "a"}},
		Globals:     map[string]any{"STATUS": "success", "answer_text": "ok"},
		Steps:       42, Duration: time.Millisecond,
	}
	var e encoder
	b.ReportAllocs()
	for b.Loop() {
		if err := e.run(m); err != nil {
			b.Fatal(err)
		}
		d := newDecoder(e.frame()[5:])
		_ = d.run()
		e.done(done{Res: res, VMData: 5})
		d = newDecoder(e.frame()[5:])
		_ = d.done()
	}
}
