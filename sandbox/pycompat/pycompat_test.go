package pycompat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/diag"
)

var testOpts = Options{Modules: map[string][]string{
	"math": {"ceil", "floor", "pi", "sqrt"},
	"json": {"dumps", "loads"},
	"re":   {"findall", "search", "sub", "IGNORECASE"},
}}

var dialect = syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}

// requireParses fails unless src parses as Starlark in the sandbox's dialect.
func requireParses(t *testing.T, src string) {
	t.Helper()
	_, err := dialect.Parse("plan.star", src, 0)
	require.NoError(t, err, "output does not parse:\n%s", src)
}

func rules(rs []Rewrite) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Rule)
	}
	return out
}

// translateCases are input, exact output and the rules recorded, in order. The fuzz target
// seeds its corpus from them.
var translateCases = []struct {
	name, in, out string
	rules         []string
}{
	// f-strings
	{"fstring nested quotes and specs",
		`x = f"{row['name']}: {price:.2f} {n:>5} {total:,.2f}"`,
		`x = "{}: {} {} {}".format(row['name'], format(price, ".2f"), format(n, ">5"), format(total, ",.2f"))`,
		[]string{RuleFString}},
	{"fstring same-quote nesting, conversions, escapes, debug",
		`x = f"{row["name"]!r} {{lit}} {x=} {y = :.1f} {z!s}"`,
		`x = "{!r} {{lit}} x={!r} y = {} {!s}".format(row["name"], x, format(y, ".1f"), z)`,
		[]string{RuleFString}},
	{"fstring single quotes", `x = f'{a}-{b}'`, `x = '{}-{}'.format(a, b)`, []string{RuleFString}},
	{"fstring conversion with spec", `x = f"{v!r:>10}|{w!s:<3}"`,
		`x = "{}|{}".format(format(repr(v), ">10"), format(str(w), "<3"))`, []string{RuleFString}},
	{"fstring without fields", `x = f"a {{b}} c" + F'd'`, `x = "a {b} c" + 'd'`, []string{RuleFString, RuleFString}},
	{"raw fstring", `x = rf"\d{n}" + fR'\w{m}'`, `x = r"\d{}".format(n) + r'\w{}'.format(m)`, []string{RuleFString, RuleFString}},
	{"triple-quoted fstring keeps its lines", "x = f'''a\n{b:>3}\nc'''\ny = 1",
		"x = '''a\n{}\nc'''.format(format(b, \">3\"))\ny = 1", []string{RuleFString}},
	{"field spanning lines", "s = f\"\"\"{\n  a +\n  b\n}\"\"\"",
		"s = \"\"\"{}\"\"\".format(\n  a +\n  b\n)", []string{RuleFString}},
	{"nested spec field", `x = f"{x:>{width}}"`, `x = "{}".format(format(x, ">{}".format(width)))`, []string{RuleFString}},
	{"fstring tuple field", `x = f"{a, b}"`, `x = "{}".format((a, b))`, []string{RuleFString}},
	{"conditional in field with spec", `print(f"{'yes' if ok else 'no':^5}")`,
		`print("{}".format(format('yes' if ok else 'no', "^5")))`, []string{RuleFString}},
	{"rewrites inside fields", `x = f"{', '.join(f'{v:.2f}' for v in vs)} {a is None}"`,
		`x = "{} {}".format(', '.join(['{}'.format(format(v, ".2f")) for v in vs]), a == None)`,
		[]string{RuleFString, RuleGenexp, RuleFString, RuleIsNone}},
	{"comparison in field", `x = f"{a != b} {c == d}"`, `x = "{} {}".format(a != b, c == d)`, []string{RuleFString}},

	// %-formatting
	{"percent precision", `s = "%.2f" % x`, `s = "{}".format(format(x, ".2f"))`, []string{RulePercentFormat}},
	{"percent width and flags", `s = "%5s|%-4d" % (a, b)`,
		`s = "{}|{}".format(format(str(a), ">5"), format(int(b), "<4d"))`, []string{RulePercentFormat}},
	{"percent zero pad and literal percent", `s = "%05.1f%%" % x`, `s = "{}%".format(format(x, "05.1f"))`, []string{RulePercentFormat}},
	{"percent plain conversions in a translated string", `s = "%s: %d %r %x {b} %.1f" % (a, n, v, h, f)`,
		`s = "{}: {} {!r} {} {{b}} {}".format(a, int(n), v, format(h, "x"), format(f, ".1f"))`, []string{RulePercentFormat}},
	{"percent signs and alternate forms", `s = "%+d|% d|%#x|%#o|%-+6.1e|%G" % (a, b, c, d, e, f)`,
		`s = "{}|{}|{}|{}|{}|{}".format(format(int(a), "+d"), format(int(b), " d"), format(c, "#x"), format(d, "#o"), format(e, "<+6.1e"), format(f, "G"))`,
		[]string{RulePercentFormat}},
	{"percent string precision", `s = "%-10.3s|" % name`, `s = "{}|".format(format(str(name), "<10.3"))`, []string{RulePercentFormat}},
	{"percent repr with width", `s = "%6r" % v`, `s = "{}".format(format(repr(v), ">6"))`, []string{RulePercentFormat}},
	{"percent mapping", `s = "%(name)s %(price).2f" % row`,
		`s = "{} {}".format(row["name"], format(row["price"], ".2f"))`, []string{RulePercentFormat}},
	{"percent mapping display", `s = "%(a)5d" % {"a": 1}`,
		`s = "{}".format(format(int({"a": 1}["a"]), "5d"))`, []string{RulePercentFormat}},
	{"percent operand binds tighter than +", `s = "%5.1f" % -x ** 2 + "!"`,
		`s = "{}".format(format(-x ** 2, "5.1f")) + "!"`, []string{RulePercentFormat}},
	{"percent operand with trailers", `s = "%5.1f" % f(x)[0].y`, `s = "{}".format(format(f(x)[0].y, "5.1f"))`, []string{RulePercentFormat}},
	{"percent with binary minus before", `v = a - "%5d" % 3`, `v = a - "{}".format(format(int(3), "5d"))`, []string{RulePercentFormat}},
	{"percent braces escaped", `s = "{%5d}" % n`, `s = "{{{}}}".format(format(int(n), "5d"))`, []string{RulePercentFormat}},
	{"percent multiline tuple keeps lines and comments", "s = \"%5d %s\" % (a,\n   b,  # c\n)",
		"s = \"{} {}\".format(format(int(a), \"5d\"),\n   b  # c\n)", []string{RulePercentFormat}},
	{"percent split across lines", "x = (\"%5d\" %  # count\n     n)",
		"x = (\"{}\".format(  # count\n     format(int(n), \"5d\")))", []string{RulePercentFormat}},
	{"percent-only forms Starlark has are left", `s = "%s=%d (%r) %%" % (k, v, w)`, `s = "%s=%d (%r) %%" % (k, v, w)`, nil},
	{"percent whose left operand is not only the literal", `s = x * "%5d" % 3`, `s = x * "%5d" % 3`, nil},

	// str.format
	{"format precision", `s = "{:.1f}".format(x)`, `s = "{}".format(format(x, ".1f"))`, []string{RuleStrFormat}},
	{"format numbered and keyword", `s = "{0:>5} {name:,}".format(a, name=b)`,
		`s = "{0} {name}".format(format(a, ">5"), name=format(b, ","))`, []string{RuleStrFormat}},
	{"format same simple argument two ways", `s = "{0:>5} {0}".format(a.b)`,
		`s = "{0} {1}".format(format(a.b, ">5"), a.b)`, []string{RuleStrFormat}},
	{"format keyword two ways", `s = "{x:>3}{x}{x:>3}".format(x=v)`,
		`s = "{x}{0}{x}".format(v, x=format(v, ">3"))`, []string{RuleStrFormat}},
	{"format conversion and spec", `s = "{0!r:>10}|{0!s}".format(val)`,
		`s = "{0}|{1!s}".format(format(repr(val), ">10"), val)`, []string{RuleStrFormat}},
	{"format extra argument kept", `s = "{:>3}{:<3}".format(a, b, c)`,
		`s = "{}{}".format(format(a, ">3"), format(b, "<3"), c)`, []string{RuleStrFormat}},
	{"format without spec left alone", `s = "{} {!r} {name}".format(a, b, name=c)`, `s = "{} {!r} {name}".format(a, b, name=c)`, nil},
	{"format comment untouched", `s = '{} {:5}'.format(x, y) # {:5} 'x is None'`,
		`s = '{} {}'.format(x, format(y, "5")) # {:5} 'x is None'`, []string{RuleStrFormat}},
	{"format argument with rewrites", `s = "{:>8}".format(f"{a}")`, `s = "{}".format(format("{}".format(a), ">8"))`,
		[]string{RuleStrFormat, RuleFString}},

	// is None / True / False
	{"is none", `if x is None or y is not None: pass`, `if x == None or y != None: pass`, []string{RuleIsNone, RuleIsNone}},
	{"is true false", `a = x is True and y is not False`, `a = x == True and y != False`, []string{RuleIsNone, RuleIsNone}},
	{"none on the left", `b = None is x`, `b = None == x`, []string{RuleIsNone}},
	{"is across a continuation", "x = a is \\\n not None", "x = a != \\\n  None", []string{RuleIsNone}},
	{"is with other values left", `c = x is y`, `c = x is y`, nil},
	{"is none attribute left", `d = x is None.y`, `d = x is None.y`, nil},

	// generator expressions
	{"genexp sole argument", `t = sum(r["price"] for r in rows)`, `t = sum([r["price"] for r in rows])`, []string{RuleGenexp}},
	{"genexp join", `t = ", ".join(str(x) for x in xs if x)`, `t = ", ".join([str(x) for x in xs if x])`, []string{RuleGenexp}},
	{"genexp with tuple target", `t = dict((k, v) for k, v in pairs)`, `t = dict([(k, v) for k, v in pairs])`, []string{RuleGenexp}},
	{"parenthesised genexp", `t = max((p for p in ps), key=f)`, `t = max([p for p in ps], key=f)`, []string{RuleGenexp}},
	{"genexp in for", `for i in (x for x in y): pass`, `for i in [x for x in y]: pass`, []string{RuleGenexp}},
	{"genexp with another argument left", `f(x for x in y, 1)`, `f(x for x in y, 1)`, nil},
	{"comprehensions untouched", `a = [x for x in y]; b = {k: v for k, v in z}`, `a = [x for x in y]; b = {k: v for k, v in z}`, nil},

	// chained comparisons
	{"chain", `ok = 70 <= price <= 100`, `ok = (70 <= price and price <= 100)`, []string{RuleChainedCompare}},
	{"long chain", `ok = a < b < c < d`, `ok = (a < b and b < c and c < d)`, []string{RuleChainedCompare}},
	{"chain with attribute, index, in", `ok = a < b.c[0] == d in e`, `ok = (a < b.c[0] and b.c[0] == d and d in e)`, []string{RuleChainedCompare}},
	{"chain under not", `ok = not 0 < x < 10`, `ok = not (0 < x and x < 10)`, []string{RuleChainedCompare}},
	{"chain with not in and is", `ok = a not in b is not None`, `ok = (a not in b and b != None)`, []string{RuleChainedCompare, RuleIsNone}},
	{"chain in comprehension", `x = [y for y in z if 0 < y < 10]`, `x = [y for y in z if (0 < y and y < 10)]`, []string{RuleChainedCompare}},
	{"chain in for header", `for a in b < c < d: pass`, `for a in (b < c and c < d): pass`, []string{RuleChainedCompare}},
	{"chain across lines", "ok = (a <\n b <\n c)", "ok = ((a <\n b and b <\n c))", []string{RuleChainedCompare}},
	{"chain with arithmetic middle", `ok = 0 <= i + 1 < n`, `ok = (0 <= i + 1 and i + 1 < n)`, []string{RuleChainedCompare}},
	{"genexp around chain", `e = all(0 < x < 5 for x in xs)`, `e = all([(0 < x and x < 5) for x in xs])`, []string{RuleGenexp, RuleChainedCompare}},
	{"two comparisons joined by and are no chain", `ok = a < b and c < d`, `ok = a < b and c < d`, nil},
	{"lambda and conditional bound chains", `f = lambda v: 0 < v < 1 if v else v == 1`, `f = lambda v: (0 < v and v < 1) if v else v == 1`, []string{RuleChainedCompare}},

	// imports
	{"import dropped", "import re\nx = 1", "\nx = 1", []string{RuleImport}},
	{"import list dropped", "import math, json\nx = 1", "\nx = 1", []string{RuleImport}},
	{"import as", "import math as m", "m = math", []string{RuleImport}},
	{"import as in a list", "import math as m, json as j, re", "m, j = math, json", []string{RuleImport}},
	{"from import", "from math import floor, ceil", "floor, ceil = math.floor, math.ceil", []string{RuleImport}},
	{"from import as", "from math import floor as fl", "fl = math.floor", []string{RuleImport}},
	{"from import parenthesised over lines", "from math import (floor,  # f\n   ceil)\nx = 1",
		"floor, ceil = math.floor, math.ceil  # f\n\nx = 1", []string{RuleImport}},
	{"import in a function keeps indentation", "def f():\n    import re\n    from math import floor\n    return 1",
		"def f():\n    pass\n    floor = math.floor\n    return 1", []string{RuleImport, RuleImport}},
	{"import as sole block statement", "if x:\n    import math\ny = 1", "if x:\n    pass\ny = 1", []string{RuleImport}},
	{"import after colon", "if x: import math", "if x: pass", []string{RuleImport}},
	{"import before semicolon", "import math; x = 1", "pass; x = 1", []string{RuleImport}},
	{"import with continuation", "import math, \\\n  json\nx = 1", "\n\nx = 1", []string{RuleImport}},

	// never inside strings or comments
	{"strings and comments untouched", "# x is None, f\"{x}\", import re\ns = 'a < b < c is None' + \"%5d\" # '%5d' % 3\nt = '''\nimport re\n'''",
		"# x is None, f\"{x}\", import re\ns = 'a < b < c is None' + \"%5d\" # '%5d' % 3\nt = '''\nimport re\n'''", nil},
	{"bytes and implicit concatenation left", `s = b"%5d" % 3`, `s = b"%5d" % 3`, nil},
	{"f-string without fields before %", `s = f"%.2f" % x + rf"%d" % y`, `s = "{}".format(format(x, ".2f")) + r"%d" % y`,
		[]string{RulePercentFormat, RuleFString}},
}

