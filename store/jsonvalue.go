package store

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendMarshal appends v as encoding/json's Marshal writes it, byte for byte, for the values rows
// and where-filters hold (nil, string, bool, int64, int, finite float64, map[string]any and
// []any of them); for anything else (or a NaN or infinite float, which json.Marshal refuses) it
// calls json.Marshal. A run records a predicate read's filter with every read: the reflection
// and sorting of json.Marshal cost more than the read.
func AppendMarshal(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendJSONString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			break
		}
		return AppendJSONFloat(b, v), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		var small [8]string
		keys := small[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, k)
			b = append(b, ':')
			var err error
			if b, err = AppendMarshal(b, v[k]); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = AppendMarshal(b, x); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, raw...), nil
}

// AppendJSONFloat writes a finite f as encoding/json does (its floatEncoder): 'f' format, or 'e'
// for very small and very large magnitudes, with a one-digit negative exponent.
func AppendJSONFloat(b []byte, f float64) []byte {
	// A whole number below 2^53 (a price, a count, a stock read as a float) is its integer's
	// digits: every integer there is exact and the next float is at most 1 away, so no shorter
	// digits round to it. Not -0, which is written "-0".
	if i := int64(f); float64(i) == f && i > -1<<53 && i < 1<<53 && (i != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, i, 10)
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// special8 marks, in the high bit of each byte of x (little-endian), the bytes that need a look;
// its lowest mark is the first such byte exactly (the marks above it may be false: the
// subtractions borrow upwards only).
func special8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// A byte c of x is 0 in x^(ones*c), which v-ones&^v marks (written out, no closure, so that
	// special8 is inlined in AppendJSONString's loop).
	q, bs, lt, gt, am := x^(ones*'"'), x^(ones*'\\'), x^(ones*'<'), x^(ones*'>'), x^(ones*'&')
	return (x | // 0x80 and above
		(x-ones*0x20)&^x | // below 0x20
		(q-ones)&^q | (bs-ones)&^bs | (lt-ones)&^lt | (gt-ones)&^gt | (am-ones)&^am) & highs
}

const hexDigits = "0123456789abcdef"

// jsonSafe holds the ASCII bytes encoding/json writes as they are (with HTML escaping).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendJSONString appends s as encoding/json writes a string (HTML characters escaped, invalid
// UTF-8 as \ufffd, U+2028 and U+2029 escaped).
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a look (issue 32: the audit record's text).
		for i+8 <= len(s) {
			m := special8(binary.LittleEndian.Uint64([]byte(s[i : i+8])))
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3 // to the first that needs one
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
