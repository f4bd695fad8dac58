package sandbox

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.starlark.net/syntax"
)

// fastParse is a fast path for fileOptions.Parse(name, src, 0): for the plain programs plans are
// made of it returns the very tree that go.starlark.net's parser returns (the same nodes, fields,
// positions and nil-or-empty slices: TestFastParseMatchesParse compares them, and the compiled
// programs, over the test corpus and the fuzz seeds), in a fraction of the time (go.starlark.net's
// parser climbs ten precedence levels with a deferred call each for every operand, and copies
// every token's text).
//
// It never reports an error: ok is false for anything it does not handle or that is not a valid
// program (a syntax error, a backslash, a tab or CR outside a literal, bytes, a number other than
// a plain decimal, non-ASCII text outside strings and comments, load, nesting deep enough to
// approach go.starlark.net's limit), and the caller parses with go.starlark.net, which gives the
// error with its wording and position. So it can only ever be slower than necessary, never accept
// what the parser rejects: every rule below mirrors syntax/scan.go and syntax/parse.go, and any
// doubt is a bail-out.
func fastParse(name, src string) (f *syntax.File, fl fastLex, ok bool) {
	return fastParseWith(name, src, nil)
}

// fastParsePooled is fastParse cutting the tree's most frequent nodes from slabs that an earlier
// tree left (ts). The caller calls ts.release() once nothing refers to the tree any more (also
// when ok is false): its nodes are cleared and given to a later parse.
func fastParsePooled(name, src string) (f *syntax.File, fl fastLex, ok bool, ts *treeSlabs) {
	ts = slabPool.Get().(*treeSlabs)
	f, fl, ok = fastParseWith(name, src, ts)
	return f, fl, ok, ts
}

// fastParseWith is fastParse; with ts, the slabs come from ts when they are large enough, and
// ts holds the ones the tree was cut from when it returns.
func fastParseWith(name, src string, ts *treeSlabs) (f *syntax.File, fl fastLex, ok bool) {
	if len(src) > maxFastParse {
		return nil, fastLex{}, false
	}
	p := fparserPool.Get().(*fparser)
	lent := false
	defer func() {
		if r := recover(); r != nil {
			if r != errBail {
				panic(r)
			}
			f, fl, ok = nil, fastLex{}, false
		}
		if lent {
			ts.keep(p)
		}
		p.reset()
		fparserPool.Put(p)
	}()
	p.file = &name
	if !p.scan(src) {
		return nil, fastLex{}, false
	}
	if ts != nil {
		ts.lend(p)
		lent = true
	}
	f = p.parseFile()
	f.Path = name
	f.Options = fileOptions
	return f, p.lex, true
}

// treeSlabs are the slabs of one tree's most frequent nodes and the last chunk of its lists,
// kept for a later parse once nothing refers to the tree (a plan's tree is dead once it is
// compiled: the compiled program keeps positions, names and constants, never a node). A parse
// takes a slab only when it is at least as large as the one it would allocate, so pooled or not,
// a tree is cut from the same number of slabs.
type treeSlabs struct {
	idents  []syntax.Ident
	lits    []syntax.Literal
	bins    []syntax.BinaryExpr
	dots    []syntax.DotExpr
	calls   []syntax.CallExpr
	assigns []syntax.AssignStmt
	entries []syntax.DictEntry
	indexes []syntax.IndexExpr
	arena   []syntax.Expr
}

var slabPool = sync.Pool{New: func() any { return new(treeSlabs) }}

// maxPooledSlab is the largest slab (in nodes) kept for reuse: a plan's are a few hundred.
const maxPooledSlab = 4096

// lend gives p the slabs of ts that are large enough for the counts p's scan made.
func (ts *treeSlabs) lend(p *fparser) {
	p.idents, p.lits, p.bins = lendSlab(ts.idents, p.nIdent), lendSlab(ts.lits, p.nLit), lendSlab(ts.bins, p.nBin)
	p.dots, p.calls, p.assigns = lendSlab(ts.dots, p.nDot), lendSlab(ts.calls, p.nCall), lendSlab(ts.assigns, p.nAssign)
	p.entries, p.indexes = lendSlab(ts.entries, p.nEntry), lendSlab(ts.indexes, p.nIndex)
	p.arena = lendSlab(ts.arena, len(p.toks)/4)
	*ts = treeSlabs{}
}

// lendSlab returns s, emptied, when it can hold what slab would allocate for n nodes; else nil.
func lendSlab[T any](s []T, n int) []T {
	if cap(s) >= max(n, 8) {
		return s[:0]
	}
	return nil
}

// keep takes the slabs p cut the tree from last (earlier ones, when a count fell short, stay
// with the tree and the collector).
func (ts *treeSlabs) keep(p *fparser) {
	*ts = treeSlabs{p.idents, p.lits, p.bins, p.dots, p.calls, p.assigns, p.entries, p.indexes, p.arena}
}

// release clears the slabs, so that they hold no node or value of the old tree, and pools them.
func (ts *treeSlabs) release() {
	ts.idents = clearSlab(ts.idents)
	ts.lits = clearSlab(ts.lits)
	ts.bins = clearSlab(ts.bins)
	ts.dots = clearSlab(ts.dots)
	ts.calls = clearSlab(ts.calls)
	ts.assigns = clearSlab(ts.assigns)
	ts.entries = clearSlab(ts.entries)
	ts.indexes = clearSlab(ts.indexes)
	ts.arena = clearSlab(ts.arena)
	slabPool.Put(ts)
}

// clearSlab zeroes s up to its capacity and returns it empty; a slab too large to keep is dropped.
func clearSlab[T any](s []T) []T {
	if cap(s) > maxPooledSlab {
		return nil
	}
	clear(s[:cap(s)])
	return s[:0]
}