func TestTranslate(t *testing.T) {
	for _, tt := range translateCases {
		t.Run(tt.name, func(t *testing.T) {
			r := Translate(tt.in, testOpts)
			assert.Empty(t, r.Diagnostics)
			assert.Equal(t, tt.out, r.Source)
			want := tt.rules
			if len(want) == 0 {
				want = nil
			}
			assert.Equal(t, want, rules(r.Rewrites))
			assert.Equal(t, strings.Count(tt.in, "\n"), strings.Count(r.Source, "\n"))
			if r.Source != tt.in && !strings.Contains(r.Source, "**") { // ** is the checker's business
				requireParses(t, r.Source)
			}
		})
	}
}

func TestRejections(t *testing.T) {
	tests := []struct {
		name, in  string
		code      string
		line, col int
		msg       string // a substring of the message
	}{
		{"chain with a call in the middle", "ok = not a < f(x) < c", CodeChainedCompare, 1, 14, "`f(x)` twice"},
		{"chain with a call in an index in the middle", `ok = a < d[g()] < c`, CodeChainedCompare, 1, 10, "twice"},
		{"chain with a comprehension in the middle", `ok = a < [x for x in y] < c`, CodeChainedCompare, 1, 10, "twice"},
		{"unknown module", "import requests", CodeImportUnknown, 1, 8, "json, math, re"},
		{"unknown module in a list", "import math, os.path", CodeImportUnknown, 1, 14, "os.path"},
		{"unknown module in from", "from collections import Counter", CodeImportUnknown, 1, 6, "collections"},
		{"relative import", "from . import x", CodeImportUnknown, 1, 6, "module ."},
		{"unknown member", "from math import flor", CodeImportMember, 1, 18, "did you mean floor?"},
		{"star import", "from math import *", CodeImportStar, 1, 1, "import *"},
		{"fstring ascii conversion", `s = f'{x!a}'`, CodeFString, 1, 7, "!a"},
		{"fstring nested spec with spec", `s = f'{x:{w:>3}}'`, CodeFString, 1, 10, "nested"},
		{"fstring malformed", `s = f"{x"`, CodeFString, 1, 5, "malformed"},
		{"fstring single brace", `s = f"a } b"`, CodeFString, 1, 5, "malformed"},
		{"fstring empty field", `s = f"{}"`, CodeFString, 1, 7, "empty"},
		{"fstring named escape", `s = f"\N{BULLET} {x}"`, CodeFString, 1, 5, "malformed"},
		{"fstring escape spelling a brace", `s = f"\x7b{x}"`, CodeFString, 1, 7, "brace"},
		{"fstring quote in spec", `s = f"{x:'>5}"`, CodeFString, 1, 10, "spec"},
		{"fstring debug text with quote", `s = f"{d['k']=}"`, CodeFString, 1, 8, "{expr=}"},
		{"f-string with braces before %", `s = f"{{%5d}}" % x`, CodeFString, 1, 5, "left operand of %"},
		{"fstring unknown conversion", `s = f'{x!z}'`, CodeFString, 1, 7, "unknown conversion"},
		{"percent key with a quote", `s = '%(a"b)5d' % d`, CodePercentFormat, 1, 6, "%(key)"},
		{"percent mapping too large", "s = '" + strings.Repeat("%(a)5d", 100) + "' % x" + strings.Repeat("[a]", 20), CodePercentFormat, 1, 610, "too large"},
		{"format argument copied too often", "s = '" + manySpecs(100) + "'.format(x" + strings.Repeat("[a]", 20) + ")", CodeStrFormat, 1, 405, "too large"},
		{"percent star width", `s = '%*d' % (3, x)`, CodePercentFormat, 1, 6, "* width"},
		{"percent precision on int", `s = '%.3d' % 5`, CodePercentFormat, 1, 6, "%.3d"},
		{"percent ascii", `s = '%5a' % 5`, CodePercentFormat, 1, 6, "%a"},
		{"percent char with width", `s = '%3c' % 65`, CodePercentFormat, 1, 6, "%c"},
		{"percent unknown conversion", `s = '%5y' % 5`, CodePercentFormat, 1, 6, "unknown conversion"},
		{"percent width on percent", `s = '%5%' % ()`, CodePercentFormat, 1, 6, "%%"},
		{"percent non-literal tuple", `s = '%s %5d' % t`, CodePercentFormat, 1, 16, "tuple"},
		{"percent count mismatch", `s = '%5d %d' % (1, 2, 3)`, CodePercentFormat, 1, 16, "2 conversions but 3 values"},
		{"percent mixed keys", `s = '%(a)5d %s' % d`, CodePercentFormat, 1, 13, "mixes"},
		{"percent mapping evaluated twice", `s = '%(a)5d %(b)s' % f()`, CodePercentFormat, 1, 22, "once per key"},
		{"percent starred", `s = '%5d %d' % (*a, b)`, CodePercentFormat, 1, 17, "starred"},
		{"percent escape spelling percent", `s = '\x25%5d' % 3`, CodePercentFormat, 1, 5, "escape"},
		{"format call evaluated twice", `s = "{0:>5} {0}".format(f(a))`, CodeStrFormat, 1, 13, "evaluate it twice"},
		{"format nested field", `s = '{:>{w}}'.format(x, w=3)`, CodeStrFormat, 1, 6, "nested"},
		{"format attribute field", `s = '{0.name:>5}'.format(x)`, CodeStrFormat, 1, 6, "attribute"},
		{"format missing argument", `s = '{1:>5}'.format(x)`, CodeStrFormat, 1, 6, "no argument"},
		{"format mixed numbering", `s = '{} {0:>5}'.format(x)`, CodeStrFormat, 1, 5, "mixes"},
		{"format starred", `s = '{:>5}'.format(*xs)`, CodeStrFormat, 1, 20, "starred"},
		{"format ascii conversion", `s = '{!a:>5}'.format(x)`, CodeStrFormat, 1, 6, "!a"},
		{"format quote in spec", `s = "{:'>5}".format(x)`, CodeStrFormat, 1, 6, "spec"},
		{"format escape spelling a brace", `s = "\x7b{:>5}".format(x)`, CodeStrFormat, 1, 5, "brace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Translate(tt.in, testOpts)
			assert.Equal(t, tt.in, r.Source, "a refused construct is left as written")
			assert.Empty(t, r.Rewrites)
			require.Len(t, r.Diagnostics, 1, "%v", r.Diagnostics)
			d := r.Diagnostics[0]
			assert.Equal(t, diag.StagePycompat, d.Stage)
			assert.Equal(t, tt.code, d.Code)
			assert.Equal(t, tt.line, d.Line, "line")
			assert.Equal(t, tt.col, d.Col, "col")
			assert.Contains(t, d.Message, tt.msg)
			assert.NotEmpty(t, d.Hint)
		})
	}
}

