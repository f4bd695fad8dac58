package pycompat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// rvfrontFormatGaps are str.format calls whose `.` and `format` are apart: tryStrFormat reads
// the tokens (string, `.`, `format`, `(`) whatever gap separates them, so the pre-scan must look
// past the same gaps (many spaces, tabs, a form feed, a line break inside brackets, a comment,
// a backslash continuation, CRLF).
var rvfrontFormatGaps = []string{
	"s = \"{:>5}\".               format(x)\n",
	"s = \"{:>5}\"\t.\t\t\t\t\t\t\t\t\t\t\t\t\t\t\tformat(x)\n",
	"s = \"{:>5}\".\f\fformat(x)\n",
	"s = (\"{:>5}\".\n      format(x))\n",
	"s = (\"{:>5}\".\r\n      format(x))\n",
	"s = (\"{:>5}\".  # pad it\n      format(x))\n",
	"s = \"{:>5}\".\\\nformat(x)\n",
	"s = \"{:>5}\".\\\r\nformat(x)\n",
}

// TestRvfrontByLineMatchesFullAfterFormatGap: a line whose `.format` is far from its `.` is
// rendered by the full pass (another line of the program has an f-string, so the whole-program
// pre-scan says yes) and must be rendered by the line-by-line pass too.
func TestRvfrontByLineMatchesFullAfterFormatGap(t *testing.T) {
	for _, line := range rvfrontFormatGaps {
		src := "a = f\"{x:>3}\"\n" + line
		full, byLine := translate(src, testOpts, false), translate(src, testOpts, true)
		require.Len(t, full.Rewrites, 2, "%q: the full pass rewrites both lines", src)
		require.Equal(t, full, byLine, "%q", src)
	}
}

// TestRvfrontPrescanSeesFormatAfterGap: the same line alone is rewritten too (the whole-program
// pre-scan must not skip it).
func TestRvfrontPrescanSeesFormatAfterGap(t *testing.T) {
	for _, line := range rvfrontFormatGaps {
		require.True(t, mayNeedRewrite(line), "%q", line)
		require.NotEmpty(t, Translate(line, testOpts).Rewrites, "%q", line)
	}
}

// TestRvfrontPrescanReadsNumbersAsTheTokenizer: the tokenizer reads .0band as the number .0 and
// the name band; a pre-scan reading . and 0b and the keyword and would end the comparison there
// and pass a line whose chain the renderer splits (only in a text that does not parse, since two
// operands meet, but by-line and full rendering must still agree).
func TestRvfrontPrescanReadsNumbersAsTheTokenizer(t *testing.T) {
	for _, line := range []string{
		"ok = a < .0band < c\n",
		"ok = a in .0x1freturn == b\n",
	} {
		require.True(t, mayNeedRewrite(line), "%q", line)
		src := "a = f\"{x:>3}\"\n" + line
		require.Equal(t, translate(src, testOpts, false), translate(src, testOpts, true), "%q", src)
	}
}
