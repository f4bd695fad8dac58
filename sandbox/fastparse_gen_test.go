package sandbox

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"

	"go.starlark.net/syntax"

	"github.com/starplan/starplan/internal/testtier"
)

// A differential generator for fastParse: structured Starlark-ish programs (mostly valid, with
// odd trivia, literals and operators mixed in) and token soups (mostly invalid), each compared by
// sameParse: fastParse declines, or gives go.starlark.net's tree, compiled bytes and lex findings.

// genProg writes random programs from r.
type genProg struct {
	r     *rand.Rand
	b     strings.Builder
	depth int
	clean bool // only what fastParse should take: valid literals, operators, trivia
}

var (
	cleanNums = []string{"0", "1", "42", "0.5", "1.", "3.25", "100", "9223372036854775807", "7", "0.", "10.01"}
	cleanStrs = []string{`'a'`, `"b"`, `''`, `""`, `'''c'''`, `"""d` + "\n" + `e"""`, `r'x'`, `'a\'b'`, `"a\\"`, `'é'`, `'\t'`, `"\n"`,
		`'''a'b''c'''`, `""""""`, `'"'`, `"'"`, `r'''a` + "\n" + `b'''`, `'tab	in'`, `"ünï"`, `'\"'`, `'#'`, `"a#b"`, `'\''`, `'''\''''`,
		`"""a\""""`, `'''\n'''`, `"日本"`, `"""x` + "\n\n  " + `"""`}
	cleanBinops = []string{"+", "-", "*", "/", "//", "%", "<", ">", "<=", ">=", "==", "!=", "<<", ">>", "&", "|", "^", "and", "or", "in", "not in"}
	cleanAugs   = []string{"=", "+=", "-=", "*=", "/=", "//=", "%=", "&=", "|=", "^=", "<<=", ">>="}
	cleanTrivia = []string{" ", "  ", "\n", " # c\n", "\n\n", "\n    ", "#\n", "# é\n", "#'\n"}
)

func (g *genProg) pickC(dirty, clean []string) string {
	if g.clean {
		return g.pick(clean)
	}
	return g.pick(dirty)
}

var (
	genNames = []string{"x", "y", "z", "f", "g", "_a", "assert", "r", "b", "rb", "u", "True", "None", "answer_text", "a1", "print", "len"}
	genNums  = []string{"0", "1", "42", "0.5", "1.", "3.25", "100", "9223372036854775807", "9223372036854775808", "00", "1e5", "0x1F", "0o7", "1_000", ".5", "1.e3", "7"}
	genStrs  = []string{`'a'`, `"b"`, `''`, `""`, `'''c'''`, `"""d` + "\n" + `e"""`, `r'x'`, `r"\n"`, `'a\'b'`, `"a\\"`, `'\x41'`, `'é'`, `b'x'`,
		`'\t'`, `"\n"`, `'''a'b''c'''`, `"""""" `, `'"'`, `"'"`, `r'''a` + "\n" + `b'''`, `'tab	in'`, `"ünï"`, `'\"'`, `'#'`, `"a#b"`, `'\u00e9'`, `'\141'`, `'\''`, `'''\''''`}
	genBinops = []string{"+", "-", "*", "/", "//", "%", "**", "<", ">", "<=", ">=", "==", "!=", "<<", ">>", "&", "|", "^", "and", "or", "in", "not in", "is", "is not"}
	genAugs   = []string{"=", "+=", "-=", "*=", "/=", "//=", "%=", "&=", "|=", "^=", "<<=", ">>=", "**=", ":="}
	genTrivia = []string{" ", " ", " ", "", "  ", "\n", " # c\n", "\t", "\r\n", "\\\n", "\n\n", "\n    ", "#\n"}
)

func (g *genProg) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g *genProg) w(s string) { g.b.WriteString(s) }

// sp writes the space between two tokens: mostly one space, sometimes odd trivia (which, outside
// brackets, usually makes a syntax error: fine, fastParse must then decline).
func (g *genProg) sp(inBrackets bool) {
	if g.r.IntN(12) == 0 {
		t := g.pickC(genTrivia, cleanTrivia)
		if !inBrackets && strings.ContainsAny(t, "\n") && (g.clean || g.r.IntN(3) != 0) {
			t = " "
		}
		g.w(t)
		return
	}
	if !g.clean && g.r.IntN(3) == 0 {
		return
	}
	g.w(" ")
}