func TestFPrefixNextToQuote(t *testing.T) {
	// Implicit concatenation is not Starlark, but dropping the f must not turn ""f"a" into
	// the opening of a triple-quoted string either (found by the fuzzer).
	r := Translate(`s = ""f"a"`, testOpts)
	assert.Equal(t, `s = "" "a"`, r.Source)
}

func TestLoneCarriageReturn(t *testing.T) {
	// Starlark ends a line at a lone CR: so must the rewriting (found by the fuzzer).
	r := Translate("a = 1\rok = 0 < x < 2 # c\r\nb = f'{a}'", testOpts)
	assert.Equal(t, "a = 1\nok = (0 < x and x < 2) # c\r\nb = '{}'.format(a)", r.Source)
	require.Len(t, r.Rewrites, 2)
	assert.Equal(t, 2, r.Rewrites[0].Line)
	assert.Equal(t, 3, r.Rewrites[1].Line)
	requireParses(t, r.Source)

	src := "# x\rimport re" // the fast path must not miss a line after a CR
	assert.Equal(t, "# x\n", Translate(src, testOpts).Source)
	src = "a = 1\rb = 2"
	assert.Equal(t, src, Translate(src, testOpts).Source, "nothing to rewrite: returned as it was")
}

// manySpecs returns n fields of argument 0, each with its own spec: {0:1}{0:2}...
func manySpecs(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString("{0:" + itoa(i) + "}")
	}
	return b.String()
}

