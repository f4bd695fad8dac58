package table

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCompareKeysOrder(t *testing.T) {
	// Every element is strictly less than the next.
	ordered := []any{
		nil,
		false, true,
		math.NaN(), math.Inf(-1), int64(math.MinInt64), -1.5, int64(-1), int64(0), 0.5, int64(1), 1.5,
		int64(1<<53 + 1), float64(1 << 54), int64(math.MaxInt64), math.Inf(1),
		"", "0", "00", "01", "1", "2", "10", "A", "A09", "A9", "A10", "TXN001", "TXN9", "TXN010",
		"TXN10", "TXN11", "TXN99999999999999999999999", "TXN100000000000000000000000", "TXNa",
		"a", "a1b", "a1c", "a01d", "txn10", "é",
		[]any{"other kinds sort last"},
	}
	for i := range ordered {
		for j := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			assert.Equal(t, want, CompareKeys(ordered[i], ordered[j]), "CompareKeys(%#v, %#v)", ordered[i], ordered[j])
		}
	}
}

func TestCompareKeysEqualNumbers(t *testing.T) {
	assert.Equal(t, 0, CompareKeys(int64(5), 5.0))
	assert.Equal(t, 0, CompareKeys(5, int64(5)))
	assert.Equal(t, 0, CompareKeys(float32(2.5), 2.5))
	assert.Equal(t, 0, CompareKeys(int32(-3), -3.0))
	assert.Equal(t, 0, CompareKeys(math.NaN(), math.NaN()))
	assert.Equal(t, 1, CompareKeys(-0x1p63, math.Inf(-1)))
	assert.Equal(t, 0, CompareKeys(-0x1p63, int64(math.MinInt64)))
	assert.Equal(t, 1, CompareKeys(0x1p63, int64(math.MaxInt64)))
	assert.Equal(t, -1, CompareKeys(int64(math.MaxInt64), 0x1p63))
}

func TestCompareKeysSorts(t *testing.T) {
	keys := []any{"TXN10", "TXN2", int64(3), "TXN1", 2.5, "TXN002"}
	slices.SortFunc(keys, CompareKeys)
	assert.Equal(t, []any{2.5, int64(3), "TXN1", "TXN002", "TXN2", "TXN10"}, keys)
}

func TestCompareKeysDoesNotAllocate(t *testing.T) {
	skipUnderRace(t)
	pairs := [][2]any{{"TXN9", "TXN10"}, {int64(1), 2.5}, {"a", int64(1)}, {nil, true}, {"x01", "x1"}}
	allocs := testing.AllocsPerRun(100, func() {
		for _, p := range pairs {
			CompareKeys(p[0], p[1])
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkCompareKeys(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		CompareKeys("TXN000123", "TXN000124")
	}
}

// FuzzCompareKeys checks that the order is antisymmetric, transitive and total (0 only for
// equal strings) over arbitrary strings and numbers.
func FuzzCompareKeys(f *testing.F) {
	f.Add("TXN9", "TXN10", "TXN010", int64(3), 2.5)
	f.Add("a01", "a1", "a001b", int64(-1), math.Inf(1))
	f.Fuzz(func(t *testing.T, a, b, c string, i int64, x float64) {
		vals := []any{a, b, c, i, x}
		for _, p := range vals {
			for _, q := range vals {
				pq, qp := CompareKeys(p, q), CompareKeys(q, p)
				if pq != -qp {
					t.Fatalf("not antisymmetric: %#v %#v: %d %d", p, q, pq, qp)
				}
				ps, pIsStr := p.(string)
				qs, qIsStr := q.(string)
				if pIsStr && qIsStr && (pq == 0) != (ps == qs) {
					t.Fatalf("0 for unequal strings %q %q", ps, qs)
				}
				for _, r := range vals {
					if pq <= 0 && CompareKeys(q, r) <= 0 && CompareKeys(p, r) > 0 {
						t.Fatalf("not transitive: %#v <= %#v <= %#v but %#v > %#v", p, q, r, p, r)
					}
				}
			}
		}
	})
}
