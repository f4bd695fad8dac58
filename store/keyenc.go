package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// The natural-order encoding of keys, for storage whose order is bytes.Compare (bbolt's key
// buckets, PostgreSQL's bytea _ord column): AppendKey encodes a table key so that byte order is
// table.CompareKeys order ("TXN9" < "TXN10"), which no byte order or SQL collation of the key
// itself gives.
//
// A string key is read as a sequence of tokens: each byte that is not an ASCII digit is one
// token, and each maximal run of digits is one token. table.CompareKeys compares two strings as
// their token sequences, lexicographically, where a sequence that ends first is smaller:
//
//   - two byte tokens compare as bytes;
//   - two digit runs compare as numbers: by their length without leading zeros, then digit by
//     digit (so "007" = "7" and "0" = "000");
//   - a byte token and a digit run compare as the byte and the run's first digit, and since the
//     byte is not a digit that only depends on whether the byte is below '0' or above '9': a
//     digit run sorts as if it were one byte between '/' and ':'.
//
// Strings whose token sequences are equal (they differ only in leading zeros) are then ordered
// by strings.Compare. The encoding follows that definition: first the natural part, each token
// encoded in a prefix-free code whose byte order is the token order, then a terminator that
// sorts before every token, then the tie-break part, which orders keys with the same natural
// part as strings.Compare does (see appendKeyString).
const (
	escByte  = 0x00 // starts a pair: a 0x00 byte of text or the end of the text
	escZero  = 0xFF // escByte, escZero: a 0x00 byte of the text
	escEnd   = 0x01 // escByte, escEnd: the end of the text; sorts before every other byte pair
	runMark  = '0'  // starts a digit run in a key's natural part; no other token starts with it
	smallMax = 0xF7 // AppendOrderedUint writes numbers up to smallMax as one byte
)

// AppendKey appends the encoding of a table key, a string or an int64, to dst. For two keys a
// and b of the same kind, bytes.Compare of their encodings has the sign of
// table.CompareKeys(a, b), so distinct keys get distinct encodings; and no key's encoding is a
// proper prefix of another's. An int64 is its 8 big-endian bytes with the sign bit flipped. A
// key of another kind is a programming error: AppendKey panics.
func AppendKey(dst []byte, key any) []byte {
	switch k := key.(type) {
	case int64:
		return binary.BigEndian.AppendUint64(dst, uint64(k)^(1<<63))
	case string:
		return appendKeyString(dst, k)
	}
	panic(fmt.Sprintf("store: AppendKey of a %T key (keys are strings or int64s)", key))
}

// appendKeyString appends the encoding of a string key (see the comment at the top of this
// file). The natural part encodes a byte token b as b, except 0x00 as escByte, escZero, and a
// digit run as runMark, the length of its digits without leading zeros (AppendOrderedUint),
// then those digits; it ends with escByte, escEnd. Each code starts with a byte that tells its
// kind, so the code is prefix-free, and it orders tokens as table.CompareKeys does: the end
// (0x00 0x01) < byte 0x00 (0x00 0xFF) < bytes 0x01..'/' < digit runs ('0') < bytes ':'..0xFF.
// So when two keys' natural parts differ, the first differing byte of their encodings lies in
// the natural part and decides the order.
//
// When the natural parts are equal, the keys differ only in how many leading zeros their digit
// runs have, and strings.Compare is decided at the first run whose count z differs: the key
// with fewer zeros has, where the other has its next '0', the run's first significant digit
// (1-9, greater than '0') or, for a run of zeros only, the byte after the run (which is the
// same in both keys, since the natural parts are equal: not a digit, or the end of the key,
// which is smaller). So fewer zeros sorts first exactly when the run's value is 0 and it is
// followed by the end or a byte below '0'; the tie-break part holds, for each run in order, z
// in AppendOrderedUint's code, with its bytes inverted (which reverses the order and keeps the
// code prefix-free) where more zeros must sort first.
func appendKeyString(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if !isKeyDigit(c) {
			dst = AppendTextByte(dst, c)
			i++
			continue
		}
		end, sig := digitRun(s, i)
		dst = append(dst, runMark)
		dst = AppendOrderedUint(dst, uint64(end-sig))
		dst = append(dst, s[sig:end]...)
		i = end
	}
	dst = append(dst, escByte, escEnd)
	for i := 0; i < len(s); {
		if !isKeyDigit(s[i]) {
			i++
			continue
		}
		end, sig := digitRun(s, i)
		at := len(dst)
		dst = AppendOrderedUint(dst, uint64(sig-i))
		zerosFirst := s[sig] != '0' || end < len(s) && s[end] > '9'
		if zerosFirst {
			for k := at; k < len(dst); k++ {
				dst[k] = ^dst[k]
			}
		}
		i = end
	}
	return dst
}

