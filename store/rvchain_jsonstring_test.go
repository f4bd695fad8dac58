package store

// rvchain: an attacker's review of special8 written out (a4ffae1): the audit record's strings
// are hashed into the chain as AppendJSONString writes them, and read back and checked against
// encoding/json's form (TestAppendJSONStringIsEncodingJSON); these look for a word where the
// bit trick's borrows make it skip a byte that needs an escape.

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
)

// rvSpecial is whether AppendJSONString must look at byte c: it is not ASCII, or JSON or
// encoding/json's HTML escaping changes it.
func rvSpecial(c byte) bool {
	return c >= 0x80 || c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&'
}

// special8's lowest marked byte is the first byte of the word that needs a look, and it marks
// one whenever one does (AppendJSONString skips to the lowest mark, and past an unmarked word):
// words of the bytes around each class's edges, and random ones.
func TestRvchainSpecial8FirstMarkIsFirstSpecial(t *testing.T) {
	check := func(w [8]byte) {
		x := binary.LittleEndian.Uint64(w[:])
		first := 8
		for i, c := range w {
			if rvSpecial(c) {
				first = i
				break
			}
		}
		m := special8(x)
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		require.Equal(t, first, got, "word % x: special8 %016x", w, m)
	}
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '#', '[', '\\', ']', ';', '<', '=', '>', '?', '%', '&', '\'', 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0xff, 'a'}
	var w [8]byte
	for i := range 8 {
		for j := i; j < 8; j++ {
			for _, a := range edges {
				for _, b := range edges {
					for k := range w {
						w[k] = 'a'
					}
					w[i], w[j] = a, b
					check(w)
				}
			}
		}
	}
	rnd := rand.New(rand.NewPCG(11, 12))
	for range testtier.Size(30_000, 20_000_000) {
		x := rnd.Uint64()
		if rnd.IntN(2) == 0 { // mostly plain text, a few edge bytes
			for k := range w {
				w[k] = 'a' + byte(rnd.IntN(26))
				if rnd.IntN(4) == 0 {
					w[k] = edges[rnd.IntN(len(edges))]
				}
			}
		} else {
			binary.LittleEndian.PutUint64(w[:], x)
		}
		check(w)
	}
}

// Two bytes that need a look at any two places of a 24-byte string: AppendJSONString still
// writes what json.Marshal writes.
func TestRvchainAppendJSONStringPairs(t *testing.T) {
	edges := []string{"\x00", "\x1f", " ", "\"", "\\", "<", ">", "&", "\x7f", "é", "\u2028", "\xff", "\xe2\x80"}
	for i := 0; i < 24; i += testtier.Size(3, 1) {
		for j := i + 1; j < 24; j++ {
			for _, a := range edges {
				for _, b := range edges {
					s := strings.Repeat("x", i) + a + strings.Repeat("y", j-i) + b + strings.Repeat("z", 24-j)
					want, err := json.Marshal(s)
					require.NoError(t, err)
					require.Equal(t, string(want), string(AppendJSONString(nil, s)), "%q", s)
				}
			}
		}
	}
}