func TestRejectionKeepsOtherRewrites(t *testing.T) {
	src := "import requests\nx = f\"{a:>3}\"\nok = a < g() < b"
	r := Translate(src, testOpts)
	assert.Equal(t, "import requests\nx = \"{}\".format(format(a, \">3\"))\nok = a < g() < b", r.Source)
	assert.Equal(t, []string{RuleFString}, rules(r.Rewrites))
	require.Len(t, r.Diagnostics, 2)
	assert.Equal(t, CodeImportUnknown, r.Diagnostics[0].Code)
	assert.Equal(t, CodeChainedCompare, r.Diagnostics[1].Code)
	assert.Equal(t, 3, r.Diagnostics[1].Line)
}

// An import of a Python module a plan can never have says why, not only which modules exist.
func TestForeignModuleImportSaysWhy(t *testing.T) {
	for mod, want := range map[string]string{
		"import os.path":        "there is no os module in plans; plans cannot reach files",
		"import subprocess":     "plans cannot start processes",
		"from socket import ab": "plans cannot reach the network",
	} {
		r := Translate(mod, testOpts)
		require.Len(t, r.Diagnostics, 1, mod)
		assert.Equal(t, CodeImportUnknown, r.Diagnostics[0].Code, mod)
		assert.Contains(t, r.Diagnostics[0].Hint, want, mod)
		assert.Contains(t, r.Diagnostics[0].Hint, "json, math, re", mod)
	}
	r := Translate("import collections", testOpts)
	require.Len(t, r.Diagnostics, 1)
	assert.NotContains(t, r.Diagnostics[0].Hint, "there is no")
}

