package engine

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// retailMini is the test domain of rules that read (testdata/domains/retail-mini), with files
// replaced by over.
func retailMini(t *testing.T, over map[string]string) fs.FS {
	t.Helper()
	dir := os.DirFS("../testdata/domains/retail-mini")
	m := fstest.MapFS{}
	entries, err := fs.ReadDir(dir, ".")
	require.NoError(t, err)
	for _, e := range entries {
		b, err := fs.ReadFile(dir, e.Name())
		require.NoError(t, err)
		m[e.Name()] = &fstest.MapFile{Data: b}
	}
	for name, text := range over {
		m[name] = &fstest.MapFile{Data: []byte(text)}
	}
	return m
}

func retailEngine(t *testing.T, over map[string]string) *Engine {
	t.Helper()
	dom, errs := LoadDomain(retailMini(t, over))
	require.Empty(t, errs)
	return domainEngine(t, dom)
}

func runPlan(t *testing.T, e *Engine, plan string) *Result {
	t.Helper()
	res, err := e.Run(context.Background(), Request{Reply: plan})
	require.NoError(t, err)
	return res
}

// A plan that refunds an order to another customer's gift card by writing the order directly
// changes no payment method, so a rule over the change set alone cannot see whose method it is;
// the reading rule looks it up and refuses it, and lets a refund to the customer's own card through.
func TestReadingRuleRefusesARefundToAnotherCustomersMethod(t *testing.T) {
	e := retailEngine(t, nil)
	res := runPlan(t, e, `orders_tbl.update({"status": "refunded", "refunded_to": "PM2"}, {"order_id": "O1"})
STATUS, answer_text = "success", "Refunded."`)
	require.Equal(t, OutcomeContractViolation, res.Outcome, res.Diagnostics.String())
	require.Len(t, res.Diagnostics, 1)
	assert.Equal(t, "refund_to_own_method", res.Diagnostics[0].Code)
	assert.Equal(t, "order O1 of C1 is refunded to PM2, a payment method of C2", res.Diagnostics[0].Message)

	res = runPlan(t, e, `orders_tbl.update({"status": "refunded", "refunded_to": "PM9"}, {"order_id": "O1"})
STATUS, answer_text = "success", "Refunded."`)
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	assert.Contains(t, res.Diagnostics[0].Message, "PM9, which is no payment method")

	res = runPlan(t, e, `orders_tbl.update({"status": "refunded", "refunded_to": "PM1"}, {"order_id": "O1"})
STATUS, answer_text = "success", "Refunded."`)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	applied, err := e.Apply(context.Background(), res.RunID)
	require.NoError(t, err)
	assert.True(t, applied.Applied, "a reading rule is not run again at apply when nothing it read moved")
}

// Two runs that each keep the credit ceiling alone (10 + 60) but not together (10 + 60 + 60):
// the plans read nothing and write different rows, so only the rule's reads tie them. The first
// applies; the second, whose rule read the customer's credits, is a conflict and writes nothing;
// made again, the rule refuses it.
func TestReadingRuleRunsValidAloneNotTogetherDoNotBothApply(t *testing.T) {
	e := retailEngine(t, nil)
	ctx := context.Background()
	grant := func(id string) string {
		return `credits_tbl.insert({"credit_id": "` + id + `", "customer_id": "C1", "amount": 60.0})
STATUS, answer_text = "success", "Granted."`
	}
	a := runPlan(t, e, grant("CRA"))
	b := runPlan(t, e, grant("CRB"))
	require.Equal(t, OutcomeOK, a.Outcome, a.Diagnostics.String())
	require.Equal(t, OutcomeOK, b.Outcome, b.Diagnostics.String())
	require.True(t, a.Pending)
	require.True(t, b.Pending)

	applied, err := e.Apply(ctx, a.RunID)
	require.NoError(t, err)
	require.True(t, applied.Applied)

	refused, err := e.Apply(ctx, b.RunID)
	require.NoError(t, err)
	assert.False(t, refused.Applied)
	require.Equal(t, OutcomeConflict, refused.Outcome)
	require.NotEmpty(t, refused.Diagnostics)
	assert.Equal(t, CodeConflict, refused.Diagnostics[0].Code)
	assert.Contains(t, refused.Diagnostics[0].Message, `the credits rows matching {"customer_id":"C1"} changed after the run read them`)
	assert.Contains(t, refused.Diagnostics[0].Hint, "the domain's rules that read the data (refund_to_own_method, credit_ceiling)")

	again := runPlan(t, e, grant("CRB"))
	require.Equal(t, OutcomeContractViolation, again.Outcome)
	assert.Equal(t, "credit_ceiling", again.Diagnostics[0].Code)
	assert.Contains(t, again.Diagnostics[0].Message, "customer C1 would hold 130.0 in store credit")
}

