package termsafe

import (
	"fmt"
	"strconv"
)

// Quote returns s as a quoted string a person cannot mistake for the words around it: in double
// quotes, with every quote, backslash, line break and character Escape would escape written as
// a Go (and, for these characters, JSON) escape (\", \n, \u202e), so it stays on one line and
// ends where its closing quote is. A text longer than max bytes is cut at a UTF-8 boundary
// first, and the quote is followed by how long it was: "…" (cut: 5000 bytes in all). Use it
// wherever a person reads text someone else wrote (a proposer's request) beside starplan's own
// words before deciding.
func Quote(s string, max int) string {
	if len(s) <= max {
		return strconv.Quote(s)
	}
	i := max
	for i > 0 && s[i]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		i--
	}
	return fmt.Sprintf("%s… (cut: %d bytes in all)", strconv.Quote(s[:i]), len(s))
}