// expr writes a test (an expression, no bare tuple); junk now and then when not clean.
func (g *genProg) expr(inB bool) {
	g.depth++
	defer func() { g.depth-- }()
	if g.depth > 3 {
		g.atom()
		return
	}
	if !g.clean && g.r.IntN(25) == 0 {
		g.w(g.pick(genSoup))
	}
	switch g.r.IntN(14) {
	case 0:
		g.w("lambda")
		if g.r.IntN(2) == 0 {
			g.w(" ")
			g.params()
		}
		g.w(":")
		g.sp(inB)
		g.expr(inB)
	case 1:
		g.orTest(inB)
		g.w(" if ")
		g.orTest(inB)
		g.w(" else ")
		g.expr(inB)
	default:
		g.orTest(inB)
	}
}

func (g *genProg) orTest(inB bool) {
	g.notTest(inB)
	for g.depth < 3 && g.r.IntN(4) == 0 {
		g.sp(inB)
		g.w(g.pick([]string{"or", "and"}))
		g.w(" ")
		g.notTest(inB)
	}
}

func (g *genProg) notTest(inB bool) {
	if g.r.IntN(7) == 0 {
		g.w(g.pick([]string{"not ", "not  ", "not("}))
		if g.b.String()[g.b.Len()-1] == '(' {
			g.expr(true)
			g.w(")")
			return
		}
		g.notTest(inB)
		return
	}
	g.arith(inB)
	if g.r.IntN(5) == 0 {
		g.sp(inB)
		g.w(g.pickC(genBinops, []string{"<", ">", "<=", ">=", "==", "!=", "in", "not in", "not  in"}))
		g.sp(inB)
		g.arith(inB)
		if !g.clean && g.r.IntN(4) == 0 {
			g.w(" < ")
			g.arith(inB)
		}
	}
}

func (g *genProg) arith(inB bool) {
	g.unary(inB)
	for g.depth < 3 && g.r.IntN(3) == 0 {
		g.sp(inB)
		g.w(g.pickC(genBinops, []string{"+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^"}))
		g.sp(inB)
		g.unary(inB)
	}
}

func (g *genProg) unary(inB bool) {
	if g.r.IntN(7) == 0 {
		g.w(g.pick([]string{"-", "+", "~", "- ", "--"}))
		g.unary(inB)
		return
	}
	g.primary()
	for g.depth < 3 && g.r.IntN(4) == 0 {
		switch g.r.IntN(3) {
		case 0:
			g.w(g.pick([]string{".", ". ", " ."}))
			g.w(g.pick(genNames))
		case 1:
			g.w("[")
			switch g.r.IntN(6) {
			case 0:
				g.expr(true)
			case 1:
				g.expr(true)
				g.w(":")
			case 2:
				g.w(":")
				g.expr(true)
				g.w(":")
				g.expr(true)
			case 3:
				g.w("::")
				g.expr(true)
			case 4:
				g.expr(true)
				g.w(",")
				g.expr(true)
			case 5:
				g.w(":")
			}
			g.w("]")
		case 2:
			g.w("(")
			n := g.r.IntN(4)
			for i := 0; i < n; i++ {
				if i > 0 {
					g.w(",")
					g.sp(true)
				}
				switch g.r.IntN(6) {
				case 0:
					g.w("*")
				case 1:
					g.w("**")
				case 2:
					g.w(g.pick(genNames) + g.pick([]string{"=", " = ", "= "}))
				}
				g.expr(true)
			}
			if n > 0 && g.r.IntN(5) == 0 {
				g.w(",")
			}
			g.sp(true)
			g.w(")")
		}
	}
}

func (g *genProg) primary() {
	if g.depth > 3 {
		g.atom()
		return
	}
	g.depth++
	defer func() { g.depth-- }()
	switch g.r.IntN(12) {
	case 0:
		g.w("(")
		g.sp(true)
		g.expr(true)
		if g.r.IntN(3) == 0 {
			g.w(",")
			if g.r.IntN(2) == 0 {
				g.sp(true)
				g.expr(true)
			}
		}
		g.sp(true)
		g.w(")")
	case 1:
		open, close := "[", "]"
		if g.r.IntN(3) == 0 {
			open, close = "(", ")"
		}
		g.w(open)
		n := g.r.IntN(4)
		for i := 0; i < n; i++ {
			if i > 0 {
				g.w(",")
				g.sp(true)
			}
			g.expr(true)
		}
		if n > 0 && g.r.IntN(3) == 0 {
			g.w(",")
		}
		g.sp(true)
		g.w(close)
	case 2:
		g.w("{")
		n := g.r.IntN(4)
		for i := 0; i < n; i++ {
			if i > 0 {
				g.w(",")
				g.sp(true)
			}
			g.expr(true)
			if g.clean || g.r.IntN(8) != 0 {
				g.w(g.pick([]string{":", ": ", " : "}))
				g.sp(true)
				g.expr(true)
			}
		}
		if n > 0 && g.r.IntN(3) == 0 {
			g.w(",")
		}
		g.w("}")
	case 3:
		open, close := "[", "]"
		dict := g.r.IntN(3) == 0
		if dict {
			open, close = "{", "}"
		}
		g.w(open)
		g.expr(true)
		if dict {
			g.w(": ")
			g.expr(true)
		}
		n := 1 + g.r.IntN(3)
		for i := 0; i < n; i++ {
			if i == 0 || g.r.IntN(2) == 0 {
				g.w(" for ")
				g.target()
				g.w(" in ")
				g.orTest(true)
			} else {
				g.w(" if ")
				if g.r.IntN(5) == 0 {
					g.w("lambda: ")
				}
				g.orTest(true)
			}
			g.sp(true)
		}
		g.w(close)
	default:
		g.atom()
	}
}