// A reading rule's view is read-only: a write is the rule's fault, and refuses the changes.
func TestReadingRuleCannotWrite(t *testing.T) {
	e := retailEngine(t, map[string]string{"invariants.star": `
def refund_to_own_method(changes, data):
    data["credits"].insert({"credit_id": "CRX", "customer_id": "C1", "amount": 1.0})
    return []

def credit_ceiling(changes, data):
    return []
`})
	res := runPlan(t, e, `credits_tbl.insert({"credit_id": "CRA", "customer_id": "C2", "amount": 1.0})
STATUS, answer_text = "success", "Granted."`)
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	assert.Contains(t, res.Diagnostics[0].Message, "the rule could not be checked")
	assert.Contains(t, res.Diagnostics[0].Message, "a rule reads the data; it cannot change it")
}

// A reading rule is bounded in rows read, per call.
func TestReadingRuleRowsReadBound(t *testing.T) {
	e := retailEngine(t, nil)
	saved := ruleRowsRead
	ruleRowsRead = 1
	t.Cleanup(func() { ruleRowsRead = saved })
	res := runPlan(t, e, `credits_tbl.insert({"credit_id": "CRA", "customer_id": "C1", "amount": 1.0})
STATUS, answer_text = "success", "Granted."`)
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	assert.Equal(t, "credit_ceiling", res.Diagnostics[0].Code)
	assert.Contains(t, res.Diagnostics[0].Message, "credit_ceiling read more than 1 rows")

	ruleRowsRead = 2 // CR0 and CRA: within the bound
	res = runPlan(t, e, `credits_tbl.insert({"credit_id": "CRA", "customer_id": "C1", "amount": 1.0})
STATUS, answer_text = "success", "Granted."`)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
}

// spinning is an invariants.star whose credit rule reads without end.
const spinning = `
def refund_to_own_method(changes, data):
    return []

def credit_ceiling(changes, data):
    n = 0
    for i in range(1000000000):
        n += data["credits"].count({"customer_id": "C1"})
    return []
`

// A reading rule is bounded in steps.
func TestReadingRuleStepsBound(t *testing.T) {
	liftRuleTime(t) // its cleanup puts invariantLimits back, steps too
	// The rule spins until a limit stops it: in the normal tier a tenth of the real million steps
	// (the same limit fires, a million steps of reads under -race took 3 s).
	invariantLimits.MaxSteps = testtier.Size(invariantLimits.MaxSteps/10, invariantLimits.MaxSteps)
	e := retailEngine(t, map[string]string{"invariants.star": spinning})
	// The rule reads through the run's stage, so the run's own clock is lifted too: a million
	// steps of reads under -race on a loaded machine took longer than the run's 5 s.
	res, err := e.Run(context.Background(), Request{Reply: `credits_tbl.insert({"credit_id": "CRA", "customer_id": "C1", "amount": 1.0})
STATUS, answer_text = "success", "Granted."`, Limits: sandbox.Limits{Timeout: 10 * time.Minute}})
	require.NoError(t, err)
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	assert.Equal(t, "credit_ceiling", res.Diagnostics[0].Code)
	assert.Contains(t, res.Diagnostics[0].Message, "the rule could not be checked")
	assert.Contains(t, res.Diagnostics[0].Message, "step limit")
}

// A reading rule is bounded in time: with steps lifted, only time stops it.
func TestReadingRuleTimeBound(t *testing.T) {
	limits := invariantLimits
	invariantLimits.MaxSteps, invariantLimits.Timeout = 1<<62, 200*time.Millisecond
	t.Cleanup(func() { invariantLimits = limits })
	e := retailEngine(t, map[string]string{"invariants.star": spinning})
	res := runPlan(t, e, `credits_tbl.insert({"credit_id": "CRA", "customer_id": "C1", "amount": 1.0})
STATUS, answer_text = "success", "Granted."`)
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	assert.Equal(t, "credit_ceiling", res.Diagnostics[0].Code)
	assert.Contains(t, res.Diagnostics[0].Message, "the rule could not be checked")
	assert.Contains(t, res.Diagnostics[0].Message, "time")
}

