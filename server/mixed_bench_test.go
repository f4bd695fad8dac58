package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

// mixedLog is the large audit log of BenchmarkMixedLoad, in runs. Issue 32's target is flat up
// to 1M runs; seeding those takes minutes, so the default is smaller:
//
//	go test ./server -run '^$' -bench MixedLoad -benchtime 3000x -mixed-log=1000000
var mixedLog = flag.Int("mixed-log", 100_000, "the large audit log of BenchmarkMixedLoad, in runs")

// mixedSeeds keeps BenchmarkMixedLoad's seeded stores in a directory of one's choosing, made
// once and reused by later runs (alternated base and new binaries, a 1M log): each run works on
// a copy.
var mixedSeeds = flag.String("mixed-seeds", "", "a directory to keep BenchmarkMixedLoad's seeded stores in, across runs (default: a temporary one)")

// mixedRate, when set, makes BenchmarkMixedLoad open-loop: the rounds arrive on a fixed schedule
// that offers this many operations a second, whether or not the server keeps up, and each
// round's first operation is timed from its scheduled start, so time spent queued for a free
// client counts (no coordinated omission). 0: closed-loop, each client starts its next round
// as soon as its last one is answered.
var mixedRate = flag.Float64("mixed-rate", 0, "BenchmarkMixedLoad open-loop: operations offered a second (0: closed-loop)")

