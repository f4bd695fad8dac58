// Package evals measures how well a model plans with starplan: it runs a suite of customer
// requests (the format of testdata/eval/lab-requests.jsonl) through Ask, each against its own
// freshly seeded store, applies the accepted runs, and compares STATUS, stock, the transactions
// added and the register balance with the expectations; on a store of another domain
// (Options.Domain), STATUS and the rows each case lists as added or changed (rows_after). The report's figures (pass rate,
// first-try pass rate, repairs, contract violations, latency, tokens) tell whether a prompt or
// model change helped.
//
// It must not know about terminals or flags: the CLI renders its Report.
package evals

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// Case is one request of a suite, with what a correct plan does.
type Case struct {
	ID                 string           `json:"id"`
	Request            string           `json:"request"`
	Kind               string           `json:"kind"`   // read, mutate or other
	Status             string           `json:"status"` // the STATUS a correct plan sets
	StockAfter         map[string]int64 `json:"stock_after"`
	TransactionAmounts []float64        `json:"transaction_amounts"`
	BalanceAfter       *float64         `json:"balance_after"` // nil: not checked
	// RowsAfter lists, per table and key, each row the applied run adds or changes, with the
	// values of the fields to check; every other row must stay as it was. Checked on any
	// domain; a domain without the inventory's tables checks it even when it is absent (then
	// nothing may change).
	RowsAfter map[string]map[string]map[string]any `json:"rows_after"`
}

// Load reads a suite: one JSON object per line; blank lines are skipped. A malformed line is an
// error that names its line number.
func Load(r io.Reader) ([]Case, error) {
	var cases []Case
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(slices.DeleteFunc(slices.Clone(line), func(b byte) bool { return b == ' ' || b == '\t' || b == '\r' })) == 0 {
			continue
		}
		var c Case
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if c.Request == "" || c.Status == "" {
			return nil, fmt.Errorf("line %d: every case needs a request and a status", n)
		}
		if c.ID == "" {
			c.ID = fmt.Sprintf("line-%d", n)
		}
		cases = append(cases, c)
	}
	return cases, sc.Err()
}

// Options configure Run. The zero value runs one case at a time with the engine's defaults.
type Options struct {
	// Concurrency is how many cases run at once; 0 or less means 1.
	Concurrency int
	// MaxRepairs is passed to Ask.
	MaxRepairs int
	// Engine configures each case's engine (runner, limits).
	Engine engine.Options
	// Domain is the directory each case's store is made of, as for `starplan db init --domain`
	// (checked by engine.LoadDomain before the first case); nil means the inventory.
	Domain fs.FS
	// Progress, when set, is called after each case with the suite's progress so far.
	Progress func(Progress)
	// GiveUpAfter stops the suite when that many cases, the first to finish, all failed to reach
	// the model (an endpoint that is down or refuses the key): the rest would fail the same way,
	// each after its retries. 0 means DefaultGiveUpAfter; a negative value never gives up.
	GiveUpAfter int
}

// DefaultGiveUpAfter is Options.GiveUpAfter's default.
const DefaultGiveUpAfter = 3

// Progress is how far a suite has come.
type Progress struct {
	Done, Total, Passed int
}

// UnreachableError is Run giving up: the first cases to finish all failed to reach the model.
type UnreachableError struct {
	Cases int    // how many cases failed before Run gave up
	Err   string // the first case's error
}

func (e *UnreachableError) Error() string {
	if e.Cases == 1 {
		return "the first request failed to reach the model, so the suite stopped: " + e.Err
	}
	return fmt.Sprintf("the first %d requests all failed to reach the model, so the suite stopped: %s", e.Cases, e.Err)
}