func TestNoModules(t *testing.T) {
	r := Translate("import math", Options{})
	require.Len(t, r.Diagnostics, 1)
	assert.Equal(t, CodeImportUnknown, r.Diagnostics[0].Code)
	assert.Contains(t, r.Diagnostics[0].Message, "no modules")
}

func TestRewriteRecord(t *testing.T) {
	src := "a = 1\ns = f'''x\n{v:>3}\ny''' + f\"{w}\"\nok = 0 < a < 2\n"
	r := Translate(src, testOpts)
	require.Len(t, r.Rewrites, 3)
	assert.Equal(t, Rewrite{Line: 2, Rule: RuleFString,
		Before: "s = f'''x\n{v:>3}\ny''' + f\"{w}\"",
		After:  "s = '''x\n{}\ny'''.format(format(v, \">3\")) + \"{}\".format(w)"}, r.Rewrites[0])
	assert.Equal(t, 4, r.Rewrites[1].Line)
	assert.Equal(t, RuleFString, r.Rewrites[1].Rule)
	assert.Equal(t, Rewrite{Line: 5, Rule: RuleChainedCompare, Before: "ok = 0 < a < 2", After: "ok = (0 < a and a < 2)"}, r.Rewrites[2])
}

// A plan in the lab's style with nothing to rewrite takes the fast path and comes back as is.
const plainPlan = `rows = inventory_tbl.all()
low = []
total = 0
for r in rows:
    qty = r["quantity_in_stock"]
    if qty < r["reorder_level"] and r["active"]:
        low.append(r)
    total = total + r["price"] * qty
names = [r["name"] for r in low if r["price"] > 10]
by_cat = {}
for r in rows:
    cat = r["category"]
    if cat not in by_cat:
        by_cat[cat] = []
    by_cat[cat].append(r["name"])
summary = []
for cat in sorted(by_cat.keys()):
    summary.append(cat + ": " + str(len(by_cat[cat])))
if len(low) == 0:
    answer_text = "Nothing to reorder."
    STATUS = "success"
else:
    lines = []
    for r in low:
        lines.append("- " + r["name"] + " (" + str(r["quantity_in_stock"]) + " left)")
    answer_text = "Reorder:\n" + "\n".join(lines)
    STATUS = "success"
# totals for the report
report = {
    "total_value": total,
    "low_count": len(low),
    "categories": summary,
    "names": names,
}
def pct(a, b):
    if b == 0:
        return 0
    return a * 100 // b
share = pct(len(low), len(rows))
answer_text = answer_text + "\n" + str(share) + "% low"
`

