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
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/diffview"
	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

var update = flag.Bool("update", false, "rewrite the diff sections of testdata/scenarios")

// A scenario is a txtar file in testdata/scenarios:
//
//	-- domain --    optional: the built-in domain whose fresh store it runs on (default inventory)
//	-- request --   the customer's words (user_request)
//	-- subject --   optional: the subject the run acts for (Request.Subject)
//	-- reply --     the canned model reply
//	-- want --      JSON: outcome, status, codes (the diagnostics' codes, in order), rewrites
//	                (rules that must appear), limit, apply_outcome, apply_codes (the apply's
//	                diagnostics' codes, in order), stock_after,
//	                transaction_amounts, balance_after (as in ../shared/eval/lab-requests.jsonl;
//	                inventory only), rows_after (any domain: {table: {key: {field: value}}},
//	                every row the apply adds or changes, with the fields to check)
//	-- interfere -- optional: a plan applied between the dry run and the apply
//	-- diff --      the change set as the terminal shows it, rewritten with -update
type scenarioWant struct {
	Outcome            Outcome          `json:"outcome"`
	Status             string           `json:"status"`
	AnswerText         string           `json:"answer_text"` // checked when set
	Codes              []string         `json:"codes"`
	Rewrites           []string         `json:"rewrites"`
	Limit              string           `json:"limit"`
	ApplyOutcome       Outcome          `json:"apply_outcome"`
	ApplyCodes         []string         `json:"apply_codes"`
	StockAfter         map[string]int64 `json:"stock_after"`
	TransactionAmounts []float64        `json:"transaction_amounts"`
	BalanceAfter       *float64         `json:"balance_after"`
	// RowsAfter lists, per table and key, each row the apply added or changed and the values of
	// the fields to check; every other row must be as it was.
	RowsAfter map[string]map[string]map[string]any `json:"rows_after"`
}

// scenarioDomain is the built-in domain a scenario runs on.
func scenarioDomain(ar *txtar.Archive) string {
	if name, ok := section(ar, "domain"); ok {
		return strings.TrimSpace(name)
	}
	return domains.Inventory
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("../testdata/scenarios/*.txtar")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 25)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel() // each on an engine and store of its own
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
	subject, _ := section(ar, "subject")
	reply, ok := section(ar, "reply")
	require.True(t, ok, "a scenario has a reply")
	wantJSON, ok := section(ar, "want")
	require.True(t, ok, "a scenario has a want section")
	var want scenarioWant
	dec := json.NewDecoder(strings.NewReader(wantJSON))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&want))

	name := scenarioDomain(ar)
	var e *Engine
	if name == domains.Inventory {
		e, _ = newEngine(t)
	} else {
		e = builtinEngine(t, name)
		require.Empty(t, want.StockAfter, "stock_after is for the inventory domain; use rows_after")
		require.Empty(t, want.TransactionAmounts, "transaction_amounts is for the inventory domain; use rows_after")
		require.Nil(t, want.BalanceAfter, "balance_after is for the inventory domain; use rows_after")
	}
	ctx := context.Background()
	before := snapshot(t, e)
	// A scenario asserts which limit fired only where speed cannot change it: the time limit is
	// far beyond any step budget on a loaded machine, so a step-limit scenario sees the steps.
	res, err := e.Run(ctx, Request{Reply: reply, UserRequest: strings.TrimSpace(request), Subject: strings.TrimSpace(subject), Origin: "scenario",
		Limits: sandbox.Limits{Timeout: 10 * time.Minute}})
	require.NoError(t, err)

	assert.Equal(t, want.Outcome, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, want.Status, res.Status)
	if want.AnswerText != "" {
		assert.Equal(t, want.AnswerText, res.AnswerText)
	}
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
	if name == domains.Inventory {
		checkStore(t, want, before, after)
	}
	if name != domains.Inventory || want.RowsAfter != nil {
		checkRows(t, e, want.RowsAfter, before, after)
	}
}

// storeState is what a scenario checks: every row of every table, in key order.
type storeState map[string][]table.Row

func snapshot(t *testing.T, e *Engine) storeState {
	t.Helper()
	v := e.Store().StageFor(context.Background(), store.RunLimits{})
	s := storeState{}
	for _, name := range v.Names() {
		tb, _ := v.Table(name)
		rows, err := tb.Find(table.Query{})
		require.NoError(t, err)
		s[name] = rows
	}
	return s
}

