package pycompat

import "strings"

// emitFString writes the f-string tk as a plain string literal with .format(...): each field
// becomes {} (or {!r}, {!s}) and its expression an argument; a field with a format spec passes
// format(value, "spec"). It reports false, having written nothing, when the f-string cannot be
// translated exactly (the diagnostic is recorded).
func (t *translator) emitFString(b *writer, tk token, lvl int) bool {
	src := t.src
	q := tk.start + int(tk.prefix)
	quote := src[q]
	triple := tk.flags&sTriple != 0
	raw := tk.flags&sRaw != 0
	body := q + 1
	open := src[q : q+1]
	if triple {
		body = q + 3
		open = src[q : q+3]
	}
	// The pieces go in the translator's scratch slice, reused by its next f-string (one nested
	// in this one's fields finds it taken and makes its own).
	parts := t.fparts[:0]
	t.fparts = nil
	defer func() {
		clear(parts)
		t.fparts = parts[:0]
	}()
	budget := 4*(tk.end-tk.start) + 1<<12 // the tokenizer parsed it within less
	fs := fscanner{src: src, hi: len(src), budget: &budget}
	if _, ok := fs.body(body, quote, triple, raw, 0, &parts); !ok {
		t.diag(CodeFString, tk.start, "this f-string is malformed", "check its braces and quotes")
		return false
	}
	nrw := len(t.rewrites)
	fail := func(off int, msg, hint string) bool {
		// The f-string stays as written, so its fields' rewrites are not made either; their
		// diagnostics stand, since the fields are not rendered again.
		t.rewrites = t.rewrites[:nrw]
		t.diag(CodeFString, off, msg, hint)
		return false
	}
	var tmpl strings.Builder
	tmpl.Grow(tk.end - tk.start) // about the f-string's text: a hint, it grows if needed
	var args []string
	fields := 0
	for _, p := range parts {
		if p.lit {
			lit := src[p.start:p.end]
			if !raw && escapeSpells(lit, "{}") {
				return fail(p.start, "an escape sequence in this f-string spells a brace", "write the brace itself, doubled: {{ or }}")
			}
			tmpl.WriteString(lit)
			continue
		}
		fields++
		if p.debugEnd > 0 {
			dbg := src[p.exprStart:p.debugEnd]
			if strings.ContainsAny(dbg, "\\\n'\"") {
				return fail(p.exprStart, "the text of this {expr=} field holds a quote, a backslash or a line break", "write the label out: f\"name={x!r}\"")
			}
			tmpl.WriteString(strings.NewReplacer("{", "{{", "}", "}}").Replace(dbg))
		}
		arg, ok := t.fieldArg(p, quote, lvl, fail)
		if !ok {
			return false
		}
		args = append(args, arg.value)
		tmpl.WriteString(arg.field)
	}

	b.WriteString(t.plainPrefix(tk))
	b.WriteString(open)
	if fields == 0 {
		// No field: the braces are plain text once the f is gone.
		b.WriteString(strings.NewReplacer("{{", "{", "}}", "}").Replace(tmpl.String()))
		b.WriteString(open)
	} else {
		b.WriteString(tmpl.String())
		b.WriteString(open)
		b.WriteString(".format(")
		for i, a := range args {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a)
		}
		b.WriteString(")")
	}
	t.record(RuleFString, tk.start, tk.end)
	return true
}

type fieldOut struct {
	field string // the replacement field in the template: {}, {!r} or {!s}
	value string // the argument
}

