package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostile holds one of every kind of character a terminal acts on.
var hostile = map[string]struct{ in, out string }{
	"ESC":                {"a\x1bb", `a\x1bb`},
	"OSC window title":   {"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
	"CSI clear screen":   {"\x1b[2J", `\x1b[2J`},
	"CSI conceal":        {"\x1b[8mhidden", `\x1b[8mhidden`},
	"C1 CSI":             {"\u009b2J", `\x9b2J`},
	"C1 NEL":             {"a\u0085b", `a\x85b`},
	"DEL":                {"a\x7fb", `a\x7fb`},
	"NUL":                {"a\x00b", `a\x00b`},
	"backspace":          {"ok\b\bno", `ok\x08\x08no`},
	"carriage return":    {"approved\rrejected", `approved\rrejected`},
	"bidi override":      {"abc\u202edef", `abc\u202edef`},
	"bidi isolate":       {"\u2066x\u2069", `\u2066x\u2069`},
	"bidi marks":         {"\u200e\u200f\u061c", `\u200e\u200f\u061c`},
	"zero-width space":   {"a\u200bb", `a\u200bb`},
	"line separator":     {"a\u2028b\u2029", `a\u2028b\u2029`},
	"invalid UTF-8":      {"a\xffb\xc3", `a\xffb\xc3`},
	"astral format char": {"\U000e0001tag", `\U000e0001tag`},
}

func TestEscapeMakesEveryUnsafeCharacterVisible(t *testing.T) {
	for name, tt := range hostile {
		t.Run(name, func(t *testing.T) {
			got := Escape(tt.in, Text)
			assert.Equal(t, tt.out, got)
			assert.True(t, utf8.ValidString(got))
			for _, r := range got {
				assert.False(t, Unsafe(r) && r != '\n' && r != '\t', "%q left %U raw", got, r)
			}
		})
	}
}

func TestEscapeKeepsLayoutOnlyWhenAsked(t *testing.T) {
	s := "a\tb\nc"
	assert.Equal(t, s, Escape(s, Text))
	assert.Equal(t, "a\\tb\nc", Escape(s, KeepNewline))
	assert.Equal(t, "a\tb\\nc", Escape(s, KeepTab))
	assert.Equal(t, `a\tb\nc`, Escape(s, 0))
	assert.Equal(t, `a\r`+"\n", Escape("a\r\n", Text), "a carriage return is escaped even before a line break")
}

func TestEscapeLeavesOrdinaryTextAlone(t *testing.T) {
	for _, s := range []string{"", "plain ASCII ~!@#$%^&*()\\", "Größe 42 €, 日本語, emoji 😀, e\u0301", "price: $80.00"} {
		assert.Equal(t, s, Escape(s, 0))
	}
}

func TestPredicates(t *testing.T) {
	for _, r := range []rune{0, '\t', '\n', '\r', 0x1b, 0x1f, 0x7f, 0x80, 0x9b, 0x9f} {
		assert.True(t, IsControl(r), "%U", r)
	}
	for _, r := range []rune{' ', '~', 0xa0, 0xe9, 0x202e} {
		assert.False(t, IsControl(r), "%U", r)
	}
	for _, r := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c} {
		assert.True(t, IsBidi(r), "%U", r)
		assert.True(t, Unsafe(r), "%U", r)
	}
	for _, r := range []rune{0x2029, 0x2065, 0x206a, 0x200b, 'a'} {
		assert.False(t, IsBidi(r), "%U", r)
	}
}

func TestJSONEscapesWhatEncodingJSONLeavesRaw(t *testing.T) {
	v := map[string]string{"s": "a\u009b2J\u202eb\u200b\x7f\U000e0001\x1b[8m"}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	doc := JSON(sb.String())
	for _, r := range doc {
		assert.False(t, Unsafe(r) && r != '\n', "%U left raw in %s", r, doc)
	}
	assert.Contains(t, doc, `\u009b`)
	assert.Contains(t, doc, `\u202e`)
	assert.Contains(t, doc, `\udb40\udc01`, "astral characters as a surrogate pair")
	var back map[string]string
	require.NoError(t, json.Unmarshal([]byte(doc), &back))
	assert.Equal(t, v, back, "the escapes decode to the same strings")
	assert.Equal(t, `{"a": 1}`, JSON(`{"a": 1}`))
}