// CaseResult is how one case went.
type CaseResult struct {
	ID                 string   `json:"id"`
	Request            string   `json:"request"`
	Pass               bool     `json:"pass"`
	FirstTry           bool     `json:"first_try"` // passed with the model's first reply
	Failures           []string `json:"failures"`  // what differed from the expectations
	Outcome            string   `json:"outcome"`
	Status             string   `json:"status"`
	Attempts           int      `json:"attempts"`
	ContractViolations int      `json:"contract_violations"` // attempts that broke the contract
	LatencyMS          float64  `json:"latency_ms"`
	PromptTokens       int      `json:"prompt_tokens"`
	CompletionTokens   int      `json:"completion_tokens"`
	RunID              string   `json:"run_id,omitempty"`
	Error              string   `json:"error,omitempty"` // the model or starplan failed
}

// Report sums up a suite.
type Report struct {
	Cases              []CaseResult `json:"cases"`
	Total              int          `json:"total"`
	Passed             int          `json:"passed"`
	FirstTryPassed     int          `json:"first_try_passed"`
	PassRate           float64      `json:"pass_rate"`
	FirstTryRate       float64      `json:"first_try_pass_rate"`
	RepairsUsed        int          `json:"repairs_used"`
	ContractViolations int          `json:"contract_violations"`
	Errors             int          `json:"errors"`
	LatencyP50MS       float64      `json:"latency_p50_ms"`
	LatencyP95MS       float64      `json:"latency_p95_ms"`
	PromptTokens       int          `json:"prompt_tokens"`
	CompletionTokens   int          `json:"completion_tokens"`
}

