package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// soakFor turns TestSoak64Clients from a fixed amount of work into a soak of that wall time:
//
//	go test -race -timeout 15m ./server -run TestSoak64Clients -soak=30s -v
//
// (the package comes before -soak, which only this package's tests know).
// Without it (every `go test ./...`) each client does soakRounds rounds, so the test does the
// same work on any machine and its verdict never depends on speed. Either way the duration only
// decides how much work is done, never whether the test passes.
var soakFor = flag.Duration("soak", 0, "run TestSoak64Clients for this wall time (e.g. 30s) instead of a fixed number of rounds per client")

const (
	soakClients     = 64
	soakSubscribers = 4 // besides the one that checks every event
	// soakBacklog is the server's event backlog in the soak: the checking subscriber that is cut
	// off for falling behind replays from it. Without -soak the whole test publishes fewer events
	// than this, so nothing can be missed however slow the reader is.
	soakBacklog = 1 << 15
	// soakHeapGrowth bounds the live heap added by the soak (after a GC, server still up). The
	// ledger and the event backlog grow with the work, by well under this.
	soakHeapGrowth = 64 << 20
	// soakGoroutineSlack is how many goroutines more than before the soak may remain once the
	// clients, the streams and their connections are gone.
	soakGoroutineSlack = 8
)

// soakRounds is the rounds per client without -soak. Client c's round n is of kind
// (c+n) mod soakKinds, so two rounds still do every kind, each by about 20 clients at once; the
// long tier (testtier) does three times the work.
var soakRounds = testtier.Size(2, 6)

// soakItems are the styles the soak buys and returns: they compete for stock and the ledger.
var soakItems = []string{"Aviator", "Sport", "Classic", "Moon"}

// Kinds of a soak round: what a client does with its dry run.
const (
	soakApplyTwice    = iota // a purchase, applied twice at once
	soakApplyOnce            // a purchase, applied once
	soakReturn               // a return, applied once
	soakRejectFirst          // a purchase rejected, then applied (refused)
	soakApplyOrReject        // a purchase applied and rejected at once
	soakLeavePending         // a purchase nobody decides, and read-only queries
	soakKinds
)

// soakReturnPlan is a plan that takes back qty units of the named style from customer, refunding
// them from the register when it holds enough.
func soakReturnPlan(name string, qty int, customer string) string {
	return fmt.Sprintf(`qty = %d
item = inventory_tbl.get({"name": %q})
amount = item["price"] * qty
balance = get_current_balance(transactions_tbl)
if balance < amount:
    STATUS = "invalid_request"
    answer_text = "The register cannot refund that now."
else:
    inventory_tbl.update({"quantity_in_stock": item["quantity_in_stock"] + qty}, {"item_id": item["item_id"]})
    transactions_tbl.insert({
        "transaction_id": next_transaction_id(transactions_tbl),
        "customer_name": %q,
        "transaction_summary": "Return of %%d x %%s" %% (qty, item["name"]),
        "transaction_amount": -amount,
        "balance_after_transaction": balance - amount,
        "timestamp": now(),
    })
    STATUS = "success"
    answer_text = "Refunded."
`, qty, name, customer)
}

// soakRun is one dry run of the soak and what the answers to its decisions said.
type soakRun struct {
	kind     int
	item     string
	delta    int64  // the stock change of the item if the run was applied
	customer string // unique: the ledger row of this run, if applied, carries it
	doc      RunDocument
	// What the answers said happened, at most one of applied and rejected.
	applied, conflict, rejected bool
}

// soakClient sends the soak's requests and keeps every failure (transport error, 5xx, an answer
// that contradicts another) for the test to report.
type soakClient struct {
	f      *fixture
	ctx    context.Context
	client *http.Client
	query  string // a read-only plan
	mu     sync.Mutex
	errs   []error
}

func (s *soakClient) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) < 100 {
		s.errs = append(s.errs, fmt.Errorf(format, args...))
	}
}