// isKeyDigit reports whether c is an ASCII digit, the bytes table.CompareKeys reads as numbers.
func isKeyDigit(c byte) bool { return '0' <= c && c <= '9' }

// digitRun returns the end of the digit run of s that starts at i, and where its significant
// digits start: after its leading zeros, but at its last digit when it has only zeros.
func digitRun(s string, i int) (end, sig int) {
	end = i
	for end < len(s) && isKeyDigit(s[end]) {
		end++
	}
	sig = i
	for sig < end-1 && s[sig] == '0' {
		sig++
	}
	return end, sig
}

// AppendTextByte appends byte c of an escaped text: c itself, or escByte, escZero for 0x00, so
// that AppendTextEnd can end the text and sort before every byte of it.
func AppendTextByte(dst []byte, c byte) []byte {
	if c == escByte {
		return append(dst, escByte, escZero)
	}
	return append(dst, c)
}

// AppendOrderedUint appends v in a prefix-free code whose byte order is numeric order: v up to
// smallMax as one byte; a larger v as smallMax+n followed by its n big-endian bytes (n = 1..8,
// the fewest that hold it), so a longer form starts with a greater byte than any shorter one.
// Nearly every length and count takes one byte.
func AppendOrderedUint(dst []byte, v uint64) []byte {
	if v <= smallMax {
		return append(dst, byte(v))
	}
	n := (bits.Len64(v) + 7) / 8
	dst = append(dst, byte(smallMax+n))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

// KeyPrefixEnd returns the range [lo, hi) of encodings of the string keys that start with
// prefix: every such key's encoding is in it and no other key's is; hi is nil when the range
// has no end (every encoding >= lo starts with lo, as for the prefix ""). ok is false when no
// such range exists, that is when prefix contains a digit: "A1" is followed by "A2" but also by
// "A10", and "A01x" sorts among the keys that start with "A1". A prefix of non-digits is one
// byte token per byte, so a key starts with it exactly when its encoding starts with those
// tokens' codes, which the code being prefix-free makes the same as the encoding starting
// with lo.
//
// To find the highest key of the form prefix+digits, walk a cursor backwards from hi (from the
// last key when hi is nil) while keys are >= lo: such keys are in that range, ordered by their
// number, among the other keys that start with prefix.
func KeyPrefixEnd(prefix string) (lo, hi []byte, ok bool) {
	lo = make([]byte, 0, len(prefix)+1)
	for i := 0; i < len(prefix); i++ {
		if isKeyDigit(prefix[i]) {
			return nil, nil, false
		}
		lo = AppendTextByte(lo, prefix[i])
	}
	return lo, BytesAfterPrefix(lo), true
}

// BytesAfterPrefix returns the least byte string greater than every string that starts with p,
// or nil when there is none (p is empty or all 0xFF).
func BytesAfterPrefix(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xFF {
			end := bytes.Clone(p[:i+1])
			end[i]++
			return end
		}
	}
	return nil
}

// AppendTextEnd appends the end of an escaped text (escByte, escEnd), which sorts before every
// byte of it, so that no escaped text's encoding is a proper prefix of another's.
func AppendTextEnd(dst []byte) []byte { return append(dst, escByte, escEnd) }
