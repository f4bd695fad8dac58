package pycompat

import "strings"

// This file holds the renderer: it walks a token list one bracket level at a time and writes
// the source back with every rewrite applied. The gaps between tokens are copied verbatim, so
// comments, spacing and line breaks survive; each rewrite keeps the number of newlines of the
// text it replaces, so every line keeps its number.

func (t *translator) text(tk token) string { return t.src[tk.start:tk.end] }

func (t *translator) isName(tk token, s string) bool {
	return tk.kind == kName && t.src[tk.start:tk.end] == s
}

func (t *translator) isOp(tk token, s string) bool {
	return tk.kind == kOp && t.src[tk.start:tk.end] == s
}

// isKeyword reports whether s is one of Python's reserved words (None, True and False are
// values, handled apart), or Starlark's load.
func isKeyword(s string) bool {
	switch s {
	case "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
		"elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is",
		"lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with",
		"yield", "load":
		return true
	}
	return false
}

func (t *translator) isConst(tk token) bool {
	if tk.kind != kName {
		return false
	}
	switch t.text(tk) {
	case "None", "True", "False":
		return true
	}
	return false
}

// endsOperand reports whether tk can end an operand, so that a following '(' is a call, a
// following '[' an index, and a following 'not in' a comparison.
func (t *translator) endsOperand(tk token) bool {
	switch tk.kind {
	case kNumber:
		return true
	case kString:
		return true
	case kName:
		return !isKeyword(t.text(tk))
	case kOp:
		s := t.text(tk)
		return (s == ")" || s == "]" || s == "}") && tk.match >= 0
	}
	return false
}

// gap writes the source text src[start:end] between two tokens. While a duplicate is
// rendered, a gap that holds a newline, a comment or a continuation becomes one space, so the
// duplicate adds no line.
func (t *translator) gap(b *writer, start, end int) {
	if t.flat > 0 && strings.ContainsAny(t.src[start:end], "\n#\\") {
		b.byte(' ')
		return
	}
	b.copy(start, end)
}

func (t *translator) gapBefore(b *writer, toks []token, k int) {
	t.gap(b, toks[k-1].end, toks[k].start)
}

// writer accumulates output. A run of source copied unchanged stays a pending span until
// something else is written, so copying costs one append per run, and a program with nothing
// to rewrite comes back without being copied at all.
type writer struct {
	src      string
	buf      strings.Builder // String hands its bytes over without a copy
	from, to int             // the pending span of src
	hint     int             // the capacity to allocate on the first write
}

func (w *writer) copy(start, end int) {
	if start >= end {
		return
	}
	if w.to == start && w.from < w.to {
		w.to = end
		return
	}
	w.flush()
	w.from, w.to = start, end
}

func (w *writer) flush() {
	if w.from < w.to {
		w.grow()
		w.buf.WriteString(w.src[w.from:w.to])
	}
	w.from, w.to = 0, 0
}

func (w *writer) grow() {
	if w.buf.Cap() == 0 && w.hint > 0 {
		w.buf.Grow(w.hint)
	}
}

// WriteString writes s, which need not come from the source.
func (w *writer) WriteString(s string) {
	if s != "" {
		w.flush()
		w.grow()
		w.buf.WriteString(s)
	}
}

// byte writes c.
func (w *writer) byte(c byte) {
	w.flush()
	w.grow()
	w.buf.WriteByte(c)
}

// String returns everything written.
func (w *writer) String() string {
	if w.buf.Len() == 0 {
		return w.src[w.from:w.to]
	}
	w.flush()
	return w.buf.String()
}

// keptGap returns the gap before toks[k] when it must survive a rewrite that drops the tokens
// around it (it holds a newline or a comment), or "".
func (t *translator) keptGap(toks []token, k int) string {
	if k <= 0 || k >= len(toks) {
		return ""
	}
	s := t.src[toks[k-1].end:toks[k].start]
	if strings.ContainsAny(s, "\n#") {
		if t.flat > 0 {
			return " "
		}
		return s
	}
	return ""
}

// verbatim writes toks[lo:hi] without rewriting.
func (t *translator) verbatim(b *writer, toks []token, lo, hi int) {
	for k := lo; k < hi; k++ {
		if k > lo {
			t.gapBefore(b, toks, k)
		}
		b.copy(toks[k].start, toks[k].end)
	}
}

