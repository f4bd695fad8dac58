// Package termsafe makes text that a plan, a model or stored data controls safe to show on a
// terminal, and defines which characters are unsafe. It is the one home of that rule: the diff
// views, every command's human output, the output contract and the program check all use it.
//
// A terminal acts on some characters instead of showing them: ESC starts CSI and OSC sequences
// that move the cursor, clear the screen, conceal text or set the window title; C1 controls
// (U+0080–U+009F) do the same on terminals that honour them; a carriage return or a backspace
// overwrites what was printed; bidirectional overrides and isolates (U+202E, U+2066, ...) reorder
// what follows them; zero-width and other format characters hide text. Escape writes each of
// these visibly (\x1b, \x9b, \u202e), so text can neither restyle the screen nor hide or reorder
// what a reviewer must see.
//
// It also measures text as a terminal shows it (Width, Truncate), so every column layout agrees.
//
// It is a leaf: it imports only the standard library and go-runewidth, so any package may use it.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Keep names the layout characters that Escape lets through as themselves. The zero value keeps
// none: the result is one line.
type Keep uint8

const (
	// KeepNewline keeps a line break (U+000A) as a line break. A carriage return is always
	// escaped: it would move back over what the line already shows.
	KeepNewline Keep = 1 << iota
	// KeepTab keeps a tab. A tab only moves the cursor right to the next tab stop (ESC, which
	// could set tab stops, is escaped), so it cannot hide or overwrite text; callers that
	// measure columns (the diff's aligned layout) leave it escaped.
	KeepTab
)

// Text is the Keep of free text: several lines, tabs as tabs.
const Text = KeepNewline | KeepTab

// IsControl reports whether r is a control character (Unicode category Cc): C0 (U+0000–U+001F),
// DEL (U+007F) or C1 (U+0080–U+009F).
func IsControl(r rune) bool {
	return r < 0x20 || r >= 0x7f && r < 0xa0
}

// IsBidi reports whether r is a bidirectional formatting character, which reorders the display
// of the text around it: the embeddings and overrides U+202A–U+202E, the isolates
// U+2066–U+2069, and the marks U+200E, U+200F and U+061C.
func IsBidi(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 ||
		r == 0x200e || r == 0x200f || r == 0x061c
}

// IsLineSeparator reports whether r is U+2028 or U+2029, which some viewers break a line at
// and others (terminals, the Starlark scanner) do not.
func IsLineSeparator(r rune) bool { return r == 0x2028 || r == 0x2029 }

// Unsafe reports whether Escape writes r escaped (unless a Keep lets it through): every control
// character, every format character (category Cf: the bidi characters, zero-width spaces and
// joiners, soft hyphens, byte-order marks) and the line and paragraph separators.
func Unsafe(r rune) bool {
	return IsControl(r) || IsLineSeparator(r) || r > 0x7f && unicode.Is(unicode.Cf, r)
}

// Escape returns s with every unsafe character written as an escape a reader can see: \n, \t,
// \r for those three (when keep does not let them through), \xHH for other characters below
// U+0100 and for bytes that are not valid UTF-8, \uHHHH or \UHHHHHHHH above. Everything else,
// including a backslash, is unchanged, so an escape in the output is ambiguous with the same
// characters typed literally; what matters is that no character in the output acts on the
// terminal. s is returned as it is when nothing needs escaping.
func Escape(s string, keep Keep) string {
	if isSafe(s, keep) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&sb, `\x%02x`, s[i])
		case r == '\n' && keep&KeepNewline != 0, r == '\t' && keep&KeepTab != 0:
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\r':
			sb.WriteString(`\r`)
		case !Unsafe(r):
			sb.WriteString(s[i : i+size])
		case r < 0x100:
			fmt.Fprintf(&sb, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			fmt.Fprintf(&sb, `\U%08x`, r)
		}
		i += size
	}
	return sb.String()
}

func isSafe(s string, keep Keep) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return false
		case r == '\n' && keep&KeepNewline != 0, r == '\t' && keep&KeepTab != 0:
		case Unsafe(r):
			return false
		}
		i += size
	}
	return true
}

// JSON rewrites the unsafe characters that encoding/json leaves raw in an encoded document (DEL,
// C1 controls, format characters such as bidi overrides and zero-width spaces) as \u escapes. The
// document decodes to exactly the same values, but shown on a terminal it can no longer act on
// it or reorder it. encoding/json already escapes the C0 controls, U+2028, U+2029 and invalid
// UTF-8; characters outside strings are ASCII, so every rewritten character is inside a string.
func JSON(doc string) string {
	if !strings.ContainsFunc(doc, unsafeNonASCII) {
		return doc
	}
	var sb strings.Builder
	sb.Grow(len(doc) + 16)
	for _, r := range doc {
		if !unsafeNonASCII(r) {
			sb.WriteRune(r)
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != unicode.ReplacementChar {
			fmt.Fprintf(&sb, `\u%04x\u%04x`, r1, r2)
		} else {
			fmt.Fprintf(&sb, `\u%04x`, r)
		}
	}
	return sb.String()
}

func unsafeNonASCII(r rune) bool { return r >= 0x7f && Unsafe(r) }