// fieldArg translates one f-string field.
func (t *translator) fieldArg(p fpart, quote byte, lvl int, fail func(int, string, string) bool) (fieldOut, bool) {
	expr, comma, empty := t.renderExpr(p.exprStart, p.exprEnd, lvl+1)
	if empty {
		return fieldOut{}, fail(p.start, "this f-string has an empty field {}", "put an expression in the braces, or double them ({{}}) for literal braces")
	}
	if comma {
		expr = "(" + expr + ")"
	}
	conv := p.conv
	switch conv {
	case 0, 'r', 's':
	case 'a':
		return fieldOut{}, fail(p.start, "Starlark has no ascii(): the !a conversion cannot be translated", "use !r")
	default:
		return fieldOut{}, fail(p.start, "unknown conversion !"+string(conv)+" in f-string", "use !r or !s")
	}
	if conv == 0 && p.debugEnd > 0 && !p.hasSpec {
		conv = 'r' // {x=} shows repr(x)
	}
	if !p.hasSpec || p.specEnd == p.specStart {
		if conv == 0 {
			return fieldOut{"{}", expr}, true
		}
		return fieldOut{"{!" + string(conv) + "}", expr}, true
	}
	spec, ok := t.specExpr(p, quote, lvl, fail)
	if !ok {
		return fieldOut{}, false
	}
	switch conv {
	case 'r':
		expr = "repr(" + expr + ")"
	case 's':
		expr = "str(" + expr + ")"
	}
	return fieldOut{"{}", "format(" + expr + ", " + spec + ")"}, true
}

// specExpr returns the Starlark expression of a field's format spec: a string literal, or a
// .format call when the spec holds nested fields ({x:>{width}}).
func (t *translator) specExpr(p fpart, quote byte, lvl int, fail func(int, string, string) bool) (string, bool) {
	badSpec := func(s string) bool { return strings.ContainsAny(s, "\\\n'\"{}") }
	if !p.nested {
		s := t.src[p.specStart:p.specEnd]
		if badSpec(s) {
			return "", fail(p.specStart, "the format spec of this f-string field holds a quote, a backslash or a line break", "write a plain format spec such as .2f or >10")
		}
		return `"` + s + `"`, true
	}
	var tmpl strings.Builder
	var args []string
	for _, sp := range p.spec {
		if sp.lit {
			s := t.src[sp.start:sp.end]
			if badSpec(s) {
				return "", fail(sp.start, "the format spec of this f-string field holds a quote, a backslash or a line break", "write a plain format spec such as .2f or >10")
			}
			tmpl.WriteString(s)
			continue
		}
		if sp.hasSpec || sp.debugEnd > 0 {
			return "", fail(sp.start, "a field nested in a format spec cannot have its own spec or '='", "compute the spec first: w = str(width), then f\"{x:>{w}}\"")
		}
		out, ok := t.fieldArg(sp, quote, lvl, fail)
		if !ok {
			return "", false
		}
		tmpl.WriteString(out.field)
		args = append(args, out.value)
	}
	return `"` + tmpl.String() + `".format(` + strings.Join(args, ", ") + ")", true
}

// escapeSpells reports whether the source text s of a non-raw literal holds an escape sequence
// (\x.., \u...., \U........, octal) whose character is one of chars: such a character would be
// seen by str.format or % after the literal is decoded, though the source does not show it.
func escapeSpells(s, chars string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		c := s[i+1]
		var v, n int
		switch {
		case c == 'x':
			v, n = hexVal(s[i+2:], 2)
		case c == 'u':
			v, n = hexVal(s[i+2:], 4)
		case c == 'U':
			v, n = hexVal(s[i+2:], 8)
		case c >= '0' && c <= '7':
			for n < 3 && i+1+n < len(s) && s[i+1+n] >= '0' && s[i+1+n] <= '7' {
				v = v*8 + int(s[i+1+n]-'0')
				n++
			}
		default:
			i++ // skip the escaped character
			continue
		}
		if n > 0 && v < 128 && strings.IndexByte(chars, byte(v)) >= 0 {
			return true
		}
		i++
	}
	return false
}

func hexVal(s string, max int) (v, n int) {
	for n < max && n < len(s) {
		c := s[n] | 0x20
		switch {
		case s[n] >= '0' && s[n] <= '9':
			v = v*16 + int(s[n]-'0')
		case c >= 'a' && c <= 'f':
			v = v*16 + int(c-'a'+10)
		default:
			return v, n
		}
		n++
		if v > 0x10FFFF {
			return -1, n
		}
	}
	return v, n
}