// next returns the index after the level element that starts at i (a matched bracket group
// counts as one element).
func next(toks []token, i, hi int) int {
	if m := toks[i].match; m > i && m < hi {
		return m + 1
	}
	return i + 1
}

// render writes toks[lo:hi] and the gaps between them (not the gap before lo) with every rewrite
// applied. lvl is the bracket nesting; top is true for the program's own tokens, where
// statements (and so imports) can start.
func (t *translator) render(b *writer, toks []token, lo, hi, lvl int, top bool) {
	if lo >= hi {
		return
	}
	if lvl > maxNest {
		t.verbatim(b, toks, lo, hi)
		return
	}
	chains := t.findChains(toks, lo, hi)
	ci := 0
	for i := lo; i < hi; {
		if i > lo {
			t.gapBefore(b, toks, i)
		}
		for ci < len(chains) && chains[ci].start < i {
			ci++
		}
		if ci < len(chains) && chains[ci].start == i {
			t.emitChain(b, toks, chains[ci], lvl)
			i = chains[ci].end
			ci++
			continue
		}
		i = t.emitAtom(b, toks, i, hi, lvl, top)
	}
}

// renderLines writes the program's tokens as render(b, toks, 0, len(toks), 0, true) does, but
// renders only the logical lines that the pre-scan (mayNeedRewrite) says may need a rewrite and
// copies the others as they are: in a typical plan most lines have no Python-ism, and the
// renderer costs more than the copy. It is the same output, rewrites and diagnostics:
//   - a logical line is the tokens up to and including a kNewline token, which the tokenizer
//     emits only outside brackets, so no bracket group spans two lines; and at the top level
//     every rule reads tokens within one line (a chain, an import and a %-operand end at a
//     kNewline; an `is`, a string's % or .format and a call's '(' look at their neighbours, and
//     a newline token is no neighbour any rule acts on), so rendering a line alone, with the
//     newline that ends it, writes what rendering it among the others writes;
//   - a line the pre-scan passes has no rule to apply: read alone it is a program of one line,
//     with the same tokens (it starts outside brackets and strings; a budget-bound f-string
//     scan is not among its tokens, since any f-string makes the pre-scan say yes), and the
//     pre-scan reports false only when Translate of such a program rewrites and reports
//     nothing; the renderer copies a line it does not rewrite exactly (gaps verbatim at the
//     top level).
//
// Diagnostics and rewrites are recorded in another order (a line's chains before its atoms,
// line by line, not every chain first), which changes nothing: both are sorted by position, and
// two at one position are on one line, where the order is the same.
// TestTranslateByLineMatchesFull and FuzzTranslate compare the two.
func (t *translator) renderLines(b *writer, toks []token) {
	for lo := 0; lo < len(toks); {
		hi := lo
		for hi < len(toks) && toks[hi].kind != kNewline {
			hi++
		}
		if hi < len(toks) {
			hi++ // the newline that ends the line
		}
		if lo > 0 {
			t.gapBefore(b, toks, lo)
		}
		if mayNeedRewrite(t.src[toks[lo].start:toks[hi-1].end]) {
			t.render(b, toks, lo, hi, 0, true)
		} else {
			b.copy(toks[lo].start, toks[hi-1].end)
		}
		lo = hi
	}
}

// renderString renders toks[lo:hi] into a new string.
func (t *translator) renderString(toks []token, lo, hi, lvl int) string {
	b := writer{src: t.src}
	t.render(&b, toks, lo, hi, lvl, false)
	return b.String()
}

// dup renders toks[lo:hi] a second time, on one line and without recording anything.
func (t *translator) dup(toks []token, lo, hi, lvl int) string {
	t.quiet++
	t.flat++
	s := t.renderString(toks, lo, hi, lvl)
	t.flat--
	t.quiet--
	return s
}

