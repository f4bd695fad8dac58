package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pyCase is one line of testdata/pyfloat/golden.jsonl, written by CPython (see gen.py there).
type pyCase struct {
	Expr  string `json:"expr"`
	Want  string `json:"want"`
	Error string `json:"error"`
	Setup string `json:"setup"`
	Print bool   `json:"print"`
}

func readPyCases(t *testing.T) []pyCase {
	t.Helper()
	f, err := os.Open("testdata/pyfloat/golden.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var cases []pyCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c pyCase
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c), sc.Text())
		cases = append(cases, c)
	}
	require.NoError(t, sc.Err())
	require.Greater(t, len(cases), 1000, "the golden file is cut short")
	return cases
}

// pyPlan is the plan that evaluates cases in order: each expression's value is appended to the
// list r, and each print case prints.
func pyPlan(cases []pyCase) string {
	var b strings.Builder
	b.WriteString("r = []\n")
	for _, c := range cases {
		if c.Setup != "" {
			b.WriteString(c.Setup + "\n")
		}
		if c.Print {
			b.WriteString(c.Expr + "\n")
		} else {
			b.WriteString("r.append(" + c.Expr + ")\n")
		}
	}
	return b.String()
}

// TestFloatsAsPython runs every expression of the golden file as a plan, through extraction,
// the Python rewrites, the check and the guards, and compares its text with CPython's: str,
// repr, print, % (literal and computed formats), str.format, f-strings, format, json.dumps and
// round of floats around the notation switch points, signed zeros, inf and nan, and float // and
// % with every sign and zero divisors. Where CPython raises, the plan must fail.
func TestFloatsAsPython(t *testing.T) {
	env := NewEnv()
	runPlan := func(src string) *Result {
		return env.Run(context.Background(), Request{Reply: src, Bare: true, Globals: []string{"r"}})
	}
	var ok, printed []pyCase
	for _, c := range readPyCases(t) {
		switch {
		case c.Error != "":
			t.Run(c.Expr, func(t *testing.T) {
				res := runPlan(pyPlan([]pyCase{c}))
				assert.Equal(t, OutcomeRuntimeError, res.Outcome, "CPython raises %s; stdout %q, r = %v", c.Error, res.Stdout, res.Globals["r"])
			})
		case c.Print:
			printed = append(printed, c)
		default:
			ok = append(ok, c)
		}
	}
	// Cases that succeed run in batches, and one by one when a batch fails, for a precise report.
	const batch = 200
	check := func(cases []pyCase) bool {
		res := runPlan(pyPlan(cases))
		if res.Outcome != OutcomeOK {
			return false
		}
		var want []any
		var stdout strings.Builder
		for _, c := range cases {
			if c.Print {
				stdout.WriteString(c.Want)
			} else {
				want = append(want, c.Want)
			}
		}
		if want == nil {
			want = []any{}
		}
		return assert.ObjectsAreEqual(want, res.Globals["r"]) && res.Stdout == stdout.String()
	}
	for _, all := range [][]pyCase{ok, printed} {
		for lo := 0; lo < len(all); lo += batch {
			cases := all[lo:min(lo+batch, len(all))]
			if check(cases) {
				continue
			}
			for _, c := range cases {
				t.Run(c.Expr, func(t *testing.T) {
					res := runPlan(pyPlan([]pyCase{c}))
					require.Equal(t, OutcomeOK, res.Outcome, "plan:\n%s\n%s", pyPlan([]pyCase{c}), res.Diagnostics.String())
					if c.Print {
						assert.Equal(t, c.Want, res.Stdout, "setup:\n%s", c.Setup)
					} else {
						assert.Equal(t, []any{c.Want}, res.Globals["r"], "setup:\n%s", c.Setup)
					}
				})
			}
		}
	}
}

// The golden file covers what the task promises, so that trimming it would be noticed.
func TestFloatGoldenCoversTheSwitchPoints(t *testing.T) {
	exprs := map[string]bool{}
	for _, c := range readPyCases(t) {
		exprs[c.Expr] = true
	}
	for _, e := range []string{"str(1e+16)", "str(1e-05)", "str(0.0001)", "str(123456789012345.0)", "str(-0.0)",
		"str(float('inf'))", "str(-float('inf'))", "str(float('nan'))", "repr(1 // 0.1)", "repr(-7.0 // 2.0)", "repr(7 % -3.0)",
		"repr(7.0 // 0.0)", `"%.2f" % 1234567.0`, `f"{1234567.0}"`, `"{}".format(1234567.0)`} {
		assert.True(t, exprs[e], fmt.Sprintf("the golden file has no case %s", e))
	}
}

// Issue 25: "Numbers print as Python prints them". json.encode and json.encode_indent, the other
// way a plan turns a float into JSON text, write floats as json.dumps and Python do (1234567.0,
// not Go's 1.234567e+06).
func TestJSONEncodeWritesFloatsAsJSONDumps(t *testing.T) {
	res := NewEnv().Run(context.Background(), Request{Reply: `print(json.encode([1234567.0, 1e16]))
print(json.encode_indent({"a": 1234567.0}, indent=""))
print(json.dumps([1234567.0, 1e16]))
`, Bare: true})
	require.Equal(t, OutcomeOK, res.Outcome, "%v", res.Diagnostics)
	assert.Equal(t, "[1234567.0,1e+16]\n{\n\"a\": 1234567.0\n}\n[1234567.0, 1e+16]\n", res.Stdout)
}
