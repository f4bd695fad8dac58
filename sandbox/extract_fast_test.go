package sandbox

import (
	"math/rand"
	"strings"
	"testing"
)

// randomReply builds a text from pieces that matter to extraction: line breaks, indentation,
// blank lines, tags in any case, fences and code.
func randomReply(rng *rand.Rand) string {
	pieces := []string{"\n", "\n\n", " ", "\t", "  ", "x = 1", "# c", "<", "<e", "<execute_python>",
		"</EXECUTE_PYTHON>", "<Execute_Python>", "```", "```python\n", "for a in b:", "\u00a0", "\r\n", "é"}
	var b strings.Builder
	for range rng.Intn(12) {
		b.WriteString(pieces[rng.Intn(len(pieces))])
	}
	return b.String()
}

// The fast paths of Extract decide only what the slow paths would: a text tidied vouches for
// comes out of the full tidy unchanged, and a reply mayHoldTag rules out holds no tag.
func TestExtractFastPathsAgree(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for range 200_000 {
		s := randomReply(rng)
		if tidied(s) && retidy(s) != s {
			t.Fatalf("tidied(%q) but tidy gives %q", s, retidy(s))
		}
		if !mayHoldTag(s) && tagOpen.MatchString(s) {
			t.Fatalf("mayHoldTag(%q) is false but it holds a tag", s)
		}
	}
}

// checkText's pass over printable ASCII allows exactly what textProblem allows.
func TestCheckTextASCIIPass(t *testing.T) {
	for c := 0; c < 0x80; c++ {
		src := "a" + string(rune(c)) + "b\n"
		what, _ := textProblem(src, 1, rune(c), 1)
		if got := len(checkText(src)) > 0; got != (what != "") {
			t.Errorf("byte 0x%02x: checkText refuses it: %v, textProblem: %q", c, got, what)
		}
	}
}
