package pycompat

// This file holds the tokenizer: a small Python-ish lexer that knows exactly enough to find
// string literals (including f-strings with nested quotes), comments, brackets and logical line
// ends. Tokens are byte ranges of the source; everything between two tokens (whitespace,
// comments, backslash continuations, non-logical newlines) is a "gap" that rewriting copies
// verbatim.

type kind uint8

const (
	kName kind = iota + 1
	kNumber
	kString
	kOp
	kNewline // the end of a logical line (outside brackets)
	kError   // a byte the lexer cannot place, or an unterminated string
)

// String token flags.
const (
	sF         uint8 = 1 << iota // an f-string
	sRaw                         // r prefix
	sTriple                      // triple-quoted
	sBad                         // malformed f-string, scanned as a plain string
	sMultiline                   // contains a newline
	sBytes                       // b prefix
)

type token struct {
	start, end int // byte offsets in the source
	match      int // index of the matching bracket, or -1
	kind       kind
	flags      uint8 // string flags
	prefix     uint8 // length of a string's prefix letters
}

// maxFDepth bounds the nesting of f-strings inside f-string fields (Python itself allows only a
// handful of levels); deeper input is treated as malformed, which keeps scanning linear.
const maxFDepth = 16

func isIdentStart(c byte) bool {
	return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80
}

func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// stringPrefix reports whether w is a string prefix (r, b, u, f and their two-letter mixes) and
// returns the flags it implies.
func stringPrefix(w string) (uint8, bool) {
	if len(w) == 0 || len(w) > 2 {
		return 0, false
	}
	var fl uint8
	for i := 0; i < len(w); i++ {
		switch w[i] | 0x20 {
		case 'r':
			if fl&sRaw != 0 {
				return 0, false
			}
			fl |= sRaw
		case 'f':
			if fl&sF != 0 {
				return 0, false
			}
			fl |= sF
		case 'b':
			if fl&sBytes != 0 {
				return 0, false
			}
			fl |= sBytes
		case 'u':
			if len(w) != 1 {
				return 0, false
			}
		default:
			return 0, false
		}
	}
	if fl&sF != 0 && fl&sBytes != 0 {
		return 0, false
	}
	return fl, true
}

// tokenize appends the tokens of src[lo:hi] to dst. When nested is true the range is inside
// brackets (an f-string field), so newlines never end a logical line.
func tokenize(src string, lo, hi int, nested bool, dst []token) []token {
	var stack []int // indices of open brackets
	// The f-string scans of one call share a budget: a malformed f-string can scan far before
	// it fails, and many of them must not make tokenizing quadratic.
	budget := 4*(hi-lo) + 1<<12
	lineHasTok := false
	i := lo
	for i < hi {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case c == '\n':
			if !nested && len(stack) == 0 && lineHasTok {
				dst = append(dst, token{start: i, end: i + 1, kind: kNewline, match: -1})
				lineHasTok = false
			}
			i++
		case c == '#':
			for i < hi && src[i] != '\n' {
				i++
			}
		case c == '\\' && i+1 < hi && src[i+1] == '\n':
			i += 2
		case c == '\\' && i+2 < hi && src[i+1] == '\r' && src[i+2] == '\n':
			i += 3
		case isIdentStart(c):
			j := i + 1
			for j < hi && isIdent(src[j]) {
				j++
			}
			if j < hi && (src[j] == '"' || src[j] == '\'') {
				if fl, ok := stringPrefix(src[i:j]); ok {
					dst = append(dst, scanString(src, i, j, hi, fl, &budget))
					i = dst[len(dst)-1].end
					lineHasTok = true
					continue
				}
			}
			dst = append(dst, token{start: i, end: j, kind: kName, match: -1})
			i = j
			lineHasTok = true
		case isDigit(c) || (c == '.' && i+1 < hi && isDigit(src[i+1])):
			j := scanNumber(src, i, hi)
			dst = append(dst, token{start: i, end: j, kind: kNumber, match: -1})
			i = j
			lineHasTok = true
		case c == '"' || c == '\'':
			dst = append(dst, scanString(src, i, i, hi, 0, &budget))
			i = dst[len(dst)-1].end
			lineHasTok = true
		default:
			n := opLen(src[i:hi])
			if n == 0 {
				// Not an operator: one byte (or one UTF-8 sequence) of error.
				j := i + 1
				for j < hi && src[j]&0xC0 == 0x80 {
					j++
				}
				dst = append(dst, token{start: i, end: j, kind: kError, match: -1})
				i = j
				lineHasTok = true
				continue
			}
			t := token{start: i, end: i + n, kind: kOp, match: -1}
			idx := len(dst)
			if n == 1 {
				switch c {
				case '(', '[', '{':
					stack = append(stack, idx)
				case ')', ']', '}':
					if k := len(stack) - 1; k >= 0 && closerOf(src[dst[stack[k]].start]) == c {
						t.match = stack[k]
						dst[stack[k]].match = idx
						stack = stack[:k]
					}
				}
			}
			dst = append(dst, t)
			i += n
			lineHasTok = true
		}
	}
	return dst
}

