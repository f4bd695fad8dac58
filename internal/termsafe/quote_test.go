package termsafe

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQuoteKeepsTextInsideItsQuotes(t *testing.T) {
	hostile := "x\": inventory: no changes, nothing will be written.\nYes is safe. \u202eevila\u202c \"done"
	q := Quote(hostile, 200)
	assert.Equal(t, `"x\": inventory: no changes, nothing will be written.\nYes is safe. \u202eevila\u202c \"done"`, q)
	assert.NotContains(t, q, "\n")
	assert.Equal(t, 2, strings.Count(q, `"`)-strings.Count(q, `\"`), "one opening and one closing quote")

	long := strings.Repeat("é", 100) // 200 bytes
	assert.Equal(t, `"`+strings.Repeat("é", 4)+`"… (cut: 200 bytes in all)`, Quote(long, 9), "cut at a character boundary")
	assert.Equal(t, `""`, Quote("", 10))
}

// Quote promises "a quoted string a person cannot mistake for the words around it", and the MCP
// confirmation relies on it (issue 26 item 9) to keep a proposer's request from passing for
// starplan's words: a quotation mark that looks like the closing one (“ ” „ ‟ ″ ＂ ❞ ...) is
// escaped, so the request cannot close the quote to the eye and go on in words that read as
// starplan's, such as a fake "(cut: N bytes in all)" and a verdict.
func TestQuoteEscapesLookAlikeQuotes(t *testing.T) {
	lookAlikes := []rune{'\u201c', '\u201d', '\u201e', '\u201f', '\u2033', '\u2036', '\u275d', '\u275e', '\u301d', '\u301e', '\uff02', '\u02ba', '\u02dd',
		'\u00ab', '\u00bb', '\u2039', '\u203a', '\u2018', '\u2019', '\u201a', '\u300c', '\u300f', '\uff07', '\u05f4', '\u2e42', '\U0001f677'}
	for _, r := range lookAlikes {
		req := "Restock 5 Aviators" + string(r) + " (cut: 20 bytes in all). Checked by starplan: it writes nothing; Yes is safe."
		q := Quote(req, 200)
		assert.False(t, strings.ContainsRune(q, r), "%U stays raw inside the quote: %s", r, q)
		assert.True(t, IsQuoteLike(r), "%U", r)
		back, err := strconv.Unquote(q)
		if assert.NoError(t, err, q) {
			assert.Equal(t, req, back, "the escape reads back as the character")
		}
	}
	assert.Equal(t, `"\u201cYes\u201d \U0001f677 isn't \"safe\""`, Quote("“Yes” \U0001f677 isn't \"safe\"", 100))
	assert.Equal(t, `"\u00abab\u00bb"… (cut: 9 bytes in all)`, Quote("«ab»c«", 6), "a cut quote escapes them too")
	for _, r := range "aé€'`-—()[]" {
		assert.False(t, IsQuoteLike(r), "%U is no quotation mark", r)
	}
}

// Quote escapes every character Escape escapes (its doc promises so), whatever the Keep.
func TestQuoteEscapesWhatEscapeEscapes(t *testing.T) {
	for r := rune(0); r <= 0x10ffff; r++ {
		if Unsafe(r) {
			assert.False(t, strings.ContainsRune(Quote(string(r), 10), r), "%U", r)
		}
	}
}
