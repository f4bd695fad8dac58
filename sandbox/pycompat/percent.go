package pycompat

import "strings"

// pspec is one conversion of a printf-style format.
type pspec struct {
	off, end    int // source offsets of the conversion, from '%' to just after its type
	key         string
	hasKey      bool
	flags       string
	width, prec string
	hasPrec     bool
	conv        byte
}

// needsSpec reports whether Starlark's own % operator cannot render the conversion as Python
// does: it supports no flags, width or precision, and its %e/%f/%g differ from Python's.
func (p pspec) needsSpec() bool {
	return p.flags != "" || p.width != "" || p.hasPrec || strings.IndexByte("eEfFgG", p.conv) >= 0
}

// parsePrintf parses the conversions of the literal body s, which starts at source offset base.
func parsePrintf(s string, base int) ([]pspec, bool) {
	var out []pspec
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		p := pspec{off: base + i}
		j := i + 1
		if j < len(s) && s[j] == '(' {
			depth, k := 1, j+1
			for k < len(s) && depth > 0 {
				switch s[k] {
				case '(':
					depth++
				case ')':
					depth--
				}
				k++
			}
			if depth > 0 {
				return nil, false
			}
			p.key, p.hasKey = s[j+1:k-1], true
			j = k
		}
		fs := j
		for j < len(s) && strings.IndexByte("#0- +", s[j]) >= 0 {
			j++
		}
		p.flags = s[fs:j]
		ws := j
		if j < len(s) && s[j] == '*' {
			j++
		} else {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
		}
		p.width = s[ws:j]
		if j < len(s) && s[j] == '.' {
			p.hasPrec = true
			j++
			ps := j
			if j < len(s) && s[j] == '*' {
				j++
			} else {
				for j < len(s) && isDigit(s[j]) {
					j++
				}
			}
			p.prec = s[ps:j]
			if p.prec == "" {
				p.prec = "0"
			}
		}
		for j < len(s) && (s[j] == 'h' || s[j] == 'l' || s[j] == 'L') {
			j++
		}
		if j >= len(s) {
			return nil, false
		}
		p.conv = s[j]
		p.end = base + j + 1
		out = append(out, p)
		i = j
	}
	return out, true
}

// operandEnd returns the index after the operand of a binary % that starts at toks[k]: unary
// operators, an atom, its trailers and a ** power, as Python's grammar binds them.
func (t *translator) operandEnd(toks []token, k, hi int, depth int) (int, bool) {
	if depth > maxNest {
		return 0, false
	}
	for k < hi && (t.isOp(toks[k], "-") || t.isOp(toks[k], "+") || t.isOp(toks[k], "~")) {
		k++
	}
	if k >= hi {
		return 0, false
	}
	tk := toks[k]
	switch tk.kind {
	case kName:
		if isKeyword(t.text(tk)) {
			return 0, false
		}
	case kNumber:
	case kString:
		if k+1 < hi && toks[k+1].kind == kString {
			return 0, false // implicit concatenation: not Starlark anyway
		}
	case kOp:
		if !(tk.match > k && tk.match < hi) || t.text(tk) == ")" || t.text(tk) == "]" || t.text(tk) == "}" {
			return 0, false
		}
		k = tk.match
	default:
		return 0, false
	}
	k++
	for k < hi {
		tk := toks[k]
		if t.isOp(tk, ".") && k+1 < hi && toks[k+1].kind == kName {
			k += 2
		} else if (t.isOp(tk, "(") || t.isOp(tk, "[")) && tk.match > k && tk.match < hi {
			k = tk.match + 1
		} else {
			break
		}
	}
	if k < hi && t.isOp(toks[k], "**") {
		return t.operandEnd(toks, k+1, hi, depth+1)
	}
	return k, true
}

// literalBody returns the source offsets of a string literal's body (between its quotes) and
// its opening quotes.
func (t *translator) literalBody(tk token) (bs, be int, open string) {
	q := tk.start + int(tk.prefix)
	n := 1
	if tk.flags&sTriple != 0 {
		n = 3
	}
	return q + n, tk.end - n, t.src[q : q+n]
}

