package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

const testToken = "test-token-0123456789abcdef"

// fixture is one server over a fresh demo store, reachable over HTTP.
type fixture struct {
	t   testing.TB
	st  *bolt.Store
	eng *engine.Engine
	srv *Server
	web *httptest.Server
	// keys are the review sessions' keys by their cookie's value (review_test.go).
	keys map[string]string
}

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	st, err := bolt.Open(t.TempDir(), bolt.Options{})
	require.NoError(t, err)
	return fixtureOn(t, st, opts)
}

// fixtureOn is a server over st, which it closes at the test's end.
func fixtureOn(t testing.TB, st *bolt.Store, opts Options) *fixture {
	t.Helper()
	return fixtureWith(t, st, engine.Options{}, opts)
}

// fixtureWith is fixtureOn with the engine's options.
func fixtureWith(t testing.TB, st *bolt.Store, eopts engine.Options, opts Options) *fixture {
	t.Helper()
	eng, err := engine.New(st, eopts)
	require.NoError(t, err)
	if opts.Token == "" {
		opts.Token = testToken
	}
	srv, err := New(eng, opts)
	require.NoError(t, err)
	web := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Drain()
		web.Close()
		assert.NoError(t, eng.Close())
		assert.NoError(t, st.Close())
	})
	return &fixture{t: t, st: st, eng: eng, srv: srv, web: web}
}

// response is one HTTP exchange's status and body.
type response struct {
	status int
	body   []byte
	header http.Header
}

func (r response) decode(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "%s", r.body)
}

// errorCode returns the code of an error body, failing the test for any other body.
func (r response) errorCode(t testing.TB) string {
	t.Helper()
	var eb ErrorBody
	r.decode(t, &eb)
	require.NotNil(t, eb.Error, "%s", r.body)
	assert.NotEmpty(t, eb.Error.Message)
	assert.NotEmpty(t, eb.Error.Hint, "every error says what to do next")
	return eb.Error.Code
}

// call sends one request with the test token. body is JSON-encoded unless it is a string.
func (f *fixture) call(method, path string, body any) response {
	f.t.Helper()
	return f.callWith(testToken, method, path, body)
}

func (f *fixture) callWith(token, method, path string, body any) response {
	f.t.Helper()
	r, err := f.try(token, method, path, body)
	require.NoError(f.t, err)
	return r
}

// try is callWith for other goroutines than the test's: it returns its errors.
func (f *fixture) try(token, method, path string, body any) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, f.web.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.web.Client().Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: raw, header: resp.Header}, err
}

// run dry-runs a program and returns its document, requiring 200.
func (f *fixture) run(program, request string) *RunDocument {
	f.t.Helper()
	r := f.call("POST", "/v1/runs", RunRequest{Program: program, Request: request})
	require.Equal(f.t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(f.t, &doc)
	return &doc
}

// committed reads a committed row.
func (f *fixture) committed(tbl string, key any) table.Row {
	f.t.Helper()
	tb, ok := f.st.Stage().Table(tbl)
	require.True(f.t, ok)
	r, found, err := tb.Get(key)
	require.NoError(f.t, err)
	require.True(f.t, found, "%s %v", tbl, key)
	return r
}

func (f *fixture) count(tbl string) int {
	f.t.Helper()
	tb, ok := f.st.Stage().Table(tbl)
	require.True(f.t, ok)
	return tb.Len()
}

func example(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "examples", name))
	require.NoError(t, err)
	return string(b)
}

// purchase is a plan that sells qty units of the named style to customer, through the ledger.
func purchase(name string, qty int, customer string) string {
	return fmt.Sprintf(`qty = %d
item = inventory_tbl.get({"name": %q})
if item == None or item["quantity_in_stock"] < qty:
    STATUS = "insufficient_stock"
    answer_text = "Sorry, not enough in stock."
else:
    amount = item["price"] * qty
    inventory_tbl.update({"quantity_in_stock": item["quantity_in_stock"] - qty}, {"item_id": item["item_id"]})
    transactions_tbl.insert({
        "transaction_id": next_transaction_id(transactions_tbl),
        "customer_name": %q,
        "transaction_summary": "Purchase of %%d x %%s" %% (qty, item["name"]),
        "transaction_amount": amount,
        "balance_after_transaction": get_current_balance(transactions_tbl) + amount,
        "timestamp": now(),
    })
    STATUS = "success"
    answer_text = "Done."
`, qty, name, customer)
}

// sse reads a Server-Sent Events stream, one event at a time, with bounded lines.
type sse struct {
	t    testing.TB
	resp *http.Response
	sc   *bufio.Scanner
}

// subscribe opens /v1/events and returns once the server says the subscription is live, so that
// every event published afterwards reaches it. query is appended to the path.
func (f *fixture) subscribe(ctx context.Context, header http.Header) *sse {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", f.web.URL+"/v1/events", nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := f.web.Client().Do(req)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { resp.Body.Close() })
	require.Equal(f.t, http.StatusOK, resp.StatusCode)
	require.Equal(f.t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 64<<10) // an event line longer than 64 KiB fails the test
	return &sse{t: f.t, resp: resp, sc: sc}
}

// next returns the next event, skipping comments; ok is false when the stream ended. Events
// before the ": subscribed" comment (a replay) are returned too.
func (s *sse) next() (ev Event, ok bool) {
	s.t.Helper()
	var typ, data string
	for lines := 0; lines < 1000; lines++ {
		if !s.sc.Scan() {
			return Event{}, false
		}
		line := s.sc.Text()
		switch {
		case line == "":
			if data != "" {
				require.NoError(s.t, json.Unmarshal([]byte(data), &ev))
				assert.Equal(s.t, typ, ev.Type, "the event field names the type")
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	s.t.Fatal("no event within 1000 lines")
	return Event{}, false
}

// untilSubscribed reads the replayed events up to the ": subscribed" comment.
func (s *sse) untilSubscribed() []Event {
	s.t.Helper()
	var out []Event
	var typ, data string
	for lines := 0; lines < 10000; lines++ {
		require.True(s.t, s.sc.Scan(), "the stream ended before the subscription was live")
		line := s.sc.Text()
		switch {
		case line == ": subscribed":
			return out
		case line == "" && data != "":
			var ev Event
			require.NoError(s.t, json.Unmarshal([]byte(data), &ev))
			assert.Equal(s.t, typ, ev.Type)
			out = append(out, ev)
			data = ""
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	s.t.Fatal("no subscription comment within 10000 lines")
	return nil
}

// testContext is the test's context with a generous deadline: a hung stream fails the test
// instead of hanging it. It never decides an outcome.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