// emitAtom writes the level element that starts at toks[i] and returns the index after it.
func (t *translator) emitAtom(b *writer, toks []token, i, hi, lvl int, top bool) int {
	tk := toks[i]
	switch tk.kind {
	case kName:
		s := t.text(tk)
		if top && (s == "import" || s == "from") && t.stmtStart(toks, i) {
			if j := t.emitImport(b, toks, i, hi); j > i {
				return j
			}
		}
		if s == "is" {
			return t.emitIs(b, toks, i, hi)
		}
	case kString:
		if tk.flags&sF != 0 && tk.flags&sBad == 0 && i+2 < hi && t.isOp(toks[i+1], "%") {
			// f"%.2f" % x: an f-string without fields is a plain literal, and the left
			// operand of %. (With braces, {{ would mean { here but not in the template.)
			bs, be, _ := t.literalBody(tk)
			if strings.ContainsAny(t.src[bs:be], "{}") {
				t.diag(CodeFString, tk.start, "an f-string is the left operand of %",
					"use a plain string with str.format: \"{:.2f}\".format(x)")
				t.verbatim(b, toks, i, i+1)
				return i + 1
			}
			if j := t.tryPercent(b, toks, i, hi, lvl); j > i {
				return j
			}
		}
		if tk.flags&sF != 0 {
			if tk.flags&sBad != 0 {
				t.diag(CodeFString, tk.start, "this f-string is malformed or uses a feature Starlark cannot express (\\N{...}, an unbalanced brace, a comment or line break inside a field)",
					"write a plain string and build it with .format() or +")
			} else if t.emitFString(b, tk, lvl) {
				return i + 1
			}
		} else if tk.flags&sBytes == 0 && !(i > 0 && toks[i-1].kind == kString) {
			if j := t.tryPercent(b, toks, i, hi, lvl); j > i {
				return j
			}
			if j := t.tryStrFormat(b, toks, i, hi, lvl); j > i {
				return j
			}
		}
	case kOp:
		if m := tk.match; m > i && m < hi {
			t.emitGroup(b, toks, i, m, lvl)
			return m + 1
		}
	}
	b.copy(tk.start, tk.end)
	return i + 1
}

// plainPrefix returns the prefix of the string literal tk without an f: r for a raw f-string
// (Starlark knows no R), and a space in place of an f that would otherwise leave a quote just
// before the literal's own (""f"" must not become """").
func (t *translator) plainPrefix(tk token) string {
	if tk.flags&sF == 0 {
		return t.src[tk.start : tk.start+int(tk.prefix)]
	}
	if tk.flags&sRaw != 0 {
		return "r"
	}
	if tk.start > 0 && (t.src[tk.start-1] == '"' || t.src[tk.start-1] == '\'') {
		return " "
	}
	return ""
}

// stmtStart reports whether toks[i] starts a statement.
func (t *translator) stmtStart(toks []token, i int) bool {
	if i == 0 {
		return true
	}
	p := toks[i-1]
	return p.kind == kNewline || t.isOp(p, ";") || t.isOp(p, ":")
}

// emitGroup writes the bracket group toks[i..m], turning a generator expression into a list
// comprehension.
func (t *translator) emitGroup(b *writer, toks []token, i, m, lvl int) {
	if t.text(toks[i]) == "(" && t.hasGenexp(toks, i, m) {
		call := i > 0 && t.endsOperand(toks[i-1])
		if call {
			b.WriteString("([")
		} else {
			b.WriteString("[")
		}
		t.gapBefore(b, toks, i+1)
		t.render(b, toks, i+1, m, lvl+1, false)
		t.gapBefore(b, toks, m)
		if call {
			b.WriteString("])")
		} else {
			b.WriteString("]")
		}
		t.record(RuleGenexp, toks[i].start, toks[m].end)
		return
	}
	b.copy(toks[i].start, toks[i].end)
	if m > i+1 {
		t.gapBefore(b, toks, i+1)
		t.render(b, toks, i+1, m, lvl+1, false)
	}
	t.gapBefore(b, toks, m)
	b.copy(toks[m].start, toks[m].end)
}

// hasGenexp reports whether the parenthesised group toks[i..m] is exactly one generator
// expression: a 'for' at its own level after a non-empty element, and no comma at that level
// except in the targets of its for clauses.
func (t *translator) hasGenexp(toks []token, i, m int) bool {
	seenFor, inTarget := false, false
	for k := i + 1; k < m; k = next(toks, k, m) {
		tk := toks[k]
		if tk.kind == kError || (tk.kind == kOp && tk.end-tk.start == 1 && strings.IndexByte("()[]{}", t.src[tk.start]) >= 0 && !(tk.match > k && tk.match < m)) {
			return false // an unmatched bracket: not an expression at all
		}
		switch {
		case t.isOp(tk, ","):
			if !inTarget {
				return false // f(a, x for x in y) or f(x for x in y, a): not a sole generator
			}
		case t.isName(tk, "for"):
			if k == i+1 {
				return false
			}
			seenFor, inTarget = true, true
		case t.isName(tk, "in"):
			inTarget = false
		}
	}
	return seenFor
}

