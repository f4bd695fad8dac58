package pycompat

import (
	"strconv"
	"strings"
)

// sfield is one replacement field of a str.format template.
type sfield struct {
	off, end int    // source offsets, from '{' to just after '}'
	name     string // "" (automatic numbering), digits, or an identifier
	conv     byte
	spec     string
	nested   bool // the spec holds a nested field
}

// parseBraces parses the replacement fields of the template body s (at source offset base).
func parseBraces(s string, base int) ([]sfield, bool) {
	var out []sfield
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				i++
				continue
			}
			return nil, false
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				i++
				continue
			}
			depth, k := 1, i+1
			for k < len(s) && depth > 0 {
				switch s[k] {
				case '{':
					depth++
				case '}':
					depth--
				}
				k++
			}
			if depth > 0 {
				return nil, false
			}
			f := sfield{off: base + i, end: base + k}
			body := s[i+1 : k-1]
			// The name ends at the first '!' or ':' outside [...].
			n, br := 0, false
			for n < len(body) && (br || (body[n] != '!' && body[n] != ':')) {
				switch body[n] {
				case '[':
					br = true
				case ']':
					br = false
				}
				n++
			}
			f.name = body[:n]
			rest := body[n:]
			if strings.HasPrefix(rest, "!") {
				if len(rest) < 2 {
					return nil, false
				}
				f.conv = rest[1]
				rest = rest[2:]
				if rest != "" && rest[0] != ':' {
					return nil, false
				}
			}
			if strings.HasPrefix(rest, ":") {
				f.spec = rest[1:]
			}
			f.nested = strings.ContainsAny(f.spec, "{}")
			out = append(out, f)
			i = k - 1
		}
	}
	return out, true
}

// carg is one argument of a call: tokens [lo, hi), and for a keyword argument its name and the
// first token of its value.
type carg struct {
	lo, hi int
	kw     string
	vlo    int
}

