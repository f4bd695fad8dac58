package bolt

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The key order encoding is tested in store (keyenc_test.go); these are the index values'.

func TestIndexValue(t *testing.T) {
	values := []any{nil, false, true, 0.0, math.Copysign(0, -1), 1.0, -1.0, 0.5, -0.5, math.Inf(1), math.Inf(-1),
		math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 80.0,
		"", "a", "A", "ab", "a\x00", "a\x00b", "\x00", "\x00\x01", "\x01", "\xff", "AVIATOR", "aviator", "\xc3("}
	for _, a := range values {
		ea := appendIndexValue(nil, a)
		for _, b := range values {
			eb := appendIndexValue(nil, b)
			assert.Equal(t, any(a) == any(b), bytes.Equal(ea, eb), "values %#v and %#v", a, b)
			if !bytes.Equal(ea, eb) {
				assert.False(t, bytes.HasPrefix(eb, ea), "%#v's encoding is a prefix of %#v's", a, b)
			}
			c := table.CompareKeys(a, b) // kinds, and numbers, in key order
			if sa, ok := a.(string); ok {
				if sb, ok := b.(string); ok {
					c = strings.Compare(sa, sb) // text in byte order
				}
			}
			if c != 0 {
				assert.Equal(t, c, bytes.Compare(ea, eb), "values %#v and %#v", a, b)
			}
		}
	}
	// A text past maxIndexValue encodes as its hash: equal texts alike, others not, none a
	// prefix of another, and the length bounded whatever the text's.
	long := strings.Repeat("x", maxIndexValue)
	longs := []string{long, long + "y", long + "x", strings.Repeat("x", 40000), "\x00" + long}
	for _, a := range longs {
		ea := appendIndexValue(nil, a)
		assert.Equal(t, byte(ivLong), ea[0])
		assert.Len(t, ea, 33)
		for _, b := range append(longs, "x", "") {
			eb := appendIndexValue(nil, b)
			assert.Equal(t, a == b, bytes.Equal(ea, eb), "%q… and %q…", a[:3], b[:min(3, len(b))])
			if a != b {
				assert.False(t, bytes.HasPrefix(eb, ea) || bytes.HasPrefix(ea, eb))
			}
		}
	}
	assert.Less(t, len(appendIndexValue(nil, long[:maxIndexValue-3])), maxIndexValue+1, "a shorter text is stored as it is")
	assert.Equal(t, byte(ivString), appendIndexValue(nil, long[:maxIndexValue-3])[0])
	assert.Panics(t, func() { appendIndexValue(nil, math.NaN()) })
	assert.Panics(t, func() { appendIndexValue(nil, int64(1)) })
	assert.Panics(t, func() { appendIndexValue(nil, float32(1)) })
}

// indexValueOf makes an index value of kind k (mod 4) from s or x.
func indexValueOf(k byte, s string, x float64) (any, bool) {
	switch k % 4 {
	case 0:
		return nil, true
	case 1:
		return len(s)%2 == 1, true
	case 2:
		return x, !math.IsNaN(x)
	}
	return s, true
}

func FuzzIndexValue(f *testing.F) {
	f.Add(byte(2), "", 0.0, byte(2), "", math.Copysign(0, -1))
	f.Add(byte(3), "a", 0.0, byte(3), "a\x00", 0.0)
	f.Add(byte(3), "a\x00", 0.0, byte(3), "a\x00\x01", 0.0)
	f.Add(byte(1), "x", 0.0, byte(1), "", 0.0)
	f.Fuzz(func(t *testing.T, ka byte, sa string, xa float64, kb byte, sb string, xb float64) {
		a, okA := indexValueOf(ka, sa, xa)
		b, okB := indexValueOf(kb, sb, xb)
		if !okA || !okB {
			return
		}
		ea, eb := appendIndexValue(nil, a), appendIndexValue(nil, b)
		if (a == b) != bytes.Equal(ea, eb) {
			t.Fatalf("values %#v and %#v: encodings %x and %x", a, b, ea, eb)
		}
		if !bytes.Equal(ea, eb) && (bytes.HasPrefix(ea, eb) || bytes.HasPrefix(eb, ea)) {
			t.Fatalf("values %#v and %#v: encodings %x and %x, one a prefix of the other", a, b, ea, eb)
		}
	})
}

// FuzzIndexEntryFoldsAsIndexKey holds appendIndexEntry's fold of ASCII text as it encodes to
// indexKey's table.FoldKey then appendIndexValue, for any text: ASCII or not, letters of both
// cases, escapes, past maxIndexValue.
func FuzzIndexEntryFoldsAsIndexKey(f *testing.F) {
	f.Add("Classic Aviator 12")
	f.Add("ALREADY UPPER")
	f.Add("a\x00b`{@[")
	f.Add("Straße ǅ")
	f.Add(strings.Repeat("long text ", 30))
	f.Fuzz(func(t *testing.T, s string) {
		ek := store.AppendKey(nil, "SG001")
		got, ok := appendIndexEntry(nil, s, ek)
		require.True(t, ok)
		ik, ok := indexKey(s)
		require.True(t, ok)
		require.Equal(t, append(appendIndexValue(nil, ik), ek...), got, "%q", s)
	})
}
