package pycompat

import "strings"

// maxPreDepth is the bracket depth the pre-scan tracks; deeper input takes the full path.
const maxPreDepth = 32

// mayNeedRewrite is a fast, allocation-free scan that reports false only when no rule can
// apply: no f-string, no `is`, no import, no % or .format after a string literal, no `for`
// directly inside parentheses, and no two comparison operators in one expression. It
// over-approximates: true only means the full pass must look.
func mayNeedRewrite(src string) bool {
	var count [maxPreDepth]uint8 // comparison operators seen in the current expression, per depth
	var brack [maxPreDepth]byte
	depth := 0
	afterString := false // the last token was a string literal
	cmp := func() bool {
		count[depth]++
		return count[depth] >= 2
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			if depth == 0 {
				count[0] = 0
				afterString = false
			}
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case c == '\\':
			// A line continuation does not end the expression.
			i++
			if i < len(src) && src[i] == '\r' {
				i++
			}
			if i < len(src) && src[i] == '\n' {
				i++
			} else {
				i = skipContinuation(src, i) // an error token, as the tokenizer reads it
			}
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			i = skipString(src, i)
			afterString = true
		case isIdentStart(c):
			j := i + 1
			for j < len(src) && isIdent(src[j]) {
				j++
			}
			w := src[i:j]
			if j < len(src) && (src[j] == '"' || src[j] == '\'') {
				if fl, ok := stringPrefix(w); ok {
					if fl&sF != 0 {
						return true
					}
					i = skipString(src, j)
					afterString = true
					continue
				}
			}
			afterString = false
			i = j
			switch w {
			case "is", "import", "from":
				return true
			case "for":
				if depth > 0 && brack[depth] == '(' {
					return true
				}
				count[depth] = 0
			case "in":
				if cmp() {
					return true
				}
			case "and", "or", "if", "else", "lambda", "elif", "while", "return", "assert":
				count[depth] = 0
			}
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			// A number as the tokenizer reads it: .0x1f is .0 and the name x1f, not . and 0x1f.
			i = scanNumber(src, i, len(src))
			afterString = false
		default:
			switch c {
			case '%':
				if afterString {
					return true
				}
			case '.':
				if afterString && strings.HasPrefix(src[skipGap(src, i+1):], "format") {
					return true
				}
			case '(', '[', '{':
				depth++
				if depth >= maxPreDepth {
					return true
				}
				count[depth], brack[depth] = 0, c
			case ')', ']', '}':
				// Like the tokenizer, a closer that does not match is not a close.
				if depth > 0 && closerOf(brack[depth]) == c {
					depth--
				}
			case '<', '>':
				if cmp() {
					return true
				}
				if i+1 < len(src) && (src[i+1] == '=' || src[i+1] == c) {
					i++
				}
			case '!':
				if cmp() {
					return true
				}
				if i+1 < len(src) && src[i+1] == '=' {
					i++
				}
			case '=':
				if i+1 < len(src) && src[i+1] == '=' {
					if cmp() {
						return true
					}
					i++
				} else {
					count[depth] = 0
				}
			case ',', ':', ';':
				count[depth] = 0
			}
			afterString = false
			if i+1 < len(src) && src[i+1]&0xC0 == 0x80 && opLen(src[i:]) == 0 {
				// Not an operator: the tokenizer reads the byte and the UTF-8 continuation
				// bytes after it as one error token (so a continuation byte there does not
				// start a name, as it would alone: "$\x80f''" holds an f-string).
				i = skipContinuation(src, i+1)
				continue
			}
			i++
		}
	}
	return false
}

// skipGap returns the offset of the first byte from i that is not in a gap between two tokens
// (spaces, tabs, form feeds, line ends, comments, backslash continuations): the renderer's rules
// read the next token whatever gap comes before it (tryStrFormat's `.` and `format`).
func skipGap(src string, i int) int {
	for i < len(src) {
		switch c := src[i]; {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\n' || c == '\\':
			i++
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		default:
			return i
		}
	}
	return i
}

// skipContinuation returns the offset of the first byte from i that is not a UTF-8
// continuation byte.
func skipContinuation(src string, i int) int {
	for i < len(src) && src[i]&0xC0 == 0x80 {
		i++
	}
	return i
}

// skipString returns the offset after the string literal whose opening quote is at q (or the
// end of the line or input when it is unterminated).
func skipString(src string, q int) int {
	quote := src[q]
	if q+2 < len(src) && src[q+1] == quote && src[q+2] == quote {
		end, _, _ := scanPlain(src, q+3, len(src), quote, true)
		return end
	}
	end, _, _ := scanPlain(src, q+1, len(src), quote, false)
	return end
}
