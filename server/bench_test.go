package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

// latencies collects per-request durations and reports their percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) pct(p float64) time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func (l *latencies) report(b *testing.B, prefix string) {
	b.ReportMetric(float64(l.pct(0.50).Microseconds()), prefix+"p50-µs")
	b.ReportMetric(float64(l.pct(0.99).Microseconds()), prefix+"p99-µs")
}

// benchRequest is one HTTP dry run of the purchase plan, its body read to the end.
func benchRequest(b *testing.B, client *http.Client, url string, body []byte) {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkHTTPDryRun: dry runs of a purchase (a pending run: stage, contract, diff, digest,
// audit record) over HTTP, in process, by 1 and 8 concurrent clients; p50 and p99 per request.
func BenchmarkHTTPDryRun(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(map[int]string{1: "clients=1", 8: "clients=8"}[clients], func(b *testing.B) {
			f := newFixture(b, Options{})
			body, err := json.Marshal(RunRequest{Program: purchase("Aviator", 1, "Bench"), Request: "one Aviator"})
			require.NoError(b, err)
			url := f.web.URL + "/v1/runs"
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			var lat latencies
			b.ResetTimer()
			var wg sync.WaitGroup
			work := make(chan struct{})
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						start := time.Now()
						benchRequest(b, client, url, body)
						lat.add(time.Since(start))
					}
				}()
			}
			for b.Loop() {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.StopTimer()
			lat.report(b, "")
		})
	}
}

// BenchmarkServerOverhead alternates a direct engine.Run, the same dry run through the server's
// handler in process (no network: decoding, digest, events, encoding) and over HTTP (one
// client), so all three see the same machine load. It reports their p50s and what the handler
// and HTTP add to the direct run. Target: < 200 µs p50 added over HTTP.
func BenchmarkServerOverhead(b *testing.B) {
	f := newFixture(b, Options{})
	program := purchase("Aviator", 1, "Bench")
	body, err := json.Marshal(RunRequest{Program: program, Request: "one Aviator"})
	require.NoError(b, err)
	url := f.web.URL + "/v1/runs"
	handler := f.srv.Handler()
	client := &http.Client{}
	ctx := context.Background()
	var direct, inProcess, viaHTTP latencies
	for b.Loop() {
		start := time.Now()
		res, err := f.eng.Run(ctx, engine.Request{Reply: program, UserRequest: "one Aviator", Origin: OriginHTTP})
		if err != nil || !res.Pending {
			b.Fatal(err, res)
		}
		direct.add(time.Since(start))

		start = time.Now()
		req := httptest.NewRequest("POST", "http://127.0.0.1/v1/runs", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		inProcess.add(time.Since(start))

		start = time.Now()
		benchRequest(b, client, url, body)
		viaHTTP.add(time.Since(start))
	}
	b.StopTimer()
	direct.report(b, "direct-")
	inProcess.report(b, "handler-")
	viaHTTP.report(b, "http-")
	b.ReportMetric(float64((inProcess.pct(0.5) - direct.pct(0.5)).Microseconds()), "handler-added-p50-µs")
	b.ReportMetric(float64((viaHTTP.pct(0.5) - direct.pct(0.5)).Microseconds()), "http-added-p50-µs")
}

// BenchmarkClients: throughput and latency of the lab's two-item purchase dry run
// (testdata/examples/03_two_item_order.star: two reads, two stock updates, two ledger rows, the
// contract, the diff, the digest, the audit record and two events) over real HTTP, by 1, 8 and
// 64 concurrent clients, each on its own kept-alive connection. It reports requests per second
// and the 99th percentile of a request's latency, in milliseconds:
//
//	go test -run - -bench Clients -count 6 ./server | tee new.txt && benchstat new.txt
func BenchmarkClients(b *testing.B) {
	reply := example(b, "03_two_item_order.star")
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			f := newFixture(b, Options{})
			body, err := json.Marshal(RunRequest{Reply: reply, Request: "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses."})
			require.NoError(b, err)
			url := f.web.URL + "/v1/runs"
			transport := &http.Transport{MaxIdleConnsPerHost: clients}
			defer transport.CloseIdleConnections()
			client := &http.Client{Transport: transport}
			benchRequest(b, client, url, body) // a pending run: the purchase is valid
			var lat latencies
			// b.N requests, timed until the last one is answered (b.Loop would stop the timer
			// while the last clients' requests are still in flight).
			work := make(chan struct{})
			var wg sync.WaitGroup
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						start := time.Now()
						benchRequest(b, client, url, body)
						lat.add(time.Since(start))
					}
				}()
			}
			b.ResetTimer()
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			b.ReportMetric(float64(lat.pct(0.99))/float64(time.Millisecond), "p99-ms")
			b.ReportMetric(0, "ns/op") // the wall time of b.N requests by many clients: req/s says it
		})
	}
}
