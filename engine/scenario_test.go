package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/diffview"
	"github.com/starplan/starplan/table"
)

var update = flag.Bool("update", false, "rewrite the diff sections of testdata/scenarios")

// A scenario is a txtar file in testdata/scenarios:
//
//	-- request --   the customer's words (user_request)
//	-- reply --     the canned model reply
//	-- want --      JSON: outcome, status, codes (the diagnostics' codes, in order), rewrites
//	                (rules that must appear), limit, apply_outcome, apply_codes (the apply's
//	                diagnostics' codes, in order), stock_after,
//	                transaction_amounts, balance_after (as in ../shared/eval/lab-requests.jsonl)
//	-- interfere -- optional: a plan applied between the dry run and the apply
//	-- diff --      the change set as the terminal shows it, rewritten with -update
type scenarioWant struct {
	Outcome            Outcome          `json:"outcome"`
	Status             string           `json:"status"`
	Codes              []string         `json:"codes"`
	Rewrites           []string         `json:"rewrites"`
	Limit              string           `json:"limit"`
	ApplyOutcome       Outcome          `json:"apply_outcome"`
	ApplyCodes         []string         `json:"apply_codes"`
	StockAfter         map[string]int64 `json:"stock_after"`
	TransactionAmounts []float64        `json:"transaction_amounts"`
	BalanceAfter       *float64         `json:"balance_after"`
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("../testdata/scenarios/*.txtar")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 25)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			runScenario(t, file)
		})
	}
}

func section(ar *txtar.Archive, name string) (string, bool) {
	for _, f := range ar.Files {
		if f.Name == name {
			return string(f.Data), true
		}
	}
	return "", false
}

func runScenario(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	require.NoError(t, err)
	request, _ := section(ar, "request")
	reply, ok := section(ar, "reply")
	require.True(t, ok, "a scenario has a reply")
	wantJSON, ok := section(ar, "want")
	require.True(t, ok, "a scenario has a want section")
	var want scenarioWant
	dec := json.NewDecoder(strings.NewReader(wantJSON))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&want))

	e, _ := newEngine(t)
	ctx := context.Background()
	before := snapshot(t, e)
	res, err := e.Run(ctx, Request{Reply: reply, UserRequest: strings.TrimSpace(request), Origin: "scenario"})
	require.NoError(t, err)

	assert.Equal(t, want.Outcome, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, want.Status, res.Status)
	var codes []string
	for _, d := range res.Diagnostics {
		codes = append(codes, d.Code)
		assert.NotEmpty(t, d.Message)
	}
	assert.Equal(t, want.Codes, codes, res.Diagnostics.String())
	assert.Equal(t, want.Limit, string(res.Limit))
	var rules []string
	for _, r := range res.Rewrites {
		rules = append(rules, r.Rule)
	}
	for _, r := range want.Rewrites {
		assert.Contains(t, rules, r)
	}

	var diff bytes.Buffer
	require.NoError(t, diffview.Terminal(&diff, res.Changes, diffview.Options{Schemas: schemaMap(e)}))
	if *update {
		setSection(ar, "diff", diff.String())
		require.NoError(t, os.WriteFile(file, txtar.Format(ar), 0o644))
	} else {
		golden, _ := section(ar, "diff")
		assert.Equal(t, golden, diff.String(), "the diff (go test ./engine -run TestScenarios -update rewrites it)")
	}

	if interfere, ok := section(ar, "interfere"); ok {
		other, err := e.Run(ctx, Request{Reply: interfere, Apply: true, Origin: "scenario"})
		require.NoError(t, err)
		require.True(t, other.Applied, other.Diagnostics.String())
		before = snapshot(t, e)
	}
	if res.Pending {
		applied, err := e.Apply(ctx, res.RunID)
		require.NoError(t, err)
		assert.Equal(t, want.ApplyOutcome, applied.Outcome, applied.Diagnostics.String())
		var codes []string
		for _, d := range applied.Diagnostics {
			codes = append(codes, d.Code)
			assert.Equal(t, diag.StageApply, d.Stage)
		}
		assert.Equal(t, want.ApplyCodes, codes, applied.Diagnostics.String())
	} else {
		assert.Empty(t, want.ApplyOutcome, "only a pending run is applied")
	}
	after := snapshot(t, e)
	if want.ApplyOutcome != OutcomeOK {
		assert.Equal(t, before, after, "a run that is not applied changes nothing")
		return
	}
	checkStore(t, want, before, after)
}