func TestFastPath(t *testing.T) {
	require.False(t, mayNeedRewrite(plainPlan), "the plain plan should take the fast path")
	r := Translate(plainPlan, testOpts)
	assert.Equal(t, plainPlan, r.Source)
	assert.Empty(t, r.Rewrites)
	assert.Empty(t, r.Diagnostics)

	// Every trigger sends the program down the full path.
	for _, src := range []string{
		`x = f"{a}"`, `x = a is None`, "import re", "from math import pi", `x = "%5d" % 3`,
		"x = \"%5d\" \\\n % 3", `x = "{:5}" . format(3)`, `x = sum(a for a in b)`, `x = a < b < c`,
		`x = a < b[0] < c`, "x = a < \\\n b < c", `x = a not in b not in c`, `x = (a < b < c)`,
	} {
		assert.True(t, mayNeedRewrite(src), src)
	}
}

func TestFullPathWithoutRewrites(t *testing.T) {
	// Triggers that turn out to need nothing give back the very same string.
	src := "x = [a for a in b if a < 3]\ny = \"%s\" % a\nif a in b and c < d: pass\n"
	require.True(t, mayNeedRewrite(src))
	r := Translate(src, testOpts)
	assert.Equal(t, src, r.Source)
	assert.Empty(t, r.Rewrites)
	assert.Empty(t, r.Diagnostics)
}