// checkRows checks that the rows an apply added or changed are exactly those listed, with the
// listed values (compared as JSON), and that no row was removed.
func checkRows(t *testing.T, e *Engine, want map[string]map[string]map[string]any, before, after storeState) {
	t.Helper()
	schemas := schemaMap(e)
	for name := range want {
		require.Contains(t, schemas, name, "rows_after names a table the domain lacks")
	}
	for name, rows := range after {
		key := schemas[name].Key
		old := map[string]table.Row{}
		for _, r := range before[name] {
			old[fmt.Sprint(r[key])] = r
		}
		seen := map[string]bool{}
		for _, r := range rows {
			k := fmt.Sprint(r[key])
			seen[k] = true
			fields, listed := want[name][k]
			if !listed {
				assert.Equal(t, old[k], r, "%s %s is not in rows_after, so it must not change", name, k)
				continue
			}
			assert.NotEqual(t, old[k], r, "%s %s is in rows_after, so the apply adds or changes it", name, k)
			for f, v := range fields {
				wantJSON, err := json.Marshal(v)
				require.NoError(t, err)
				gotJSON, err := json.Marshal(r[f])
				require.NoError(t, err)
				assert.JSONEq(t, string(wantJSON), string(gotJSON), "%s %s: %s", name, k, f)
			}
		}
		for k := range old {
			assert.True(t, seen[k], "%s %s was removed", name, k)
		}
		for k := range want[name] {
			assert.True(t, seen[k], "rows_after lists %s %s, which is not in the store", name, k)
		}
	}
}

// checkStore checks the inventory's own expectations: every item's stock and the ledger.
func checkStore(t *testing.T, want scenarioWant, before, after storeState) {
	t.Helper()
	stock := func(s storeState) map[string]int64 {
		m := map[string]int64{}
		for _, it := range s["inventory"] {
			m[it["item_id"].(string)] = it["quantity_in_stock"].(int64)
		}
		return m
	}
	beforeStock, afterStock := stock(before), stock(after)
	beforeLedger, afterLedger := before["transactions"], after["transactions"]
	for id, stock := range afterStock {
		expected, listed := want.StockAfter[id]
		if !listed {
			expected = beforeStock[id]
		}
		assert.Equal(t, expected, stock, "stock of %s", id)
	}
	require.GreaterOrEqual(t, len(afterLedger), len(beforeLedger))
	assert.Equal(t, beforeLedger, afterLedger[:len(beforeLedger)], "existing transactions never change")
	var amounts []float64
	for _, r := range afterLedger[len(beforeLedger):] {
		amounts = append(amounts, r["transaction_amount"].(float64))
	}
	assert.Equal(t, want.TransactionAmounts, amounts)
	if want.BalanceAfter != nil {
		last := afterLedger[len(afterLedger)-1]
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

// TestScenariosCoverTheContract keeps the suite honest: for the inventory, every STATUS, every
// policy rule and every outcome appears in at least one of its scenarios; for each other domain
// a scenario runs on, every STATUS of its contract, every one of its starlark rules (by its
// code, the rule's name) and both a write applied and a write refused.
func TestScenariosCoverTheContract(t *testing.T) {
	files, err := filepath.Glob("../testdata/scenarios/*.txtar")
	require.NoError(t, err)
	seen := map[string]map[string]bool{} // domain -> what its scenarios show
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		require.NoError(t, err)
		name := scenarioDomain(ar)
		if seen[name] == nil {
			seen[name] = map[string]bool{}
		}
		wantJSON, _ := section(ar, "want")
		var w scenarioWant
		require.NoError(t, json.Unmarshal([]byte(wantJSON), &w))
		seen[name]["status:"+w.Status] = true
		seen[name]["outcome:"+string(w.Outcome)] = true
		seen[name]["outcome:"+string(w.ApplyOutcome)] = true
		for _, c := range append(w.Codes, w.ApplyCodes...) {
			seen[name]["code:"+c] = true
		}
	}
	need := map[string][]string{domains.Inventory: {
		"status:success", "status:no_match", "status:insufficient_stock", "status:invalid_request", "status:unsupported_intent",
		"outcome:ok", "outcome:check_failed", "outcome:runtime_error", "outcome:limit_exceeded", "outcome:contract_violation", "outcome:conflict",
		"code:no-program", "code:python-try", "code:writes-not-allowed", "code:ledger-whole-order", "code:ledger-per-unit",
		"code:ledger-sign", "code:ledger-amount", "code:balance-chain", "code:delete-not-allowed", "code:append-only", "code:field-immutable",
		"code:balance-negative", "code:conflict", "code:answer-control-char", "code:program-control-char",
	}}
	require.Contains(t, seen, domains.Library, "the library has scenarios")
	for name := range seen {
		if name == domains.Inventory {
			continue
		}
		dir, ok := domains.Builtin(name)
		require.True(t, ok, "scenarios run on built-in domains; %q is not one", name)
		dom, errs := LoadDomain(dir)
		require.Empty(t, errs)
		policy, err := contracts.FromDefinition(dom.Name, dom.Definition)
		require.NoError(t, err)
		n := []string{"outcome:ok", "outcome:contract_violation"}
		for _, st := range policy.Contract.Statuses {
			n = append(n, "status:"+st)
		}
		for _, r := range policy.Rules {
			if r.Kind == "starlark" {
				n = append(n, "code:"+r.Name)
			}
		}
		need[name] = n
	}
	for name, n := range need {
		var missing []string
		for _, x := range n {
			if !seen[name][x] {
				missing = append(missing, x)
			}
		}
		slices.Sort(missing)
		assert.Empty(t, missing, fmt.Sprintf("no %s scenario shows %v", name, missing))
	}
}