// scanNumber returns the end of the number literal at i. Like Python's tokenizer it stops
// before letters that cannot continue the literal, so 1if x else 2 reads as 1 if x else 2.
func scanNumber(src string, i, hi int) int {
	digits := func(j int, ok func(byte) bool) int {
		for j < hi && (ok(src[j]) || src[j] == '_') {
			j++
		}
		return j
	}
	if src[i] == '0' && i+1 < hi {
		switch src[i+1] | 0x20 {
		case 'x':
			return digits(i+2, func(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') })
		case 'o':
			return digits(i+2, func(c byte) bool { return c >= '0' && c <= '7' })
		case 'b':
			return digits(i+2, func(c byte) bool { return c == '0' || c == '1' })
		}
	}
	j := digits(i, isDigit)
	if j < hi && src[j] == '.' {
		j = digits(j+1, isDigit)
	}
	if j < hi && src[j]|0x20 == 'e' {
		k := j + 1
		if k < hi && (src[k] == '+' || src[k] == '-') {
			k++
		}
		if k < hi && isDigit(src[k]) {
			j = digits(k, isDigit)
		}
	}
	if j < hi && src[j]|0x20 == 'j' {
		j++
	}
	return j
}

func closerOf(c byte) byte {
	switch c {
	case '(':
		return ')'
	case '[':
		return ']'
	case '{':
		return '}'
	}
	return 0
}

// opLen returns the length of the operator at the start of s, or 0.
func opLen(s string) int {
	var c1, c2 byte
	if len(s) > 1 {
		c1 = s[1]
	}
	if len(s) > 2 {
		c2 = s[2]
	}
	switch s[0] {
	case '(', ')', '[', ']', '{', '}', ',', ';', '~':
		return 1
	case '.':
		if c1 == '.' && c2 == '.' {
			return 3
		}
		return 1
	case '*', '/', '<', '>':
		if c1 == s[0] { // ** // << >> and **= //= <<= >>=
			if c2 == '=' {
				return 3
			}
			return 2
		}
		if c1 == '=' {
			return 2
		}
		return 1
	case '-':
		if c1 == '>' || c1 == '=' {
			return 2
		}
		return 1
	case ':', '=', '!', '+', '%', '&', '|', '^', '@':
		if c1 == '=' {
			return 2
		}
		return 1
	}
	return 0
}

// scanString scans a string literal whose prefix starts at start and whose opening quote is at
// q; an f-string's scan spends budget. An f-string that does not parse is rescanned as a plain string and flagged sBad, so one
// malformed f-string does not derail the rest of the program.
func scanString(src string, start, q, hi int, fl uint8, budget *int) token {
	t := token{start: start, kind: kString, flags: fl, prefix: uint8(q - start), match: -1}
	quote := src[q]
	triple := q+2 < hi && src[q+1] == quote && src[q+2] == quote
	body := q + 1
	if triple {
		t.flags |= sTriple
		body = q + 3
	}
	if fl&sF != 0 {
		fs := fscanner{src: src, hi: hi, budget: budget}
		if end, ok := fs.body(body, quote, triple, fl&sRaw != 0, 0, nil); ok {
			t.end = end
			if containsNL(src[start:end]) {
				t.flags |= sMultiline
			}
			return t
		}
		t.flags |= sBad
	}
	end, ok, nl := scanPlain(src, body, hi, quote, triple)
	t.end = end
	if nl {
		t.flags |= sMultiline
	}
	if !ok {
		t.kind = kError
	}
	return t
}

// scanPlain scans the body of a plain string from i and returns the offset just after its
// closing quote. An unterminated single-quoted string ends before the newline.
func scanPlain(src string, i, hi int, quote byte, triple bool) (end int, ok, multiline bool) {
	for i < hi {
		c := src[i]
		switch {
		case c == '\\':
			if i+1 < hi && src[i+1] == '\n' {
				multiline = true
			}
			i += 2
			continue
		case c == '\n':
			if !triple {
				return i, false, multiline
			}
			multiline = true
		case c == quote:
			if !triple {
				return i + 1, true, multiline
			}
			if i+2 < hi && src[i+1] == quote && src[i+2] == quote {
				return i + 3, true, multiline
			}
		}
		i++
	}
	return hi, false, multiline
}

func containsNL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return true
		}
	}
	return false
}