// fastLex is what lex would find in a text that fastParse took, measured on fastParse's tokens
// so that a plan is scanned once (TestFastParseMatchesParse compares it with lex's).
type fastLex struct {
	// maxDepth is lex's maxDepth: the deepest nesting of brackets plus indented blocks.
	maxDepth int
	// needLex is true when lex could find a Python-only construct that parses as Starlark (an
	// assert(...) call at the start of a line, ** anywhere but after ( or ,), or when a line
	// starts with an opening bracket (lex, counting the bracket first, then leaves the line's
	// indentation out of its depth): the caller runs lex. Every other construct findPythonisms
	// reports is a reserved word or a character fastParse declines.
	needLex bool
}

// maxFastParse is the largest text fastParse takes (a plan is at most DefaultMaxProgram; larger
// texts go to go.starlark.net's parser, so the pooled token slices stay small).
const maxFastParse = 256 << 10

// maxFastDepth bounds fastParse's recursion. go.starlark.net's parser stops at a depth of 1000
// of its own, and it enters at most 11 levels for each of fastParse's: below 80, fastParse never
// accepts a program nested too deeply for go.starlark.net.
const maxFastDepth = 80

// errBail is what fastParse panics with to give up; recovered in fastParse only.
var errBail = new(int)

func bail() { panic(errBail) }

// ftok is a token: its kind, position and text (src[off:end]).
type ftok struct {
	tok       syntax.Token
	line, col int32
	off, end  int32
}

type fparser struct {
	src   string
	file  *string
	toks  []ftok
	i     int // the current token
	depth int
	lex   fastLex

	// The most frequent nodes are cut from slabs sized by the scan's counts: one allocation for
	// all of a kind instead of one each. The slabs are the caller's with the tree (pooled only
	// through fastParsePooled, whose caller says when the tree is dead).
	nIdent, nLit, nBin, nDot, nCall, nAssign, nEntry, nIndex int
	idents                                                   []syntax.Ident
	lits                                                     []syntax.Literal
	bins                                                     []syntax.BinaryExpr
	dots                                                     []syntax.DotExpr
	calls                                                    []syntax.CallExpr
	assigns                                                  []syntax.AssignStmt
	entries                                                  []syntax.DictEntry
	indexes                                                  []syntax.IndexExpr

	// Lists of expressions (arguments, parameters, elements, entries) are gathered on stack,
	// a scratch that stays with the parser, and copied to arena, which goes with the tree.
	stack []syntax.Expr
	arena []syntax.Expr
}

// push adds x to the list being gathered on the stack.
func (p *fparser) push(x syntax.Expr) { p.stack = append(p.stack, x) }

// take returns the list gathered on the stack since mark (nil for none, as go.starlark.net's
// parser leaves an empty list) in the arena, with no room to grow, and pops it.
func (p *fparser) take(mark int) []syntax.Expr {
	n := len(p.stack) - mark
	if n == 0 {
		return nil
	}
	if cap(p.arena)-len(p.arena) < n {
		p.arena = make([]syntax.Expr, 0, max(n, len(p.toks)/4))
	}
	l := len(p.arena)
	p.arena = append(p.arena, p.stack[mark:]...)
	clear(p.stack[mark:])
	p.stack = p.stack[:mark]
	return p.arena[l : l+n : l+n]
}

// slab returns the next element of *s, allocating a slab of n (at least 8) when it is full.
func slab[T any](s *[]T, n int) *T {
	if len(*s) == cap(*s) {
		*s = make([]T, 0, max(n, 8))
	}
	*s = (*s)[:len(*s)+1]
	return &(*s)[len(*s)-1]
}

var fparserPool = sync.Pool{New: func() any { return &fparser{toks: make([]ftok, 0, 512)} }}

func (p *fparser) reset() {
	if cap(p.toks) > 1<<14 {
		p.toks = make([]ftok, 0, 512)
	}
	clear(p.stack)
	*p = fparser{toks: p.toks[:0], stack: p.stack[:0]}
}

