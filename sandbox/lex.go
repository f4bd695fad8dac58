package sandbox

// A small scanner for what go.starlark.net's parser cannot report well: it stops at the first
// syntax error, so a plan with both try/except and a decorator would need two repair rounds.
// This scanner skips strings and comments, finds every Python-only construct with its position,
// and measures nesting before the parser (which recurses) sees a hostile program.

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
	lineStart bool // first token of a logical line
}

// lexResult is what scanning a program finds.
type lexResult struct {
	tokens   []lexToken
	maxDepth int // deepest nesting of brackets plus indented blocks
	depthAt  lexToken
}

// lex scans src. It never fails: unterminated strings end at the end of their line (or of the
// file, for triple-quoted ones) and the parser reports them.
func lex(src string) lexResult {
	var r lexResult
	line, col := 1, 1
	brackets := 0
	indents := []int{0}
	lineStart := true
	indent := 0 // width of the current line's indentation
	i := 0
	advance := func(n int) {
		for k := 0; k < n && i < len(src); k++ {
			if src[i] == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
			i++
		}
	}
	emit := func(kind int, text string, l, c int) {
		t := lexToken{kind: kind, text: text, line: l, col: c, lineStart: lineStart}
		if lineStart && brackets == 0 {
			for len(indents) > 1 && indent < indents[len(indents)-1] {
				indents = indents[:len(indents)-1]
			}
			if indent > indents[len(indents)-1] {
				indents = append(indents, indent)
			}
		}
		lineStart = false
		r.tokens = append(r.tokens, t)
		if d := brackets + len(indents) - 1; d > r.maxDepth {
			r.maxDepth, r.depthAt = d, t
		}
	}
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\n':
			if brackets == 0 {
				lineStart, indent = true, 0
			}
			advance(1)
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			if lineStart && brackets == 0 && col == 1 {
				w := 0
				for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
					if src[i] == '\t' {
						w += 8 - w%8
					} else {
						w++
					}
					advance(1)
				}
				indent = w
				continue
			}
			advance(1)
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			advance(2) // explicit line continuation
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				advance(1)
			}
		case isIdentStart(c):
			j := i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			word := src[i:j]
			if j < len(src) && (src[j] == '"' || src[j] == '\'') && isStringPrefix(word) {
				emit(tokOther, word, line, col)
				advance(len(word))
				skipString(src, &i, advance)
				continue
			}
			emit(tokName, word, line, col)
			advance(len(word))
		case c == '"' || c == '\'':
			emit(tokOther, "string", line, col)
			skipString(src, &i, advance)
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (isIdentPart(src[j]) || src[j] == '.') {
				j++
			}
			emit(tokOther, src[i:j], line, col)
			advance(j - i)
		default:
			op := string(c)
			if i+1 < len(src) {
				switch two := src[i : i+2]; two {
				case "**", ":=", "->", "==", "!=", "<=", ">=", "//", "+=", "-=", "*=", "/=", "%=":
					op = two
				}
			}
			switch op {
			case "(", "[", "{":
				brackets++
			case ")", "]", "}":
				if brackets > 0 {
					brackets--
				}
			}
			emit(tokOp, op, line, col)
			advance(len(op))
		}
	}
	return r
}

// skipString advances past the string literal whose opening quote is at src[*i].
func skipString(src string, i *int, advance func(int)) {
	q := src[*i]
	triple := *i+2 < len(src) && src[*i+1] == q && src[*i+2] == q
	if triple {
		advance(3)
	} else {
		advance(1)
	}
	for *i < len(src) {
		c := src[*i]
		switch {
		case c == '\\':
			advance(2)
		case c == '\n' && !triple:
			return
		case c == q && !triple:
			advance(1)
			return
		case c == q && *i+2 < len(src) && src[*i+1] == q && src[*i+2] == q:
			advance(3)
			return
		default:
			advance(1)
		}
	}
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
