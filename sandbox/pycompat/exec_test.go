package pycompat

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	starmath "go.starlark.net/lib/math"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// TestExecute runs translated programs on go.starlark.net and compares `result` with the value
// CPython 3.12 gives for the original program (hard-coded, checked by hand with python3).
func TestExecute(t *testing.T) {
	tests := []struct {
		name, src string
		python    string // `result` in Python: a string itself, other values as repr (strings in double quotes, as Starlark writes them)
	}{
		{"fstring specs",
			"price = 3.14159\nn = 42\ntotal = 1234567.891\nrow = {'name': 'Widget'}\n" +
				`result = f"{row['name']}: {price:.2f} [{n:>5}] {total:,.2f}"`,
			"Widget: 3.14 [   42] 1,234,567.89"},
		{"fstring debug, repr, escapes", "n = 42\nprice = 3.14159\n" + `result = f"{n=} {n!r} {{x}} {price=:.1f} {n = }"`,
			"n=42 42 {x} price=3.1 n = 42"},
		{"fstring nested spec and center", "x = 5\nw = 4\n" + `result = f"[{x:{w}}] [{'yes' if x > 3 else 'no':^7}] [{x:0>{w}}]"`,
			"[   5] [  yes  ] [0005]"},
		{"triple-quoted fstring", "n = 42\nresult = f\"\"\"a\n{n:>4}\nb\"\"\"", "a\n  42\nb"},
		{"percent widths and flags", `result = "%5s|%-4d|%05.1f%%" % ("ab", 7, 3.14159)`, "   ab|7   |003.1%"},
		{"percent int of float", `result = "[%5d] [%-3i] [%d]" % (3.7, -2, 9.9)`, "[    3] [-2 ] [9]"},
		{"percent alternate forms and signs", `result = "%x|%#o|%+d|% d|%#X" % (255, 8, 5, 5, 255)`, "ff|0o10|+5| 5|0XFF"},
		{"percent float conversions", `result = "%g|%e|%.3g|%10.4f|%-8.2e|" % (1234567.0, 12.5, 0.000123456, 3.14159265, 1234.5)`,
			"1.23457e+06|1.250000e+01|0.000123|    3.1416|1.23e+03|"},
		{"percent strings", `result = "%-6s|%.2s|%6r" % ("ab", "xyz", 12)`, "ab    |xy|    12"},
		{"percent mapping", "d = {'name': 'W', 'price': 2.5}\n" + `result = "%(name)s costs %(price).2f" % d`, "W costs 2.50"},
		{"percent single value", "x = 2.5\n" + `result = "%6.2f" % x`, "  2.50"},
		{"str.format specs", `result = "{:.1f}|{:>5}|{name:,}".format(2.26, "a", name=1234567)`,
			"2.3|    a|1,234,567"},
		{"str.format same argument two ways", "x = 12\n" + `result = "{0:>5}|{0}|{0!r:>6}".format(x)`, "   12|12|    12"},
		{"str.format keyword two ways", "v = 7\n" + `result = "{x:>3}{x}{x:>3}".format(x=v)`, "  77  7"},
		{"is none", "x = None\ny = 0\nresult = [x is None, x is not None, y is None, y is not False, True is True]",
			"[True, False, False, True, True]"},
		{"generator expressions", "xs = [3, 1, 2]\n" +
			`result = [", ".join(str(x) for x in xs), max((p for p in xs), key=lambda v: -v), sorted(x * 2 for x in xs), any(x > 2 for x in xs), all(x > 2 for x in xs), len(list(x for x in xs if x > 1))]`,
			"[\"3, 1, 2\", 1, [2, 4, 6], True, False, 2]"},
		{"chained comparisons", "ps = [50, 70, 85, 100, 120]\n" +
			`result = [[70 <= p <= 100 for p in ps], 1 < 2 < 3 > 2 != 5 in [5], not 1 < 2 < 1, "a" in "abc" not in ["x"], 1 < 2 > 3 or 4 == 4 == 4]`,
			"[[False, True, True, True, False], True, True, True, True]"},
		{"chain precedence with not and if", "x = 5\n" + `result = ["in" if not 0 < x < 3 else "out", 0 < x < 10 and x != 5]`,
			`["in", False]`},
		{"imports", "import math as m\nfrom math import floor as fl, ceil\nimport math\nresult = [m.floor(2.5), fl(3.7), ceil(1.2), math.floor(-0.5)]",
			"[2, 3, 2, -1]"},
		{"import in a function", "def f(x):\n    from math import floor\n    return floor(x)\nresult = f(2.9)", "2"},
		{"all together", "rows = [{'name': 'a', 'price': 80.0}, {'name': 'b', 'price': 120.5}, {'name': 'c', 'price': None}]\n" +
			"ok = [r for r in rows if r['price'] is not None and 70 <= r['price'] <= 100]\n" +
			"total = sum(r['price'] for r in rows if r['price'] is not None)\n" +
			`result = f"{len(ok)} in range; total {total:,.2f}; " + "%-3s|" % ok[0]['name'] + "{:>6.1f}".format(total)`,
			"1 in range; total 200.50; a  | 200.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Translate(tt.src, testOpts)
			require.Empty(t, r.Diagnostics)
			require.NotEmpty(t, r.Rewrites)
			requireParses(t, r.Source)
			got, err := run(r.Source)
			require.NoError(t, err, "program:\n%s", r.Source)
			if s, ok := got.(starlark.String); ok {
				assert.Equal(t, tt.python, string(s), "program:\n%s", r.Source)
			} else {
				assert.Equal(t, tt.python, got.String(), "program:\n%s", r.Source)
			}
		})
	}
}

