package pycompat

import (
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/starplan/starplan/internal/testtier"
)

// TestRvfrontHunt renders random lines of tokens and gaps (strings, operators, keywords,
// continuations, comments, CRLF, tabs, non-ASCII and stray bytes) after a line with an f-string,
// line by line and whole, and requires the same result. RVHUNT_SEED picks another sequence.
func TestRvfrontHunt(t *testing.T) {
	seed := uint64(1)
	if s := os.Getenv("RVHUNT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	alpha := []string{`"{:>5}"`, `'%5d'`, `"s"`, `"{}"`, ".", "format", "(", ")", "[", "]", "{", "}", "x", "y", "1", "<", "<=", "==", "!=", "in", "not", "is", "None",
		"for", "if", "else", "and", ",", ":", "=", "%", "+", "*", "\\\n", "\n", " ", "\t", "# c\n", "\"\"\"a\nb\"\"\"", "'''%5d\n'''", `r"%5d"`, `b"%d"`, "f", "lambda",
		"import", "from", "math", "é", "\r\n", "$", ";", "->", ":=", "**", ".5", "1.", "1e5", "0x1f", "\\", "\f", "u", "\x80", "'", "\"", "    ", "\n    ", "return", "def", "as", "*", "%=", "f'{y}'", "rb'%d'", "#'\n", "\\\r\n", ".          format", "(x for", "[x for", "% (", "\"{0:{1}}\"", "\"%(a)s\"", "not in", "is not", ".format(", "\n\t", "1if", "0b1", "0o7", "1j", "1_0"}
	rng := rand.New(rand.NewPCG(seed, 2))
	n := 0
	for range testtier.Size(10_000, 2_000_000) {
		var sb strings.Builder
		k := 2 + rng.IntN(14)
		for range k {
			sb.WriteString(alpha[rng.IntN(len(alpha))])
			if rng.IntN(3) == 0 {
				sb.WriteByte(' ')
			}
		}
		line := sb.String()
		src := line
		if rng.IntN(2) == 0 {
			src = "a = f\"{x:>3}\"\n" + line
		}
		if !reflect.DeepEqual(translate(src, testOpts, true), translate(src, testOpts, false)) {
			t.Errorf("differs: %q", src)
			n++
			if n > 10 {
				return
			}
		}
	}
}
