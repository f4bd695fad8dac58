package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRvfrontPredeclaredReachedOtherwise: names a plan reaches other than at top level (only in
// a nested function, a lambda, a default value, a comprehension, a branch never taken, a
// helper's method, getattr and dir on a module, a name the guard rewrite adds inside a
// function) run as with the whole environment; a name the environment lacks is the same
// unknown-name error whichever way a run's predeclared dict is made.
func TestRvfrontPredeclaredReachedOtherwise(t *testing.T) {
	env, st := inventoryEnv(t)
	whole := *env
	whole.wholeEnv = true
	plans := []string{
		"def f():\n    return len(user_request)\nn = f()\n",
		"def outer():\n    def inner():\n        return math.floor(2.5)\n    return inner()\nx = outer()\n",
		"g = lambda: str(len(user_request))\nx = g()\n",
		"def f(x=user_request):\n    return x\nx = f()\n",
		"xs = [math.floor(v) for v in [1.5, 2.5] if v > len(user_request) - 100]\n",
		"d = {k: json.dumps(k) for k in [\"a\"]}\n",
		"if False:\n    x = inventory_tbl.get({\"name\": \"Aviator\"})\nx = 1\n",
		"fl = getattr(math, \"floor\")\nx = fl(2.5)\nnames = dir(math)\n",
		"row = inventory_tbl.get({\"name\": \"Aviator\"})\nprice = row[\"price\"] if row else 0\n",
		"def f(a, b):\n    return a * b + a\nx = f(3, 4)\nxs = [1] * 3\n",
		"def f():\n    return undefined_helper(1)\nx = 1\n",
		"x = user_requests\n",
	}
	now := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	for _, src := range plans {
		var got [2]*Result
		for i, e := range []*Env{env, &whole} {
			res := e.Run(context.Background(), Request{
				Reply: src, Bare: true, Now: now, View: st.Stage(),
				Inputs: map[string]any{"user_request": "two pairs of aviators", InputSubject: "alice"},
				Limits: Limits{MaxSteps: 200_000, MaxMemory: 16 << 20, Timeout: time.Minute},
			})
			res.Duration, res.Phases = 0, Phases{}
			got[i] = res
		}
		require.Equal(t, got[1], got[0], "%q", src)
		if got[0].Outcome == OutcomeCheckFailed {
			require.Equal(t, CodeUnknownName, got[0].Diagnostics[0].Code, "%q", src)
		} else {
			require.Equal(t, OutcomeOK, got[0].Outcome, "%q: %s", src, got[0].Diagnostics)
		}
	}
}