// tryPercent translates "literal" % operand at toks[i] when the format needs what Starlark's %
// lacks. It returns the index after the construct, or i when it wrote nothing.
func (t *translator) tryPercent(b *writer, toks []token, i, hi, lvl int) int {
	if i+2 >= hi || !t.isOp(toks[i+1], "%") || toks[i].kind != kString {
		return i
	}
	if i > 0 { // the literal must be the whole left operand
		if p := toks[i-1]; p.kind == kOp {
			switch t.text(p) {
			case "*", "/", "//", "%", "@", "**", "~", ".":
				return i
			case "+", "-":
				if i < 2 || !t.endsOperand(toks[i-2]) {
					return i // unary
				}
			}
		}
	}
	opEnd, ok := t.operandEnd(toks, i+2, hi, 0)
	if !ok {
		return i
	}
	lit := toks[i]
	bs, be, open := t.literalBody(lit)
	body := t.src[bs:be]
	convs, ok := parsePrintf(body, bs)
	if !ok {
		return i
	}
	need := false
	for _, c := range convs {
		need = need || c.needsSpec()
	}
	if !need {
		return i
	}
	nrw, nd := t.mark()
	reject := func(off int, msg, hint string) int {
		t.rollback(nrw, nd) // what was rendered so far is rendered again by the caller
		t.diag(CodePercentFormat, off, msg, hint)
		return i
	}
	const hintFormat = `use str.format with a spec: "{:>5} {:.2f}".format(name, price)`
	if lit.flags&sRaw == 0 && escapeSpells(body, "%{}") {
		return reject(lit.start, "an escape sequence in this %-format spells %, { or }", "write the character itself")
	}
	keyed := len(convs) > 0 && convs[0].hasKey
	nargs := 0
	for _, c := range convs {
		if c.hasKey != keyed && c.conv != '%' {
			return reject(c.off, "this %-format mixes %(name) and positional conversions", hintFormat)
		}
		if strings.Contains(c.width, "*") || strings.Contains(c.prec, "*") {
			return reject(c.off, "a * width or precision cannot be translated", `compute the spec: format(x, ">" + str(width))`)
		}
		switch c.conv {
		case 's', 'r', 'e', 'E', 'f', 'F', 'g', 'G':
		case 'd', 'i', 'u', 'o', 'x', 'X':
			if c.hasPrec {
				return reject(c.off, "a precision on an integer conversion (%.3d) cannot be translated", `use a zero-padded width: format(n, "03d")`)
			}
		case '%':
			if c.flags != "" || c.width != "" || c.hasPrec {
				return reject(c.off, "a width on %% cannot be translated", `write "%%" alone`)
			}
			continue
		case 'a':
			return reject(c.off, "Starlark has no ascii(): %a cannot be translated", "use %r")
		case 'c':
			return reject(c.off, "%c cannot be translated in a format with widths or precisions", "build the character with chr(n) and use %s")
		default:
			return reject(c.off, "unknown conversion %"+string(c.conv), hintFormat)
		}
		if c.hasKey && strings.ContainsAny(c.key, "\"\\\n") {
			return reject(c.off, "this %(key) holds a quote, a backslash or a line break", "use a plain key")
		}
		nargs++
	}

	// The operand: a tuple display, a mapping for %(key), or a single value.
	opLo := i + 2
	tupleDisp := opEnd == toks[opLo].match+1 && t.isOp(toks[opLo], "(") &&
		(toks[opLo].match == opLo+1 || t.topComma(toks, opLo+1, toks[opLo].match))
	pre := t.keptGap(toks, i+1) + t.keptGap(toks, i+2)
	type value struct{ lead, text string } // kept gaps before a value, and the value
	var args []value                       // rendered values in conversion order
	var tail string                        // kept gaps after the last value
	switch {
	case keyed:
		if nargs > 1 && nargs*(opEnd-opLo) > maxDupTokens {
			return reject(toks[opLo].start, "this %(key) format is too large to translate", "assign the values to names and use str.format")
		}
		if nargs > 1 && !t.simple(toks, opLo, opEnd) {
			return reject(toks[opLo].start, "this %(key) format would evaluate `"+t.snippet(toks[opLo].start, toks[opEnd-1].end)+"` once per key",
				"assign the mapping to a name first")
		}
		wrap := !t.primary(toks, opLo, opEnd)
		for _, c := range convs {
			if c.conv == '%' {
				continue
			}
			var r string
			if len(args) == 0 {
				r = t.renderString(toks, opLo, opEnd, lvl)
			} else {
				r = t.dup(toks, opLo, opEnd, lvl)
			}
			if wrap {
				r = "(" + r + ")"
			}
			args = append(args, value{text: r + `["` + c.key + `"]`})
		}
	case tupleDisp:
		elems, seps, ok := t.splitCommas(toks, opLo+1, toks[opLo].match)
		if !ok {
			return i
		}
		if len(elems) != nargs {
			return reject(toks[opLo].start, "this %-format has "+itoa(nargs)+" conversions but "+itoa(len(elems))+" values", "give one value per conversion")
		}
		for n, e := range elems {
			if t.isOp(toks[e[0]], "*") || t.isOp(toks[e[0]], "**") {
				return reject(toks[e[0]].start, "a starred value cannot be translated in a %-format", hintFormat)
			}
			args = append(args, value{seps[n], t.renderString(toks, e[0], e[1], lvl+1)})
		}
		tail = seps[len(elems)]
	default:
		if nargs != 1 {
			return reject(toks[opLo].start, "this %-format has "+itoa(nargs)+" conversions: its values must be written as a tuple (a, b)",
				hintFormat)
		}
		args = append(args, value{text: t.renderString(toks, opLo, opEnd, lvl)})
	}

	// The template and the values, in order.
	var tmpl strings.Builder
	var vals []string
	last := bs
	n := 0
	for _, c := range convs {
		tmpl.WriteString(braceEscape(t.src[last:c.off]))
		last = c.end
		if c.conv == '%' {
			tmpl.WriteByte('%')
			continue
		}
		a := args[n]
		n++
		field, val := percentField(c, a.text)
		tmpl.WriteString(field)
		if len(vals) > 0 && a.lead == "" {
			a.lead = " "
		}
		vals = append(vals, a.lead+val)
	}
	tmpl.WriteString(braceEscape(t.src[last:be]))
	b.WriteString(t.plainPrefix(lit) + open)
	b.WriteString(tmpl.String())
	b.WriteString(open)
	b.WriteString(".format(")
	b.WriteString(pre)
	b.WriteString(strings.Join(vals, ","))
	b.WriteString(tail)
	b.WriteString(")")
	t.record(RulePercentFormat, lit.start, toks[opEnd-1].end)
	return opEnd
}

