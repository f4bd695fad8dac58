package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
)

// ordersWith is the orders domain with the given files added or replaced, and notes whose two
// example answers run its rules in the check.
func ordersWith(files map[string]string) fstest.MapFS {
	d := fstest.MapFS{}
	for k, v := range ordersDomain {
		d[k] = v
	}
	d["prompt.json"] = &fstest.MapFile{Data: []byte(`{"statuses": {
		"success": {"when": "the order is changed", "answer": "Done."},
		"refused": {"when": "it cannot be changed", "answer": "Sorry, it has shipped."}}}`)}
	for k, v := range files {
		d[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return d
}

// manyMegabytes builds strings of 1,000,000 bytes, each under the size from which a guard asks
// the budget (builtins.CheckThreshold): only a measure of the heap sees them add up.
func manyMegabytes(n int) string {
	return fmt.Sprintf("[str(i %% 10) * 1000000 for i in range(%d)]", n)
}

// rulesPolicy is the orders policy with one starlark rule per function.
func rulesPolicy(fns ...string) string {
	var rules []string
	for _, fn := range fns {
		rules = append(rules, fmt.Sprintf(`{"name": "rule_%s", "kind": "starlark", "doc": "a rule", "params": {"function": %q}}`, fn, fn))
	}
	return `{"name": "orders",
		"contract": {"statuses": ["success", "refused"], "write_status": "success", "answer_max_sentences": 2, "answer_max_chars": 200},
		"rules": [` + strings.Join(rules, ",\n") + `]}`
}

func joined(errs []error) string {
	var all []string
	for _, e := range errs {
		all = append(all, e.Error())
	}
	return strings.Join(all, "\n")
}

// A helpers.star whose top level holds more than its 64 MiB budget, in strings each too small
// for a guard, is refused by the check, naming the limit, before any store is made of it.
func TestDomainCheckHoldsHelpersToTheirMemoryBudget(t *testing.T) {
	t.Cleanup(sandbox.LiftModuleTime(10 * time.Minute)) // which limit fires must not depend on the machine's speed
	_, errs := LoadDomain(ordersWith(map[string]string{"helpers.star": "_big = " + manyMegabytes(600) + "\n"}))
	require.NotEmpty(t, errs)
	assert.Contains(t, joined(errs), "helpers.star:1:")
	assert.Contains(t, joined(errs), "memory limit of 64.0 MiB exceeded")
}

// A rule that holds more than its budget on an example answer's changes is refused by the check.
func TestDomainCheckHoldsRulesToTheirMemoryBudget(t *testing.T) {
	liftRuleTime(t) // which limit fires must not depend on the machine's speed
	_, errs := LoadDomain(ordersWith(map[string]string{
		"policy.json":     rulesPolicy("grows"),
		"invariants.star": "def grows(changes):\n    held = " + manyMegabytes(600) + "\n    return []\n",
	}))
	require.NotEmpty(t, errs)
	assert.Contains(t, joined(errs), "grows: ")
	assert.Contains(t, joined(errs), "memory limit of 64.0 MiB exceeded")
}

// A rule that holds more than its budget only on the changes of a run (no example shows it)
// fails that run with the memory limit, under concurrent dry runs, and the process goes on: the
// next run is checked as before. The rule holds 70 MB (its budget is 64 MiB) in strings each too small for a guard,
// then works on: a rule measures its own values at its checkpoints, since the heap's growth can
// hide them (others' garbage freed while it allocates).
func TestRuleOverItsMemoryBudgetFailsItsRun(t *testing.T) {
	liftRuleTime(t)
	dom, errs := LoadDomain(ordersWith(map[string]string{
		"policy.json": rulesPolicy("pending_only_cancelled", "grows_on_insert"),
		"invariants.star": string(ordersDomain["invariants.star"].Data) + `
def grows_on_insert(changes):
    held = []
    for r in changes.get("orders", {}).get("inserted", []):
        for i in range(70):
            held.append(str(i % 10) * 1000000)
        a, b = "x" * 30000, "x" * 29999 + "x"
        while a == b:  # ever true, and slow enough that the limit of steps is not near
            pass
    return []
`,
	}))
	require.Empty(t, errs, joined(errs))
	e := domainEngine(t, dom)
	ctx := context.Background()
	const runs = 3
	results := make([]*Result, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			res, err := e.Run(ctx, Request{Reply: fmt.Sprintf(`orders_tbl.insert({"order_id": "N%d", "status": "pending"})
STATUS, answer_text = "success", "Added."`, i)})
			assert.NoError(t, err)
			results[i] = res
		})
	}
	wg.Wait()
	for _, res := range results {
		require.NotNil(t, res)
		require.Equal(t, OutcomeContractViolation, res.Outcome, res.Diagnostics.String())
		assert.Equal(t, "rule_grows_on_insert", res.Diagnostics[0].Code)
		assert.Contains(t, res.Diagnostics[0].Message, "memory limit of 64.0 MiB exceeded")
	}

	res, err := e.Run(ctx, Request{Reply: `orders_tbl.update({"status": "cancelled"}, {"order_id": "O1"})
STATUS, answer_text = "success", "Cancelled."`})
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.True(t, res.Pending)
}

