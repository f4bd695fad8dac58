package store

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sign returns -1, 0 or +1.
func sign(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

// keyEncCmp compares two keys by their encodings.
func keyEncCmp(a, b any) int {
	return sign(bytes.Compare(AppendKey(nil, a), AppendKey(nil, b)))
}

// checkKeyPair checks that the encodings of a and b order them as table.CompareKeys does and
// are distinct when the keys are.
func checkKeyPair(t *testing.T, a, b any) {
	t.Helper()
	want := table.CompareKeys(a, b)
	ea, eb := AppendKey(nil, a), AppendKey(nil, b)
	if got := sign(bytes.Compare(ea, eb)); got != want {
		t.Fatalf("keys %q and %q: CompareKeys says %d, encodings %x and %x say %d", a, b, want, ea, eb, got)
	}
}

func TestKeyOrderPairs(t *testing.T) {
	many := func(s string, n int) string { return strings.Repeat(s, n) }
	tests := []struct {
		a, b string
		want int // table.CompareKeys(a, b), pinned so that a change to it shows here
	}{
		{"TXN9", "TXN010", -1},
		{"TXN9", "TXN10", -1},
		{"TXN10", "txn10", -1},
		{"a", "a1", -1},
		{"a", "a0", -1},
		{"a01", "a1", -1},  // equal numbers: the plain order decides, '0' < '1'
		{"a00", "a0", 1},   // a run of zeros followed by the end: more zeros sorts last
		{"a00-", "a0-", 1}, // ... or by a byte below '0'
		{"a00x", "a0x", -1},
		{"a00:", "a0:", -1},
		{"a01x", "a1x", -1},
		{"a01-", "a1-", -1},
		{"a0/", "a00", 1},   // equal runs, then "/" against the end
		{"1a01", "01a1", 1}, // the first run with different zeros decides
		{"01a1", "1a01", -1},
		{"a\x00", "a", 1},
		{"a\x00", "a\x01", -1},
		{"a\x00b", "a", 1},
		{"a\x00\x00", "a\x00", 1},
		{"a\x00", "a\x00\xff", -1},
		{"", "a", -1},
		{"", "\x00", -1},
		{"", "0", -1},
		{"", "", 0},
		{"x-1", "x1", -1},
		{"x-1", "x-01", 1},
		{"5", "/", 1},
		{"5", ":", -1},
		{"0", "/", 1},
		{"9", ":", -1},
		{"/", "0", -1},
		{"a9z", "a10", -1},
		{"a9", "a/", 1},
		{"a10", "a9:", 1},
		{"\xff", "\xfe\xff", 1},
		{"\xff", "9", 1},
		{"\xc3(", "\xc3", 1}, // invalid UTF-8
		{"007", "7", -1},
		{"7", "0007", 1},
		{"0", "00", -1},
		{"0", "000", -1},
		{"1", "0", 1},
		{"10", "9", 1},
		{"a1b2", "a1b10", -1},
		{"a1b2", "a01b2", 1},
		{"1" + many("0", 99), many("9", 99), 1},
		{many("9", 100), many("9", 100) + "0", -1},
		{many("0", 300) + "5", "5", -1},
		{many("0", 300) + "5", many("0", 299) + "5", -1},
		{many("0", 300), many("0", 299), 1},
		{many("0", 300) + "x", many("0", 299) + "x", -1},
		{"1" + many("0", 249), "1" + many("0", 255), -1}, // lengths of one byte and of two
		{many("0", 250) + "1", many("0", 256) + "1", 1},
		{"1" + many("0", 5000), "9" + many("0", 4999), 1},
		{"1" + many("0", 5000), "2" + many("0", 5000), -1},
		{many("0", 70000) + "1", "1", -1},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, table.CompareKeys(tt.a, tt.b), "CompareKeys(%q, %q)", tt.a, tt.b)
		checkKeyPair(t, tt.a, tt.b)
		checkKeyPair(t, tt.b, tt.a)
	}
}

func TestKeyOrderInt64(t *testing.T) {
	keys := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 32, -256, -255, -2, -1, 0, 1, 2, 255, 256, 1 << 32, math.MaxInt64 - 1, math.MaxInt64}
	for _, a := range keys {
		assert.Len(t, AppendKey(nil, a), 8)
		for _, b := range keys {
			checkKeyPair(t, a, b)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		checkKeyPair(t, int64(r.Uint64()), int64(r.Uint64()))
	}
}

