package diffview

import (
	"github.com/starplan/starplan/internal/termsafe"
	"slices"
	"strings"
)

// style is how a piece of terminal text is shown when colour is on.
type style uint8

const (
	plain style = iota
	bold
	dim
	removed // red
	added   // green
)

var sgr = [...]string{plain: "", bold: "\x1b[1m", dim: "\x1b[2m", removed: "\x1b[31m", added: "\x1b[32m"}

const sgrReset = "\x1b[0m"

// glyph is one character of styled text.
type glyph struct {
	r  rune
	st style
}

// text is styled terminal text, measured and wrapped by display columns.
type text []glyph

func (t *text) add(s string, st style) {
	*t = slices.Grow(*t, len(s))
	for _, r := range s {
		*t = append(*t, glyph{r, st})
	}
}

// width is the number of columns t takes on one line.
func (t text) width() int {
	w := 0
	for _, g := range t {
		w += runeWidth(g.r)
	}
	return w
}

func strWidth(s string) int { return termsafe.Width(s) }

// write renders t, with ANSI colour when color is set. Trailing spaces are dropped, and every
// coloured run is closed, so a line never leaks its style into the next.
func (t text) write(sb *strings.Builder, color bool) {
	for len(t) > 0 && t[len(t)-1].r == ' ' {
		t = t[:len(t)-1]
	}
	for i := 0; i < len(t); {
		j := i
		for j < len(t) && t[j].st == t[i].st {
			j++
		}
		on := color && t[i].st != plain
		if on {
			sb.WriteString(sgr[t[i].st])
		}
		for _, g := range t[i:j] {
			sb.WriteRune(g.r)
		}
		if on {
			sb.WriteString(sgrReset)
		}
		i = j
	}
}

// wrap breaks t into lines of at most width columns: at line breaks, at spaces between words
// (the spaces at a break are dropped), and inside a word only when the word alone is wider than
// a line.
func wrap(t text, width int) []text {
	width = max(width, 1)
	var lines []text
	var line text
	lw := 0
	flush := func() {
		lines = append(lines, line)
		line, lw = nil, 0
	}
	for i := 0; i < len(t); {
		switch t[i].r {
		case '\n':
			flush()
			i++
		case ' ':
			j := i
			for j < len(t) && t[j].r == ' ' {
				j++
			}
			k := wordEnd(t, j)
			if lw > 0 && k > j && lw+(j-i)+t[j:k].width() > width {
				flush()
			} else {
				line = append(line, t[i:j]...)
				lw += j - i
			}
			i = j
		default:
			k := wordEnd(t, i)
			for word := t[i:k]; len(word) > 0; {
				ww := word.width()
				if lw > 0 && lw+ww > width {
					flush()
				}
				if lw+ww <= width {
					line = append(line, word...)
					lw += ww
					break
				}
				n, w := 0, 0 // the longest head of word that fits, at least one glyph
				for n < len(word) && (n == 0 || w+runeWidth(word[n].r) <= width-lw) {
					w += runeWidth(word[n].r)
					n++
				}
				line = append(line, word[:n]...)
				flush()
				word = word[n:]
			}
			i = k
		}
	}
	if len(line) > 0 || len(lines) == 0 {
		lines = append(lines, line)
	}
	return lines
}

func wordEnd(t text, i int) int {
	for i < len(t) && t[i].r != ' ' && t[i].r != '\n' {
		i++
	}
	return i
}
