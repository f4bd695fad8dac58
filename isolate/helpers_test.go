package isolate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
)

// A worker loads the domain's helpers under their own 64 MiB budget, measured as a run's is: a
// top level that holds 600 strings of 1 MB, each too small for a guard, is refused with that
// limit named, not left to the worker's process limit.
func TestWorkerHoldsHelpersToTheirBudget(t *testing.T) {
	p := newPool(t, Options{})
	st := openStore(t)
	j, _ := job(st, readPlan, sandbox.Limits{})
	j.Inputs["user_request"] = "1"
	j.Helpers = "_big = [str(i % 10) * 1000000 for i in range(600)]\n"
	res := p.Run(bg, j)
	require.NotEqual(t, sandbox.OutcomeOK, res.Outcome)
	require.NotEmpty(t, res.Diagnostics)
	assert.Contains(t, res.Diagnostics.String(), "memory limit of 64.0 MiB exceeded")
}
