package sandbox

import (
	"fmt"
	"unicode/utf8"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/internal/termsafe"
)

// maxTextDiagnostics is how many program-control-char findings one check reports; the last one
// says how many more there are.
const maxTextDiagnostics = 10

// checkText rejects the characters that make the program a reviewer reads differ from the
// program that runs. It runs on the extracted program, before any rewrite, so its positions are
// the program's own (line and col, col counted in characters as the Starlark parser counts).
//
//   - NUL: go.starlark.net's scanner takes it for the end of the file and runs only the text
//     before it, while a reviewer reads the whole file.
//   - A carriage return that does not end a line (CR LF is a line break): Starlark breaks the
//     line there, many viewers do not, so code can hide behind a comment.
//   - Every other control character but tab and line feed (ESC, BEL, backspace, form feed, DEL,
//     the C1 controls): a terminal acts on it instead of showing it.
//   - Bidi formatting characters (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C): they
//     reorder how the text around them is shown ("Trojan Source").
//   - Line and paragraph separators (U+2028, U+2029): some viewers break the line there,
//     Starlark does not.
//   - Bytes that are not UTF-8: a viewer shows a replacement character, the program uses the
//     byte.
//
// Inside a string literal a plan can still write any of them as an escape ("\x1b", "\u202e"),
// which reads as what it is.
func checkText(src string) diag.List {
	var ds diag.List
	total := 0
	line, col := 1, 0
	for i := 0; i < len(src); {
		if c := src[i]; c >= 0x20 && c < 0x7f {
			// Printable ASCII, most of any program: allowed, one byte, one column.
			col++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(src[i:])
		col++
		what, why := textProblem(src, i, r, size)
		if what != "" {
			total++
			if len(ds) < maxTextDiagnostics {
				ds = append(ds, diag.Diagnostic{
					Stage: diag.StageCheck, Code: CodeControlChar, Line: line, Col: col,
					Message: fmt.Sprintf("the program text holds %s: %s", what, why),
					Hint:    `remove it; inside a string literal write it as an escape such as "\x1b" or "\u202e". Program text may hold only printable characters, spaces, tabs and line breaks`,
				})
			}
		}
		if r == '\n' {
			line, col = line+1, 0
		}
		i += size
	}
	if total > len(ds) {
		ds[len(ds)-1].Message += fmt.Sprintf(" (and %d more such characters after it)", total-len(ds))
	}
	return ds
}

// textProblem names the character at src[i:i+size] and why checkText rejects it, or returns ""
// when it is allowed.
func textProblem(src string, i int, r rune, size int) (what, why string) {
	const differs = "a terminal acts on it instead of showing it, so the program a reviewer reads is not the program that runs"
	switch {
	case r == utf8.RuneError && size == 1:
		return fmt.Sprintf("the byte 0x%02x, which is not UTF-8", src[i]), "a viewer shows a replacement character where the program has the byte"
	case r == 0:
		return "a NUL character (U+0000)", "the Starlark scanner stops at it and would run only the text before it"
	case r == '\r':
		if i+1 < len(src) && src[i+1] == '\n' {
			return "", ""
		}
		return "a carriage return (U+000D) that does not end a line", "Starlark starts a new line there, many viewers do not, so code can hide behind a comment"
	case r == '\t' || r == '\n':
		return "", ""
	case termsafe.IsControl(r):
		return fmt.Sprintf("the control character U+%04X", r), differs
	case termsafe.IsBidi(r):
		return fmt.Sprintf("the bidi formatting character U+%04X", r), "it reorders how the text around it is shown, so the program a reviewer reads is not the program that runs"
	case termsafe.IsLineSeparator(r):
		return fmt.Sprintf("the separator U+%04X", r), "some viewers start a new line there, Starlark does not"
	}
	return "", ""
}