// checkBoundMessage is what the check says when its rules' allowance is spent.
const checkBoundMessage = "the check runs the starlark rules on every example answer within 4000000 steps and 4s in all"

// Rules that each run to their own step limit on every example answer are stopped by the check's
// bound on all of them together, which names the rule that spent it: five rules on two answers
// would take ten times a rule's limit.
func TestDomainCheckBoundsItsRulesTogether(t *testing.T) {
	fns := []string{"spin_1", "spin_2", "spin_3", "spin_4", "spin_5"}
	var src strings.Builder
	for _, fn := range fns {
		fmt.Fprintf(&src, "def %s(changes):\n    while True:\n        pass\n\n", fn)
	}
	_, errs := LoadDomain(ordersWith(map[string]string{"policy.json": rulesPolicy(fns...), "invariants.star": src.String()}))
	require.NotEmpty(t, errs)
	all := joined(errs)
	assert.Contains(t, all, checkBoundMessage)
	assert.Regexp(t, `policy\.json: rule rule_spin_\d \(function spin_\d of invariants\.star\): the check`, all)
	assert.Equal(t, 1, strings.Count(all, checkBoundMessage), "said once, for the rule that spent it")
}

// A rule whose steps are each slow (a comparison of 100 MB) can only be stopped by time: the
// check's bound stops it within the check's total time, not a rule's limit per answer.
func TestDomainCheckBoundsSlowRulesByTime(t *testing.T) {
	shortenRuleTime(t)
	_, errs := LoadDomain(ordersWith(map[string]string{
		"policy.json": rulesPolicy("slow"),
		"invariants.star": `
def slow(changes):
    s = "x" * 500000
    t = "x" * 499999 + "y"
    held = []
    for i in range(200):
        held.append(s)
    while True:
        if t in held:
            return []
    return []
`,
	}))
	require.NotEmpty(t, errs)
	all := joined(errs)
	assert.Contains(t, all, strings.Replace(checkBoundMessage, "4s", invariantsTime.String(), 1))
	assert.Contains(t, all, "rule rule_slow (function slow of invariants.star): the check")
	assert.Contains(t, all, "it ran out the time", "only time can stop a rule whose every step is this slow")
}

// shortenRuleTime cuts the time bound of rules to an eighth for one test (restored at its end),
// one that asserts that time stops a rule nothing else can stop: the same limit fires at any
// speed, in half a second instead of four.
func shortenRuleTime(t *testing.T) {
	limits, total := invariantLimits, invariantsTime
	invariantLimits.Timeout, invariantsTime = limits.Timeout/8, total/8
	t.Cleanup(func() { invariantLimits, invariantsTime = limits, total })
}

// liftRuleTime lifts the time bound of rules for one test (restored at its end), so that a test
// asserting that the memory or step limit fires sees it on a loaded machine too. Engine tests do
// not run in parallel, so the variables are never read by another test meanwhile.
func liftRuleTime(t *testing.T) {
	limits, total := invariantLimits, invariantsTime
	invariantLimits.Timeout, invariantsTime = 10*time.Minute, 20*time.Minute
	t.Cleanup(func() { invariantLimits, invariantsTime = limits, total })
}
