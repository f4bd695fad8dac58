package termsafe

import "github.com/mattn/go-runewidth"

// widths measures like a terminal in a non-East-Asian locale: ambiguous characters take one
// column, wide and fullwidth characters (CJK, most emoji) two, combining marks none. It is fixed,
// not read from the locale, so a layout is the same on every machine.
var widths = &runewidth.Condition{EastAsianWidth: false}

// RuneWidth is the number of terminal columns r takes.
func RuneWidth(r rune) int { return widths.RuneWidth(r) }

// Width is the number of terminal columns s takes on one line: the sum of its runes' widths.
// Every column layout of starplan's output (tables, diffs) measures with it.
func Width(s string) int {
	w := 0
	for _, r := range s {
		w += widths.RuneWidth(r)
	}
	return w
}

// Truncate shortens s to at most w columns, ending it with "…" when it was cut.
func Truncate(s string, w int) string {
	if Width(s) <= w {
		return s
	}
	out := make([]rune, 0, w)
	used := 0
	for _, r := range s {
		rw := widths.RuneWidth(r)
		if used+rw > w-1 {
			break
		}
		out = append(out, r)
		used += rw
	}
	return string(out) + "…"
}