func TestNeverTouchesUnknownConstructs(t *testing.T) {
	// Not this package's job: left exactly as written for the checker.
	for _, src := range []string{
		"try:\n    x = 1\nexcept Exception:\n    pass",
		"class A:\n    pass",
		"if (n := len(a)) > 3: pass",
		"y = x ** 2",
		"with open(f) as g: pass",
		"del x[0]",
	} {
		r := Translate(src, testOpts)
		assert.Equal(t, src, r.Source)
		assert.Empty(t, r.Diagnostics)
	}
}

func TestDeepNestingAndHugeInput(t *testing.T) {
	deep := strings.Repeat("(", 5000) + "a < b < c" + strings.Repeat(")", 5000)
	r := Translate(deep, testOpts)
	assert.Equal(t, strings.Count(deep, "\n"), strings.Count(r.Source, "\n"))

	deepF := "x = " + strings.Repeat(`f"{`, 200) + "a" + strings.Repeat(`}"`, 200)
	r = Translate(deepF, testOpts)
	assert.NotContains(t, r.Diagnostics.String(), CodeInternal)

	big := strings.Repeat("x = f\"{a:>3}\" if b is None else 0 < c < d\n", 20000)
	r = Translate(big, testOpts)
	assert.Len(t, r.Rewrites, 60000)
	assert.Equal(t, strings.Count(big, "\n"), strings.Count(r.Source, "\n"))
}

