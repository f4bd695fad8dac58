package bolt

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/starplan/starplan/store"
)

// The byte encoding of index values, for bbolt's bytes.Compare order: appendIndexValue encodes
// an index value so that an index entry, the value followed by the key (store.AppendKey), is
// found by the value's prefix and its key is what follows the prefix. Text is escaped as keys
// are (store.AppendTextByte, store.AppendTextEnd).

// The first byte of an index value's encoding: its kind, in table.CompareKeys's order of kinds.
const (
	ivNil    = 0x01
	ivFalse  = 0x02
	ivTrue   = 0x03
	ivNumber = 0x04 // then 8 bytes
	ivString = 0x05 // then the escaped text (store.AppendTextByte), ended by store.AppendTextEnd
	ivLong   = 0x06 // then the SHA-256 of the value's ivString encoding (see maxIndexValue)
)

// maxIndexValue is the longest index value encoding stored as it is: a longer text is stored as
// its SHA-256 (ivLong), so an index entry stays far below bbolt's 32 KiB key limit whatever a
// field's max_len allows. Equal texts still share the entry; every candidate is checked by the
// filter anyway, so a collision could only add a candidate, never lose one.
const maxIndexValue = 256

// appendIndexValue appends the encoding of an index value, one that indexKey returns: nil, a
// bool, a float64 other than NaN, or a (case-folded) string. Two values encode the same exactly
// when they are equal as map keys (so 0.0 and -0.0 encode the same), and no value's encoding is
// a proper prefix of another's, so the index entries of one value (its encoding followed by
// store.AppendKey's encoding of a key) are exactly those with its encoding as a prefix, in key order,
// and each one's key is what follows the prefix. A text longer than maxIndexValue encodes as its
// hash (ivLong), equal for equal texts and in no order. Values of one kind are in their natural order (strings
// by bytes). A value of another kind, or NaN, is a programming error: appendIndexValue panics.
func appendIndexValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, ivNil)
	case bool:
		if x {
			return append(dst, ivTrue)
		}
		return append(dst, ivFalse)
	case float64:
		if math.IsNaN(x) {
			panic("store: appendIndexValue of NaN (indexKey never returns it)")
		}
		b := math.Float64bits(x)
		switch {
		case x == 0:
			b = 1 << 63 // 0.0 and -0.0 are one value
		case b>>63 == 0:
			b |= 1 << 63 // positive: above every negative
		default:
			b = ^b // negative: a greater magnitude sorts lower
		}
		return binary.BigEndian.AppendUint64(append(dst, ivNumber), b)
	case string:
		return appendIndexText(dst, x, false)
	}
	panic(fmt.Sprintf("store: appendIndexValue of a %T (index values are nil, bool, float64 or string)", v))
}

// appendIndexText appends the encoding of index value s, a string, with its letters a to z
// made upper case when upper is set: for ASCII text, what table.FoldKey makes of it, without
// making the folded string.
func appendIndexText(dst []byte, s string, upper bool) []byte {
	start := len(dst)
	dst = append(dst, ivString)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		dst = store.AppendTextByte(dst, c)
	}
	dst = store.AppendTextEnd(dst)
	if len(dst)-start > maxIndexValue {
		sum := sha256.Sum256(dst[start:])
		dst = append(append(dst[:start], ivLong), sum[:]...)
	}
	return dst
}
