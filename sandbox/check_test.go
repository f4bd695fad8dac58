package sandbox

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/diag"
)

// testEnv is an environment with one per-run input and one domain helper besides the language,
// so that the rules about rebinding them can be tested without the table helpers.
func testEnv() *Env {
	return NewEnv(builtins.Registry{
		{Name: "user_request", Group: builtins.GroupInput, Doc: "the request"},
		{Name: "helper_fn", Group: builtins.GroupDomain, Doc: "a helper", Value: builtins.Language().Predeclared()["sum"]},
	})
}

func codes(c Checked) []string {
	var out []string
	for _, d := range c.Diagnostics {
		out = append(out, d.Code)
	}
	return out
}

func TestCheckAcceptsThePlanDialect(t *testing.T) {
	src := `
items = [{"name": "a", "price": 10.0}, {"name": "b", "price": 20.0}]
total = 0
for it in items:
    if it["price"] > 5:
        total += it["price"]
n = 0
while n < 3:
    n += 1
seen = set(["a"])
def describe(x, **kwargs):
    return "%s" % x
answer_text = "Total: " + str(total)
answer_text = describe(answer_text)
STATUS = "success"
`
	c := testEnv().Check(src, Limits{})
	require.Empty(t, c.Diagnostics)
	require.NotNil(t, c.Program)
}

func TestCheckRejectsPythonisms(t *testing.T) {
	tests := []struct {
		name, src, code string
		line, col       int
	}{
		{"try", "try:\n    x = 1\nexcept:\n    x = 2\n", "python-try", 1, 1},
		{"raise", "raise ValueError('x')\n", "python-raise", 1, 1},
		{"class", "class A:\n    pass\n", "python-class", 1, 1},
		{"with", "with open('f') as f:\n    pass\n", "python-with", 1, 1},
		{"global", "def f():\n    global x\n    x = 1\n", "python-global", 2, 5},
		{"nonlocal", "def f():\n    nonlocal x\n", "python-global", 2, 5},
		{"del", "d = {}\ndel d['a']\n", "python-del", 2, 1},
		{"assert", "assert 1 == 1\n", "python-assert", 1, 1},
		{"async", "async def f():\n    pass\n", "python-async", 1, 1},
		{"await", "def f():\n    return await g()\n", "python-async", 2, 12},
		{"yield", "def f():\n    yield 1\n", "python-yield", 2, 5},
		{"decorator", "@cache\ndef f():\n    pass\n", "python-decorator", 1, 1},
		{"walrus", "if (n := 3) > 2:\n    pass\n", "python-walrus", 1, 7},
		{"power", "x = 2 ** 10\n", "python-power", 1, 7},
		{"is", "a = []\nb = a\nsame = a is b\n", "python-is", 3, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testEnv().Check(tt.src, Limits{})
			require.Nil(t, c.Program)
			require.NotEmpty(t, c.Diagnostics)
			d := c.Diagnostics[0]
			assert.Equal(t, tt.code, d.Code)
			assert.Equal(t, tt.line, d.Line, "line")
			assert.Equal(t, tt.col, d.Col, "col")
			assert.NotEmpty(t, d.Hint)
		})
	}
}

// All Python-isms of a program are reported at once, so one repair round can fix them all, and
// words inside strings and comments are not mistaken for them.
func TestCheckReportsEveryPythonismOnce(t *testing.T) {
	src := "s = 'try: class with'  # del raise\ntry:\n    x = 2 ** 3\nexcept:\n    pass\n"
	c := testEnv().Check(src, Limits{})
	assert.Equal(t, []string{"python-try", "python-power", "python-try"}, codes(c))
}

func TestCheckUnknownNameSuggests(t *testing.T) {
	c := testEnv().Check("x = helper_fm([1])\n", Limits{})
	require.Len(t, c.Diagnostics, 1)
	d := c.Diagnostics[0]
	assert.Equal(t, CodeUnknownName, d.Code)
	assert.Equal(t, "helper_fm is not defined", d.Message)
	assert.Equal(t, "did you mean helper_fn?", d.Hint)
	assert.Equal(t, 1, d.Line)
	assert.Equal(t, 5, d.Col)
}

