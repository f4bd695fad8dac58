package prompts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/starplan/starplan/prompts"
)

func TestEstimateTokens(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"   \t ", 0},
		{"hello world", 2},
		{"quantity_in_stock", 3},    // quantity, _in, _stock
		{"internationalization", 3}, // 20 letters: one token per started 8
		{"2025", 2},                 // digits go in threes
		{"a\nb\n", 4},               // line breaks count
		{`{"price":80.0}`, 7},       // {" price ": 80 . 0 }
		{"x -> y", 3},               // a punctuation run is one token per two characters
		{"Grüße, 世界", 3},            // letters of any script
	} {
		assert.Equal(t, tc.want, prompts.EstimateTokens(tc.text), "%q", tc.text)
	}
}