// scan splits src into tokens as go.starlark.net's scanner does (NEWLINE, INDENT and OUTDENT
// included). It returns false for any text it does not handle.
func (p *fparser) scan(src string) bool {
	p.src = src
	toks := p.toks
	var indents [64]int
	stk := indents[:1] // indentation stack, as sc.indentstk
	line, col := int32(1), int32(1)
	depth := 0               // bracket nesting
	lineStart := true        // at the start of a line: measure its indentation
	dents := 0               // INDENTs (>0) or OUTDENTs (<0) to emit
	atLineStart := true      // the next token is the first of a logical line
	prev := syntax.Token(-1) // the token before, NEWLINE, INDENT and OUTDENT aside
	emit := func(t syntax.Token, off, end int) {
		toks = append(toks, ftok{tok: t, line: line, col: col, off: int32(off), end: int32(end)})
		switch t {
		case syntax.NEWLINE:
			atLineStart = true
			return
		case syntax.INDENT, syntax.OUTDENT, syntax.EOF:
			return
		}
		// What lex measures and looks for (see fastLex).
		if d := depth + len(stk) - 1; d > p.lex.maxDepth {
			p.lex.maxDepth = d
		}
		switch {
		case t == syntax.IDENT && atLineStart && src[off:end] == "assert":
			p.lex.needLex = true
		case t == syntax.STARSTAR && prev != syntax.LPAREN && prev != syntax.COMMA:
			p.lex.needLex = true
		case atLineStart && (t == syntax.LPAREN || t == syntax.LBRACK || t == syntax.LBRACE):
			p.lex.needLex = true
		}
		atLineStart, prev = false, t
	}
	i := 0
	for {
		blank := false
		savedLineStart := lineStart
		if lineStart {
			lineStart = false
			n := 0
			for i < len(src) && src[i] == ' ' {
				n++
				i++
				col++
			}
			if i < len(src) && src[i] == '\t' {
				return false
			}
			if i == len(src) || src[i] == '#' || src[i] == '\n' {
				blank = true
			}
			if !blank && depth == 0 {
				cur := stk[len(stk)-1]
				if n > cur {
					dents++
					if len(stk) == cap(stk) {
						return false
					}
					stk = append(stk, n)
				} else if n < cur {
					for len(stk) > 0 && n < stk[len(stk)-1] {
						dents--
						stk = stk[:len(stk)-1]
					}
					if len(stk) == 0 || n != stk[len(stk)-1] {
						return false // unindent does not match any outer indentation level
					}
				}
			}
		}
		if dents != 0 {
			if dents < 0 {
				dents++
				emit(syntax.OUTDENT, i, i)
			} else {
				dents--
				emit(syntax.INDENT, i, i)
			}
			continue
		}
		for i < len(src) && src[i] == ' ' {
			i++
			col++
		}
		if i < len(src) && src[i] == '#' {
			for i < len(src) && src[i] != '\n' {
				c := src[i]
				if c == '\r' || c == 0 {
					return false
				}
				if c < utf8.RuneSelf || c&0xC0 != 0x80 {
					col++ // one column per rune
				}
				i++
			}
		}
		if i < len(src) && src[i] == '\n' {
			lineStart = true
			if depth > 0 || blank {
				i++
				line, col = line+1, 1
				continue
			}
			emit(syntax.NEWLINE, i, i+1)
			i++
			line, col = line+1, 1
			continue
		}
		if i == len(src) {
			if len(stk) > 1 {
				if savedLineStart {
					dents = 1 - len(stk)
					stk = stk[:1]
					continue
				}
				lineStart = true
				emit(syntax.NEWLINE, i, i)
				continue
			}
			emit(syntax.EOF, i, i)
			break
		}
		c := src[i]
		switch {
		case c == ',':
			emit(syntax.COMMA, i, i+1)
			i++
			col++
		case c == '"' || c == '\'':
			j, ok := scanFastString(src, i, false)
			if !ok {
				return false
			}
			emit(syntax.STRING, i, j)
			if !advance(src[i:j], &line, &col) {
				return false
			}
			i = j
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_':
			if (c == 'r' || c == 'b') && i+1 < len(src) && (src[i+1] == '"' || src[i+1] == '\'') {
				if c == 'b' {
					return false // bytes
				}
				j, ok := scanFastString(src, i+1, true)
				if !ok {
					return false
				}
				emit(syntax.STRING, i, j)
				if !advance(src[i:j], &line, &col) {
					return false
				}
				i = j
				break
			}
			j := i + 1
			for j < len(src) && isASCIIIdent(src[j]) {
				j++
			}
			if j < len(src) && src[j] >= utf8.RuneSelf {
				return false // a non-ASCII letter may continue the name
			}
			t := keyword(src[i:j])
			if t == syntax.ILLEGAL {
				return false
			}
			emit(t, i, j)
			col += int32(j - i)
			i = j
		case c == '[' || c == '(' || c == '{':
			depth++
			if depth > maxFastDepth {
				return false
			}
			t := syntax.LBRACK
			if c == '(' {
				t = syntax.LPAREN
			} else if c == '{' {
				t = syntax.LBRACE
			}
			emit(t, i, i+1)
			i++
			col++
		case c == ']' || c == ')' || c == '}':
			if depth == 0 {
				return false
			}
			depth--
			t := syntax.RBRACK
			if c == ')' {
				t = syntax.RPAREN
			} else if c == '}' {
				t = syntax.RBRACE
			}
			emit(t, i, i+1)
			i++
			col++
		case '0' <= c && c <= '9' || c == '.':
			t, j := scanFastNumber(src, i)
			if t == syntax.ILLEGAL {
				return false
			}
			emit(t, i, j)
			col += int32(j - i)
			i = j
		default:
			t, n := punct(src[i:])
			if t == syntax.ILLEGAL {
				return false
			}
			emit(t, i, i+n)
			i += n
			col += int32(n)
		}
	}
	p.toks = toks
	var n [syntax.WHILE + 1]int // tokens of each kind
	for _, t := range toks {
		if int(t.tok) < len(n) {
			n[t.tok]++
		}
	}
	p.nIdent = n[syntax.IDENT]
	p.nLit = n[syntax.INT] + n[syntax.FLOAT] + n[syntax.STRING]
	p.nDot, p.nCall, p.nIndex, p.nEntry = n[syntax.DOT], n[syntax.LPAREN], n[syntax.LBRACK], n[syntax.COLON]
	p.nBin = n[syntax.EQ] // keyword arguments and defaults
	for t, prec := range fastPrec {
		if prec >= 0 {
			p.nBin += n[t]
		}
	}
	p.nAssign = n[syntax.EQ]
	for t := syntax.PLUS_EQ; t <= syntax.GTGT_EQ; t++ {
		p.nAssign += n[t]
	}
	return true
}

// advance moves line and col over s, a literal's text; false when it holds a character the
// fast path leaves to go.starlark.net (CR, NUL, a byte that is not UTF-8).
func advance(s string, line, col *int32) bool {
	l, c, ascii := *line, *col, true
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b == '\n':
			l, c = l+1, 1
		case b == '\r' || b == 0:
			return false
		case b < utf8.RuneSelf:
			c++
		default:
			ascii = false
			if b&0xC0 != 0x80 {
				c++ // one column per rune: its first byte
			}
		}
	}
	*line, *col = l, c
	return ascii || utf8.ValidString(s)
}