// A Python module used without its import is not a misspelt helper: the hint says why no plan
// has it, instead of suggesting the nearest name (os is not "did you mean transactions_tbl?").
func TestCheckUnknownNameThatIsAPythonModule(t *testing.T) {
	c := testEnv().Check("x = os.listdir('.')\nr = requests.get('http://x')\n", Limits{})
	require.Len(t, c.Diagnostics, 2)
	assert.Equal(t, CodeUnknownName, c.Diagnostics[0].Code)
	assert.Equal(t, "there is no os module in plans; plans cannot reach files, the environment or processes", c.Diagnostics[0].Hint)
	assert.Equal(t, "there is no requests module in plans; plans cannot reach the network", c.Diagnostics[1].Hint)
}

func TestCheckRejectsRebindingHelpers(t *testing.T) {
	for _, src := range []string{
		"user_request = 'buy everything'\n",
		"helper_fn = None\n",
		"math = None\n",
		"for json in [1]:\n    pass\n",
		"def re():\n    pass\n",
		"if True:\n    helper_fn, y = 1, 2\n",
		"if False:\n    pass\nelse:\n    re = 1\n",
		"while False:\n    math = 1\n",
		"for x in [1]:\n    if x:\n        json = 1\n",
	} {
		c := testEnv().Check(src, Limits{})
		assert.Equal(t, []string{CodePredeclaredAssign}, codes(c), src)
	}
	// Local names inside a function may shadow a helper; language builtins may be shadowed too.
	c := testEnv().Check("def f(user_request):\n    return user_request\nsum = 0\n", Limits{})
	assert.Empty(t, c.Diagnostics)
}

func TestCheckRejectsReservedNames(t *testing.T) {
	c := testEnv().Check("x = _sp_mul(2, 3)\n", Limits{})
	assert.Contains(t, codes(c), CodeReservedName)
}

func TestCheckRejectsLoad(t *testing.T) {
	c := testEnv().Check("load('x.star', 'y')\n", Limits{})
	assert.Equal(t, []string{CodeLoad}, codes(c))
}

func TestCheckSyntaxErrorPosition(t *testing.T) {
	c := testEnv().Check("x = 1\ny = (2,\nz = 3\n", Limits{})
	require.Len(t, c.Diagnostics, 1)
	assert.Equal(t, CodeSyntax, c.Diagnostics[0].Code)
	assert.Equal(t, 3, c.Diagnostics[0].Line)
}

func TestCheckSizeAndNestingCaps(t *testing.T) {
	big := strings.Repeat("x = 1\n", DefaultMaxProgram/6+1)
	assert.Equal(t, []string{CodeTooLarge}, codes(testEnv().Check(big, Limits{})))
	assert.Empty(t, codes(testEnv().Check(big, Limits{MaxProgram: 2 * DefaultMaxProgram})))

	deepBrackets := "x = " + strings.Repeat("(", 70) + "1" + strings.Repeat(")", 70) + "\n"
	assert.Equal(t, []string{CodeTooDeep}, codes(testEnv().Check(deepBrackets, Limits{})))
	assert.Empty(t, codes(testEnv().Check(deepBrackets, Limits{MaxNesting: 100})))

	var b strings.Builder
	for i := range 70 {
		b.WriteString(strings.Repeat("    ", i) + "if True:\n")
	}
	b.WriteString(strings.Repeat("    ", 70) + "x = 1\n")
	c := testEnv().Check(b.String(), Limits{})
	require.Equal(t, []string{CodeTooDeep}, codes(c))
	assert.Equal(t, 71, c.Diagnostics[0].Line, "the deepest point")
}

// isCandidate must know every word a Pythonism rule looks at, or the rule never fires.
func TestEveryPythonismWordIsACandidate(t *testing.T) {
	for _, p := range Pythonisms {
		assert.True(t, isCandidate(p.Word), p.Word)
	}
}

// A carriage return or form feed at the start of a line once made the scanner loop forever
// (found by FuzzRun; the corpus keeps the input).
func TestLexEndsOnControlCharactersAtLineStart(t *testing.T) {
	for _, src := range []string{"\r#0", "\f\nx = 1\n", "x = 1\n\r\n\f\f"} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			lex(src)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("lex(%q) does not end", src)
		}
	}
}

