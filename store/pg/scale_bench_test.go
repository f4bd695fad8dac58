package pg

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/server"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// Issue 30's figures, each beside the bbolt store in the same run (PostgreSQL on the test
// cluster's local socket, fsync off; bbolt syncs each commit):
//
//   - BenchmarkSellP50: the indexed sell (bench_test.go's sell) at 100, 100k and 1M items: the dry
//     run's p50 (target ≤ 2 ms) and the apply's alone (target ≤ 5 ms), as p50-ms; ns/op of the
//     apply sub-benchmark counts its dry run too. x-bolt is PostgreSQL's p50 over bbolt's.
//   - BenchmarkImportJSON: db import of a JSON file of 1M rows into an empty table (target ≤ 10 s).
//   - BenchmarkTwoServers: 64 HTTP clients, 32 on each of two servers on one database, each a dry
//     run and its apply of an indexed update of a random account among 100k; throughput in
//     runs/s and the p99 of each request, beside one server on bbolt with the same 64 clients.
//
// The sizes past 100 rows take minutes to set up and run only when asked: STARPLAN_LONG=1, or a
// -bench pattern that names the size (rows=100k, rows=1M):
//
//	.ci/run go test ./store/pg -run '^$' -bench 'SellP50/rows=100$' -benchtime 300x
//	.ci/run go test ./store/pg -run '^$' -bench 'SellP50/rows=1M' -benchtime 300x
//	.ci/run go test ./store/pg -run '^$' -bench 'ImportJSON/rows=1M' -benchtime 1x
//	.ci/run go test ./store/pg -run '^$' -bench 'TwoServers' -benchtime 2000x
//
// One run each on the 2-core machine, shared and busy (load 7 to 12), 2026-11-28; PostgreSQL 15:
//
//	rows   dry run p50 pg / bolt   apply p50 pg / bolt
//	100    0.33 / 0.021 ms          0.67 / 3.7 ms
//	100k   0.26 / 0.057 ms          0.66 / 37 ms
//	1M     0.23 / 0.086 ms          0.54 / 284 ms
//
// (bbolt's apply grows with the store; a CPU profile at 100k shows its commit's page allocation
// remapping the file, and the rest of the time is its fsync.)
// Import of 1M rows, 2026-11-29, base and new test binaries alternated: at load 4 to 5, 6.7 and
// 6.5 s (was 13.3 and 11.0 s); at load 10 to 29 wall times swing 3x between runs, so also the
// CPU (the test process's import from its profile, PostgreSQL's from the cluster's processes):
// the file read as a stream on one goroutine while COPY sends on another, and an empty table's
// indexes built after the copy, against the whole file decoded first and COPY into the indexed
// table: PostgreSQL's CPU 5.6-6.0 s (was 7.0-9.5 s; keeping the primary key and _ord's B-trees
// up row by row was half of it), the import's Go CPU about 5 s either way (encoding/json's
// decoding 2.5 s, validation and the keys seen 1.8 s), now overlapped with PostgreSQL's. The CLI
// (starplan db import inventory FILE --replace, a 135 MB file, empty table): 9.5-12.3 s wall and
// 190 MB peak RSS, was 17.7 s and 1.1 GB. The 10 s target is met at load 4 to 5, not at 10 and
// more. 64 clients: two servers on pg
// 41 runs/s (dry run p99 0.69 s, apply p99 2.5 s), one server on bolt 23 runs/s (0.34 s, 4.9 s);
// the applies queue on each engine's one-apply-at-a-time lock (engine.ApplyWith), then on the
// table's lock across the servers. Since the audit log's hash chain (engine/chain.go) came in,
// the pg half fails (2026-11-29, at 45db3d2 too): applies on the two servers at once take the
// same next chain entry and one answers 500 "audit_chain/…: the system document exists
// already" instead of numbering its entry again; bolt's half: 120 runs/s, dry run p99 166 ms,
// apply p99 1.08 s (load 10 to 29).

// sizeAsked reports whether a benchmark of name (rows=100k) runs: always for rows=100, else in
// the long tier or when the -bench pattern names it.
func sizeAsked(name string) bool {
	if name == "rows=100" || testtier.Long() {
		return true
	}
	f := flag.Lookup("test.bench")
	return f != nil && strings.Contains(f.Value.String(), name)
}

// sizes are the benchmarks' table sizes, by sub-benchmark name.
var sizes = []struct {
	name string
	n    int
}{{"rows=100", 100}, {"rows=100k", 100_000}, {"rows=1M", 1_000_000}}