// isOpAt reports whether toks[i] is `is` comparing with None, True or False, and returns the
// number of tokens of the operator (2 for `is not`).
func (t *translator) isConstCompare(toks []token, i, hi int) (n int, ok bool) {
	n = 1
	if i+1 < hi && t.isName(toks[i+1], "not") {
		n = 2
	}
	r := i + n
	right := r < hi && t.isConst(toks[r]) && (r+1 >= hi || !isTrailer(t.text(toks[r+1])))
	left := i > 0 && t.isConst(toks[i-1])
	return n, right || left
}

func isTrailer(s string) bool { return s == "." || s == "(" || s == "[" }

// emitIs writes the `is` / `is not` at toks[i], as == / != when one side is None, True or
// False: Starlark's == on those is identity, since no other value equals them.
func (t *translator) emitIs(b *writer, toks []token, i, hi int) int {
	n, ok := t.isConstCompare(toks, i, hi)
	if !ok {
		t.verbatim(b, toks, i, i+n)
		return i + n
	}
	if n == 1 {
		b.WriteString("==")
	} else {
		b.WriteString("!=")
		b.WriteString(t.keptGap(toks, i+1))
	}
	t.record(RuleIsNone, toks[i].start, toks[i+n-1].end)
	return i + n
}

// maxDupTokens bounds the tokens that one rewrite may copy (a value used under several format
// specs), so that rewriting stays linear in the size of the program.
const maxDupTokens = 4096

// chain is a comparison chain at one level: operands separated by two or more comparison
// operators.
type chain struct {
	start, end int
	ops        []opRef
}

type opRef struct{ i, n int } // the operator's first token and its token count

// findChains returns the comparison chains at the level of toks[lo:hi] that can be split
// exactly, and reports the others.
func (t *translator) findChains(toks []token, lo, hi int) []chain {
	var out []chain
	var ops []opRef
	segStart := lo
	pendingFor := false
	closeSeg := func(end int) {
		if len(ops) >= 2 {
			c := chain{start: segStart, end: end, ops: append([]opRef(nil), ops...)}
			if t.chainOK(toks, c) {
				out = append(out, c)
			}
		}
		ops = ops[:0]
	}
	for i := lo; i < hi; {
		tk := toks[i]
		n, boundary := 0, false
		switch tk.kind {
		case kNewline:
			// A logical line ends a for clause too: a `for` whose `in` never came (a syntax
			// error) does not make the next line's first `in` its own. So no state crosses a
			// line end, as renderLines needs.
			boundary, pendingFor = true, false
		case kError:
			boundary = true
		case kOp:
			switch s := t.text(tk); s {
			case "<", ">", "<=", ">=", "==", "!=":
				n = 1
			case "(", "[", "{":
				boundary = !(tk.match > i && tk.match < hi)
			case ")", "]", "}":
				boundary = true
			case ".", "+", "-", "*", "/", "//", "%", "@", "~", "&", "|", "^", "<<", ">>", "**":
			default:
				boundary = true // , : ; = -> := augmented assignments ...
			}
		case kName:
			switch s := t.text(tk); s {
			case "in":
				if pendingFor {
					boundary, pendingFor = true, false
				} else {
					n = 1
				}
			case "not":
				if i+1 < hi && t.isName(toks[i+1], "in") && i > lo && t.endsOperand(toks[i-1]) {
					n = 2
				} else {
					boundary = true
				}
			case "is":
				n = 1
				if i+1 < hi && t.isName(toks[i+1], "not") {
					n = 2
				}
			default:
				if isKeyword(s) {
					boundary = true
					if s == "for" {
						pendingFor = true
					}
				}
			}
		}
		switch {
		case boundary:
			closeSeg(i)
			segStart = i + 1
			i++
		case n > 0:
			ops = append(ops, opRef{i, n})
			i += n
		default:
			i = next(toks, i, hi)
		}
	}
	closeSeg(hi)
	return out
}