// payments is written only by the domain's helpers: a plan's own insert is refused by the check,
// naming the helper to call; one the check cannot see (a method taken with getattr) by the call;
// the helper's own writes go through, and its precondition binds.
func TestHelpersOnlyTable(t *testing.T) {
	e := retailEngine(t, nil)
	res := runPlan(t, e, `payments_tbl.insert({"order_id": "O1", "method_id": "PM2", "amount": 50.88})
STATUS, answer_text = "success", "Paid."`)
	require.Equal(t, OutcomeCheckFailed, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "helpers-only", res.Diagnostics[0].Code)
	assert.Contains(t, res.Diagnostics[0].Message, "payments may be written only by the domain's helpers")
	assert.Equal(t, "call pay, which writes payments", res.Diagnostics[0].Hint)

	res = runPlan(t, e, `ins = getattr(payments_tbl, "ins" + "ert")
ins({"order_id": "O1", "method_id": "PM2", "amount": 50.88})
STATUS, answer_text = "success", "Paid."`)
	require.Equal(t, OutcomeRuntimeError, res.Outcome, res.Diagnostics.String())
	assert.Contains(t, res.Diagnostics[0].Message, "payments may be written only by the domain's helpers, not by a plan directly; call pay, which writes payments")

	res = runPlan(t, e, `def sneak(row):
    return payments_tbl.insert(row)
sneak({"order_id": "O1", "method_id": "PM2", "amount": 50.88})
STATUS, answer_text = "success", "Paid."`)
	require.Equal(t, OutcomeCheckFailed, res.Outcome, "a plan's own function is the plan")

	res = runPlan(t, e, `id = pay("O1", "PM2")
STATUS, answer_text = ("success", "Paid.") if id else ("refused", "That card is not yours.")`)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "refused", res.Status)
	assert.True(t, res.Changes.Empty())

	res = runPlan(t, e, `id = pay("O1", "PM1")
STATUS, answer_text = "success", "Paid with " + id + "."`)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	require.Len(t, res.Changes["payments"].Inserted, 1)
	assert.Equal(t, "PM1", res.Changes["payments"].Inserted[0]["method_id"])
}

// "writes" has one value, and a table only helpers write needs a helper that writes it.
func TestHelpersOnlyDeclarationChecked(t *testing.T) {
	domainJSON, err := os.ReadFile("../testdata/domains/retail-mini/domain.json")
	require.NoError(t, err)
	_, errs := LoadDomain(retailMini(t, map[string]string{"domain.json": strings.Replace(string(domainJSON), `"writes": "helpers"`, `"writes": "helper"`, 1)}))
	assert.Contains(t, joined(errs), `table payments: "writes" is "helper"; the one value is "helpers"`)
	_, errs = LoadDomain(retailMini(t, map[string]string{"helpers.star": `
def look(o):
    """Returns the order.

    Example: look("O1")
    """
    return orders_tbl.get_by_key(o)
`}))
	assert.Contains(t, joined(errs), `table payments may be written only by helpers ("writes": "helpers"), but no helper of helpers.star writes it`)
}

// The library's reading rule: a late fine charged to a member for another member's loan keeps
// every rule over the change set (the member's fines_due moves with the ledger) and only the
// rule that reads the loan refuses it.
func TestLibraryFineForOwnLoan(t *testing.T) {
	e := libraryEngine(t)
	fine := func(member, loan string) *Result {
		return runPlan(t, e, `fines_tbl.insert({"member_id": "`+member+`", "loan_id": "`+loan+`", "amount": 1.5, "reason": "3 days late", "timestamp": now()})
m = members_tbl.get_by_key("`+member+`")
members_tbl.update({"fines_due": m["fines_due"] + 1.5}, m)
STATUS, answer_text = "success", "Fined."`)
	}
	res := fine("M001", "L002")
	require.Equal(t, OutcomeContractViolation, res.Outcome, res.Diagnostics.String())
	require.Len(t, res.Diagnostics, 1)
	assert.Equal(t, "fine_for_own_loan", res.Diagnostics[0].Code)
	assert.Contains(t, res.Diagnostics[0].Message, "charges M001 for loan L002, which is M003's")

	res = fine("M003", "L002")
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
}
