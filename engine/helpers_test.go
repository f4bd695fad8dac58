package engine

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
)

// The inventory domain's helpers are Starlark (domains/inventory/helpers.star); the script
// testdata/domains/inventory_helpers.star checks them as a plan sees them, on the demo store.
func TestInventoryHelpers(t *testing.T) {
	// The script stores keys the domain's pattern refuses (TXN9, TXN1000X, REF007) to show what
	// the helpers do with them: its transactions take any text key here.
	files := fstest.MapFS{}
	for name, text := range store.Inventory().Definition {
		files[name] = &fstest.MapFile{Data: []byte(text)}
	}
	seed, err := os.ReadFile("../domains/inventory/seed.json")
	require.NoError(t, err)
	files["seed.json"] = &fstest.MapFile{Data: seed}
	relaxed := strings.Replace(store.Inventory().Definition["domain.json"], `"pattern": "TXN[0-9]{3,9}", `, "", 1)
	require.NotEqual(t, store.Inventory().Definition["domain.json"], relaxed)
	files["domain.json"] = &fstest.MapFile{Data: []byte(relaxed)}
	dom, err := store.LoadDomain(files)
	require.NoError(t, err)
	e := domainEngine(t, dom)
	runScript(t, e, "../testdata/domains/inventory_helpers.star")

	// Their reference comes from their def lines and docstrings.
	reg := e.Env().Registry()
	h, ok := reg.Lookup("next_transaction_id")
	require.True(t, ok)
	assert.Equal(t, builtins.GroupDomain, h.Group)
	assert.Equal(t, `next_transaction_id(tbl=transactions_tbl, prefix="TXN")`, h.Signature)
	assert.Contains(t, h.Doc, "(TXN002 after TXN001)")
	assert.Equal(t, "txn_id = next_transaction_id(transactions_tbl)", h.Example)
	_, ok = reg.Lookup("_not_the_ledger")
	assert.False(t, ok, "names starting with _ are the file's own")

	// Their calls are checked before the run, from their parameters.
	c := e.Env().CheckProgram("k = next_transaction_id(prefx=\"X\")\nb = get_current_balance(transactions_tbl, 1)\n", sandbox.Limits{})
	require.Len(t, c.Diagnostics, 2, c.Diagnostics.String())
	assert.Equal(t, builtins.CodeWrongArguments, c.Diagnostics[0].Code)
	assert.Contains(t, c.Diagnostics[0].Hint, `did you mean prefix? call it as next_transaction_id(tbl=transactions_tbl, prefix="TXN")`)
	assert.Equal(t, 2, c.Diagnostics[1].Line)
	assert.Empty(t, e.Env().CheckProgram("b = get_current_balance()\nk = next_transaction_id(transactions_tbl, prefix=\"TXN\")\n", sandbox.Limits{}).Diagnostics)
}

// A helper runs in the plan's thread: its work counts against the plan's limits, and an error
// inside it is reported at the plan's call.
func TestHelpersRunUnderThePlansLimits(t *testing.T) {
	dom := store.Inventory()
	env, ds := sandbox.NewDomainEnv(dom.Tables, `
def spin(n):
    """Counts to n.

    Example: spin(3)
    """
    i = 0
    while i < n:
        i += 1
    return i

def broken():
    """Fails.

    Example: broken()
    """
    return 1 // 0
`)
	require.Empty(t, ds)
	res := env.Run(t.Context(), sandbox.Request{Reply: "x = spin(1000000000)\nanswer_text = 'x'\nSTATUS = 'success'\n", Bare: true, Limits: sandbox.Limits{MaxSteps: 100_000}})
	assert.Equal(t, sandbox.OutcomeLimitExceeded, res.Outcome)
	assert.Equal(t, sandbox.LimitSteps, res.Limit)
	res = env.Run(t.Context(), sandbox.Request{Reply: "\n\ny = broken()\n", Bare: true})
	require.Equal(t, sandbox.OutcomeRuntimeError, res.Outcome)
	assert.Equal(t, 3, res.Diagnostics[0].Line, "the plan's line, not the helper's")
	assert.Contains(t, res.Diagnostics[0].Message, "division by zero")
}

// A helpers file is checked as a plan is, and every helper needs its docstring.
func TestHelpersFileProblems(t *testing.T) {
	t.Cleanup(sandbox.LiftModuleTime(10 * time.Minute)) // the step limit, not the time, must stop the endless loop
	dom := store.Inventory()
	for src, want := range map[string]string{
		"def f(:\n":                "plan.star", // replaced below: the file's own name
		"def f():\n    return 1\n": "helper f has no docstring",
		"load('x', 'y')\n":         "load() is not allowed",
		"x = 1 // 0\n":             "division by zero",
		"while True:\n    pass\n":  "step limit of 1000000 exceeded",
		"inventory_tbl = 1\n":      "predeclared helper and cannot be reassigned",
		"def f():\n    \"\"\"Doc.\"\"\"\n    return _sp_add(1, 2)\n": "reserved",
	} {
		_, ds := sandbox.NewDomainEnv(dom.Tables, src)
		require.NotEmpty(t, ds, src)
		if want == "plan.star" {
			assert.NotContains(t, ds.String(), "plan.star", src)
			continue
		}
		assert.Contains(t, strings.ToLower(ds.String()), strings.ToLower(want), src)
	}
}