// p50 is the median of ds.
func p50(ds []time.Duration) time.Duration {
	return pct(ds, 0.5)
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func BenchmarkSellP50(b *testing.B) {
	for _, size := range sizes {
		b.Run(size.name, func(b *testing.B) {
			if !sizeAsked(size.name) {
				b.Skipf("%s runs with STARPLAN_LONG=1 or when -bench names it", size.name)
			}
			stores := benchStores(b, size.n)
			dry, apply := map[string]time.Duration{}, map[string]time.Duration{}
			for _, kind := range []string{"bolt", "pg"} {
				st := stores[kind]
				b.Run("dryrun/"+kind, func(b *testing.B) {
					var ds []time.Duration
					for i := 0; b.Loop(); i++ {
						t0 := time.Now()
						sell(b, st, i%size.n+1)
						ds = append(ds, time.Since(t0))
					}
					dry[kind] = p50(ds)
					b.ReportMetric(ms(dry[kind]), "p50-ms")
					if kind == "pg" && dry["bolt"] > 0 {
						b.ReportMetric(float64(dry["pg"])/float64(dry["bolt"]), "x-bolt")
					}
				})
				b.Run("apply/"+kind, func(b *testing.B) {
					var ds []time.Duration
					for i := 0; b.Loop(); i++ {
						p := sell(b, st, i%size.n+1)
						t0 := time.Now()
						if err := st.ApplyPending(bg, p, nil); err != nil {
							b.Fatal(err)
						}
						ds = append(ds, time.Since(t0))
					}
					apply[kind] = p50(ds)
					b.ReportMetric(ms(apply[kind]), "p50-ms")
					if kind == "pg" && apply["bolt"] > 0 {
						b.ReportMetric(float64(apply["pg"])/float64(apply["bolt"]), "x-bolt")
					}
				})
			}
		})
	}
}

// BenchmarkImportJSON imports a JSON file of n items into an empty inventory table, as
// `starplan db import inventory FILE --replace` does (parse, validate every row, write in one
// transaction), on each store.
func BenchmarkImportJSON(b *testing.B) {
	for _, size := range sizes[1:] {
		b.Run(size.name, func(b *testing.B) {
			if !sizeAsked(size.name) {
				b.Skipf("%s runs with STARPLAN_LONG=1 or when -bench names it", size.name)
			}
			var file bytes.Buffer
			if err := json.NewEncoder(&file).Encode(benchDomain(size.n).Seed["inventory"]); err != nil {
				b.Fatal(err)
			}
			took := map[string]time.Duration{}
			for _, kind := range []string{"bolt", "pg"} {
				b.Run(kind, func(b *testing.B) {
					var last time.Duration
					for b.Loop() {
						b.StopTimer()
						var imp func() error
						var closer io.Closer
						if kind == "pg" {
							s, err := Create(bg, pgtest.DSN(b), benchDomain(0), Options{NoSeed: true})
							if err != nil {
								b.Fatal(err)
							}
							closer = s
							imp = func() error {
								_, err := s.Import(bg, "inventory", bytes.NewReader(file.Bytes()), store.JSON, Replace)
								return err
							}
						} else {
							s, err := bolt.Open(b.TempDir(), bolt.Options{Domain: benchDomain(0)})
							if err != nil {
								b.Fatal(err)
							}
							closer = s
							imp = func() error {
								_, err := s.Import(bg, "inventory", bytes.NewReader(file.Bytes()), store.JSON, bolt.Replace)
								return err
							}
						}
						b.StartTimer()
						t0 := time.Now()
						if err := imp(); err != nil {
							b.Fatal(err)
						}
						last = time.Since(t0)
						b.StopTimer()
						closer.Close()
						b.StartTimer()
					}
					took[kind] = last
					b.ReportMetric(last.Seconds(), "s")
					if kind == "pg" && took["bolt"] > 0 {
						b.ReportMetric(float64(took["pg"])/float64(took["bolt"]), "x-bolt")
					}
				})
			}
		})
	}
}

// accountsDomain is a domain with no rules: n accounts, each with an indexed owner.
func accountsDomain(n int) *store.Domain {
	rows := make([]table.Row, n)
	for i := range rows {
		rows[i] = table.Row{"id": fmt.Sprintf("A%07d", i+1), "owner": fmt.Sprintf("u%d", i+1), "balance": int64(0)}
	}
	return &store.Domain{
		Name: "accounts",
		Tables: []*table.Schema{{Name: "accounts", Key: "id", Indexes: []string{"owner"}, Fields: []table.Field{
			{Name: "id", Type: table.TypeString, Required: true},
			{Name: "owner", Type: table.TypeString, Required: true},
			{Name: "balance", Type: table.TypeInt, Required: true},
		}}},
		Seed: map[string][]table.Row{"accounts": rows},
		Definition: map[string]string{
			"domain.json": `{"name": "accounts", "doc": "Accounts.", "tables": [{"name": "accounts", "key": "id", "doc": "One row per account.", "indexes": ["owner"],
  "fields": [{"name": "id", "type": "string", "required": true, "doc": "the account's id"},
    {"name": "owner", "type": "string", "required": true, "doc": "who owns it"},
    {"name": "balance", "type": "int", "required": true, "doc": "its balance"}]}]}`,
			"policy.json": `{"name": "accounts", "doc": "Accounts credited one at a time.",
  "contract": {"statuses": ["success"], "write_status": "success", "answer_max_sentences": 1, "answer_max_chars": 100},
  "limits": {}, "rules": [{"name": "no_deletions", "kind": "no_deletes", "doc": "no account is removed"}]}`,
			"prompt.json": `{"role": "a bookkeeper", "statuses": {"success": {"when": "the account is credited", "answer": "Credited."}}}`,
		},
	}
}

// credit is a plan that adds 1 to owner's balance: an indexed get and one update.
func credit(owner string) string {
	return fmt.Sprintf(`a = accounts_tbl.get({"owner": %q})
accounts_tbl.update({"balance": a["balance"] + 1}, {"id": a["id"]})
STATUS = "success"
answer_text = "Credited."
`, owner)
}

// benchServer is an engine and its HTTP API on st.
func benchServer(b *testing.B, st store.Store, token string) string {
	e, err := engine.New(st, engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(e, server.Options{Token: token})
	if err != nil {
		b.Fatal(err)
	}
	web := httptest.NewServer(srv.Handler())
	b.Cleanup(func() { srv.Drain(); web.Close(); e.Close() })
	return web.URL
}

// BenchmarkTwoServers: 64 clients, half on each of two servers (each its own engine and
// connection pool) on one database, each doing b.N/64 times: a dry run of a credit to a random
// account among 100k over HTTP, then its apply. Beside it, the same 64 clients on one server
// on a bbolt store (bbolt takes one process). Reported: runs applied per second, the p99 of
// each request, and how many applies were conflicts (two clients on one account).
func BenchmarkTwoServers(b *testing.B) {
	const n, clients, token = 100_000, 64, "a-token-for-the-benchmark"
	for _, kind := range []string{"bolt", "pg"} {
		b.Run(kind, func(b *testing.B) {
			var urls []string
			if kind == "pg" {
				dsn := pgtest.DSN(b)
				sa, err := Create(bg, dsn, accountsDomain(n), Options{})
				if err != nil {
					b.Fatal(err)
				}
				sb, err := Open(bg, dsn, Options{})
				if err != nil {
					b.Fatal(err)
				}
				// Closed after the servers (cleanups run last first).
				b.Cleanup(func() { sa.Close(); sb.Close() })
				urls = []string{benchServer(b, sa, token), benchServer(b, sb, token)}
			} else {
				bs, err := bolt.Open(b.TempDir(), bolt.Options{Domain: accountsDomain(n)})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { bs.Close() })
				urls = []string{benchServer(b, bs, token)}
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			post := func(url string, body []byte) (int, []byte, time.Duration) {
				t0 := time.Now()
				req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				out, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
				return resp.StatusCode, out, time.Since(t0)
			}
			var mu sync.Mutex
			var dryLat, applyLat []time.Duration
			var left, conflicts atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			t0 := time.Now()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					base := urls[c%len(urls)]
					rng := rand.New(rand.NewPCG(uint64(c), 1))
					var dl, al []time.Duration
					for left.Add(-1) >= 0 {
						body, _ := json.Marshal(server.RunRequest{Program: credit(fmt.Sprintf("u%d", rng.IntN(n)+1))})
						code, out, d := post(base+"/v1/runs", body)
						if code != http.StatusOK {
							b.Errorf("dry run: %d %s", code, out)
							return
						}
						dl = append(dl, d)
						var doc server.RunDocument
						if err := json.Unmarshal(out, &doc); err != nil {
							b.Error(err)
							return
						}
						code, out, d = post(base+"/v1/runs/"+doc.RunID+"/apply", []byte(`{"digest": "`+doc.Digest+`"}`))
						switch code {
						case http.StatusOK:
						case http.StatusConflict:
							conflicts.Add(1)
						default:
							b.Errorf("apply: %d %s", code, out)
							return
						}
						al = append(al, d)
					}
					mu.Lock()
					dryLat, applyLat = append(dryLat, dl...), append(applyLat, al...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			took := time.Since(t0)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "runs/s")
			b.ReportMetric(ms(pct(dryLat, 0.99)), "dryrun-p99-ms")
			b.ReportMetric(ms(pct(applyLat, 0.99)), "apply-p99-ms")
			b.ReportMetric(float64(conflicts.Load()), "conflicts")
		})
	}
}
