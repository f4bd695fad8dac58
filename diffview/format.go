package diffview

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/starplan/starplan/internal/termsafe"
)

// show renders a cell value for people: strings as they are, other values as Python's repr
// shows them. A string that is empty or starts or ends with whitespace is quoted, so that the
// whitespace can be seen. Control and format characters are escaped; a line break is kept, and
// the layout decides what to do with it.
func show(v any) string {
	if s, ok := v.(string); ok && s != "" && strings.TrimSpace(s) == s {
		return escape(s, true)
	}
	var sb strings.Builder
	repr(&sb, v)
	return sb.String()
}

// Value renders one field value as the people views show it: strings as they are, other values
// as Python's repr (None, True, 80.0, ['a', 1], {'k': 2.0} with keys sorted), control and format
// characters escaped.
func Value(v any) string { return show(v) }

// showPair shows both sides of a change; when they would read the same (the string "1" and the
// int 1), both are shown as Python's repr.
func showPair(old, new any) (string, string) {
	a, b := show(old), show(new)
	if a == b {
		var sa, sb strings.Builder
		repr(&sa, old)
		repr(&sb, new)
		return sa.String(), sb.String()
	}
	return a, b
}

// isLong reports whether v is long text (see LongCell).
func isLong(v any) bool {
	s, ok := v.(string)
	return ok && (strings.IndexByte(s, '\n') >= 0 || utf8.RuneCountInString(s) > LongCell)
}

// repr writes v as Python's repr would: None, True, 80.0, 'text', [1, 'a'], {'k': 2} (keys
// sorted). Values of kinds a row cannot hold are written as Go prints them.
func repr(sb *strings.Builder, v any) {
	switch v := v.(type) {
	case absentValue:
		sb.WriteString("(absent)")
	case nil:
		sb.WriteString("None")
	case bool:
		if v {
			sb.WriteString("True")
		} else {
			sb.WriteString("False")
		}
	case string:
		quote := byte('\'')
		if strings.IndexByte(v, '\'') >= 0 && strings.IndexByte(v, '"') < 0 {
			quote = '"'
		}
		sb.WriteByte(quote)
		for _, r := range escape(v, false) {
			if r == rune(quote) {
				sb.WriteByte('\\')
			}
			sb.WriteRune(r)
		}
		sb.WriteByte(quote)
	case float64:
		sb.WriteString(pyFloat(v))
	case float32:
		sb.WriteString(pyFloat(float64(v)))
	case int64:
		sb.WriteString(strconv.FormatInt(v, 10))
	case int:
		sb.WriteString(strconv.Itoa(v))
	case []any:
		sb.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				sb.WriteString(", ")
			}
			repr(sb, e)
		}
		sb.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			repr(sb, k)
			sb.WriteString(": ")
			repr(sb, v[k])
		}
		sb.WriteByte('}')
	default:
		sb.WriteString(escape(fmt.Sprint(v), false))
	}
}

// pyFloat renders f as Python's repr does: the shortest text that reads back as f, with a
// decimal point ("80.0"), in exponent form below 1e-4 and from 1e16 ("1e-05", "1e+16").
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if f != 0 && (exp < -4 || exp >= 16) {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if strings.IndexByte(s, '.') < 0 {
		s += ".0"
	}
	return s
}

// escape makes characters that a terminal or a reader would not see as themselves visible
// (termsafe.Escape: \t, \r, \x1b, \u200b, \u202e, invalid bytes as \xff). A tab is always
// escaped, since the layout measures columns; a line break is kept when keepNewline is set and
// escaped as \n otherwise.
func escape(s string, keepNewline bool) string {
	if keepNewline {
		return termsafe.Escape(s, termsafe.KeepNewline)
	}
	return termsafe.Escape(s, 0)
}

// runeWidth is the number of terminal columns r takes (termsafe measures every layout).
func runeWidth(r rune) int { return termsafe.RuneWidth(r) }