func (g *genProg) atom() {
	switch g.r.IntN(4) {
	case 0:
		g.w(g.pickC(genNums, cleanNums))
	case 1:
		g.w(g.pickC(genStrs, cleanStrs))
	default:
		g.w(g.pick(genNames))
	}
}

func (g *genProg) target() {
	n := 1 + g.r.IntN(3)
	if g.r.IntN(4) == 0 {
		g.w("(")
		defer g.w(")")
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			g.w(", ")
		}
		g.w(g.pick(genNames))
	}
	if g.r.IntN(6) == 0 {
		g.w(",")
	}
}

func (g *genProg) params() {
	n := g.r.IntN(4)
	for i := 0; i < n; i++ {
		if i > 0 {
			g.w(", ")
		}
		switch g.r.IntN(6) {
		case 0:
			g.w("*")
			if g.r.IntN(2) == 0 {
				g.w(g.pick(genNames))
			}
		case 1:
			g.w("**" + g.pick(genNames))
		case 2:
			g.w(g.pick(genNames) + "=")
			g.expr(true)
		default:
			g.w(g.pick(genNames))
		}
	}
	if n > 0 && g.r.IntN(5) == 0 {
		g.w(",")
	}
}

func (g *genProg) simple() {
	switch g.r.IntN(12) {
	case 0:
		g.w("return")
		if g.r.IntN(3) != 0 {
			g.w(" ")
			g.expr(false)
		}
	case 1:
		g.w(g.pickC([]string{"pass", "break", "continue", "load('m', 'x')", "del x", "assert x", "import x", "global x"}, []string{"pass", "break", "continue"}))
	case 2, 3, 4:
		g.target()
		g.sp(false)
		g.w(g.pickC(genAugs, cleanAugs))
		g.sp(false)
		g.expr(false)
	default:
		g.expr(false)
	}
	if g.r.IntN(8) == 0 {
		g.w(";")
		if g.r.IntN(2) == 0 {
			g.w(" ")
			g.simple()
		}
	}
}

func (g *genProg) block(indent string, n int) {
	for i := 0; i < n; i++ {
		g.stmt(indent)
	}
}

func (g *genProg) stmt(indent string) {
	g.w(indent)
	if g.r.IntN(30) == 0 {
		g.w(g.pickC([]string{"", " ", "\t", "#x", "  # y"}, []string{"", " ", "#x", "  # y"}))
		g.w("\n")
		return
	}
	inner := indent + g.pickC([]string{"    ", "  ", " ", "\t", "    ", "        "}, []string{"    ", "  ", " ", "        "})
	if len(indent) > 12 {
		g.simple()
		g.w(g.pickC([]string{"\n", "\n", "\n", "", " # end\n", "\r\n"}, []string{"\n", "\n", " # end\n"}))
		return
	}
	suite := func() {
		g.w(":")
		if g.r.IntN(6) == 0 {
			g.w(" ")
			g.simple()
			g.w("\n")
			return
		}
		g.w(g.pick([]string{"\n", "\n", " # c\n", "\n\n"}))
		g.block(inner, 1+g.r.IntN(3))
		if !g.clean && g.r.IntN(10) == 0 {
			g.w(indent + " ")
		}
	}
	switch g.r.IntN(10) {
	case 0:
		g.w("def " + g.pick(genNames) + "(")
		g.params()
		g.w(")")
		suite()
	case 1:
		g.w("if ")
		g.expr(false)
		suite()
		for g.r.IntN(3) == 0 {
			g.w(indent + "elif ")
			g.expr(false)
			suite()
		}
		if g.r.IntN(2) == 0 {
			g.w(indent + "else")
			suite()
		}
	case 2:
		g.w("for ")
		g.target()
		g.w(" in ")
		g.expr(false)
		suite()
	case 3:
		g.w("while ")
		g.expr(false)
		suite()
	default:
		g.simple()
		g.w(g.pick([]string{"\n", "\n", "\n", "\n", "", " # end\n", "\n  \n"}))
	}
}