// tryStrFormat translates "literal".format(...) at toks[i] when a field has a format spec,
// which Starlark's str.format does not support. It returns the index after the call, or i when
// it wrote nothing.
func (t *translator) tryStrFormat(b *writer, toks []token, i, hi, lvl int) int {
	if i+3 >= hi || !t.isOp(toks[i+1], ".") || !t.isName(toks[i+2], "format") || !t.isOp(toks[i+3], "(") {
		return i
	}
	open, closeIdx := i+3, toks[i+3].match
	if closeIdx <= open || closeIdx >= hi {
		return i
	}
	lit := toks[i]
	bs, be, quotes := t.literalBody(lit)
	body := t.src[bs:be]
	fields, ok := parseBraces(body, bs)
	if !ok {
		return i
	}
	need := false
	for _, f := range fields {
		need = need || f.spec != ""
	}
	if !need {
		return i
	}
	nrw, nd := t.mark()
	reject := func(off int, msg, hint string) int {
		t.rollback(nrw, nd)
		t.diag(CodeStrFormat, off, msg, hint)
		return i
	}
	const hintSplit = `format each value first: "{} {}".format(format(a, ">5"), format(b, ".2f"))`
	if lit.flags&sRaw == 0 && escapeSpells(body, "{}") {
		return reject(lit.start, "an escape sequence in this template spells a brace", "write the brace itself")
	}

	// The call's arguments.
	var args []carg
	elems, _, ok := t.splitCommas(toks, open+1, closeIdx)
	if !ok {
		return i
	}
	nPos := 0
	kwIndex := map[string]int{}
	for _, e := range elems {
		a := carg{lo: e[0], hi: e[1], vlo: e[0]}
		if t.isOp(toks[e[0]], "*") || t.isOp(toks[e[0]], "**") {
			return reject(toks[e[0]].start, "a starred argument to str.format cannot be translated", hintSplit)
		}
		if e[1]-e[0] >= 3 && toks[e[0]].kind == kName && t.isOp(toks[e[0]+1], "=") {
			a.kw, a.vlo = t.text(toks[e[0]]), e[0]+2
			if _, dup := kwIndex[a.kw]; dup {
				return i
			}
			kwIndex[a.kw] = len(args)
		} else {
			if len(kwIndex) > 0 {
				return i // positional after keyword: not valid Python
			}
			nPos++
		}
		args = append(args, a)
	}

	// Resolve each field to an argument.
	type use struct {
		arg  int
		kind string // "" for a field without spec, else conv + ":" + spec
	}
	uses := make([]use, len(fields))
	auto, manual := false, false
	for n, f := range fields {
		if f.nested {
			return reject(f.off, "a nested field in a format spec cannot be translated", `compute the spec first: spec = ">" + str(width); format(x, spec)`)
		}
		if f.conv != 0 && f.conv != 'r' && f.conv != 's' {
			return reject(f.off, "conversion !"+string(f.conv)+" cannot be translated", "use !r or !s")
		}
		if strings.ContainsAny(f.spec, "\\\n'\"") {
			return reject(f.off, "this format spec holds a quote, a backslash or a line break", "write a plain spec such as .2f or >10")
		}
		u := use{arg: -1}
		if f.spec != "" {
			u.kind = string(f.conv) + ":" + f.spec
		}
		switch {
		case f.name == "":
			auto = true
			idx := 0
			for _, g := range fields[:n] {
				if g.name == "" {
					idx++
				}
			}
			if idx < nPos {
				u.arg = idx
			}
		case isDigits(f.name):
			manual = true
			if k, err := strconv.Atoi(f.name); err == nil && k < nPos {
				u.arg = k
			}
		case isIdentifier(f.name):
			if k, ok := kwIndex[f.name]; ok {
				u.arg = k
			}
		default:
			return reject(f.off, "Starlark's str.format has no attribute or index fields ({"+f.name+"})", `pass the value itself: "{}".format(row["name"])`)
		}
		if u.arg < 0 {
			return reject(f.off, "no argument for the field {"+f.name+"}", "give one argument per field")
		}
		uses[n] = u
	}
	if auto && manual {
		return reject(lit.start, "this template mixes {} and {0} fields", "number every field, or none")
	}

	// In place, each argument takes the form of its first use; other forms of the same argument
	// become extra positional arguments (a copy of a plain value).
	first := map[int]string{}
	slot := make([]int, len(fields)) // -1: the argument itself; else the extra's position
	type extra struct {
		arg  int
		kind string
	}
	var extras []extra
	dupTokens := 0
	for n, u := range uses {
		k, seen := first[u.arg]
		if !seen {
			first[u.arg] = u.kind
			slot[n] = -1
			continue
		}
		if k == u.kind {
			slot[n] = -1
			continue
		}
		a := args[u.arg]
		if !t.simple(toks, a.vlo, a.hi) {
			return reject(fields[n].off, "this template formats `"+t.snippet(toks[a.vlo].start, toks[a.hi-1].end)+"` in two ways, which would evaluate it twice",
				"assign it to a name first, or format it once")
		}
		slot[n] = -1
		for e, x := range extras {
			if x.arg == u.arg && x.kind == u.kind {
				slot[n] = nPos + e
			}
		}
		if slot[n] < 0 {
			if dupTokens += a.hi - a.vlo; dupTokens > maxDupTokens {
				return reject(fields[n].off, "this template is too large to translate", "assign the values to names and format them once")
			}
			slot[n] = nPos + len(extras)
			extras = append(extras, extra(u))
		}
	}
	numbered := manual || len(extras) > 0

	// The template.
	var tmpl strings.Builder
	last := bs
	for n, f := range fields {
		tmpl.WriteString(t.src[last:f.off])
		last = f.end
		ref := ""
		switch {
		case slot[n] >= 0:
			ref = strconv.Itoa(slot[n])
		case numbered && args[uses[n].arg].kw == "":
			ref = strconv.Itoa(uses[n].arg)
		case args[uses[n].arg].kw != "":
			ref = f.name
		}
		if uses[n].kind == "" && f.conv != 0 {
			ref += "!" + string(f.conv)
		}
		tmpl.WriteString("{" + ref + "}")
	}
	tmpl.WriteString(t.src[last:be])

	wrap := func(kind, v string) string {
		if kind == "" {
			return v
		}
		conv, spec, _ := strings.Cut(kind, ":")
		switch conv {
		case "r":
			v = "repr(" + v + ")"
		case "s":
			v = "str(" + v + ")"
		}
		return "format(" + v + `, "` + spec + `")`
	}
	var ex []string
	for _, x := range extras {
		a := args[x.arg]
		ex = append(ex, wrap(x.kind, t.dup(toks, a.vlo, a.hi, lvl+1)))
	}

	b.WriteString(t.src[lit.start:bs] + tmpl.String() + quotes)
	t.gapBefore(b, toks, i+1)
	t.verbatim(b, toks, i+1, open+1)
	if len(args) > 0 {
		t.gapBefore(b, toks, open+1)
	}
	k := open + 1
	for n, a := range args {
		if n == nPos && n > 0 && len(ex) > 0 {
			b.WriteString(", " + strings.Join(ex, ", "))
		}
		for ; k < a.lo; k++ { // commas and gaps between arguments
			if k > open+1 {
				t.gapBefore(b, toks, k)
			}
			b.copy(toks[k].start, toks[k].end)
		}
		if a.lo > open+1 {
			t.gapBefore(b, toks, a.lo)
		}
		if n == 0 && nPos == 0 && len(ex) > 0 {
			b.WriteString(strings.Join(ex, ", ") + ", ")
		}
		if a.kw != "" {
			t.verbatim(b, toks, a.lo, a.vlo)
			t.gapBefore(b, toks, a.vlo)
		}
		kind, used := first[n]
		v := t.renderString(toks, a.vlo, a.hi, lvl+1)
		if used {
			v = wrap(kind, v)
		}
		b.WriteString(v)
		k = a.hi
	}
	if len(args) == nPos && len(ex) > 0 {
		b.WriteString(", " + strings.Join(ex, ", "))
	}
	for ; k < closeIdx; k++ { // a trailing comma
		t.gapBefore(b, toks, k)
		b.copy(toks[k].start, toks[k].end)
	}
	t.gapBefore(b, toks, closeIdx)
	b.WriteString(")")
	t.record(RuleStrFormat, lit.start, toks[closeIdx].end)
	return closeIdx + 1
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func isIdentifier(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdent(s[i]) {
			return false
		}
	}
	return true
}