// BenchmarkMixedLoad is `serve` under a mixed load: 64 clients on kept-alive connections, each
// doing in turn a dry run of a purchase (a new text each time), a dry run then its apply, a dry
// run then its rejection, a listing of the newest page of runs, a listing of pending runs and a
// look at its own last run, while 4 more clients follow /v1/events (SSE) throughout. Every HTTP
// request is an operation; the stream subscriptions are not. It runs on a log of 10 runs and on
// one of -mixed-log runs (seeded before the server starts, as old runs), and reports ops/s and the
// 99th percentile of an operation's latency. Issue 32's target, on 2 cores: ≥ 1,000 ops/s with
// p99 ≤ 100 ms, the same at 10 and at 1M runs:
//
//	go test ./server -run '^$' -bench MixedLoad -benchtime 3000x -count 6 | tee new.txt; benchstat new.txt
//
// Closed-loop (the default), the clients have no think time, so by Little's law the mean
// latency is 64 / throughput: 64 ms at exactly 1,000 ops/s, and a p99 ≤ 100 ms there needs a
// very tight distribution, or a much higher throughput. Open-loop (-mixed-rate=1000) offers the
// target rate on a schedule and reports the ops/s achieved and the latencies at that rate,
// each operation timed from its scheduled start.
func BenchmarkMixedLoad(b *testing.B) {
	seeds := *mixedSeeds // the seeded stores, made once for the sizes' repeated runs
	if seeds == "" {
		seeds = b.TempDir()
	}
	for _, n := range []int{10, *mixedLog} {
		b.Run(fmt.Sprintf("log=%d", n), func(b *testing.B) {
			f := mixedFixture(b, filepath.Join(seeds, fmt.Sprint(n)), n)
			const clients, subscribers = 64, 4
			transport := &http.Transport{MaxIdleConnsPerHost: clients + subscribers}
			defer transport.CloseIdleConnections()
			client := &http.Client{Transport: transport}
			ctx, cancel := context.WithCancel(context.Background())
			var streams sync.WaitGroup
			var events atomic.Int64
			for range subscribers {
				req, err := http.NewRequestWithContext(ctx, "GET", f.web.URL+"/v1/events", nil)
				require.NoError(b, err)
				req.Header.Set("Authorization", "Bearer "+testToken)
				resp, err := client.Do(req)
				require.NoError(b, err)
				require.Equal(b, http.StatusOK, resp.StatusCode)
				streams.Add(1)
				go func() {
					defer streams.Done()
					defer resp.Body.Close()
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
						if strings.HasPrefix(sc.Text(), "event: ") {
							events.Add(1)
						}
					}
				}()
			}
			var lat latencies
			// The latencies of each kind of operation too: dry runs, decisions (apply, reject:
			// one at a time, under the engine's apply lock) and reads (listings, a run's page).
			var latDry, latDecide, latRead latencies
			var ops, failed atomic.Int64
			var firstErr atomic.Value
			// do is one operation, timed from start: when it began, or (open-loop) when its round
			// was due.
			do := func(start time.Time, method, path, body string) []byte {
				var rd io.Reader
				if body != "" {
					rd = strings.NewReader(body)
				}
				req, _ := http.NewRequest(method, f.web.URL+path, rd)
				req.Header.Set("Authorization", "Bearer "+testToken)
				resp, err := client.Do(req)
				var raw []byte
				if err == nil {
					raw, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					// An apply that finds the data moved (another client's apply came first) answers
					// 409 with the run in state conflict: an answer like any other.
					conflict := resp.StatusCode == http.StatusConflict && strings.Contains(string(raw), `"state":"conflict"`)
					if err == nil && resp.StatusCode != http.StatusOK && !conflict {
						err = fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, raw)
					}
				}
				took := time.Since(start)
				lat.add(took)
				switch {
				case method == "GET":
					latRead.add(took)
				case strings.HasSuffix(path, "/apply") || strings.HasSuffix(path, "/reject"):
					latDecide.add(took)
				default:
					latDry.add(took)
				}
				ops.Add(1)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				return raw
			}
			var seq atomic.Int64
			dryRun := func(start time.Time) RunDocument {
				i := seq.Add(1)
				raw := do(start, "POST", "/v1/runs", fmt.Sprintf(`{"program": %q, "request": "one pair"}`, purchase(mixedItems[i%int64(len(mixedItems))], 1, fmt.Sprintf("Mixed %d", i))))
				var doc RunDocument
				if err := json.Unmarshal(raw, &doc); err != nil || doc.State != StatePending {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("a dry run is not pending: %s", raw))
				}
				return doc
			}
			type round struct {
				i  int
				at time.Time // when it is due (open-loop); zero: now
			}
			work := make(chan round, b.N)
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					last := ""
					for r := range work {
						start := r.at
						if start.IsZero() {
							start = time.Now()
						}
						// A round's second operation starts when its first is answered.
						switch (c + r.i) % 6 {
						case 0:
							last = dryRun(start).RunID
						case 1:
							doc := dryRun(start)
							if last = doc.RunID; last != "" {
								do(time.Now(), "POST", "/v1/runs/"+last+"/apply", fmt.Sprintf(`{"digest": %q}`, doc.Digest))
							}
						case 2:
							if last = dryRun(start).RunID; last != "" {
								do(time.Now(), "POST", "/v1/runs/"+last+"/reject", `{"feedback": "not this one"}`)
							}
						case 3:
							do(start, "GET", "/v1/runs?limit=20", "")
						case 4:
							do(start, "GET", "/v1/runs?state=pending&limit=20", "")
						case 5:
							if last != "" {
								do(start, "GET", "/v1/runs/"+last, "")
							} else {
								do(start, "GET", "/v1/runs?limit=1", "")
							}
						}
					}
				}()
			}
			b.ResetTimer()
			cpu0 := processCPU()
			if *mixedRate > 0 {
				// Six rounds are eight operations (a dry run with its apply, one with its
				// rejection, four of one each).
				every := time.Duration(float64(time.Second) * 8 / 6 / *mixedRate)
				t0 := time.Now()
				for i := range b.N {
					at := t0.Add(time.Duration(i) * every)
					time.Sleep(time.Until(at))
					work <- round{i: i, at: at} // never blocks: a round waits its turn in the channel
				}
			} else {
				for i := range b.N {
					work <- round{i: i}
				}
			}
			close(work)
			wg.Wait()
			b.StopTimer()
			cpu := processCPU() - cpu0
			cancel()
			streams.Wait()
			if err, _ := firstErr.Load().(error); err != nil {
				b.Fatalf("%d of %d operations failed; the first: %v", failed.Load(), ops.Load(), err)
			}
			b.ReportMetric(float64(ops.Load())/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64(lat.pct(0.99))/float64(time.Millisecond), "p99-ms")
			b.ReportMetric(float64(lat.pct(0.50))/float64(time.Millisecond), "p50-ms")
			for kind, l := range map[string]*latencies{"dry": &latDry, "decide": &latDecide, "read": &latRead} {
				b.ReportMetric(float64(l.pct(0.99))/float64(time.Millisecond), kind+"-p99-ms")
			}
			b.ReportMetric(float64(events.Load())/subscribers/b.Elapsed().Seconds(), "events/s")
			// The process's CPU (server and clients) per operation: what the load around the
			// benchmark changes least, so the figure to compare between log sizes.
			b.ReportMetric(float64(cpu.Microseconds())/float64(ops.Load()), "cpu-µs/op")
			b.ReportMetric(0, "ns/op") // the wall time of b.N rounds by many clients: ops/s says it
		})
	}
}