func TestAppendKeyAppends(t *testing.T) {
	dst := []byte("head")
	assert.Equal(t, append([]byte("head"), AppendKey(nil, "TXN001")...), AppendKey(dst, "TXN001"))
	assert.Equal(t, append([]byte("head"), AppendKey(nil, int64(-5))...), AppendKey([]byte("head"), int64(-5)))
}

func TestAppendKeyRejectsOtherKinds(t *testing.T) {
	assert.Panics(t, func() { AppendKey(nil, 5) })
	assert.Panics(t, func() { AppendKey(nil, 5.0) })
	assert.Panics(t, func() { AppendKey(nil, nil) })
}

// randomKey returns a short string drawn mostly from the bytes that matter to the natural
// order: digits (zeros above all), the bytes next to them, 0x00, 0xFF and a few letters.
func randomKey(r *rand.Rand) string {
	const alphabet = "0000123456789/:\x00\x01\xffaAz-."
	var b []byte
	for n := r.IntN(9); n > 0; n-- {
		b = append(b, alphabet[r.IntN(len(alphabet))])
	}
	if r.IntN(20) == 0 { // now and then a long run
		b = append(b, strings.Repeat("0", r.IntN(300))...)
		b = append(b, strings.Repeat("7", r.IntN(300))...)
	}
	return string(b)
}

func TestKeyOrderRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = randomKey(r)
	}
	keys = append(keys, "TXN9", "TXN010", "TXN10", "TXN0010", "a", "a1", "a01", "", "x-1", "x1")
	slices.Sort(keys)
	keys = slices.Compact(keys) // distinct, so both orders are strict

	byCompare := slices.Clone(keys)
	slices.SortFunc(byCompare, func(a, b string) int { return table.CompareKeys(a, b) })
	byEncoding := slices.Clone(keys)
	slices.SortFunc(byEncoding, func(a, b string) int { return keyEncCmp(a, b) })
	require.Equal(t, byCompare, byEncoding)

	for i := 1; i < len(byEncoding); i++ {
		a, b := AppendKey(nil, byEncoding[i-1]), AppendKey(nil, byEncoding[i])
		require.Negative(t, bytes.Compare(a, b), "keys %q and %q encode alike", byEncoding[i-1], byEncoding[i])
		assert.False(t, bytes.HasPrefix(b, a), "%q's encoding is a prefix of %q's", byEncoding[i-1], byEncoding[i])
	}
}

func TestKeyOrderedUint(t *testing.T) {
	vals := []uint64{0, 1, 0xF6, 0xF7, 0xF8, 0xFF, 0x100, 0xFFFF, 0x10000, 1 << 32, 1<<56 - 1, 1 << 56, math.MaxUint64 - 1, math.MaxUint64}
	for i, a := range vals {
		ea := AppendOrderedUint(nil, a)
		for _, b := range vals[i+1:] {
			eb := AppendOrderedUint(nil, b)
			assert.Negative(t, bytes.Compare(ea, eb), "%d and %d", a, b)
			assert.False(t, bytes.HasPrefix(eb, ea), "%d and %d", a, b)
		}
	}
	assert.Len(t, AppendOrderedUint(nil, 0xF7), 1)
	assert.Len(t, AppendOrderedUint(nil, 0xF8), 2)
	assert.Len(t, AppendOrderedUint(nil, math.MaxUint64), 9)
}

// inKeyRange reports whether enc lies in [lo, hi), hi nil meaning no end.
func inKeyRange(enc, lo, hi []byte) bool {
	return bytes.Compare(enc, lo) >= 0 && (hi == nil || bytes.Compare(enc, hi) < 0)
}