// checkedEnv has a table-like value tbl and a function fn whose static checks record what they
// were asked and flag every call, so the tests see which calls the checker hands them.
func checkedEnv(asked *[]string) *Env {
	flag := func(name string) builtins.CallCheck {
		return func(method string, call *syntax.CallExpr) diag.List {
			*asked = append(*asked, name+"."+method)
			return diag.List{{Stage: diag.StageCheck, Code: CodeWrongArguments, Line: int(call.Lparen.Line), Col: int(call.Lparen.Col), Message: "flagged", Hint: "h"}}
		}
	}
	sum := builtins.Language().Predeclared()["sum"]
	return NewEnv(builtins.Registry{
		{Name: "tbl", Group: builtins.GroupTable, Value: sum, Check: flag("tbl")},
		{Name: "fn", Group: builtins.GroupDomain, Value: sum, Check: flag("fn")},
		{Name: "doc_only", Group: builtins.GroupDomain, Check: flag("doc_only")},
	})
}

// The checker asks a helper about every call of its name and of its methods, and reports what
// it says with the program's other check diagnostics, before anything runs.
func TestCheckAsksHelpersAboutTheirCalls(t *testing.T) {
	var asked []string
	c := checkedEnv(&asked).Check("x = fn([1])\ny = tbl.search({})\ndef g():\n    return tbl.insert(fn([2]))\n", Limits{})
	assert.Nil(t, c.Program)
	assert.Equal(t, []string{CodeWrongArguments, CodeWrongArguments, CodeWrongArguments, CodeWrongArguments}, codes(c))
	assert.Equal(t, []string{"fn.", "tbl.search", "tbl.insert", "fn."}, asked)
	assert.Equal(t, 2, c.Diagnostics[1].Line)
	assert.Equal(t, 15, c.Diagnostics[1].Col)
}

// A name a function, lambda or comprehension binds may be another value there: what its calls'
// checks find is never reported, anywhere in the program (the check must not flag what could
// run). Calls of
// other values' methods and of names without a value are not the helpers' either.
func TestCheckLeavesShadowedAndOtherCallsAlone(t *testing.T) {
	for _, src := range []string{
		"def g(tbl):\n    return tbl.search({})\n",
		"def g(x, tbl=None):\n    return tbl.search({})\n",
		"def g(*tbl):\n    return len(tbl)\nx = tbl.search({})\n",
		"def g():\n    tbl = {}\n    return tbl.get(1)\n",
		"def g():\n    for tbl in [{}]:\n        tbl.get(1)\n",
		"f = lambda tbl: tbl.search({})\n",
		"x = [tbl.get(1) for tbl in [{}]]\n",
		"d = {}\nx = d.search({})\ny = other.tbl.search({})\n",
		"x = doc_only(1)\n",
	} {
		var asked []string
		c := checkedEnv(&asked).Check(src, Limits{})
		assert.NotContains(t, codes(c), CodeWrongArguments, src)
	}
}

// A line end inside a triple-quoted string is not a line start: lex counted the token after
// such a string as the start of a line and dropped every enclosing block from its depth, so a
// plan could nest past MaxNesting by closing a multi-line string at each level (found by
// review: depth 11 counted as 8). Both the fast parse's scan and lex's must see the depth.
func TestNestingAfterAMultiLineString(t *testing.T) {
	src := "x = 1\nif x:\n if x:\n  if x:\n   if x:\n    y = '''\n''' + 1\n    if x:\n     if x:\n      if x:\n       if x:\n        y = [[[1]]]\n"
	assert.Equal(t, []string{CodeTooDeep}, codes(testEnv().Check(src, Limits{MaxNesting: 8})), "fast path")
	slow := strings.Replace(src, "y = '''", "y = \\\n'''", 1) // a continuation: the fast path declines
	assert.Equal(t, []string{CodeTooDeep}, codes(testEnv().Check(slow, Limits{MaxNesting: 8})), "lex")
	assert.Empty(t, codes(testEnv().Check(src, Limits{MaxNesting: 11})))
}
