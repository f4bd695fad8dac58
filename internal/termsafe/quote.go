package termsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Quote returns s as a quoted string a person cannot mistake for the words around it: in double
// quotes, with every quote, backslash, line break and character Escape would escape written as
// a Go (and, for these characters, JSON) escape (\", \n, \u202e), so it stays on one line and
// ends where its closing quote is. Characters that look like a quotation mark (IsQuoteLike: “ ”
// „ ＂ « » ❞ ...) are escaped too (\u201d), so the text cannot appear to close its quote and go on
// in words that read as the caller's. A text longer than max bytes is cut at a UTF-8 boundary
// first, and the quote is followed by how long it was: "…" (cut: 5000 bytes in all). Use it
// wherever a person reads text someone else wrote (a proposer's request) beside starplan's own
// words before deciding.
func Quote(s string, max int) string {
	if len(s) <= max {
		return quote(s)
	}
	i := max
	for i > 0 && s[i]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		i--
	}
	return fmt.Sprintf("%s… (cut: %d bytes in all)", quote(s[:i]), len(s))
}

// quote is strconv.Quote with the quote-like characters it keeps (they are printable) escaped.
// strconv.Quote writes every escape in ASCII, so a non-ASCII character in its output is one of
// s's own, shown as itself.
func quote(s string) string {
	q := strconv.Quote(s)
	if !strings.ContainsFunc(q, IsQuoteLike) {
		return q
	}
	var sb strings.Builder
	sb.Grow(len(q) + 8)
	for _, r := range q {
		switch {
		case !IsQuoteLike(r):
			sb.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			fmt.Fprintf(&sb, `\U%08x`, r)
		}
	}
	return sb.String()
}

// quoteLookAlikes are the characters outside the categories IsQuoteLike takes whole that a reader
// can take for a quotation mark: primes and double primes, modifier letters and accents shaped
// like " or ', the Hebrew geresh and gershayim, the ditto mark, and the dingbat and ornament
// quotation marks (category So).
var quoteLookAlikes = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x02b9, Hi: 0x02bd, Stride: 1}, // ʹ ʺ ʻ ʼ ʽ
		{Lo: 0x02dd, Hi: 0x02dd, Stride: 1}, // ˝
		{Lo: 0x02ee, Hi: 0x02ee, Stride: 1}, // ˮ
		{Lo: 0x05f3, Hi: 0x05f4, Stride: 1}, // ׳ ״
		{Lo: 0x2032, Hi: 0x2037, Stride: 1}, // ′ ″ ‴ ‵ ‶ ‷
		{Lo: 0x2057, Hi: 0x2057, Stride: 1}, // ⁗
		{Lo: 0x275b, Hi: 0x2760, Stride: 1}, // ❛ ❜ ❝ ❞ ❟ ❠
		{Lo: 0x276e, Hi: 0x276f, Stride: 1}, // ❮ ❯
		{Lo: 0x3003, Hi: 0x3003, Stride: 1}, // 〃
	},
	R32: []unicode.Range32{
		{Lo: 0x1f676, Hi: 0x1f678, Stride: 1}, // 🙶 🙷 🙸
	},
}

// IsQuoteLike reports whether r is a non-ASCII character a reader can take for a quotation mark:
// the initial and final quotation marks (categories Pi and Pf: “ ” ‘ ’ « » ‹ ›), the characters
// with Unicode's Quotation_Mark property („ ‟ ＂ ＇ 「 」 〝 〞 ...) and the look-alikes in
// quoteLookAlikes (″ ʺ ˝ ❞ ...). Quote escapes them; Escape does not, since in the text it makes
// safe (names, messages, rows) they are ordinary punctuation and nothing is delimited by quotes.
func IsQuoteLike(r rune) bool {
	return r > 0x7f && unicode.In(r, unicode.Pi, unicode.Pf, unicode.Quotation_Mark, quoteLookAlikes)
}