// do sends one request; ok is false (and the failure kept) on a transport error or a 5xx.
func (s *soakClient) do(method, path string, body any) (r response, ok bool) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			s.fail("%s %s: %v", method, path, err)
			return r, false
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(s.ctx, method, s.f.web.URL+path, rd)
	if err != nil {
		s.fail("%s %s: %v", method, path, err)
		return r, false
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := s.client.Do(req)
	if err != nil {
		s.fail("%s %s: %v", method, path, err)
		return r, false
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.fail("%s %s: reading the body: %v", method, path, err)
		return r, false
	}
	r = response{status: resp.StatusCode, body: raw, header: resp.Header}
	if r.status >= 500 {
		s.fail("%s %s: status %d: %s", method, path, r.status, raw)
		return r, false
	}
	return r, true
}

// document decodes a run document, or keeps the failure.
func (s *soakClient) document(what string, r response) (doc RunDocument, ok bool) {
	if err := json.Unmarshal(r.body, &doc); err != nil || doc.RunID == "" {
		s.fail("%s: status %d: not a run document: %s", what, r.status, r.body)
		return doc, false
	}
	return doc, true
}

// errorCode decodes an error body's code, or keeps the failure.
func (s *soakClient) errorCode(what string, r response) string {
	var eb ErrorBody
	if err := json.Unmarshal(r.body, &eb); err != nil || eb.Error == nil {
		s.fail("%s: status %d: not an error body: %s", what, r.status, r.body)
		return ""
	}
	return eb.Error.Code
}

// apply applies a run and reads the answer: applied, conflict, or refused with an error code.
func (s *soakClient) apply(run *soakRun) (r response, state, code string) {
	what := "apply " + run.doc.RunID
	r, ok := s.do("POST", "/v1/runs/"+run.doc.RunID+"/apply", ApplyRequest{Digest: run.doc.Digest})
	if !ok {
		return r, "", ""
	}
	switch r.status {
	case http.StatusOK:
		if doc, ok := s.document(what, r); ok && doc.State != StateApplied {
			s.fail("%s: 200 with state %s", what, doc.State)
		}
		return r, StateApplied, ""
	case http.StatusConflict:
		if strings.Contains(string(r.body), `"error"`) {
			return r, "", s.errorCode(what, r)
		}
		doc, ok := s.document(what, r)
		if ok && (doc.State != StateConflict || doc.Outcome != engine.OutcomeConflict || len(doc.Diagnostics) == 0) {
			s.fail("%s: 409 with state %s, outcome %s, %d diagnostics", what, doc.State, doc.Outcome, len(doc.Diagnostics))
		}
		return r, StateConflict, ""
	}
	s.fail("%s: status %d: %s", what, r.status, r.body)
	return r, "", ""
}

// reject rejects a run: rejected (200), or refused with an error code.
func (s *soakClient) reject(run *soakRun) (state, code string) {
	what := "reject " + run.doc.RunID
	r, ok := s.do("POST", "/v1/runs/"+run.doc.RunID+"/reject", RejectRequest{Feedback: "not this one"})
	if !ok {
		return "", ""
	}
	switch r.status {
	case http.StatusOK:
		if doc, ok := s.document(what, r); ok && doc.State != StateRejected {
			s.fail("%s: 200 with state %s", what, doc.State)
		}
		return StateRejected, ""
	case http.StatusConflict:
		return "", s.errorCode(what, r)
	}
	s.fail("%s: status %d: %s", what, r.status, r.body)
	return "", ""
}