// storeState is what a scenario checks: every item's stock and the ledger.
type storeState struct {
	Stock  map[string]int64
	Ledger []table.Row
}

func snapshot(t *testing.T, e *Engine) storeState {
	t.Helper()
	v := e.Store().Stage()
	inv, _ := v.Table("inventory")
	txns, _ := v.Table("transactions")
	items, err := inv.Find(table.Query{})
	require.NoError(t, err)
	s := storeState{Stock: map[string]int64{}}
	for _, it := range items {
		s.Stock[it["item_id"].(string)] = it["quantity_in_stock"].(int64)
	}
	s.Ledger, err = txns.Find(table.Query{})
	require.NoError(t, err)
	return s
}

func checkStore(t *testing.T, want scenarioWant, before, after storeState) {
	t.Helper()
	for id, stock := range after.Stock {
		expected, listed := want.StockAfter[id]
		if !listed {
			expected = before.Stock[id]
		}
		assert.Equal(t, expected, stock, "stock of %s", id)
	}
	require.GreaterOrEqual(t, len(after.Ledger), len(before.Ledger))
	assert.Equal(t, before.Ledger, after.Ledger[:len(before.Ledger)], "existing transactions never change")
	var amounts []float64
	for _, r := range after.Ledger[len(before.Ledger):] {
		amounts = append(amounts, r["transaction_amount"].(float64))
	}
	assert.Equal(t, want.TransactionAmounts, amounts)
	if want.BalanceAfter != nil {
		last := after.Ledger[len(after.Ledger)-1]
		assert.InDelta(t, *want.BalanceAfter, last["balance_after_transaction"].(float64), 0.005)
	}
}

func schemaMap(e *Engine) map[string]*table.Schema {
	m := map[string]*table.Schema{}
	for _, s := range Schemas(e.Store()) {
		m[s.Name] = s
	}
	return m
}

func setSection(ar *txtar.Archive, name, data string) {
	for i := range ar.Files {
		if ar.Files[i].Name == name {
			ar.Files[i].Data = []byte(data)
			return
		}
	}
	ar.Files = append(ar.Files, txtar.File{Name: name, Data: []byte(data)})
}

// TestScenariosCoverTheContract keeps the suite honest: every STATUS, every policy rule and every
// outcome appears in at least one scenario.
func TestScenariosCoverTheContract(t *testing.T) {
	files, err := filepath.Glob("../testdata/scenarios/*.txtar")
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		require.NoError(t, err)
		wantJSON, _ := section(ar, "want")
		var w scenarioWant
		require.NoError(t, json.Unmarshal([]byte(wantJSON), &w))
		seen["status:"+w.Status] = true
		seen["outcome:"+string(w.Outcome)] = true
		seen["outcome:"+string(w.ApplyOutcome)] = true
		for _, c := range append(w.Codes, w.ApplyCodes...) {
			seen["code:"+c] = true
		}
	}
	var missing []string
	need := []string{
		"status:success", "status:no_match", "status:insufficient_stock", "status:invalid_request", "status:unsupported_intent",
		"outcome:ok", "outcome:check_failed", "outcome:runtime_error", "outcome:limit_exceeded", "outcome:contract_violation", "outcome:conflict",
		"code:no-program", "code:python-try", "code:writes-not-allowed", "code:ledger-whole-order", "code:ledger-per-unit",
		"code:ledger-sign", "code:ledger-amount", "code:balance-chain", "code:delete-not-allowed", "code:append-only", "code:field-immutable",
		"code:balance-negative", "code:conflict", "code:answer-control-char", "code:program-control-char",
	}
	for _, n := range need {
		if !seen[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	assert.Empty(t, missing, fmt.Sprintf("no scenario shows %v", missing))
}
