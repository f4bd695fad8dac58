package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/builtins/tables"
	"github.com/starplan/starplan/table"
)

func run(t *testing.T, src string, limits Limits) *Result {
	t.Helper()
	return testEnv().Run(context.Background(), Request{Reply: src, Limits: limits})
}

func TestRunReturnsGlobalsAndOutput(t *testing.T) {
	res := testEnv().Run(context.Background(), Request{
		Reply:  "<execute_python>\nprint('looking up', user_request)\nanswer_text = 'We have ' + str(3) + ' in stock.'\nSTATUS = 'success'\nprices = [1, 2.5, None, True]\nf = lambda x: x\n</execute_python>",
		Inputs: map[string]any{"user_request": "how many?"},
	})
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "We have 3 in stock.", res.Globals["answer_text"])
	assert.Equal(t, "success", res.Globals["STATUS"])
	assert.Equal(t, []any{int64(1), 2.5, nil, true}, res.Globals["prices"])
	assert.NotContains(t, res.Globals, "f", "functions are not data")
	assert.Equal(t, "looking up how many?\n", res.Stdout)
	assert.False(t, res.StdoutTruncated)
	assert.Positive(t, res.Steps)
	assert.Positive(t, res.Duration)
}

// emptyView is a staged view without tables.
type emptyView struct{}

func (emptyView) Names() []string                  { return nil }
func (emptyView) Table(string) (table.Table, bool) { return nil, false }

// A request's view and now are bound to the run's thread: now() answers the request's time; a
// request without a view leaves the tables unbound.
func TestRunBindsTheView(t *testing.T) {
	env, ds := NewDomainEnv(nil, "")
	require.Empty(t, ds)
	at := time.Date(2025, 3, 14, 17, 9, 26, 0, time.UTC)
	res := env.Run(context.Background(), Request{Reply: "t = now()\n", View: emptyView{}, Now: at, Globals: []string{"t"}})
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, at.Format(tables.TimestampLayout), res.Globals["t"])

	res = env.Run(context.Background(), Request{Reply: "t = now()\n"})
	assert.Equal(t, OutcomeRuntimeError, res.Outcome)
	assert.Contains(t, res.Diagnostics.String(), tables.ErrNotBound.Error())
}

func TestRunStepLimit(t *testing.T) {
	// The clock is out of reach so that only the step limit can stop the run, however slow the
	// machine.
	res := run(t, "n = 0\nwhile True:\n    n += 1\n", Limits{MaxSteps: 10_000, Timeout: time.Hour})
	assert.Equal(t, OutcomeLimitExceeded, res.Outcome)
	assert.Equal(t, LimitSteps, res.Limit)
	require.Len(t, res.Diagnostics, 1)
	assert.Equal(t, CodeLimit, res.Diagnostics[0].Code)
	assert.InDelta(t, 10_000, float64(res.Steps), 10)

	// The same program under the default limit runs 1000× longer before it is stopped.
	res = run(t, "n = 0\nwhile n < 100000:\n    n += 1\n", Limits{Timeout: time.Hour})
	assert.Equal(t, OutcomeOK, res.Outcome)
}

func TestRunTimeLimit(t *testing.T) {
	res := run(t, "while True:\n    pass\n", Limits{MaxSteps: 1 << 62, Timeout: 50 * time.Millisecond})
	assert.Equal(t, OutcomeLimitExceeded, res.Outcome)
	assert.Equal(t, LimitTime, res.Limit)
	assert.Contains(t, res.Diagnostics[0].Message, "time limit of 50ms exceeded")
}

func TestRunCancelledByCaller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	res := testEnv().Run(ctx, Request{Reply: "while True:\n    pass\n", Limits: Limits{MaxSteps: 1 << 62, Timeout: time.Minute}})
	assert.Equal(t, OutcomeRuntimeError, res.Outcome)
	assert.Equal(t, CodeCancelled, res.Diagnostics[0].Code)
}

// A deadline of the caller's that passes before the run's time limit stops the run as the time
// limit does; a caller's context that has already ended cancels the run at once.
func TestRunStoppedByTheCallersDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res := testEnv().Run(ctx, Request{Reply: "while True:\n    pass\n", Limits: Limits{MaxSteps: 1 << 62, Timeout: time.Hour}})
	assert.Equal(t, OutcomeLimitExceeded, res.Outcome)
	assert.Equal(t, LimitTime, res.Limit)

	ended, cancel2 := context.WithCancel(context.Background())
	cancel2()
	res = testEnv().Run(ended, Request{Reply: "while True:\n    pass\n", Limits: Limits{MaxSteps: 1 << 62, Timeout: time.Hour}})
	assert.Equal(t, OutcomeRuntimeError, res.Outcome)
	require.NotEmpty(t, res.Diagnostics)
	assert.Equal(t, CodeCancelled, res.Diagnostics[0].Code)
}

