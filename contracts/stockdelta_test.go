package contracts

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
)

// stockDelta subtracts two int64 stocks without big.Float when the difference fits in an
// int64; it must give what big.Float's exact difference, rounded once, gives.
func TestStockDeltaOfIntegersIsExact(t *testing.T) {
	vals := []int64{0, 1, -1, 2, 1 << 53, 1<<53 + 1, -(1<<53 + 1), 1<<62 + 3, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1, 123456789012345678}
	for _, b := range vals {
		for _, a := range vals {
			d, changed, ok := stockDelta(b, a)
			assert.True(t, ok)
			assert.Equal(t, b != a, changed)
			want, _ := new(big.Float).Sub(new(big.Float).SetInt64(b), new(big.Float).SetInt64(a)).Float64()
			if b == a {
				want = 0
			}
			assert.Equal(t, want, d, "%d - %d", b, a)
		}
	}
}