// fpart is one piece of an f-string: a literal run or a replacement field.
type fpart struct {
	lit                bool
	start, end         int // literal text, or the field from '{' to just after '}'
	exprStart, exprEnd int // the field's expression, whitespace included
	debugEnd           int // > 0 for the '=' form: the debug text is src[exprStart:debugEnd]
	conv               byte
	hasSpec            bool
	specStart, specEnd int
	spec               []fpart // the spec's pieces when it holds nested fields
	nested             bool    // the spec holds nested fields
}

// fscanner parses f-strings. With a nil recorder it only finds the end (the tokenizer); with a
// recorder it also returns the pieces (the renderer).
type fscanner struct {
	src    string
	hi     int
	budget *int // bytes left to scan; shared by a whole tokenize call
}

// step spends n bytes of the budget and reports whether any was left.
func (s *fscanner) step(n int) bool {
	*s.budget -= n
	return *s.budget >= 0
}

// body scans an f-string body from i (just after the opening quotes) up to and including the
// closing quotes.
func (s *fscanner) body(i int, quote byte, triple, raw bool, depth int, rec *[]fpart) (int, bool) {
	if depth > maxFDepth {
		return 0, false
	}
	src, hi := s.src, s.hi
	litStart := i
	flush := func(end int) {
		if rec != nil && end > litStart {
			*rec = append(*rec, fpart{lit: true, start: litStart, end: end})
		}
	}
	for i < hi {
		if !s.step(1) {
			return 0, false
		}
		c := src[i]
		switch {
		case c == '\\':
			if i+1 < hi && (src[i+1] == '{' || src[i+1] == '}') {
				i++ // a backslash does not escape a brace in an f-string
				continue
			}
			if !raw && i+2 < hi && src[i+1] == 'N' && src[i+2] == '{' {
				return 0, false // \N{...} named escapes: not supported by Starlark
			}
			i += 2
		case c == '\n' && !triple:
			return 0, false
		case c == quote:
			if !triple {
				flush(i)
				return i + 1, true
			}
			if i+2 < hi && src[i+1] == quote && src[i+2] == quote {
				flush(i)
				return i + 3, true
			}
			i++
		case c == '{':
			if i+1 < hi && src[i+1] == '{' {
				i += 2
				continue
			}
			flush(i)
			j, ok := s.field(i, quote, triple, raw, depth, rec, false)
			if !ok {
				return 0, false
			}
			i = j
			litStart = i
		case c == '}':
			if i+1 < hi && src[i+1] == '}' {
				i += 2
				continue
			}
			return 0, false
		default:
			i++
		}
	}
	return 0, false
}