func TestKeyPrefixEnd(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	keys := []string{"", "T", "TX", "TXN", "TXN0", "TXN9", "TXN010", "TXN\x00", "TXO", "TXM", "SG", "SG1", "SF9", "SG\xff", "B", "B\x00", "A", "C", "\xff", "\xff\xff", "\x00", "x-", "x-1", "x.", "x,"}
	for range 3000 {
		keys = append(keys, randomKey(r))
		keys = append(keys, "TXN"+randomKey(r), "SG"+randomKey(r), "B"+randomKey(r))
	}
	for _, prefix := range []string{"TXN", "SG", "B", "", "\x00", "B\x00", "\xff", "\xff\xff", "x-", "TX\x00N"} {
		lo, hi, ok := KeyPrefixEnd(prefix)
		require.True(t, ok, "prefix %q", prefix)
		for _, k := range keys {
			assert.Equal(t, strings.HasPrefix(k, prefix), inKeyRange(AppendKey(nil, k), lo, hi), "prefix %q, key %q", prefix, k)
		}
	}
	for _, prefix := range []string{"TXN1", "A1B", "0", "x-1", "9"} {
		_, _, ok := KeyPrefixEnd(prefix)
		assert.False(t, ok, "prefix %q contains a digit", prefix)
	}
	lo, hi, ok := KeyPrefixEnd("")
	require.True(t, ok)
	assert.Empty(t, lo)
	assert.Nil(t, hi)
}

// TestKeyPrefixEndFindsHighestNumber does what key generation does with a cursor (bbolt's): walk
// back from hi to the first key of the form prefix+digits.
func TestKeyPrefixEndFindsHighestNumber(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	keys := []string{"TXN", "TXNa", "TXN-5", "TXN999x", "TXO1", "TXM99999", "TXN1000000000000000000000"}
	want := int64(-1)
	for range 2000 {
		n := r.Int64N(100000)
		k := "TXN" + strings.Repeat("0", r.IntN(4)) + strconv.FormatInt(n, 10)
		if r.IntN(3) == 0 {
			k += "/"
		} else {
			want = max(want, n)
		}
		keys = append(keys, k, randomKey(r))
	}
	encs := make([][]byte, 0, len(keys))
	byEnc := make(map[string]string, len(keys))
	for _, k := range keys {
		e := AppendKey(nil, k)
		encs = append(encs, e)
		byEnc[string(e)] = k
	}
	slices.SortFunc(encs, bytes.Compare)

	lo, hi, ok := KeyPrefixEnd("TXN")
	require.True(t, ok)
	i, _ := slices.BinarySearchFunc(encs, hi, bytes.Compare) // the cursor's Seek(hi)
	got := int64(-1)
	for i--; i >= 0 && bytes.Compare(encs[i], lo) >= 0; i-- {
		digits := strings.TrimPrefix(byEnc[string(encs[i])], "TXN")
		if digits == "" || strings.Trim(digits, "0123456789") != "" {
			continue
		}
		if n, err := strconv.ParseInt(digits, 10, 64); err == nil {
			got = n
			break
		}
	}
	assert.Equal(t, want, got)
}

func FuzzKeyOrder(f *testing.F) {
	for _, p := range [][2]string{{"TXN9", "TXN010"}, {"a", "a1"}, {"a01", "a1"}, {"a\x00", "a"}, {"", "x"}, {"x-1", "x1"}, {"5", ":"}, {"5", "/"}, {"a00", "a0"}, {"a00x", "a0x"}, {"0/", "00"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		want := table.CompareKeys(a, b)
		ea, eb := AppendKey(nil, a), AppendKey(nil, b)
		if got := sign(bytes.Compare(ea, eb)); got != want {
			t.Fatalf("keys %q and %q: CompareKeys says %d, encodings %x and %x say %d", a, b, want, ea, eb, got)
		}
		if a != b && (bytes.HasPrefix(ea, eb) || bytes.HasPrefix(eb, ea)) {
			t.Fatalf("keys %q and %q: encodings %x and %x, one a prefix of the other", a, b, ea, eb)
		}
	})
}

func FuzzKeyPrefixEnd(f *testing.F) {
	for _, p := range [][2]string{{"TXN", "TXN001"}, {"SG", "SF9"}, {"B", "B\x00"}, {"", "x"}, {"\xff", "\xff\x00"}, {"a\x00", "a\x00\xff"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, prefix, key string) {
		lo, hi, ok := KeyPrefixEnd(prefix)
		if !ok {
			if !strings.ContainsAny(prefix, "0123456789") {
				t.Fatalf("prefix %q without digits refused", prefix)
			}
			return
		}
		for _, k := range []string{key, prefix + key} {
			if strings.HasPrefix(k, prefix) != inKeyRange(AppendKey(nil, k), lo, hi) {
				t.Fatalf("prefix %q, key %q: range [%x, %x), encoding %x", prefix, k, lo, hi, AppendKey(nil, k))
			}
		}
	})
}
