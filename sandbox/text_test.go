package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/diag"
)

// A program whose text holds a character that makes what a reviewer reads differ from what runs
// is rejected at the check, with the character's exact position, before anything runs.
func TestCheckRejectsControlCharactersInProgramText(t *testing.T) {
	tests := []struct {
		name, src string
		line, col int
		mention   string
	}{
		{"NUL hides the rest of the file", "x = 1\n# done\x00\nSTATUS = \"hidden\"\n", 2, 7, "U+0000"},
		{"NUL at the very end", "x = 1\n\x00\n", 2, 1, "U+0000"},
		{"ESC in a comment", "# \x1b[8m concealed\nx = 1\n", 1, 3, "U+001B"},
		{"ESC in a string literal", "s = \"\x1b]0;pwned\x07\"\n", 1, 6, "U+001B"},
		{"BEL", "x = 1 # \x07\n", 1, 9, "U+0007"},
		{"backspace", "x = 1 # ok\b\bno\n", 1, 11, "U+0008"},
		{"form feed", "x = 1\n\f\ny = 2\n", 2, 1, "U+000C"},
		{"vertical tab", "x = 1\v\n", 1, 6, "U+000B"},
		{"DEL", "x = 1 # \x7f\n", 1, 9, "U+007F"},
		{"C1 CSI", "s = \"\u009b2J\"\n", 1, 6, "U+009B"},
		{"C1 NEL", "x = 1 # a\u0085b\n", 1, 10, "U+0085"},
		{"lone carriage return hides code behind a comment", "x = 1 # note\rSTATUS = \"hidden\"\n", 1, 13, "carriage return"},
		{"right-to-left override (Trojan Source)", "access = \"user\" # \u202e } \u2066if admin\u2069 \u2066\n", 1, 19, "U+202E"},
		{"left-to-right isolate", "s = \"\u2066x\u2069\"\n", 1, 6, "U+2066"},
		{"right-to-left mark", "x = 1 # \u200f\n", 1, 9, "U+200F"},
		{"Arabic letter mark", "x = 1 # \u061c\n", 1, 9, "U+061C"},
		{"line separator", "x = 1 # a\u2028STATUS = 2\n", 1, 10, "U+2028"},
		{"invalid UTF-8", "x = 1 # \xff\n", 1, 9, "0xff"},
		{"column in characters", "s = \"日本語\" # \x1b\n", 1, 13, "U+001B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testEnv().Check(tt.src, Limits{})
			require.Nil(t, c.Program, "the program must not be accepted")
			require.NotEmpty(t, c.Diagnostics)
			d := c.Diagnostics[0]
			assert.Equal(t, CodeControlChar, d.Code, d.String())
			assert.Equal(t, diag.StageCheck, d.Stage)
			assert.Equal(t, tt.line, d.Line, d.String())
			assert.Equal(t, tt.col, d.Col, d.String())
			assert.Contains(t, d.Message, tt.mention)
			assert.NotEmpty(t, d.Hint)
			assert.Equal(t, tt.src, c.Extracted, "the program shown is the text that was checked")
		})
	}
}

func TestCheckAcceptsTabsLineBreaksAndEscapes(t *testing.T) {
	for _, src := range []string{
		"x = 1\t# a tab before a comment\ns = \"a\tb\"\n",
		"x = 1\r\ny = 2\r\n",                         // CR LF line ends
		"s = \"\\x1b[2J\\x07\\u202e\\u009b\\x00\"\n", // escapes are text
		"s = \"Größe 42 €, 日本語, 😀, e\u0301\"\n",      // ordinary Unicode
		"s = \"👨\u200d👩\u200d👧\"\n",                  // a zero-width joiner in an emoji
	} {
		c := testEnv().Check(src, Limits{})
		assert.Empty(t, c.Diagnostics, "%q", src)
		assert.NotNil(t, c.Program, "%q", src)
	}
}

// The program reported is the whole text, and nothing of it runs: before, a NUL made the
// scanner stop and the engine ran the prefix while the reviewer read the whole file.
func TestRunOfANULProgramRunsNothing(t *testing.T) {
	src := "STATUS = \"success\"\nanswer_text = \"nothing happened\"\n# \x00\nSTATUS = \"hidden\"\n"
	res := testEnv().Run(context.Background(), Request{Reply: "<execute_python>\n" + src + "</execute_python>"})
	assert.Equal(t, OutcomeCheckFailed, res.Outcome)
	assert.Equal(t, src, res.Program)
	assert.Zero(t, res.Steps)
	assert.Empty(t, res.Globals)
	require.Len(t, res.Diagnostics, 1)
	assert.Equal(t, "3:3: program-control-char", res.Diagnostics[0].String()[:len("3:3: program-control-char")])
}

func TestCheckTextReportsAtMostTenFindings(t *testing.T) {
	c := testEnv().Check("x = 1 # "+strings.Repeat("\x1b", 25)+"\n", Limits{})
	require.Len(t, c.Diagnostics, maxTextDiagnostics)
	assert.Contains(t, c.Diagnostics[maxTextDiagnostics-1].Message, "and 15 more")
	for i, d := range c.Diagnostics {
		assert.Equal(t, 9+i, d.Col)
	}
}
