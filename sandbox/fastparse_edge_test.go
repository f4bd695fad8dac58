package sandbox

import "testing"

// fastParseEdges are texts at the edges of what fastParse takes: each must be declined or parse
// as go.starlark.net parses it (sameParse), with lex's findings.
var fastParseEdges = []string{
	"if x:\n  pass", "if x:\n  if y:\n    z", "if x:\n  y\n # c", "if x:\n  y\n  ", "x = 1 #c", "x = (1,\n# c\n 2)", "x = [\n]\n",
	"x = 1;", "x = 1;;", ";", "x = 1; ; y", "def f(*, a): pass", "def f(*): pass", "def f(**a, b): pass", "lambda: 1",
	"f(*a, *b, **c, d=1)", "f(a=1, b)", "f(a.b=1)", "x[1:2, 3]", "x[1,]", "x[1,2]", "for x, in y: pass", "for x in y, z: pass",
	"for x in y,: pass", "return 1,", "x = 1,", "(1,)", "a if b else c if d else e", "lambda x: lambda y: x if y else 1",
	"[x for x in y if lambda: 1]", "[x for x in lambda: y]", "not", "a not in b", "a not  in b", "a not\nin b", "(a not\nin b)",
	"- - x", "-x ** y", "~-x", "x = 'a' 'b'", "x.if", "x = {1, 2}", "x = {}", "x = {1: 2 for a in b}", "x = {**a}", "x = [*a]",
	"x = a < b > c", "x = a < (b > c)", "x = not a < b", "x = a and not b or c", "x = a if b else lambda: c", "while True: break",
	"if x: pass\nelif y: pass\nelse: pass", "if x:\n    pass\n  else:\n    pass", "x = 1\n\n\n", "\n\n\nx=1", "", "   ", "# only",
	"  x = 1", "if x:\n\n    y", "if x:\n# c\n    y", "x = '''a\n'''", "def f():\n    return\n", "def f(): return\n",
	"x = f()()()[0][1].a.b", "x = a.b(c=d, *e)", "f(**a, *b)", "x = -1.5", "x = 9223372036854775807", "x = -9223372036854775808",
	"x = 1 < 2 == 3", "x = 1 in 2 in 3", "x = a not in b not in c", "x = (a) (b)", "x = a [1]", "x = a .b", "x = 1 .real",
	"x = 1.real", "x = 1.__add__", "x=1if 1else 2", "x = 1or 2", "x = 0or 1", "x = 0in y", "x = 1in y", "x = 0b1", "x = 1_2",
	"x = 'a\\\nb'", "x = '\\0'", "x = r'\\'", "x = r''", "x = r'''\n'''", "x = '''''' + ''", "x = '\"' + \"'\"", "x = 'é' + y",
	"x = '😀' + y", "x = '\t' + y", "x = '''a\n\tb''' + y", "x = 1\r\n", "x = 1\x00", "x = 'a\x00'", "# \xff\nx = 1", "x = 1 # \xff",
	"x = 1 # é", "if x:\n    y = '''\n'''\n    z = [[1]]\n", "if x:\n    y = '''\n''' + [[1]][0][0]\n", "x = 1 if y else 2 if z else 3",
	"x = [a for a in b if c if d for e in f]", "x = {a: b for a, b in c.items()}", "x = (a for a in b)", "f(a for a in b)",
	"x = a[::]", "x = a[:]", "x = a[::-1]", "x = a[1:][2:]", "x = a[b:c:d]", "x = a[(1, 2)]", "x = ()", "x = ((),)", "x = [(),]",
	"x = a if b else c,", "x, = a", "x, y = a, b", "[x, y] = a", "(x) = 1", "x.y = 1", "x[0] = 1", "x += 1", "x //= 2",
	"x <<= 1", "x >>= 1", "x **= 2", "x := 1", "x @ y", "x = not not x", "x = --x", "x = + + + x", "x = a.b.c.d(e)(f)[g]",
	"if x:\n  y\nelse:\n  z\n", "if x:\n  y\n else:\n  z\n", "for a in b:\n  for c in d:\n    pass\n  pass\n", "x = (\n  1\n  )\n",
	"x = [1,\n 2,\n]\n", "x = {\n'a': 1,\n}\n", "def f(\n a,\n b,\n):\n  pass\n", "def f(a=1, b=2,): pass", "f(a,)", "f(*a,)",
	"f(**a,)", "lambda a, b=1, *c, **d: a", "lambda *, a: a", "lambda: (yield)", "x = a is b", "assert x", "assert(x)",
	"x = 1\nassert(x)", "  assert(x)", "if x:\n  assert(x)", "x = 1; assert(x)", "x = f(**y)", "x = f(a, **y)", "x = [**y]",
	"x = (**y)", "x = {**y}", "def f(**kw): pass", "x = a **b", "x = a\n**b", "(a)", "[a]", "{a: b}", "if x:\n  (a)\n",
	"x = 'a' if b else '''c\n'''\ny", "x = (1 if a else 2)", "x = [1 if a else 2 for b in c]", "print(*[1], sep='')",
	"def f():\n  def g():\n    def h():\n      return 1\n", "while x:\n  if y:\n    continue\n  break\n",
	"x = 'a\\'b\"c'", "x = \"a\\\"b'c\"", "x = '''a'''''", "x = \"\"\"a\"\"\"\"\"", "x = '''\\''''", "x = '\\\\'", "x = '\\\\\\''",
	"x = '\\t\\n\\\\'", "x = '\\r'", "x = '\\a'", "x = '\\x41'", "x = '\\u00e9'", "x = '\\101'", "x = b'a'", "x = rb'a'", "x = br'a'",
	"x = R'a'", "x = u'a'", "x = f'a'", "x = r'a\\'", "x = r'\\''", "x = 'é\\n' + 'ü'\ny = 1", "x = '''é\né''' + z",
	"x = 1\n\x0cy = 2", "x =\t1", "\tx = 1", "if x:\n\ty\n", "if x:\n        y\n\tz\n", "x = 1 \\\n + 2", "x = (1 \\\n + 2)",
	"x = 00", "x = 0", "x = 0.0", "x = 00.5", "x = 0.5e3", "x = 1.5.real", "x = 1..real", "x = .5", "x = 5.", "x = 1e5", "x = 1E5",
	"x = 0x", "x = 0o", "x = 08", "x = 0_0", "x = 1__", "x = 99999999999999999999", "x = 1.7976931348623157e309",
	"x = 179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000.0",
	"x = 0.000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001",
	"load('a', 'b')", "x = load", "x.load = 1", "def load(): pass", "x = y.not", "x = y.in", "x = y.True", "True = 1",
	"x = a < b < c", "x = (a < b) < c", "x = a == b and c == d", "x = a | b == c", "x = a == b | c == d",
	"x = not a == b", "x = a == not b", "x = a + not b", "x = a if not b else c", "x = -not a", "x = a.b if c else d.e",
	"x = a[b if c else d]", "x = {a if b else c: d}", "x = [lambda: 1, lambda x: x]", "x = (lambda: 1)()",
	"x = lambda: 1 if a else 2", "[x for x in a if lambda: 1 if b else 2]", "[x for x in a if b if c]",
	"[x for x in a, b]", "[x for x in (a, b)]", "[x for x, y in a]", "[x for (x, y) in a]", "[x for x.y in a]", "[x for x[0] in a]",
	"for x.y in a: pass", "for x[0] in a: pass", "for (x, y), z in a: pass", "for x in a if b else c: pass",
}

func TestFastParseEdges(t *testing.T) {
	taken := 0
	for _, src := range fastParseEdges {
		if sameParse(t, "edge", src) {
			taken++
		}
	}
	t.Logf("fastParse took %d of %d edge texts", taken, len(fastParseEdges))
}