// run executes src in the sandbox's dialect with the builtins the rewrites rely on and returns
// the global `result`.
func run(src string) (starlark.Value, error) {
	predeclared := starlark.StringDict{
		"format": starlark.NewBuiltin("format", formatStub),
		"math":   starmath.Module,
		"sum": starlark.NewBuiltin("sum", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			var acc starlark.Value = starlark.MakeInt(0)
			it := starlark.Iterate(args[0])
			defer it.Done()
			var x starlark.Value
			for it.Next(&x) {
				var err error
				if acc, err = starlark.Binary(syntax.PLUS, acc, x); err != nil {
					return nil, err
				}
			}
			return acc, nil
		}),
	}
	thread := &starlark.Thread{Name: "test"}
	globals, err := starlark.ExecFileOptions(&dialect, thread, "plan.star", src, predeclared)
	if err != nil {
		return nil, err
	}
	return globals["result"], nil
}

// formatStub is a test-local format(value, spec) with the parts of Python's format-spec
// mini-language that these tests use: fill, align, sign, #, 0, width, ',', precision and the
// types s d x X o e E f F g G %.
func formatStub(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	var spec string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &v, &spec); err != nil {
		return nil, err
	}
	s, err := pyFormat(v, spec)
	return starlark.String(s), err
}

func pyFormat(v starlark.Value, spec string) (string, error) {
	fill, align := " ", byte(0)
	i := 0
	if len(spec) >= 2 && strings.IndexByte("<>^=", spec[1]) >= 0 {
		fill, align, i = spec[:1], spec[1], 2
	} else if len(spec) >= 1 && strings.IndexByte("<>^=", spec[0]) >= 0 {
		align, i = spec[0], 1
	}
	sign := byte('-')
	if i < len(spec) && strings.IndexByte("+- ", spec[i]) >= 0 {
		sign, i = spec[i], i+1
	}
	alt := i < len(spec) && spec[i] == '#'
	if alt {
		i++
	}
	if i < len(spec) && spec[i] == '0' {
		if align == 0 {
			fill, align = "0", '='
		}
		i++
	}
	ws := i
	for i < len(spec) && spec[i] >= '0' && spec[i] <= '9' {
		i++
	}
	width, _ := strconv.Atoi(spec[ws:i])
	comma := i < len(spec) && spec[i] == ','
	if comma {
		i++
	}
	prec := -1
	if i < len(spec) && spec[i] == '.' {
		ps := i + 1
		i++
		for i < len(spec) && spec[i] >= '0' && spec[i] <= '9' {
			i++
		}
		prec, _ = strconv.Atoi(spec[ps:i])
	}
	typ := spec[i:]
	if len(typ) > 1 {
		return "", fmt.Errorf("bad spec %q", spec)
	}

	var body, signStr, prefix string
	numeric := true
	switch x := v.(type) {
	case starlark.String:
		numeric = false
		body = string(x)
		if prec >= 0 && prec < len(body) {
			body = body[:prec]
		}
	case starlark.Int, starlark.Float:
		if xi, ok := x.(starlark.Int); ok && !strings.ContainsAny(typ, "eEfFgG%") {
			n := new(big.Int).Set(xi.BigInt())
			if n.Sign() < 0 {
				signStr = "-"
				n.Neg(n)
			}
			base := 10
			switch typ {
			case "x", "X":
				base, prefix = 16, "0"+typ
			case "o":
				base, prefix = 8, "0o"
			}
			body = n.Text(base)
			if typ == "X" {
				body = strings.ToUpper(body)
			}
			if !alt {
				prefix = ""
			}
		} else {
			f, _ := starlark.AsFloat(x)
			if f < 0 {
				signStr = "-"
				f = -f
			}
			p := prec
			if p < 0 {
				p = 6
			}
			switch typ {
			case "", "g", "G":
				if typ == "" && prec < 0 {
					body = strconv.FormatFloat(f, 'g', -1, 64)
				} else {
					if p == 0 {
						p = 1
					}
					body = strconv.FormatFloat(f, 'g', p, 64)
				}
				if typ == "G" {
					body = strings.ToUpper(body)
				}
			case "%":
				body = strconv.FormatFloat(f*100, 'f', p, 64) + "%"
			default:
				body = strconv.FormatFloat(f, typ[0], p, 64)
			}
		}
		if comma {
			intPart, rest := body, ""
			if k := strings.IndexAny(body, ".e%"); k >= 0 {
				intPart, rest = body[:k], body[k:]
			}
			for k := len(intPart) - 3; k > 0; k -= 3 {
				intPart = intPart[:k] + "," + intPart[k:]
			}
			body = intPart + rest
		}
		if signStr == "" && sign != '-' {
			signStr = string(sign)
		}
	default:
		return "", fmt.Errorf("format: unsupported %s", v.Type())
	}
	if align == 0 {
		align = '<'
		if numeric {
			align = '>'
		}
	}
	n := len(signStr) + len(prefix) + len(body)
	pad := ""
	if width > n {
		pad = strings.Repeat(fill, width-n)
	}
	switch align {
	case '<':
		return signStr + prefix + body + pad, nil
	case '^':
		l := len(pad) / 2
		return pad[:l] + signStr + prefix + body + pad[l:], nil
	case '=':
		return signStr + prefix + pad + body, nil
	default:
		return pad + signStr + prefix + body, nil
	}
}