// round is one dry run of a client and the decisions its kind asks for.
func (s *soakClient) round(c, n int) (*soakRun, bool) {
	run := &soakRun{kind: (c + n) % soakKinds, item: soakItems[(c/soakKinds+n)%len(soakItems)], customer: fmt.Sprintf("soak c%d r%d", c, n)}
	program := purchase(run.item, 1, run.customer)
	run.delta = -1
	if run.kind == soakReturn {
		program, run.delta = soakReturnPlan(run.item, 1, run.customer), 1
	}
	r, ok := s.do("POST", "/v1/runs", RunRequest{Program: program, Request: run.customer})
	if !ok {
		return nil, false
	}
	if r.status != http.StatusOK {
		s.fail("dry run: status %d: %s", r.status, r.body)
		return nil, false
	}
	if run.doc, ok = s.document("dry run", r); !ok {
		return nil, false
	}
	if run.kind == soakLeavePending {
		s.readOnly(run, c%8 == 0)
	}
	if run.doc.State != StatePending {
		return run, true // nothing to decide
	}
	switch run.kind {
	case soakApplyTwice:
		var answers [2]response
		var states [2]string
		var both sync.WaitGroup
		for i := range 2 {
			both.Add(1)
			go func() {
				defer both.Done()
				answers[i], states[i], _ = s.apply(run)
			}()
		}
		both.Wait()
		if answers[0].status != answers[1].status || !jsonEqual(answers[0].body, answers[1].body) {
			s.fail("the two applies of %s got different answers: %d %s and %d %s", run.doc.RunID, answers[0].status, answers[0].body, answers[1].status, answers[1].body)
		}
		run.applied, run.conflict = states[0] == StateApplied, states[0] == StateConflict
	case soakApplyOnce, soakReturn:
		_, state, code := s.apply(run)
		if code != "" {
			s.fail("apply %s: refused: %s", run.doc.RunID, code)
		}
		run.applied, run.conflict = state == StateApplied, state == StateConflict
	case soakRejectFirst:
		state, code := s.reject(run)
		if state != StateRejected {
			s.fail("reject %s of a pending run: refused: %s", run.doc.RunID, code)
		}
		run.rejected = true
		if _, state, code := s.apply(run); state != "" || code != CodeRejected {
			s.fail("apply %s after its rejection: state %q, code %q; want code %s", run.doc.RunID, state, code, CodeRejected)
		}
	case soakApplyOrReject:
		var applyState, applyCode, rejectState, rejectCode string
		var both sync.WaitGroup
		both.Add(2)
		go func() { defer both.Done(); _, applyState, applyCode = s.apply(run) }()
		go func() { defer both.Done(); rejectState, rejectCode = s.reject(run) }()
		both.Wait()
		// Exactly one decision wins: the apply (the reject is refused) or the reject (the apply
		// is refused, or conflicted before the reject was recorded).
		switch {
		case applyState == StateApplied && rejectCode == CodeAlreadyApplied:
			run.applied = true
		case applyState == StateConflict && rejectState == StateRejected:
			run.conflict, run.rejected = true, true
		case applyCode == CodeRejected && rejectState == StateRejected:
			run.rejected = true
			// The apply may have found a conflict just before the rejection was recorded (its
			// answer then reads the run as rejected): the record says so, and the stream told it.
			if r, ok := s.do("GET", "/v1/runs/"+run.doc.RunID, nil); ok {
				if doc, ok := s.document("show "+run.doc.RunID, r); ok {
					run.conflict = doc.ConflictAt != nil
				}
			}
		default:
			s.fail("apply and reject of %s at once: apply %q %q, reject %q %q", run.doc.RunID, applyState, applyCode, rejectState, rejectCode)
		}
	}
	return run, true
}

