package server

// rvbuf: the audit writer's reused record buffers (audit6e) behind the HTTP API: dry runs
// posted while clients read runs and listings and an event stream relays the runs' events,
// with the race detector on. Every run read is the run asked for, as stored at the end, and
// runs verify finds nothing.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRvbufDryRunsWhileClientsRead(t *testing.T) {
	f := newFixture(t, Options{})
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	stream := f.subscribe(ctx, nil)
	relayed := make(chan struct{})
	go func() { // the relay's reader: every line it sends
		sc := bufio.NewScanner(stream.resp.Body)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		var once sync.Once
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: ") {
				once.Do(func() { close(relayed) })
			}
		}
	}()
	programs := []string{example(t, "02_purchase_wayfarer.star"), example(t, "03_two_item_order.star"), example(t, "01_round_under_100.star")}
	var mu sync.Mutex
	request := map[string]string{}
	seen := map[string][]string{} // run id -> its documents as read while runs were posted
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 10 {
			errs = append(errs, err)
		}
	}
	var done atomic.Bool
	var writers, readers sync.WaitGroup
	for w := range 3 {
		writers.Go(func() {
			for i := range 30 {
				req := fmt.Sprintf("client %d run %d <&> \"é\"", w, i)
				r, err := f.try(testToken, "POST", "/v1/runs", RunRequest{Program: programs[(w+i)%len(programs)], Request: req})
				if err != nil || r.status != http.StatusOK {
					fail(fmt.Errorf("posting a run: %v %d %s", err, r.status, r.body))
					return
				}
				var doc RunDocument
				if err := json.Unmarshal(r.body, &doc); err != nil {
					fail(err)
					return
				}
				mu.Lock()
				request[doc.RunID] = req
				mu.Unlock()
			}
		})
	}
	for range 2 {
		readers.Go(func() {
			for !done.Load() {
				r, err := f.try(testToken, "GET", "/v1/runs?limit=6", nil)
				if err != nil || r.status != http.StatusOK {
					fail(fmt.Errorf("listing: %v %d %s", err, r.status, r.body))
					return
				}
				var list RunList
				if err := json.Unmarshal(r.body, &list); err != nil {
					fail(err)
					return
				}
				for _, s := range list.Runs {
					r, err := f.try(testToken, "GET", "/v1/runs/"+s.ID, nil)
					if err != nil || r.status != http.StatusOK {
						fail(fmt.Errorf("reading run %s: %v %d %s", s.ID, err, r.status, r.body))
						return
					}
					var doc RunDocument
					if err := json.Unmarshal(r.body, &doc); err != nil {
						fail(err)
						return
					}
					mu.Lock()
					want, known := request[s.ID]
					seen[s.ID] = append(seen[s.ID], string(r.body))
					mu.Unlock()
					if doc.RunID != s.ID || s.Request != doc.Request || (known && doc.Request != want) {
						fail(fmt.Errorf("run %s listed asking %q was read as run %s asking %q", s.ID, s.Request, doc.RunID, doc.Request))
					}
				}
			}
		})
	}
	writers.Wait()
	done.Store(true)
	readers.Wait()
	require.Empty(t, errs)
	require.Len(t, request, 90)
	for id, docs := range seen {
		r := f.call("GET", "/v1/runs/"+id, nil)
		require.Equal(t, http.StatusOK, r.status)
		for _, d := range docs {
			require.JSONEq(t, string(r.body), d, "run %s was read as another document than the one stored", id)
		}
	}
	rep, err := f.eng.VerifyChain()
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
	require.GreaterOrEqual(t, rep.Records, 90)
	select { // the stream relays the runs' events (the test's deadline, if it never does)
	case <-relayed:
	case <-ctx.Done():
		t.Fatal("the event stream relayed no event")
	}
}
