package termsafe

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWidth(t *testing.T) {
	for s, want := range map[string]int{
		"":             0,
		"Aviator":      7,
		"サングラス":        10, // fullwidth katakana: two columns each
		"太阳镜 round":    12,
		"e\u0301":      1, // e + combining acute
		"😎":            2,
		"\u00e9\u00e9": 2, // precomposed é, ambiguous-free
		"\u00b7middot": 7, // ambiguous width counts one, whatever the locale
	} {
		assert.Equal(t, want, Width(s), "%q", s)
	}
}

func TestTruncate(t *testing.T) {
	assert.Equal(t, "Aviator", Truncate("Aviator", 7))
	assert.Equal(t, "Avia…", Truncate("Aviator", 5))
	assert.Equal(t, "サン…", Truncate("サングラス", 6), "a wide rune that would pass the width is dropped")
	assert.LessOrEqual(t, Width(Truncate("サングラス", 5)), 5)
}