// scanFastString returns the end of the string literal whose opening quote is src[i]. In a
// raw literal it takes no backslash, elsewhere only the escapes \\ \' \" \n and \t.
func scanFastString(src string, i int, raw bool) (int, bool) {
	q := src[i]
	triple := i+2 < len(src) && src[i+1] == q && src[i+2] == q
	j := i + 1
	if triple {
		j = i + 3
	}
	for ; j < len(src); j++ {
		switch src[j] {
		case '\\':
			if raw || j+1 == len(src) {
				return 0, false
			}
			switch src[j+1] {
			case '\\', '\'', '"', 'n', 't':
				j++
			default:
				return 0, false
			}
		case '\n', '\r':
			if !triple {
				return 0, false
			}
		case q:
			if !triple {
				return j + 1, true
			}
			if j+2 < len(src) && src[j+1] == q && src[j+2] == q {
				return j + 3, true
			}
		}
	}
	return 0, false
}

// scanFastNumber scans a plain decimal integer or float (digits, a point, digits) or a lone
// point at src[i]; ILLEGAL for any other number (hex, octal, exponents, leading zeros, .5).
func scanFastNumber(src string, i int) (syntax.Token, int) {
	j := i
	if src[j] == '.' {
		if j+1 < len(src) && isDigit(src[j+1]) {
			return syntax.ILLEGAL, 0
		}
		return syntax.DOT, j + 1
	}
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	if src[i] == '0' && j-i > 1 {
		return syntax.ILLEGAL, 0
	}
	t := syntax.INT
	if j < len(src) && src[j] == '.' {
		t = syntax.FLOAT
		j++
		for j < len(src) && isDigit(src[j]) {
			j++
		}
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E' || src[j] == 'x' || src[j] == 'X' || src[j] == 'o' || src[j] == 'O' || src[j] == 'b' || src[j] == 'B') {
		return syntax.ILLEGAL, 0
	}
	return t, j
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isASCIIIdent(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || '0' <= c && c <= '9'
}

// keyword returns the token of the name s, as go.starlark.net's keywordToken.
func keyword(s string) syntax.Token {
	switch s {
	case "and":
		return syntax.AND
	case "break":
		return syntax.BREAK
	case "continue":
		return syntax.CONTINUE
	case "def":
		return syntax.DEF
	case "elif":
		return syntax.ELIF
	case "else":
		return syntax.ELSE
	case "for":
		return syntax.FOR
	case "if":
		return syntax.IF
	case "in":
		return syntax.IN
	case "lambda":
		return syntax.LAMBDA
	case "load":
		return syntax.LOAD
	case "not":
		return syntax.NOT
	case "or":
		return syntax.OR
	case "pass":
		return syntax.PASS
	case "return":
		return syntax.RETURN
	case "while":
		return syntax.WHILE
	case "as", "async", "await", "class", "del", "except", "finally", "from", "global", "import",
		"is", "nonlocal", "raise", "try", "with", "yield":
		return syntax.ILLEGAL // reserved words: an error, left to go.starlark.net
	}
	return syntax.IDENT
}

// punct returns the operator at the start of s and its length, as go.starlark.net's scanner;
// ILLEGAL for anything else.
func punct(s string) (syntax.Token, int) {
	next := byte(0)
	if len(s) > 1 {
		next = s[1]
	}
	third := byte(0)
	if len(s) > 2 {
		third = s[2]
	}
	switch s[0] {
	case '=':
		if next == '=' {
			return syntax.EQL, 2
		}
		return syntax.EQ, 1
	case '<':
		switch {
		case next == '=':
			return syntax.LE, 2
		case next == '<' && third == '=':
			return syntax.LTLT_EQ, 3
		case next == '<':
			return syntax.LTLT, 2
		}
		return syntax.LT, 1
	case '>':
		switch {
		case next == '=':
			return syntax.GE, 2
		case next == '>' && third == '=':
			return syntax.GTGT_EQ, 3
		case next == '>':
			return syntax.GTGT, 2
		}
		return syntax.GT, 1
	case '!':
		if next == '=' {
			return syntax.NEQ, 2
		}
	case '+':
		if next == '=' {
			return syntax.PLUS_EQ, 2
		}
		return syntax.PLUS, 1
	case '-':
		if next == '=' {
			return syntax.MINUS_EQ, 2
		}
		return syntax.MINUS, 1
	case '%':
		if next == '=' {
			return syntax.PERCENT_EQ, 2
		}
		return syntax.PERCENT, 1
	case '&':
		if next == '=' {
			return syntax.AMP_EQ, 2
		}
		return syntax.AMP, 1
	case '|':
		if next == '=' {
			return syntax.PIPE_EQ, 2
		}
		return syntax.PIPE, 1
	case '^':
		if next == '=' {
			return syntax.CIRCUMFLEX_EQ, 2
		}
		return syntax.CIRCUMFLEX, 1
	case '/':
		switch {
		case next == '=':
			return syntax.SLASH_EQ, 2
		case next == '/' && third == '=':
			return syntax.SLASHSLASH_EQ, 3
		case next == '/':
			return syntax.SLASHSLASH, 2
		}
		return syntax.SLASH, 1
	case ':':
		if next == '=' {
			return syntax.ILLEGAL, 0 // lex reads := as one token: left to the slow path
		}
		return syntax.COLON, 1
	case ';':
		return syntax.SEMI, 1
	case '~':
		return syntax.TILDE, 1
	case '*':
		switch next {
		case '*':
			return syntax.STARSTAR, 2
		case '=':
			return syntax.STAR_EQ, 2
		}
		return syntax.STAR, 1
	}
	return syntax.ILLEGAL, 0
}

// The parser: go.starlark.net's grammar (syntax/parse.go), function by function, except that
// binary expressions are parsed by precedence climbing in one loop instead of one call per
// precedence level (the same trees: operators of one level associate to the left, comparisons
// do not associate). Every error is a bail-out.

func (p *fparser) tok() syntax.Token { return p.toks[p.i].tok }

func (p *fparser) pos() syntax.Position {
	t := &p.toks[p.i]
	return syntax.MakePosition(p.file, t.line, t.col)
}

// next consumes the current token and returns its position (parser.nextToken).
func (p *fparser) next() syntax.Position {
	pos := p.pos()
	if p.toks[p.i].tok != syntax.EOF {
		p.i++
	}
	return pos
}

func (p *fparser) consume(t syntax.Token) syntax.Position {
	if p.tok() != t {
		bail()
	}
	return p.next()
}

// enter counts a level of recursion (go.starlark.net's parser.enter); the caller decrements
// depth when it returns (no defer: a bail-out drops the parser).
func (p *fparser) enter() {
	p.depth++
	if p.depth > maxFastDepth {
		bail()
	}
}

func (p *fparser) text() string {
	t := &p.toks[p.i]
	return p.src[t.off:t.end]
}

func (p *fparser) parseFile() *syntax.File {
	var stmts []syntax.Stmt
	for p.tok() != syntax.EOF {
		if p.tok() == syntax.NEWLINE {
			p.next()
			continue
		}
		stmts = p.parseStmt(stmts)
	}
	return &syntax.File{Stmts: stmts}
}

func (p *fparser) parseStmt(stmts []syntax.Stmt) []syntax.Stmt {
	switch p.tok() {
	case syntax.DEF:
		return append(stmts, p.parseDefStmt())
	case syntax.IF:
		return append(stmts, p.parseIfStmt())
	case syntax.FOR:
		return append(stmts, p.parseForStmt())
	case syntax.WHILE:
		return append(stmts, p.parseWhileStmt())
	}
	return p.parseSimpleStmt(stmts)
}

func (p *fparser) parseDefStmt() syntax.Stmt {
	defpos := p.next()
	id := p.parseIdent()
	lparen := p.consume(syntax.LPAREN)
	params := p.parseParams()
	rparen := p.consume(syntax.RPAREN)
	p.consume(syntax.COLON)
	body := p.parseSuite()
	return &syntax.DefStmt{Def: defpos, Name: id, Lparen: lparen, Params: params, Rparen: rparen, Body: body}
}

func (p *fparser) parseIfStmt() syntax.Stmt {
	ifpos := p.next()
	cond := p.parseTest()
	p.consume(syntax.COLON)
	body := p.parseSuite()
	ifStmt := &syntax.IfStmt{If: ifpos, Cond: cond, True: body}
	tail := ifStmt
	for p.tok() == syntax.ELIF {
		elifpos := p.next()
		cond := p.parseTest()
		p.consume(syntax.COLON)
		body := p.parseSuite()
		elif := &syntax.IfStmt{If: elifpos, Cond: cond, True: body}
		tail.ElsePos = elifpos
		tail.False = []syntax.Stmt{elif}
		tail = elif
	}
	if p.tok() == syntax.ELSE {
		tail.ElsePos = p.next()
		p.consume(syntax.COLON)
		tail.False = p.parseSuite()
	}
	return ifStmt
}

func (p *fparser) parseForStmt() syntax.Stmt {
	forpos := p.next()
	vars := p.parseForLoopVariables()
	p.consume(syntax.IN)
	x := p.parseExpr(false)
	p.consume(syntax.COLON)
	body := p.parseSuite()
	return &syntax.ForStmt{For: forpos, Vars: vars, X: x, Body: body}
}

func (p *fparser) parseWhileStmt() syntax.Stmt {
	whilepos := p.next()
	cond := p.parseTest()
	p.consume(syntax.COLON)
	body := p.parseSuite()
	return &syntax.WhileStmt{While: whilepos, Cond: cond, Body: body}
}

func (p *fparser) parseForLoopVariables() syntax.Expr {
	v := p.parsePrimaryWithSuffix()
	if p.tok() != syntax.COMMA {
		return v
	}
	mark := len(p.stack)
	p.push(v)
	for p.tok() == syntax.COMMA {
		p.next()
		if terminatesExprList(p.tok()) {
			break
		}
		p.push(p.parsePrimaryWithSuffix())
	}
	return &syntax.TupleExpr{List: p.take(mark)}
}

func (p *fparser) parseSimpleStmt(stmts []syntax.Stmt) []syntax.Stmt {
	for {
		stmts = append(stmts, p.parseSmallStmt())
		if p.tok() != syntax.SEMI {
			break
		}
		p.next()
		if p.tok() == syntax.NEWLINE || p.tok() == syntax.EOF {
			break
		}
	}
	if p.tok() != syntax.EOF {
		p.consume(syntax.NEWLINE)
	}
	return stmts
}

func (p *fparser) parseSmallStmt() syntax.Stmt {
	switch p.tok() {
	case syntax.RETURN:
		pos := p.next()
		var result syntax.Expr
		if t := p.tok(); t != syntax.EOF && t != syntax.NEWLINE && t != syntax.SEMI {
			result = p.parseExpr(false)
		}
		return &syntax.ReturnStmt{Return: pos, Result: result}
	case syntax.BREAK, syntax.CONTINUE, syntax.PASS:
		tok := p.tok()
		pos := p.next()
		return &syntax.BranchStmt{Token: tok, TokenPos: pos}
	case syntax.LOAD:
		bail()
	}
	x := p.parseExpr(false)
	switch p.tok() {
	case syntax.EQ, syntax.PLUS_EQ, syntax.MINUS_EQ, syntax.STAR_EQ, syntax.SLASH_EQ, syntax.SLASHSLASH_EQ,
		syntax.PERCENT_EQ, syntax.AMP_EQ, syntax.PIPE_EQ, syntax.CIRCUMFLEX_EQ, syntax.LTLT_EQ, syntax.GTGT_EQ:
		op := p.tok()
		pos := p.next()
		rhs := p.parseExpr(false)
		a := slab(&p.assigns, p.nAssign)
		*a = syntax.AssignStmt{OpPos: pos, Op: op, LHS: x, RHS: rhs}
		return a
	}
	return &syntax.ExprStmt{X: x}
}

func (p *fparser) parseSuite() []syntax.Stmt {
	p.enter()
	x := p.parseSuiteIn()
	p.depth--
	return x
}

func (p *fparser) parseSuiteIn() []syntax.Stmt {
	if p.tok() == syntax.NEWLINE {
		p.next()
		p.consume(syntax.INDENT)
		var stmts []syntax.Stmt
		for p.tok() != syntax.OUTDENT && p.tok() != syntax.EOF {
			stmts = p.parseStmt(stmts)
		}
		p.consume(syntax.OUTDENT)
		return stmts
	}
	return p.parseSimpleStmt(nil)
}

func (p *fparser) parseIdent() *syntax.Ident {
	if p.tok() != syntax.IDENT {
		bail()
	}
	id := slab(&p.idents, p.nIdent)
	id.NamePos, id.Name = p.pos(), p.text()
	p.next()
	return id
}

func (p *fparser) parseParams() []syntax.Expr {
	mark := len(p.stack)
	for p.tok() != syntax.RPAREN && p.tok() != syntax.COLON && p.tok() != syntax.EOF {
		if len(p.stack) > mark {
			p.consume(syntax.COMMA)
		}
		if p.tok() == syntax.RPAREN {
			break
		}
		if p.tok() == syntax.STAR || p.tok() == syntax.STARSTAR {
			op := p.tok()
			pos := p.next()
			var x syntax.Expr
			if op == syntax.STARSTAR || p.tok() == syntax.IDENT {
				x = p.parseIdent()
			}
			p.push(&syntax.UnaryExpr{OpPos: pos, Op: op, X: x})
			continue
		}
		id := p.parseIdent()
		if p.tok() == syntax.EQ {
			eq := p.next()
			dflt := p.parseTest()
			b := slab(&p.bins, p.nBin)
			*b = syntax.BinaryExpr{X: id, OpPos: eq, Op: syntax.EQ, Y: dflt}
			p.push(b)
			continue
		}
		p.push(id)
	}
	return p.take(mark)
}

func (p *fparser) parseExpr(inParens bool) syntax.Expr {
	x := p.parseTest()
	if p.tok() != syntax.COMMA {
		return x
	}
	mark := len(p.stack)
	p.push(x)
	p.parseExprs(inParens)
	return &syntax.TupleExpr{List: p.take(mark)}
}

// parseExprs pushes the rest of a list whose first element is on the stack.
func (p *fparser) parseExprs(allowTrailingComma bool) {
	for p.tok() == syntax.COMMA {
		p.next()
		if terminatesExprList(p.tok()) {
			if !allowTrailingComma {
				bail()
			}
			break
		}
		p.push(p.parseTest())
	}
}

func (p *fparser) parseTest() syntax.Expr {
	p.enter()
	x := p.parseTestIn()
	p.depth--
	return x
}

func (p *fparser) parseTestIn() syntax.Expr {
	if p.tok() == syntax.LAMBDA {
		return p.parseLambda(true)
	}
	x := p.parseTestPrec(0)
	if p.tok() == syntax.IF {
		ifpos := p.next()
		cond := p.parseTestPrec(0)
		if p.tok() != syntax.ELSE {
			bail()
		}
		elsepos := p.next()
		else_ := p.parseTest()
		return &syntax.CondExpr{If: ifpos, Cond: cond, True: x, ElsePos: elsepos, False: else_}
	}
	return x
}

func (p *fparser) parseTestNoCond() syntax.Expr {
	if p.tok() == syntax.LAMBDA {
		return p.parseLambda(false)
	}
	return p.parseTestPrec(0)
}

func (p *fparser) parseLambda(allowCond bool) syntax.Expr {
	p.enter()
	x := p.parseLambdaIn(allowCond)
	p.depth--
	return x
}

func (p *fparser) parseLambdaIn(allowCond bool) syntax.Expr {
	lambda := p.next()
	var params []syntax.Expr
	if p.tok() != syntax.COLON {
		params = p.parseParams()
	}
	p.consume(syntax.COLON)
	var body syntax.Expr
	if allowCond {
		body = p.parseTest()
	} else {
		body = p.parseTestNoCond()
	}
	return &syntax.LambdaExpr{Lambda: lambda, Params: params, Body: body}
}

// fastPrec is go.starlark.net's precedence table: 0 or, 1 and, 2 not, 3 comparisons, 4 |, 5 ^,
// 6 &, 7 << >>, 8 + -, 9 * % / //; -1 for every other token.
var fastPrec = func() (t [syntax.WHILE + 1]int8) {
	for i := range t {
		t[i] = -1
	}
	levels := [...][]syntax.Token{
		{syntax.OR}, {syntax.AND}, {syntax.NOT},
		{syntax.EQL, syntax.NEQ, syntax.LT, syntax.GT, syntax.LE, syntax.GE, syntax.IN, syntax.NOT_IN},
		{syntax.PIPE}, {syntax.CIRCUMFLEX}, {syntax.AMP}, {syntax.LTLT, syntax.GTGT},
		{syntax.MINUS, syntax.PLUS}, {syntax.STAR, syntax.PERCENT, syntax.SLASH, syntax.SLASHSLASH},
	}
	for level, toks := range levels {
		for _, tok := range toks {
			t[tok] = int8(level)
		}
	}
	return t
}()

const (
	precNot     = 2
	precCompare = 3
)

func precOf(t syntax.Token) int {
	if int(t) < len(fastPrec) {
		return int(fastPrec[t])
	}
	return -1
}

// parseTestPrec parses an expression whose binary operators all have precedence prec or more.
func (p *fparser) parseTestPrec(prec int) syntax.Expr {
	p.enter()
	x := p.parseTestPrecIn(prec)
	p.depth--
	return x
}

func (p *fparser) parseTestPrecIn(prec int) syntax.Expr {
	var x syntax.Expr
	if prec <= precNot && p.tok() == syntax.NOT {
		pos := p.next()
		x = &syntax.UnaryExpr{OpPos: pos, Op: syntax.NOT, X: p.parseTestPrec(precNot)}
	} else {
		x = p.parsePrimaryWithSuffix()
	}
	lastCompare := false
	for {
		if p.tok() == syntax.NOT {
			// NOT after an operand must be followed by IN: one NOT_IN token (at IN's position).
			if p.toks[p.i+1].tok != syntax.IN {
				bail()
			}
			p.i++
			p.toks[p.i].tok = syntax.NOT_IN
		}
		opprec := precOf(p.tok())
		if opprec < prec {
			return x
		}
		if opprec == precCompare {
			if lastCompare {
				bail() // comparisons do not associate
			}
			lastCompare = true
		} else {
			lastCompare = false
		}
		op := p.tok()
		pos := p.next()
		y := p.parseTestPrec(opprec + 1)
		b := slab(&p.bins, p.nBin)
		*b = syntax.BinaryExpr{OpPos: pos, Op: op, X: x, Y: y}
		x = b
	}
}

func (p *fparser) parsePrimaryWithSuffix() syntax.Expr {
	x := p.parsePrimary()
	for {
		switch p.tok() {
		case syntax.DOT:
			dot := p.next()
			id := p.parseIdent()
			d := slab(&p.dots, p.nDot)
			*d = syntax.DotExpr{Dot: dot, X: x, Name: id}
			x = d
		case syntax.LBRACK:
			x = p.parseSliceSuffix(x)
		case syntax.LPAREN:
			x = p.parseCallSuffix(x)
		default:
			return x
		}
	}
}

func (p *fparser) parseSliceSuffix(x syntax.Expr) syntax.Expr {
	lbrack := p.next()
	var lo, hi, step syntax.Expr
	if p.tok() != syntax.COLON {
		y := p.parseExpr(false)
		if p.tok() == syntax.RBRACK {
			rbrack := p.next()
			ix := slab(&p.indexes, p.nIndex)
			*ix = syntax.IndexExpr{X: x, Lbrack: lbrack, Y: y, Rbrack: rbrack}
			return ix
		}
		lo = y
	}
	if p.tok() == syntax.COLON {
		p.next()
		if p.tok() != syntax.COLON && p.tok() != syntax.RBRACK {
			hi = p.parseTest()
		}
	}
	if p.tok() == syntax.COLON {
		p.next()
		if p.tok() != syntax.RBRACK {
			step = p.parseTest()
		}
	}
	rbrack := p.consume(syntax.RBRACK)
	return &syntax.SliceExpr{X: x, Lbrack: lbrack, Lo: lo, Hi: hi, Step: step, Rbrack: rbrack}
}

func (p *fparser) parseCallSuffix(fn syntax.Expr) syntax.Expr {
	lparen := p.consume(syntax.LPAREN)
	var rparen syntax.Position
	var args []syntax.Expr
	if p.tok() == syntax.RPAREN {
		rparen = p.next()
	} else {
		args = p.parseArgs()
		rparen = p.consume(syntax.RPAREN)
	}
	call := slab(&p.calls, p.nCall)
	*call = syntax.CallExpr{Fn: fn, Lparen: lparen, Args: args, Rparen: rparen}
	return call
}

func (p *fparser) parseArgs() []syntax.Expr {
	mark := len(p.stack)
	for p.tok() != syntax.RPAREN && p.tok() != syntax.EOF {
		if len(p.stack) > mark {
			p.consume(syntax.COMMA)
		}
		if p.tok() == syntax.RPAREN {
			break
		}
		if p.tok() == syntax.STAR || p.tok() == syntax.STARSTAR {
			op := p.tok()
			pos := p.next()
			x := p.parseTest()
			p.push(&syntax.UnaryExpr{OpPos: pos, Op: op, X: x})
			continue
		}
		x := p.parseTest()
		if p.tok() == syntax.EQ {
			if _, ok := x.(*syntax.Ident); !ok {
				bail()
			}
			eq := p.next()
			y := p.parseTest()
			b := slab(&p.bins, p.nBin)
			*b = syntax.BinaryExpr{X: x, OpPos: eq, Op: syntax.EQ, Y: y}
			x = b
		}
		p.push(x)
	}
	return p.take(mark)
}

func (p *fparser) parsePrimary() syntax.Expr {
	p.enter()
	x := p.parsePrimaryIn()
	p.depth--
	return x
}

func (p *fparser) parsePrimaryIn() syntax.Expr {
	switch p.tok() {
	case syntax.IDENT:
		return p.parseIdent()
	case syntax.INT, syntax.FLOAT, syntax.STRING:
		tok := p.tok()
		raw := p.text()
		var val any
		switch tok {
		case syntax.INT:
			n, err := strconv.ParseInt(raw, 10, 64)
			if err != nil {
				bail() // beyond int64: a big.Int, left to go.starlark.net
			}
			val = n
		case syntax.FLOAT:
			f, err := strconv.ParseFloat(raw, 64)
			if err != nil {
				bail()
			}
			val = f
		case syntax.STRING:
			val = stringValue(raw)
		}
		pos := p.next()
		lit := slab(&p.lits, p.nLit)
		*lit = syntax.Literal{Token: tok, TokenPos: pos, Raw: raw, Value: val}
		return lit
	case syntax.LBRACK:
		return p.parseList()
	case syntax.LBRACE:
		return p.parseDict()
	case syntax.LPAREN:
		lparen := p.next()
		if p.tok() == syntax.RPAREN {
			rparen := p.next()
			return &syntax.TupleExpr{Lparen: lparen, Rparen: rparen}
		}
		e := p.parseExpr(true)
		rparen := p.consume(syntax.RPAREN)
		return &syntax.ParenExpr{Lparen: lparen, X: e, Rparen: rparen}
	case syntax.MINUS, syntax.PLUS, syntax.TILDE:
		tok := p.tok()
		pos := p.next()
		x := p.parsePrimaryWithSuffix()
		return &syntax.UnaryExpr{OpPos: pos, Op: tok, X: x}
	}
	bail()
	return nil
}

// stringValue is the value of a string literal the scanner took (no bytes, in a raw literal no
// backslash, elsewhere only the escapes scanFastString takes).
func stringValue(raw string) string {
	if raw[0] == 'r' {
		raw = raw[1:]
	}
	if len(raw) >= 6 && raw[1] == raw[0] && raw[2] == raw[0] {
		raw = raw[3 : len(raw)-3]
	} else {
		raw = raw[1 : len(raw)-1]
	}
	i := strings.IndexByte(raw, '\\')
	if i < 0 {
		return raw
	}
	var b strings.Builder
	b.Grow(len(raw))
	for ; i >= 0; i = strings.IndexByte(raw, '\\') {
		b.WriteString(raw[:i])
		switch c := raw[i+1]; c {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		default: // \\ \' \"
			b.WriteByte(c)
		}
		raw = raw[i+2:]
	}
	b.WriteString(raw)
	return b.String()
}

func (p *fparser) parseList() syntax.Expr {
	lbrack := p.next()
	if p.tok() == syntax.RBRACK {
		rbrack := p.next()
		return &syntax.ListExpr{Lbrack: lbrack, Rbrack: rbrack}
	}
	x := p.parseTest()
	if p.tok() == syntax.FOR {
		return p.parseComprehensionSuffix(lbrack, x, syntax.RBRACK)
	}
	mark := len(p.stack)
	p.push(x)
	if p.tok() == syntax.COMMA {
		p.parseExprs(true)
	}
	rbrack := p.consume(syntax.RBRACK)
	return &syntax.ListExpr{Lbrack: lbrack, List: p.take(mark), Rbrack: rbrack}
}

func (p *fparser) parseDict() syntax.Expr {
	lbrace := p.next()
	if p.tok() == syntax.RBRACE {
		rbrace := p.next()
		return &syntax.DictExpr{Lbrace: lbrace, Rbrace: rbrace}
	}
	x := p.parseDictEntry()
	if p.tok() == syntax.FOR {
		return p.parseComprehensionSuffix(lbrace, x, syntax.RBRACE)
	}
	mark := len(p.stack)
	p.push(x)
	for p.tok() == syntax.COMMA {
		p.next()
		if p.tok() == syntax.RBRACE {
			break
		}
		p.push(p.parseDictEntry())
	}
	rbrace := p.consume(syntax.RBRACE)
	return &syntax.DictExpr{Lbrace: lbrace, List: p.take(mark), Rbrace: rbrace}
}

func (p *fparser) parseDictEntry() *syntax.DictEntry {
	k := p.parseTest()
	colon := p.consume(syntax.COLON)
	v := p.parseTest()
	e := slab(&p.entries, p.nEntry)
	*e = syntax.DictEntry{Key: k, Colon: colon, Value: v}
	return e
}

func (p *fparser) parseComprehensionSuffix(lbrace syntax.Position, body syntax.Expr, endBrace syntax.Token) syntax.Expr {
	var clauses []syntax.Node
	for p.tok() != endBrace {
		switch p.tok() {
		case syntax.FOR:
			pos := p.next()
			vars := p.parseForLoopVariables()
			in := p.consume(syntax.IN)
			x := p.parseTestPrec(0)
			clauses = append(clauses, &syntax.ForClause{For: pos, Vars: vars, In: in, X: x})
		case syntax.IF:
			pos := p.next()
			cond := p.parseTestNoCond()
			clauses = append(clauses, &syntax.IfClause{If: pos, Cond: cond})
		default:
			bail()
		}
	}
	rbrace := p.next()
	return &syntax.Comprehension{Curly: endBrace == syntax.RBRACE, Lbrack: lbrace, Body: body, Clauses: clauses, Rbrack: rbrace}
}

func terminatesExprList(tok syntax.Token) bool {
	switch tok {
	case syntax.EOF, syntax.NEWLINE, syntax.EQ, syntax.RBRACE, syntax.RBRACK, syntax.RPAREN, syntax.SEMI:
		return true
	}
	return false
}
