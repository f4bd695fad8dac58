package termsafe

import (
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
