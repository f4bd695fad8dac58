package sandbox

// A small scanner for what go.starlark.net's parser cannot report well: it stops at the first
// syntax error, so a plan with both try/except and a decorator would need two repair rounds.
// This scanner skips strings and comments, finds every token that can start a Python-only
// construct with its position, and measures nesting before the parser (which recurses) sees a
// hostile program. It runs on every check, so it keeps nothing else.

// token kinds the scanner distinguishes.
const (
	tokOther = iota
	tokName
	tokOp
)

type lexToken struct {
	kind      int
	text      string
	line, col int
	lineStart bool   // first token of a logical line
	prev      string // the text of the token before it
}

// lexResult is what scanning a program finds.
type lexResult struct {
	tokens   []lexToken // only the tokens isCandidate accepts
	maxDepth int        // deepest nesting of brackets plus indented blocks
	depthAt  lexToken   // where that depth is first reached
}

// isCandidate reports whether a token's text is one that a Pythonism rule looks at.
func isCandidate(text string) bool {
	switch text {
	case "try", "except", "finally", "raise", "class", "with", "global", "nonlocal", "del",
		"assert", "async", "await", "yield", "@", ":=", "**", "is", "import":
		return true
	}
	return false
}

// lex scans src. It never fails: unterminated strings end at the end of their line (or of the
// file, for triple-quoted ones) and the parser reports them.
func lex(src string) lexResult {
	var r lexResult
	line, lineOff := 1, 0 // current line number and the offset where it starts
	brackets := 0
	indents := []int{0}
	lineStart := true
	indent := 0 // width of the current line's indentation
	prev := ""
	emit := func(kind int, start, end int) {
		text := src[start:end]
		if lineStart && brackets == 0 {
			for len(indents) > 1 && indent < indents[len(indents)-1] {
				indents = indents[:len(indents)-1]
			}
			if indent > indents[len(indents)-1] {
				indents = append(indents, indent)
			}
		}
		d := brackets + len(indents) - 1
		if (kind != tokOther && isCandidate(text)) || d > r.maxDepth {
			t := lexToken{kind: kind, text: text, line: line, col: start - lineOff + 1, lineStart: lineStart, prev: prev}
			if kind != tokOther && isCandidate(text) {
				r.tokens = append(r.tokens, t)
			}
			if d > r.maxDepth {
				r.maxDepth, r.depthAt = d, t
			}
		}
		lineStart = false
		prev = text
	}
	newline := func(at int) {
		line, lineOff = line+1, at+1
		if brackets == 0 {
			lineStart, indent = true, 0
		}
	}
	// A line end inside a string moves the position on, but the line goes on: the token after
	// the string does not start a line (counting it as one dropped every enclosing block from
	// the depth).
	strLine := func(at int) { line, lineOff = line+1, at+1 }
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			newline(i)
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			if lineStart && brackets == 0 && i == lineOff && (c == ' ' || c == '\t') {
				w := 0
				for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
					if src[i] == '\t' {
						w += 8 - w%8
					} else {
						w++
					}
					i++
				}
				indent = w
				continue
			}
			i++
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			line, lineOff = line+1, i+2 // an explicit continuation: the logical line goes on
			i += 2
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			if j < len(src) && (src[j] == '"' || src[j] == '\'') && isStringPrefix(src[i:j]) {
				emit(tokOther, i, j)
				i = skipString(src, j, strLine)
				continue
			}
			emit(tokName, i, j)
			i = j
		case c == '"' || c == '\'':
			emit(tokOther, i, i+1)
			i = skipString(src, i, strLine)
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (isIdentPart(src[j]) || src[j] == '.') {
				j++
			}
			emit(tokOther, i, j)
			i = j
		default:
			n := 1
			if i+1 < len(src) {
				switch src[i : i+2] {
				case "**", ":=", "->", "==", "!=", "<=", ">=", "//", "+=", "-=", "*=", "/=", "%=":
					n = 2
				}
			}
			switch c {
			case '(', '[', '{':
				brackets++
			case ')', ']', '}':
				if brackets > 0 {
					brackets--
				}
			}
			emit(tokOp, i, i+n)
			i += n
		}
	}
	return r
}

// skipString returns the offset just past the string literal whose opening quote is at src[i],
// calling newline for each line end inside it (which moves the position on, not the line).
func skipString(src string, i int, newline func(int)) int {
	q := src[i]
	triple := i+2 < len(src) && src[i+1] == q && src[i+2] == q
	if triple {
		i += 3
	} else {
		i++
	}
	for i < len(src) {
		switch c := src[i]; {
		case c == '\\':
			if i+1 < len(src) && src[i+1] == '\n' {
				newline(i + 1)
			}
			i += 2
		case c == '\n':
			if !triple {
				return i // the parser reports the unterminated string
			}
			newline(i)
			i++
		case c == q && !triple:
			return i + 1
		case c == q && i+2 < len(src) && src[i+1] == q && src[i+2] == q:
			return i + 3
		default:
			i++
		}
	}
	return len(src)
}

func isIdentStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }

func isStringPrefix(w string) bool {
	if len(w) > 2 {
		return false
	}
	for i := 0; i < len(w); i++ {
		switch w[i] {
		case 'r', 'R', 'b', 'B', 'f', 'F', 'u', 'U':
		default:
			return false
		}
	}
	return true
}