// field scans a replacement field starting at the '{' at i and returns the offset after its '}'.
// inSpec is true for a field nested in another field's format spec.
func (s *fscanner) field(i int, quote byte, triple, raw bool, depth int, rec *[]fpart, inSpec bool) (int, bool) {
	src, hi := s.src, s.hi
	f := fpart{start: i, exprStart: i + 1}
	p := i + 1
	bd := 0
	exprDone := false
	for p < hi && !exprDone {
		if !s.step(1) {
			return 0, false
		}
		c := src[p]
		switch {
		case c == '"' || c == '\'':
			// A nested string (Python 3.12 allows the enclosing quote too).
			end, ok := s.nestedString(p, p, depth)
			if !ok {
				return 0, false
			}
			p = end
		case isIdentStart(c):
			j := p + 1
			for j < hi && isIdent(src[j]) {
				j++
			}
			if j < hi && (src[j] == '"' || src[j] == '\'') {
				if _, ok := stringPrefix(src[p:j]); ok {
					end, ok := s.nestedString(p, j, depth)
					if !ok {
						return 0, false
					}
					p = end
					continue
				}
			}
			p = j
		case c == '#':
			return 0, false
		case c == '\n' && !triple && bd == 0:
			return 0, false
		case c == '(' || c == '[' || c == '{':
			bd++
			p++
		case c == ')' || c == ']':
			if bd == 0 {
				return 0, false
			}
			bd--
			p++
		case c == '}':
			if bd > 0 {
				bd--
				p++
				continue
			}
			f.exprEnd = p
			exprDone = true
		case bd > 0:
			p++
		case c == '!' && p+1 < hi && src[p+1] == '=':
			p += 2
		case c == '!':
			f.exprEnd = p
			if p+1 >= hi {
				return 0, false
			}
			f.conv = src[p+1]
			p += 2
			exprDone = true
		case c == ':':
			f.exprEnd = p
			exprDone = true
		case c == '=' && p+1 < hi && src[p+1] == '=':
			p += 2
		case c == '=' && p > f.exprStart && (src[p-1] == '<' || src[p-1] == '>' || src[p-1] == '!' || src[p-1] == '='):
			p++
		case c == '=':
			f.exprEnd = p
			p++
			for p < hi && (src[p] == ' ' || src[p] == '\t') {
				p++
			}
			f.debugEnd = p
			if p < hi && src[p] == '!' {
				if p+1 >= hi {
					return 0, false
				}
				f.conv = src[p+1]
				p += 2
			}
			exprDone = true
		case c == quote:
			return 0, false
		default:
			p++
		}
	}
	if !exprDone || p >= hi {
		return 0, false
	}
	switch src[p] {
	case '}':
		f.end = p + 1
	case ':':
		f.hasSpec = true
		p++
		f.specStart = p
		var specRec *[]fpart
		var parts []fpart
		if rec != nil {
			specRec = &parts
		}
		litStart := p
		for {
			if p >= hi || !s.step(1) {
				return 0, false
			}
			c := src[p]
			if c == '}' {
				break
			}
			switch {
			case c == '{' && inSpec:
				return 0, false // Python allows one level of fields nested in a spec
			case c == '{':
				if specRec != nil && p > litStart {
					parts = append(parts, fpart{lit: true, start: litStart, end: p})
				}
				j, ok := s.field(p, quote, triple, raw, depth+1, specRec, true)
				if !ok {
					return 0, false
				}
				f.nested = true
				p = j
				litStart = p
				continue
			case c == quote || (c == '\n' && !triple):
				return 0, false
			case c == '\\':
				p++
			}
			p++
		}
		if p > hi {
			return 0, false
		}
		f.specEnd = p
		if specRec != nil && f.nested && p > litStart {
			parts = append(parts, fpart{lit: true, start: litStart, end: p})
		}
		f.spec = parts
		f.end = p + 1
	default:
		return 0, false
	}
	if rec != nil {
		*rec = append(*rec, f)
	}
	return f.end, true
}

// nestedString scans a string literal inside an f-string field: its prefix starts at start and
// its quote is at q.
func (s *fscanner) nestedString(start, q, depth int) (int, bool) {
	fl, _ := stringPrefix(s.src[start:q])
	quote := s.src[q]
	triple := q+2 < s.hi && s.src[q+1] == quote && s.src[q+2] == quote
	body := q + 1
	if triple {
		body = q + 3
	}
	if fl&sF != 0 {
		return s.body(body, quote, triple, fl&sRaw != 0, depth+1, nil)
	}
	end, ok, _ := scanPlain(s.src, body, s.hi, quote, triple)
	return end, ok && s.step(end-body)
}
