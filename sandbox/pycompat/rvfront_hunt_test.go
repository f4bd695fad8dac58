package pycompat

import (
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestRvfrontHunt(t *testing.T) {
	if os.Getenv("RVHUNT") == "" {
		t.Skip()
	}
	alpha := []string{`"{:>5}"`, `'%5d'`, `"s"`, `"{}"`, ".", "format", "(", ")", "[", "]", "{", "}", "x", "y", "1", "<", "<=", "==", "!=", "in", "not", "is", "None",
		"for", "if", "else", "and", ",", ":", "=", "%", "+", "*", "\\\n", "\n", " ", "\t", "# c\n", "\"\"\"a\nb\"\"\"", "'''%5d\n'''", `r"%5d"`, `b"%d"`, "f", "lambda",
		"import", "from", "math", "é", "\r\n", "$", ";", "->", ":=", "**", ".5", "1.", "1e5", "0x1f", "\\", "\f", "u", "\x80", "'", "\"", "    ", "\n    ", "return", "def", "as", "*", "%=", "f'{y}'", "rb'%d'", "#'\n", "\\\r\n"}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for it := 0; it < 2_000_000; it++ {
		var sb strings.Builder
		k := 2 + rng.IntN(14)
		for range k {
			sb.WriteString(alpha[rng.IntN(len(alpha))])
			if rng.IntN(3) == 0 {
				sb.WriteByte(' ')
			}
		}
		line := sb.String()
		src := "a = f\"{x:>3}\"\n" + line
		if !reflect.DeepEqual(translate(src, testOpts, true), translate(src, testOpts, false)) {
			t.Errorf("differs: %q", src)
			n++
			if n > 10 {
				return
			}
		}
	}
}