// chainOK reports whether c can be split: every operand is present and every middle operand is
// a plain value that can be evaluated twice. It reports a chain that cannot.
func (t *translator) chainOK(toks []token, c chain) bool {
	if c.ops[0].i == c.start || c.ops[len(c.ops)-1].i+c.ops[len(c.ops)-1].n >= c.end {
		return false
	}
	for k := 1; k < len(c.ops); k++ {
		lo, hi := c.ops[k-1].i+c.ops[k-1].n, c.ops[k].i
		if lo >= hi {
			return false
		}
	}
	for k := 1; k < len(c.ops); k++ {
		lo, hi := c.ops[k-1].i+c.ops[k-1].n, c.ops[k].i
		if !t.simple(toks, lo, hi) {
			mid := t.snippet(toks[lo].start, toks[hi-1].end)
			t.diag(CodeChainedCompare, toks[lo].start,
				"Starlark has no chained comparisons, and splitting `"+t.snippet(toks[c.start].start, toks[c.end-1].end)+
					"` would evaluate `"+mid+"` twice",
				"assign it first (`v = "+mid+"`), then compare with `and`: `a < v and v < b`")
			return false
		}
	}
	return true
}

// simple reports whether toks[lo:hi] is a plain value (names, attributes, indexes, literals and
// arithmetic on them): no call, no comprehension, no f-string, nothing that could differ or
// have an effect when evaluated twice.
func (t *translator) simple(toks []token, lo, hi int) bool {
	for k := lo; k < hi; k++ {
		tk := toks[k]
		switch tk.kind {
		case kNumber:
		case kString:
			if tk.flags&(sF|sBad|sMultiline) != 0 {
				return false
			}
		case kName:
			if isKeyword(t.text(tk)) {
				return false
			}
		case kOp:
			switch t.text(tk) {
			case "(":
				if tk.match < 0 || tk.match >= hi || (k > lo && t.endsOperand(toks[k-1])) {
					return false
				}
			case "[":
				if tk.match < 0 || tk.match >= hi {
					return false
				}
			case ")", "]", ".", "+", "-", "*", "/", "//", "%", "~", "&", "|", "^", "<<", ">>", ",", ":":
			default:
				return false
			}
		default:
			return false
		}
	}
	return true
}

// emitChain writes a chain a < b < c as (a < b and b < c).
func (t *translator) emitChain(b *writer, toks []token, c chain, lvl int) {
	b.byte('(')
	lo := c.start
	for k, op := range c.ops {
		t.render(b, toks, lo, op.i, lvl, false)
		if k > 0 {
			b.WriteString(" and ")
			b.WriteString(t.dup(toks, lo, op.i, lvl))
		}
		t.gapBefore(b, toks, op.i)
		t.emitOp(b, toks, op, c.end)
		lo = op.i + op.n
		t.gapBefore(b, toks, lo)
	}
	t.render(b, toks, lo, c.end, lvl, false)
	b.byte(')')
	t.record(RuleChainedCompare, toks[c.start].start, toks[c.end-1].end)
}

// emitOp writes a comparison operator of a chain.
func (t *translator) emitOp(b *writer, toks []token, op opRef, hi int) {
	if t.isName(toks[op.i], "is") {
		t.emitIs(b, toks, op.i, hi)
		return
	}
	t.verbatim(b, toks, op.i, op.i+op.n)
}

// topComma reports whether toks[lo:hi] has a comma at its own level.
func (t *translator) topComma(toks []token, lo, hi int) bool {
	for k := lo; k < hi; k = next(toks, k, hi) {
		if t.isOp(toks[k], ",") {
			return true
		}
	}
	return false
}

// renderExpr renders the expression src[start:end] (an f-string field) on its own. It returns
// the text, whether it had a comma at its top level, and whether it was empty. Leading and
// trailing whitespace is dropped unless it holds a newline or a comment.
func (t *translator) renderExpr(start, end, lvl int) (s string, comma, empty bool) {
	// The tokens go in the translator's reused scratch slice (a field nested in this one finds
	// it taken and makes its own).
	toks := tokenize(t.src, start, end, true, t.exprToks[:0])
	t.exprToks = nil
	defer func() { t.exprToks = toks[:0] }()
	if len(toks) == 0 {
		return "", false, true
	}
	b := writer{src: t.src}
	if strings.ContainsAny(t.src[start:toks[0].start], "\n#") {
		t.gap(&b, start, toks[0].start)
	}
	t.render(&b, toks, 0, len(toks), lvl, false)
	if last := toks[len(toks)-1].end; strings.ContainsAny(t.src[last:end], "\n#") {
		t.gap(&b, last, end)
	}
	return b.String(), t.topComma(toks, 0, len(toks)), false
}
