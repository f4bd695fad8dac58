package spell

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b       string
		osa, plain int
	}{
		{"", "", 0, 0},
		{"", "abc", 3, 3},
		{"abc", "abc", 0, 0},
		{"kitten", "sitting", 3, 3},
		{"flor", "floor", 1, 1},
		{"ab", "ba", 1, 2},
		{"cnacel", "cancel", 1, 2},
		{"quantity", "quantityinstock", 7, 7},
		{"abc", "xyz", 3, 3},
	} {
		// No limit: the exact distance, whichever way round.
		assert.Equal(t, tt.osa, Distance(tt.a, tt.b, math.MaxInt), "Distance(%q, %q)", tt.a, tt.b)
		assert.Equal(t, tt.osa, Distance(tt.b, tt.a, math.MaxInt), "Distance(%q, %q)", tt.b, tt.a)
		assert.Equal(t, tt.plain, Levenshtein(tt.a, tt.b, math.MaxInt), "Levenshtein(%q, %q)", tt.a, tt.b)
		assert.Equal(t, tt.plain, Levenshtein(tt.b, tt.a, math.MaxInt), "Levenshtein(%q, %q)", tt.b, tt.a)
		// A limit leaves results below it exact and keeps the others at or above it.
		for limit := 0; limit <= tt.plain+1; limit++ {
			for _, got := range []struct{ d, want int }{
				{Distance(tt.a, tt.b, limit), tt.osa},
				{Levenshtein(tt.a, tt.b, limit), tt.plain},
			} {
				if got.want < limit {
					assert.Equal(t, got.want, got.d, "%q, %q under limit %d", tt.a, tt.b, limit)
				} else {
					assert.GreaterOrEqual(t, got.d, limit, "%q, %q under limit %d", tt.a, tt.b, limit)
				}
			}
		}
	}
}

func TestDistanceStopsEarly(t *testing.T) {
	long := string(make([]byte, 1<<20))
	var d, l int
	allocs := testing.AllocsPerRun(10, func() {
		d, l = Distance("name", long, 3), Levenshtein(long, "name", 3)
	})
	assert.Zero(t, allocs, "far apart in length: no rows are built")
	assert.GreaterOrEqual(t, d, 3)
	assert.GreaterOrEqual(t, l, 3)
}

func TestNearest(t *testing.T) {
	fields := []string{"sku", "name", "price", "quantity_in_stock", "category"}
	for _, tt := range []struct {
		x          string
		candidates []string
		want       string
		why        string
	}{
		{"quantity", fields, "quantity_in_stock", "contained"},
		{"qty", fields, "quantity_in_stock", "letters in order"},
		{"Price", fields, "price", "case ignored"},
		{"prcie", fields, "price", "a swap"},
		{"ba", []string{"ab", "xyz"}, "ab", "a swap is one edit"},
		{"catgory", fields, "category", "one edit"},
		{"$eqq", []string{"$eq", "$ne"}, "$eq", "separators ignored"},
		{"", fields, "", "nothing to match"},
		{"__", fields, "", "nothing left after folding"},
		{"e", fields, "", "too short to guess among many"},
		{"colour", fields, "", "nothing close"},
		{"amount", []string{"transaction_amount", "amount_due_total"}, "", "two contain it"},
		{"tmt", []string{"transaction_amount", "timestamp"}, "", "two have its letters in order"},
		{"nam", []string{"name", "nap"}, "name", "the first closest wins"},
		{"x", nil, "", "no candidates"},
	} {
		assert.Equal(t, tt.want, Nearest(tt.x, tt.candidates), "Nearest(%q): %s", tt.x, tt.why)
	}
}