// mixedItems are the styles BenchmarkMixedLoad buys: their stock is raised so that it never
// runs out, and every dry run is a pending purchase.
var mixedItems = []string{"Aviator", "Sport", "Classic", "Moon"}

// mixedFixture is a server over a copy of the demo store in seed whose audit log holds n old
// runs, made there first if need be.
func mixedFixture(b *testing.B, seed string, n int) *fixture {
	b.Helper()
	if _, err := os.Stat(seed); err != nil {
		part := seed + ".partial" // a seeding cut short is not taken for a seed
		require.NoError(b, os.RemoveAll(part))
		seedLog(b, part, n)
		require.NoError(b, os.Rename(part, seed))
	}
	dir := b.TempDir()
	copyFile(b, filepath.Join(seed, "data.db"), filepath.Join(dir, "data.db"))
	st, err := bolt.Open(dir, bolt.Options{})
	require.NoError(b, err)
	return fixtureOn(b, st, Options{EventBacklog: 1 << 12})
}

// seedLog makes in dir a demo store (stock raised) whose audit log holds n runs a year old, in
// every state (a sixth of them rejected, with their decisions), and its index. The records are written straight to the store, in batches,
// without the hash chain (they are older than it, as a store's runs from before the chain are),
// and the engine builds their index.
func seedLog(b *testing.B, dir string, n int) {
	st, err := bolt.Open(dir, bolt.Options{})
	require.NoError(b, err)
	var inv bytes.Buffer
	require.NoError(b, st.Export(&inv, "inventory", bolt.JSON))
	var rows []map[string]any
	require.NoError(b, json.Unmarshal(inv.Bytes(), &rows))
	for _, r := range rows {
		r["quantity_in_stock"] = 1_000_000_000
	}
	raw, err := json.Marshal(rows)
	require.NoError(b, err)
	_, err = st.Import(context.Background(), "inventory", bytes.NewReader(raw), bolt.JSON, bolt.Upsert)
	require.NoError(b, err)
	year := time.Now().AddDate(-1, 0, 0)
	states := []func(r *engine.RunRecord){
		func(r *engine.RunRecord) { r.Pending = true },
		func(r *engine.RunRecord) { r.Applied = true },
		func(r *engine.RunRecord) { r.Outcome = engine.OutcomeConflict },
		func(r *engine.RunRecord) { r.Outcome = engine.OutcomeRuntimeError },
		func(r *engine.RunRecord) {},
		func(r *engine.RunRecord) { r.RejectedBy, r.ApplyError = "seed", "rejected by the reviewer" }, // with its decision
	}
	var docs []store.SysDoc
	for i := range n {
		r := &engine.RunRecord{ID: fmt.Sprintf("seed_%07d", i), Time: year.Add(time.Duration(i) * time.Second), Origin: OriginHTTP,
			Request: fmt.Sprintf("seeded run %d", i), Program: purchase("Aviator", 1, fmt.Sprintf("Seed %d", i)), Outcome: engine.OutcomeOK,
			Status: "success", ChangedRows: 2}
		states[i%len(states)](r)
		docs = append(docs, store.SysDoc{Collection: engine.AuditCollection, ID: r.ID, Value: r})
		if r.RejectedBy != "" {
			docs = append(docs, store.SysDoc{Collection: "decisions", ID: r.ID, Value: engine.Decision{RunID: r.ID, Decision: engine.DecisionRejected,
				Feedback: "not this one", Origin: OriginHTTP, By: r.RejectedBy, Time: r.Time.Add(time.Minute)}})
		}
		if len(docs) == 10_000 || i == n-1 {
			require.NoError(b, st.PutSysDocs(context.Background(), docs...))
			docs = docs[:0]
		}
	}
	eng, err := engine.New(st, engine.Options{}) // builds the log's index
	require.NoError(b, err)
	require.NoError(b, eng.Close())
	require.NoError(b, st.Close())
}

// processCPU is the CPU time, user and system, the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// copyFile copies a seeded store and syncs the copy: left dirty in the page cache, the copy's
// pages (2 GB at 1M runs) were written out by the first commit's fsync inside the measurement,
// one stall of the whole server (p99 0.7-1.0 s at 1M runs, flat otherwise).
func copyFile(b *testing.B, from, to string) {
	in, err := os.Open(from)
	require.NoError(b, err)
	defer in.Close()
	out, err := os.Create(to)
	require.NoError(b, err)
	_, err = io.Copy(out, in)
	require.NoError(b, err)
	require.NoError(b, out.Sync())
	require.NoError(b, out.Close())
}