// Run runs every case and returns the report; cases come back in suite order. The error is for
// failures that stop the whole suite (a temporary directory that cannot be made); a case whose
// model call fails is a failed case with its Error set.
func Run(ctx context.Context, cases []Case, model engine.Model, opts Options) (*Report, error) {
	giveUp := opts.GiveUpAfter
	if giveUp == 0 {
		giveUp = DefaultGiveUpAfter
	}
	giveUp = min(giveUp, len(cases))
	if opts.Domain != nil {
		if _, errs := engine.LoadDomain(opts.Domain); len(errs) > 0 {
			return nil, fmt.Errorf("the domain has problems: %w", errors.Join(errs...))
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workers := max(opts.Concurrency, 1)
	results := make([]CaseResult, len(cases))
	errs := make([]error, len(cases))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var p Progress
	p.Total = len(cases)
	unreachable := 0 // cases that failed to reach the model, while no case has reached it
	for range workers {
		wg.Go(func() {
			for i := range next {
				r, modelFailed, err := runCase(ctx, cases[i], model, opts)
				results[i], errs[i] = r, err
				mu.Lock()
				p.Done++
				if r.Pass {
					p.Passed++
				}
				switch {
				case modelFailed && unreachable >= 0:
					unreachable++
					if giveUp > 0 && unreachable == giveUp {
						cancel(&UnreachableError{Cases: unreachable, Err: r.Error})
					}
				case !modelFailed:
					unreachable = -1 // the model answered once: its later failures are the cases'
				}
				if opts.Progress != nil {
					opts.Progress(p)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range cases {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	var ue *UnreachableError
	if errors.As(context.Cause(ctx), &ue) {
		return nil, ue
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return summarise(results), nil
}

// runCase runs one case against a fresh store in a temporary directory. modelFailed reports a
// case whose model call failed (the endpoint, not the plan).
func runCase(ctx context.Context, c Case, model engine.Model, opts Options) (r CaseResult, modelFailed bool, err error) {
	r = CaseResult{ID: c.ID, Request: c.Request}
	dir, err := os.MkdirTemp("", "starplan-eval-")
	if err != nil {
		return r, modelFailed, err
	}
	defer os.RemoveAll(dir)
	var dom *store.Domain // nil: the inventory
	if opts.Domain != nil {
		var errs []error
		if dom, errs = engine.LoadDomain(opts.Domain); len(errs) > 0 {
			return r, modelFailed, errors.Join(errs...)
		}
	}
	st, err := bolt.Open(dir, bolt.Options{Domain: dom})
	if err != nil {
		return r, modelFailed, err
	}
	defer st.Close()
	eng, err := engine.New(st, opts.Engine)
	if err != nil {
		return r, modelFailed, err
	}
	defer eng.Close()

	before, err := snapshot(st)
	if err != nil {
		return r, modelFailed, err
	}
	start := time.Now()
	res, err := eng.Ask(ctx, model, engine.AskRequest{Question: c.Request, Apply: true, MaxRepairs: opts.MaxRepairs})
	r.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		var me *engine.ModelError
		modelFailed = errors.As(err, &me)
		r.Error = err.Error()
		r.Failures = []string{"no answer: " + err.Error()}
		return r, modelFailed, nil
	}
	r.Outcome, r.Status, r.RunID, r.Attempts = string(res.Outcome), res.Status, res.RunID, len(res.Attempts)
	for _, a := range res.Attempts {
		r.PromptTokens += a.PromptTokens
		r.CompletionTokens += a.CompletionTokens
		if a.Outcome == engine.OutcomeContractViolation {
			r.ContractViolations++
		}
	}
	after, err := snapshot(st)
	if err != nil {
		return r, modelFailed, err
	}
	r.Failures = compare(c, res, before, after)
	r.Pass = len(r.Failures) == 0
	r.FirstTry = r.Pass && r.Attempts == 1
	return r, modelFailed, nil
}

// state is what a case's expectations speak of.
type state struct {
	rows map[string][]table.Row // every row of every table, in key order
	keys map[string]string      // each table's key field
	// The inventory's figures; shop is false on a store without its tables.
	shop    bool
	stock   map[string]int64
	amounts []float64 // transaction_amount of every transaction, in key order
	balance float64   // balance_after_transaction of the last transaction
}

func snapshot(st *bolt.Store) (state, error) {
	v := st.Stage()
	s := state{rows: map[string][]table.Row{}, keys: map[string]string{}, stock: map[string]int64{}}
	for _, name := range v.Names() {
		tb, _ := v.Table(name)
		rows, err := tb.Find(table.Query{})
		if err != nil {
			return s, err
		}
		s.rows[name], s.keys[name] = rows, tb.Schema().Key
	}
	inv, ok := v.Table("inventory")
	txns, ok2 := v.Table("transactions")
	if s.shop = ok && ok2; !s.shop {
		return s, nil
	}
	items, err := inv.Find(table.Query{})
	if err != nil {
		return s, err
	}
	for _, it := range items {
		id, _ := it["item_id"].(string)
		s.stock[id], _ = it["quantity_in_stock"].(int64)
	}
	rows, err := txns.Find(table.Query{})
	if err != nil {
		return s, err
	}
	for _, t := range rows {
		amount, _ := t["transaction_amount"].(float64)
		s.amounts = append(s.amounts, amount)
		s.balance, _ = t["balance_after_transaction"].(float64)
	}
	return s, nil
}

// compare lists how the run and the store differ from the case's expectations.
func compare(c Case, res *engine.Result, before, after state) []string {
	fails := []string{}
	if res.Outcome != engine.OutcomeOK {
		fails = append(fails, fmt.Sprintf("the run ended as %s", res.Outcome))
	}
	if res.Status != c.Status {
		fails = append(fails, fmt.Sprintf("STATUS %q, want %q", res.Status, c.Status))
	}
	if c.RowsAfter != nil || !before.shop {
		fails = append(fails, compareRows(c.RowsAfter, before, after)...)
	}
	if !before.shop {
		return fails
	}
	for id, was := range before.stock {
		want, listed := c.StockAfter[id]
		if !listed {
			want = was
		}
		if got := after.stock[id]; got != want {
			fails = append(fails, fmt.Sprintf("stock of %s is %d, want %d", id, got, want))
		}
	}
	added := after.amounts[min(len(before.amounts), len(after.amounts)):]
	if !sameAmounts(added, c.TransactionAmounts) {
		fails = append(fails, fmt.Sprintf("transactions added %v, want %v", added, c.TransactionAmounts))
	}
	if c.BalanceAfter != nil && math.Abs(after.balance-*c.BalanceAfter) > 0.005 {
		fails = append(fails, fmt.Sprintf("balance %.2f, want %.2f", after.balance, *c.BalanceAfter))
	}
	return fails
}

// compareRows lists how the rows a run added or changed differ from want: a row added or
// changed that want does not list, a listed row that did not change or whose field differs
// (compared as JSON), a row removed.
func compareRows(want map[string]map[string]map[string]any, before, after state) []string {
	var fails []string
	for name := range want {
		if _, ok := after.rows[name]; !ok {
			fails = append(fails, fmt.Sprintf("rows_after names table %s, which the store does not have", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(after.rows)) {
		key := after.keys[name]
		old := map[string]table.Row{}
		for _, r := range before.rows[name] {
			old[fmt.Sprint(r[key])] = r
		}
		seen := map[string]bool{}
		for _, r := range after.rows[name] {
			k := fmt.Sprint(r[key])
			seen[k] = true
			prev, existed := old[k]
			changed := !existed || !reflect.DeepEqual(prev, r)
			fields, listed := want[name][k]
			switch {
			case changed && !listed:
				fails = append(fails, fmt.Sprintf("%s %s was added or changed, and rows_after does not list it", name, k))
			case !changed && listed:
				fails = append(fails, fmt.Sprintf("%s %s did not change, and rows_after lists it", name, k))
			case listed:
				fields := slices.Sorted(maps.Keys(fields))
				for _, f := range fields {
					w, _ := json.Marshal(want[name][k][f])
					g, _ := json.Marshal(r[f])
					if !sameJSON(w, g) {
						fails = append(fails, fmt.Sprintf("%s %s: %s is %s, want %s", name, k, f, g, w))
					}
				}
			}
		}
		for k := range old {
			if !seen[k] {
				fails = append(fails, fmt.Sprintf("%s %s was removed", name, k))
			}
		}
		for k := range want[name] {
			if !seen[k] {
				fails = append(fails, fmt.Sprintf("rows_after lists %s %s, which the store does not have", name, k))
			}
		}
	}
	return fails
}

// sameJSON reports whether two JSON values are equal, numbers within 0.005 (12 and 12.0 alike).
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	if fx, ok := x.(float64); ok {
		fy, ok := y.(float64)
		return ok && math.Abs(fx-fy) <= 0.005
	}
	return reflect.DeepEqual(x, y)
}

func sameAmounts(got, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 0.005 {
			return false
		}
	}
	return true
}

func summarise(results []CaseResult) *Report {
	rep := &Report{Cases: results, Total: len(results)}
	var latencies []float64
	for _, r := range results {
		if r.Pass {
			rep.Passed++
		}
		if r.FirstTry {
			rep.FirstTryPassed++
		}
		if r.Attempts > 1 {
			rep.RepairsUsed += r.Attempts - 1
		}
		if r.Error != "" {
			rep.Errors++
		}
		rep.ContractViolations += r.ContractViolations
		rep.PromptTokens += r.PromptTokens
		rep.CompletionTokens += r.CompletionTokens
		latencies = append(latencies, r.LatencyMS)
	}
	if rep.Total > 0 {
		rep.PassRate = float64(rep.Passed) / float64(rep.Total)
		rep.FirstTryRate = float64(rep.FirstTryPassed) / float64(rep.Total)
	}
	sort.Float64s(latencies)
	rep.LatencyP50MS = percentile(latencies, 0.50)
	rep.LatencyP95MS = percentile(latencies, 0.95)
	return rep
}

// percentile returns the nearest-rank percentile of sorted values (0 for none).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(rank, 0)]
}