func TestRunOutputIsCapped(t *testing.T) {
	res := run(t, "for i in range(1000):\n    print('0123456789')\n", Limits{MaxOutput: 100})
	assert.Equal(t, OutcomeOK, res.Outcome)
	assert.True(t, res.StdoutTruncated)
	assert.True(t, strings.HasPrefix(res.Stdout, strings.Repeat("0123456789\n", 9)))
	assert.Contains(t, res.Stdout, "[output truncated: 10900 more bytes]")
}

func TestRunMemoryGuard(t *testing.T) {
	res := run(t, "s = 'x' * 100000000\n", Limits{MaxMemory: 32 << 20})
	assert.Equal(t, OutcomeLimitExceeded, res.Outcome)
	assert.Equal(t, LimitMemory, res.Limit)
	assert.Equal(t, 1, res.Diagnostics[0].Line)
	// Under a larger budget the same operation is allowed.
	res = run(t, "s = 'x' * 10000000\nn = len(s)\n", Limits{MaxMemory: 64 << 20})
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, int64(10_000_000), res.Globals["n"])
}

// The guards do exactly what the operators do, so a program's meaning never changes.
func TestGuardsKeepSemantics(t *testing.T) {
	src := `
a = [1]
b = a
a += [2]
same = b == [1, 2]
c = [1]
d = c
c = c + [3]
copied = d == [1]
t = (1,) * 2
s = "ab" * 2 + "c"
n = 3 * 4 + 2
f = 1.5 * 2
r = "a-b".replace("-", "+")
j = ", ".join(["x", "y"])
m = {"k": [1]}
m["k"] += [2]
big = 12345678901234567890 * 98765432109876543210
keys = ["k"]
counts = {"k": 1}
counts[keys[0]] += 2
grid = [[1], [2]]
grid[len(keys)] *= 2
ext = [1]
ext_alias = ext
ext.extend([2, 3])
words = "a,b,,c".split(",", 2)
lines = "x\ny".splitlines()
named = "{a}-{b}".format(a = 1, b = "z")
joiner = ", ".join
aliased = joiner(["x", "y"])
shown = str(joiner)
got = getattr("a-b", "replace")("-", "+")
spread = "".join(*[["p", "q"]])
grow = [1]
add = grow.extend
add([2])
other = getattr(grow, "pop")()
acc = 0.0
for v in [1, 2.5]:
    acc += v
`
	res := run(t, src, Limits{})
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	g := res.Globals
	assert.Equal(t, true, g["same"], "+= extends a list in place")
	assert.Equal(t, true, g["copied"], "+ makes a new list")
	assert.Equal(t, []any{int64(1), int64(1)}, g["t"])
	assert.Equal(t, "ababc", g["s"])
	assert.Equal(t, int64(14), g["n"])
	assert.Equal(t, 3.0, g["f"])
	assert.Equal(t, "a+b", g["r"])
	assert.Equal(t, "x, y", g["j"])
	assert.Equal(t, map[string]any{"k": []any{int64(1), int64(2)}}, g["m"])
	assert.NotContains(t, g, "big", "integers beyond 64 bits are not plain data")
	assert.Equal(t, map[string]any{"k": int64(3)}, g["counts"], "a[f()] += y")
	assert.Equal(t, []any{[]any{int64(1)}, []any{int64(2), int64(2)}}, g["grid"], "a[f()] *= y")
	assert.Equal(t, []any{int64(1), int64(2), int64(3)}, g["ext_alias"], "extend works in place")
	assert.Equal(t, []any{"a", "b", ",c"}, g["words"])
	assert.Equal(t, []any{"x", "y"}, g["lines"])
	assert.Equal(t, "1-z", g["named"])
	assert.Equal(t, "x, y", g["aliased"], "an alias of a guarded method")
	assert.Equal(t, "<built-in method join of string value>", g["shown"])
	assert.Equal(t, "a+b", g["got"], "getattr of a guarded method")
	assert.Equal(t, "pq", g["spread"], "a guarded method called with *args")
	assert.Equal(t, []any{int64(1)}, g["grow"], "a list's aliased extend, then pop through getattr")
	assert.Equal(t, int64(2), g["other"])
	assert.Equal(t, 3.5, g["acc"], "an accumulator of numbers, which needs no guard")
}