func genProgram(seed uint64) string {
	g := &genProg{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	g.clean = g.r.IntN(4) != 0
	g.block("", 1+g.r.IntN(5))
	return g.b.String()
}

var genSoup = []string{
	"x", "y", "f", "assert", "not", "in", "is", "if", "else", "elif", "for", "lambda", "def", "return", "pass", "and", "or", "while",
	"break", "continue", "load", "r", "b", "rb", "u", "_x", "é", "0", "1", "00", "0.5", "1.", "1e5", "0x1F", "1_0", ".5", "9223372036854775808",
	`'a'`, `"b"`, `'''c'''`, `"""d` + "\n" + `e"""`, `r'x'`, `r"\n"`, `'a\'b'`, `"a\\"`, `'\x41'`, `b'x'`, `''`, `'`, `"`, `'''`,
	"+", "-", "*", "/", "//", "%", "**", "~", "<", ">", "<=", ">=", "==", "!=", "<<", ">>", "&", "|", "^", "=", "+=", "//=", "<<=",
	".", ",", ";", ":", "(", ")", "[", "]", "{", "}", ":=", "@", "!", "\\", "->",
	" ", " ", " ", "  ", "\n", "\n    ", "\n  ", "\t", "\r\n", "\r", "\\\n", "# c\n", "#", "\x00", "\xff", "\f",
}

func genSoupProgram(seed uint64) string {
	r := rand.New(rand.NewPCG(seed, ^seed))
	var b strings.Builder
	n := 1 + r.IntN(30)
	for i := 0; i < n; i++ {
		b.WriteString(genSoup[r.IntN(len(genSoup))])
		if r.IntN(2) == 0 {
			b.WriteByte(' ')
		}
	}
	if r.IntN(2) == 0 {
		b.WriteByte('\n')
	}
	return b.String()
}

// TestFastParseGenerated: generated programs and token soups, a few thousand in the normal tier.
func TestFastParseGenerated(t *testing.T) {
	n := testtier.Size(1500, 200000)
	taken, soupTaken := 0, 0
	for i := 0; i < n; i++ {
		if sameParse(t, "generated", genProgram(uint64(i))) {
			taken++
		}
		if sameParse(t, "soup", genSoupProgram(uint64(i))) {
			soupTaken++
		}
		if t.Failed() {
			break
		}
	}
	t.Logf("fastParse took %d of %d generated programs, %d of %d soups", taken, n, soupTaken, n)
}

// FuzzFastParseGenerated: the generators driven by the fuzzer's seed.
func FuzzFastParseGenerated(f *testing.F) {
	f.Add(uint64(1), false)
	f.Fuzz(func(t *testing.T, seed uint64, soup bool) {
		if soup {
			sameParse(t, "soup", genSoupProgram(seed))
		} else {
			sameParse(t, "generated", genProgram(seed))
		}
	})
}

// TestFastParseConcurrent: parses running at once (the pooled parsers) give each its own tree,
// which stays go.starlark.net's after other parses ran (run it with -race).
func TestFastParseConcurrent(t *testing.T) {
	var srcs []string
	for i := uint64(0); len(srcs) < 64; i++ {
		src := genProgram(i)
		if _, _, ok := fastParse(planFile, src); ok {
			srcs = append(srcs, src)
		}
	}
	type parsed struct {
		src string
		f   *syntax.File
	}
	var wg sync.WaitGroup
	results := make([][]parsed, 4)
	for w := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < testtier.Size(100, 2000); k++ {
				src := srcs[(k*7+w*13)%len(srcs)]
				if k%5 == 0 {
					src += "\n)" // declined: a bail-out returns its parser to the pool too
				}
				f, _, ok := fastParse(planFile, src)
				if ok {
					results[w] = append(results[w], parsed{src, f})
				}
			}
		}()
	}
	wg.Wait()
	for _, rs := range results {
		for _, r := range rs {
			want, err := fileOptions.Parse(planFile, r.src, 0)
			if err != nil || !reflect.DeepEqual(want, r.f) {
				t.Fatalf("a tree changed after other parses:\n%s", r.src)
			}
		}
	}
}