// percentField returns the replacement field and the argument for one conversion with value a.
func percentField(c pspec, a string) (field, val string) {
	align := ""
	if c.width != "" {
		align = ">"
		if strings.IndexByte(c.flags, '-') >= 0 {
			align = "<"
		}
	}
	prec := ""
	if c.hasPrec {
		prec = "." + c.prec
	}
	num := func(alt bool) string {
		s := ""
		if strings.IndexByte(c.flags, '-') >= 0 && c.width != "" {
			s += "<"
		}
		if strings.IndexByte(c.flags, '+') >= 0 {
			s += "+"
		} else if strings.IndexByte(c.flags, ' ') >= 0 {
			s += " "
		}
		if alt && strings.IndexByte(c.flags, '#') >= 0 {
			s += "#"
		}
		if strings.IndexByte(c.flags, '0') >= 0 && strings.IndexByte(c.flags, '-') < 0 {
			s += "0"
		}
		return s + c.width
	}
	switch c.conv {
	case 's':
		if c.width == "" && !c.hasPrec {
			return "{}", a
		}
		return "{}", "format(str(" + a + `), "` + align + c.width + prec + `")`
	case 'r':
		if c.width == "" && !c.hasPrec {
			return "{!r}", a
		}
		return "{}", "format(repr(" + a + `), "` + align + c.width + prec + `")`
	case 'd', 'i', 'u':
		// %d truncates a float as int() does.
		spec := num(false)
		if spec == "" {
			return "{}", "int(" + a + ")"
		}
		return "{}", "format(int(" + a + `), "` + spec + `d")`
	case 'o', 'x', 'X':
		return "{}", "format(" + a + `, "` + num(true) + string(c.conv) + `")`
	default: // e E f F g G
		return "{}", "format(" + a + `, "` + num(true) + prec + string(c.conv) + `")`
	}
}

func braceEscape(s string) string {
	if !strings.ContainsAny(s, "{}") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			b.WriteString("{{")
		case '}':
			b.WriteString("}}")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// splitCommas splits toks[lo:hi] at its top-level commas into element ranges, ignoring a
// trailing comma; ok is false when an element is empty. seps[k] holds the kept gaps (see keptGap) before element k, and
// seps[len(elems)] those after the last element.
func (t *translator) splitCommas(toks []token, lo, hi int) (elems [][2]int, seps []string, ok bool) {
	start := lo
	sep := ""
	if lo < hi {
		sep = t.keptGap(toks, lo)
	}
	for k := lo; k < hi; k = next(toks, k, hi) {
		if t.isOp(toks[k], ",") {
			if k == start {
				return nil, nil, false // (a, , b): not an expression
			}
			elems = append(elems, [2]int{start, k})
			seps = append(seps, sep)
			sep = t.keptGap(toks, k)
			if k+1 < hi {
				sep += t.keptGap(toks, k+1)
			}
			start = k + 1
		}
	}
	if start < hi {
		elems = append(elems, [2]int{start, hi})
		seps = append(seps, sep)
		sep = ""
	}
	if hi < len(toks) {
		sep += t.keptGap(toks, hi)
	}
	seps = append(seps, sep)
	return elems, seps, true
}

// primary reports whether toks[lo:hi] is an atom with trailers, so that an index can follow it
// without parentheses.
func (t *translator) primary(toks []token, lo, hi int) bool {
	if lo >= hi {
		return false
	}
	k := lo
	switch toks[k].kind {
	case kName, kString:
		k++
	case kOp:
		if !(toks[k].match > k && toks[k].match < hi) {
			return false
		}
		k = toks[k].match + 1
	default:
		return false
	}
	for k < hi {
		if t.isOp(toks[k], ".") && k+1 < hi {
			k += 2
		} else if toks[k].match > k && toks[k].match < hi && (t.isOp(toks[k], "(") || t.isOp(toks[k], "[")) {
			k = toks[k].match + 1
		} else {
			return false
		}
	}
	return true
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for n > 0 {
		d = append([]byte{byte('0' + n%10)}, d...)
		n /= 10
	}
	return string(d)
}