// A guarded method reached through an alias or getattr keeps the method's own errors: the same
// program run without the guards fails with the same message.
func TestGuardedAliasesKeepTheMethodsErrors(t *testing.T) {
	unguarded := testEnv()
	unguarded.unguarded = true
	for _, src := range []string{
		"j = ''.join\nj(1)\n",
		"r = getattr('s', 'replace')\nr(1, 2)\n",
		"x = (5).join\n",
		"x = getattr(5, 'join')\n",
		"x = getattr('s', 'nope', None).format\n",
		"e = [].extend\ne(1)\n",
		"x = ''.join(*[1])\n",
	} {
		want := unguarded.Run(context.Background(), Request{Reply: src})
		require.Equal(t, OutcomeRuntimeError, want.Outcome, src)
		res := run(t, src, Limits{})
		require.Equal(t, OutcomeRuntimeError, res.Outcome, src)
		assert.Equal(t, want.Diagnostics[0].Message, res.Diagnostics[0].Message, src)
	}
}

func TestGuardErrorsMatchTheOperators(t *testing.T) {
	res := run(t, "x = 'a' * 'b'\n", Limits{})
	require.Equal(t, OutcomeRuntimeError, res.Outcome)
	assert.Contains(t, res.Diagnostics[0].Message, "unknown binary op: string * string")
	assert.Equal(t, 1, res.Diagnostics[0].Line)
	assert.Equal(t, 9, res.Diagnostics[0].Col)
	// A number's += goes without a guard, and fails as the operator does.
	res = run(t, "n = 0\nn += 'a'\n", Limits{})
	require.Equal(t, OutcomeRuntimeError, res.Outcome)
	assert.Contains(t, res.Diagnostics[0].Message, "unknown binary op: int + string")
	assert.Equal(t, 2, res.Diagnostics[0].Line)
}

func TestRunRecoversPanics(t *testing.T) {
	env := NewEnv(builtins.Registry{{
		Name: "explode", Group: builtins.GroupDomain,
		Value: starlark.NewBuiltin("explode", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			panic("boom")
		}),
	}})
	res := env.Run(context.Background(), Request{Reply: "x = 1\nexplode()\n"})
	assert.Equal(t, OutcomeRuntimeError, res.Outcome)
	require.Len(t, res.Diagnostics, 1)
	assert.Equal(t, CodePanic, res.Diagnostics[0].Code)
	assert.Contains(t, res.Diagnostics[0].Message, "boom")
}

func TestRunRuntimeErrorPositionAndHint(t *testing.T) {
	res := run(t, "row = None\nx = 1\nprice = row['price']\n", Limits{})
	require.Equal(t, OutcomeRuntimeError, res.Outcome)
	d := res.Diagnostics[0]
	assert.Equal(t, CodeRuntime, d.Code)
	assert.Equal(t, 3, d.Line)
	assert.Contains(t, d.Hint, "None")
}

func TestRunRecursionIsAnError(t *testing.T) {
	res := run(t, "def f(n):\n    return f(n - 1) if n > 0 else 0\nf(3)\n", Limits{})
	assert.Equal(t, OutcomeRuntimeError, res.Outcome)
	assert.Equal(t, CodeRecursion, res.Diagnostics[0].Code)
}

// Runs share nothing: many at once, under the race detector, each see only their own inputs
// and produce their own results.
func TestRunsAreIndependent(t *testing.T) {
	env := testEnv()
	var wg sync.WaitGroup
	results := make([]*Result, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := "parts = []\nfor i in range(200):\n    parts.append(str(i))\nanswer_text = user_request + ':' + str(len(parts))\nprint(answer_text)\n"
			if i%4 == 3 {
				src = "while True:\n    pass\n"
			}
			results[i] = env.Run(context.Background(), Request{
				Reply: src, Inputs: map[string]any{"user_request": fmt.Sprintf("r%d", i)}, Limits: Limits{MaxSteps: 100_000, Timeout: time.Hour},
			})
		}()
	}
	wg.Wait()
	for i, res := range results {
		if i%4 == 3 {
			assert.Equal(t, LimitSteps, res.Limit)
			continue
		}
		require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
		assert.Equal(t, fmt.Sprintf("r%d:200", i), res.Globals["answer_text"])
		assert.Equal(t, fmt.Sprintf("r%d:200\n", i), res.Stdout)
	}
}

func TestRunNonFiniteFloatsAreEncodable(t *testing.T) {
	res := run(t, "x = float('nan')\ny = float('inf')\nz = [-y]\n", Limits{})
	require.Equal(t, OutcomeOK, res.Outcome)
	assert.Equal(t, "nan", res.Globals["x"])
	assert.Equal(t, "inf", res.Globals["y"], "as Python prints it")
	assert.Equal(t, []any{"-inf"}, res.Globals["z"])
}

func TestRunReturnsOnlyTheGlobalsAskedFor(t *testing.T) {
	res := testEnv().Run(context.Background(), Request{Reply: "rows = [{'a': 1}] * 3\nanswer_text = 'hi'\nSTATUS = 'success'\n", Globals: []string{"answer_text", "STATUS", "missing"}})
	require.Equal(t, OutcomeOK, res.Outcome)
	assert.Equal(t, map[string]any{"answer_text": "hi", "STATUS": "success"}, res.Globals)
}