// Hostile inputs of about 1 MiB stay linear: each used to take minutes before the f-string
// scan budget, the sorted column count and the duplication bound. (Timings are the
// benchmarks' business; this test checks what the output must be.)
func TestHostileInputs(t *testing.T) {
	cases := map[string]string{
		"unclosed nested quotes":      strings.Repeat(`f"{'`, 250000),
		"fields open across lines":    strings.Repeat("f\"{(\n", 200000),
		"triple quotes in fields":     strings.Repeat(`f"""{"""`, 120000),
		"nested f-strings":            strings.Repeat(`f"{`, 100000),
		"many refused imports":        strings.Repeat("import requests\n", 60000),
		"one long chain":              strings.Repeat("a < b < c < d ", 60000),
		"open parentheses":            strings.Repeat("(", 300000),
		"open generators":             strings.Repeat("sum(x for x in ", 50000),
		"mapping used once per key":   "s = \"" + strings.Repeat("%(a)5d", 20000) + "\" % x" + strings.Repeat("[a]", 20000),
		"argument under many specs":   "s = \"" + strings.Repeat("{0:1}{0:2}{0:3}", 3000) + "\".format(x" + strings.Repeat("[a]", 20000) + ")",
		"many rewrites on many lines": strings.Repeat("x = f\"{a:>3}\" if b is None else 0 < c < d\n", 20000),
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			r := Translate(src, testOpts)
			assert.Equal(t, strings.Count(src, "\n"), strings.Count(r.Source, "\n"))
			assert.LessOrEqual(t, len(r.Diagnostics), maxDiagnostics)
			for _, d := range r.Diagnostics {
				assert.NotEqual(t, CodeInternal, d.Code)
			}
		})
	}
}

func TestConcurrentCalls(t *testing.T) {
	// Translate shares only its token pool between calls; runs are concurrent (go test -race).
	want := Translate(translateCases[0].in, testOpts).Source
	done := make(chan string)
	for range 8 {
		go func() {
			var got string
			for range 50 {
				got = Translate(translateCases[0].in, testOpts).Source
				Translate(plainPlan, testOpts)
			}
			done <- got
		}()
	}
	for range 8 {
		assert.Equal(t, want, <-done)
	}
}

func TestSuggestSkipsLongNames(t *testing.T) {
	at, over := strings.Repeat("a", maxSuggestLen), strings.Repeat("a", maxSuggestLen+1)
	assert.Equal(t, at, suggest(at[1:], []string{at}), "up to the limit a near name is suggested")
	assert.Empty(t, suggest(over, []string{over + "b"}), "a name over the limit is not compared")
	assert.Empty(t, suggest(at, []string{over}), "nor is a candidate over the limit")
}