// readOnly sends the queries of a client that leaves its run pending: a read-only plan, its own
// run and, when list is set, the pending list. One client in eight lists, as a review page
// would: a list decodes the whole audit log, so it costs more than all the rest of a round.
func (s *soakClient) readOnly(run *soakRun, list bool) {
	if r, ok := s.do("POST", "/v1/runs", RunRequest{Program: s.query, Request: "round ones under 100?"}); ok {
		if doc, ok := s.document("read-only run", r); ok && doc.State != StateDone {
			s.fail("read-only run %s: state %s, outcome %s: %v", doc.RunID, doc.State, doc.Outcome, doc.Diagnostics)
		}
	}
	if r, ok := s.do("GET", "/v1/runs/"+run.doc.RunID, nil); ok {
		if doc, ok := s.document("show "+run.doc.RunID, r); ok && doc.State != run.doc.State {
			s.fail("show %s: state %s, its dry run said %s", run.doc.RunID, doc.State, run.doc.State)
		}
	}
	if !list {
		return
	}
	if r, ok := s.do("GET", "/v1/runs?state=pending&limit=20", nil); ok {
		var list RunList
		if err := json.Unmarshal(r.body, &list); err != nil || r.status != http.StatusOK {
			s.fail("list pending: status %d: %s", r.status, r.body)
		}
		for _, sum := range list.Runs {
			if sum.State != StatePending {
				s.fail("list pending: %s is %s", sum.ID, sum.State)
			}
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// follow reads one connection of /v1/events after lastID, calling fn for each event until fn
// returns false, the stream ends (the server cut it off or drained) or ctx ends. It returns the
// id of the last event read.
func follow(ctx context.Context, f *fixture, client *http.Client, lastID int64, fn func(Event) bool) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", f.web.URL+"/v1/events", nil)
	if err != nil {
		return lastID, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := client.Do(req)
	if err != nil {
		return lastID, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return lastID, fmt.Errorf("events: status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	var data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			var ev Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return lastID, err
			}
			data = ""
			if ev.ID <= lastID {
				return lastID, fmt.Errorf("event %d after event %d: an event came twice or out of order", ev.ID, lastID)
			}
			lastID = ev.ID
			if !fn(ev) {
				return lastID, nil
			}
		}
	}
	return lastID, nil // cut off (fell behind) or drained: the caller decides whether to reconnect
}

// eventTally counts the events of each run by type, as the checking subscriber saw them.
type eventTally struct {
	mu     sync.Mutex
	byRun  map[string]map[string]int
	endID  string
	endSaw chan struct{}
	ended  bool
}

func (e *eventTally) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.RunID == "" {
		return
	}
	if e.byRun[ev.RunID] == nil {
		e.byRun[ev.RunID] = map[string]int{}
	}
	e.byRun[ev.RunID][ev.Type]++
	e.checkEnd()
}

// end names the run whose finished event is the last the tally waits for.
func (e *eventTally) end(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endID = id
	e.checkEnd()
}

func (e *eventTally) checkEnd() {
	if !e.ended && e.endID != "" && e.byRun[e.endID][EventFinished] > 0 {
		e.ended = true
		close(e.endSaw)
	}
}

// TestSoak64Clients has 64 clients work one server at once: purchases and returns that compete
// for stock and the ledger, applied once or twice at once, rejected, applied and rejected at
// once, or left pending; read-only plans and queries; and event subscribers that come and go.
// Then: no request failed with a 5xx or contradicted another; every applied run is in the data
// exactly once and no other run is (stock, one ledger row per applied run, the balance chain);
// every run's state is what its answers said; the event stream has one applied or failed event
// per apply decision and one rejected event per rejection; the goroutines go back to about what
// they were and the live heap grew by a bounded amount. A deadlock fails the test with every
// goroutine's stack after a generous deadline.
//
// It does soakRounds rounds per client; -soak=30s makes it run for 30 s instead (see soakFor).
func TestSoak64Clients(t *testing.T) {
	// Runs get a minute (the default is seconds): which runs fail is part of what the soak
	// checks, and on a busy machine under -race a run's time limit fired (limit_exceeded).
	st, err := bolt.Open(t.TempDir(), bolt.Options{})
	require.NoError(t, err)
	f := fixtureWith(t, st, engine.Options{Limits: sandbox.Limits{Timeout: time.Minute}}, Options{EventBacklog: soakBacklog})
	limit := 5 * time.Minute
	if *soakFor > 0 {
		limit += *soakFor
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	stopDump := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			buf := make([]byte, 8<<20)
			fmt.Fprintf(os.Stderr, "TestSoak64Clients: no end after %s, a deadlock? Every goroutine:\n%s\n", limit, buf[:runtime.Stack(buf, true)])
		}
	})
	defer stopDump()

	stock := map[string]int64{}
	for _, name := range soakItems {
		stock[name] = f.committed("inventory", itemID(t, f, name))["quantity_in_stock"].(int64)
	}
	ledger := f.count("transactions")

	transport := &http.Transport{MaxIdleConnsPerHost: 2 * soakClients}
	client := &http.Client{Transport: transport}
	runtime.GC()
	goroutines := runtime.NumGoroutine()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	// The checking subscriber sees every event: when it falls behind and is cut off, it
	// reconnects with Last-Event-ID and the backlog replays what it missed.
	tally := &eventTally{byRun: map[string]map[string]int{}, endSaw: make(chan struct{})}
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	var subs sync.WaitGroup
	var subErrs []error
	var subMu sync.Mutex
	subFail := func(err error) {
		subMu.Lock()
		subErrs = append(subErrs, err)
		subMu.Unlock()
	}
	checker := make(chan struct{}) // closed when the checking subscriber stops
	subs.Add(1)
	go func() {
		defer subs.Done()
		defer close(checker)
		var last int64 // the backlog holds every event from the first
		for subCtx.Err() == nil {
			next := last + 1
			var err error
			last, err = follow(subCtx, f, client, last, func(ev Event) bool {
				if ev.ID != next {
					subFail(fmt.Errorf("the checking subscriber got event %d after %d: %d events missed", ev.ID, next-1, ev.ID-next))
				}
				next = ev.ID + 1
				tally.add(ev)
				return true
			})
			if err != nil && subCtx.Err() == nil {
				subFail(err)
				return
			}
		}
	}()
	// The other subscribers read a few events, hang up and come back with Last-Event-ID.
	for i := range soakSubscribers {
		subs.Add(1)
		go func() {
			defer subs.Done()
			var last int64
			for subCtx.Err() == nil {
				n, err := 0, error(nil)
				last, err = follow(subCtx, f, client, last, func(Event) bool {
					n++
					return n < 10+i*7
				})
				if err != nil && subCtx.Err() == nil {
					subFail(fmt.Errorf("subscriber %d: %w", i, err))
					return
				}
			}
		}()
	}
	sc := &soakClient{f: f, ctx: ctx, client: client, query: example(t, "01_round_under_100.star")}
	var stopAt time.Time
	if *soakFor > 0 {
		stopAt = time.Now().Add(*soakFor)
	}
	results := make([][]*soakRun, soakClients)
	var wg sync.WaitGroup
	for c := range soakClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				if stopAt.IsZero() && n == soakRounds || !stopAt.IsZero() && !time.Now().Before(stopAt) {
					return
				}
				run, ok := sc.round(c, n)
				if !ok {
					return
				}
				results[c] = append(results[c], run)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "the clients did not finish")
	for _, err := range sc.errs {
		t.Error(err)
	}
	require.Empty(t, sc.errs)

	// The end of the stream for the checking subscriber: this run's finished event comes after
	// every event of the clients.
	end := f.run(example(t, "01_round_under_100.star"), "end")
	tally.end(end.RunID)
	select {
	case <-tally.endSaw:
	case <-checker:
		subMu.Lock()
		defer subMu.Unlock()
		t.Fatalf("the checking subscriber stopped before the last event: %v", subErrs)
	case <-ctx.Done():
		t.Fatal("the checking subscriber never saw the last event")
	}
	stopSubs()
	subs.Wait()
	for _, err := range subErrs {
		t.Error(err)
	}

	// Every run is in the state its answers said, and only applied runs are in the data.
	var runs []*soakRun
	ledgerRows := map[string]int{} // by customer: the applied runs' rows
	for _, rs := range results {
		runs = append(runs, rs...)
	}
	wantStock := maps.Clone(stock)
	applied, conflicts, rejected, other := 0, 0, 0, 0
	pendingIDs := []string{}
	for _, run := range runs {
		want := run.doc.State
		switch {
		case run.applied:
			want = StateApplied
			applied++
			wantStock[run.item] += run.delta
		case run.rejected:
			want = StateRejected
			rejected++
		case run.conflict:
			want = StateConflict
			conflicts++
		case want == StatePending:
			pendingIDs = append(pendingIDs, run.doc.RunID)
		default:
			other++
			switch want {
			case StateDone: // stock ran out, or the register could not refund
				assert.Contains(t, []string{"insufficient_stock", "invalid_request"}, run.doc.Status, run.doc.RunID)
			case StateFailed: // the data moved mid-run (see TestConcurrentClientsApplyEachRunAtMostOnce)
				assert.Contains(t, []engine.Outcome{engine.OutcomeContractViolation, engine.OutcomeRuntimeError}, run.doc.Outcome, "%v", run.doc.Diagnostics)
			default:
				t.Errorf("dry run %s: state %s: %v", run.doc.RunID, want, run.doc.Diagnostics)
			}
		}
		var doc RunDocument
		f.call("GET", "/v1/runs/"+run.doc.RunID, nil).decode(t, &doc)
		assert.Equal(t, want, doc.State, "run %s (kind %d)", run.doc.RunID, run.kind)
		if run.applied {
			ledgerRows[run.customer] = 1
		}
	}
	t.Logf("%d clients, %d runs: %d applied, %d conflicts, %d rejected, %d left pending, %d without changes or refused mid-run",
		soakClients, len(runs), applied, conflicts, rejected, len(pendingIDs), other)
	require.NotZero(t, applied, "the first apply to reach the store cannot conflict")

	list := f.call("GET", fmt.Sprintf("/v1/runs?state=pending&limit=%d", MaxListLimit), nil)
	var pendingList RunList
	list.decode(t, &pendingList)
	if len(pendingIDs) < MaxListLimit {
		listed := []string{}
		for _, r := range pendingList.Runs {
			listed = append(listed, r.ID)
		}
		assert.ElementsMatch(t, pendingIDs, listed, "every run left pending is listed as pending, and no other")
	}

	for _, name := range soakItems {
		assert.Equal(t, wantStock[name], f.committed("inventory", itemID(t, f, name))["quantity_in_stock"], "stock of %s", name)
	}
	assert.Equal(t, ledger+applied, f.count("transactions"), "one ledger row per applied run")
	tb, _ := f.st.Stage().Table("transactions")
	rows, err := tb.Find(table.Query{})
	require.NoError(t, err)
	got := map[string]int{}
	for _, row := range rows {
		if name, _ := row["customer_name"].(string); strings.HasPrefix(name, "soak ") {
			got[name]++
		}
	}
	assert.Equal(t, ledgerRows, got, "the ledger rows of the soak are those of the applied runs, once each")
	sort.Slice(rows, func(i, j int) bool {
		return table.CompareKeys(rows[i]["transaction_id"], rows[j]["transaction_id"]) < 0
	})
	for i := 1; i < len(rows); i++ {
		want := rows[i-1]["balance_after_transaction"].(float64) + rows[i]["transaction_amount"].(float64)
		assert.LessOrEqual(t, math.Abs(want-rows[i]["balance_after_transaction"].(float64)), 0.005, "balance chain at %v", rows[i]["transaction_id"])
	}

	// One started and one finished event per run; one applied or failed event per apply
	// decision; one rejected event per rejection; nothing for runs nobody decided.
	for _, run := range runs {
		ev := tally.byRun[run.doc.RunID]
		want := map[string]int{EventStarted: 1, EventFinished: 1}
		if run.applied {
			want[EventApplied] = 1
		}
		if run.conflict {
			want[EventFailed] = 1
		}
		if run.rejected {
			want[EventRejected] = 1
		}
		assert.Equal(t, want, ev, "events of run %s (kind %d)", run.doc.RunID, run.kind)
	}

	// No leak: with the clients and the streams gone and the server drained, the goroutines are
	// back to about what they were, and the live heap grew by a bounded amount.
	transport.CloseIdleConnections()
	f.web.Client().CloseIdleConnections()
	f.srv.Drain()
	settle, stopSettle := context.WithTimeout(ctx, time.Minute) // a hang guard, far out of reach
	defer stopSettle()
	for runtime.NumGoroutine() > goroutines+soakGoroutineSlack && settle.Err() == nil {
		time.Sleep(10 * time.Millisecond) // the connections' goroutines end as they see EOF
	}
	if n := runtime.NumGoroutine(); n > goroutines+soakGoroutineSlack {
		buf := make([]byte, 8<<20)
		t.Errorf("%d goroutines after the soak, %d before:\n%s", n, goroutines, buf[:runtime.Stack(buf, true)])
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("live heap %d KiB before, %d KiB after (%+d KiB); %d goroutines before, %d after",
		before.HeapAlloc>>10, after.HeapAlloc>>10, growth>>10, goroutines, runtime.NumGoroutine())
	assert.Less(t, growth, int64(soakHeapGrowth), "live heap growth in bytes")
}

// itemID is the key of the inventory item with the given name.
func itemID(t testing.TB, f *fixture, name string) string {
	t.Helper()
	tb, ok := f.st.Stage().Table("inventory")
	require.True(t, ok)
	rows, err := tb.Find(table.Query{})
	require.NoError(t, err)
	for _, r := range rows {
		if r["name"] == name {
			return r["item_id"].(string)
		}
	}
	t.Fatalf("no item %s", name)
	return ""
}
