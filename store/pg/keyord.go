package pg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// The _ord column: a key's natural-order encoding, so that the database orders rows as
// table.CompareKeys does ("TXN9" < "TXN10"), which no SQL collation does. It is the encoding
// store/bolt's keyenc.go keeps its key buckets in (copied here: a backend imports nothing of
// another); bytea compares bytes, so ORDER BY _ord is natural order and a range of keys is a
// range of _ord, answered by its index.

const (
	escByte  = 0x00
	escZero  = 0xFF
	escEnd   = 0x01
	runMark  = '0'
	smallMax = 0xF7
)

// ordKey returns the natural-order encoding of a table key (a string or an int64).
func ordKey(key any) []byte { return appendKey(nil, key) }

func appendKey(dst []byte, key any) []byte {
	switch k := key.(type) {
	case int64:
		return binary.BigEndian.AppendUint64(dst, uint64(k)^(1<<63))
	case string:
		return appendKeyString(dst, k)
	}
	panic(fmt.Sprintf("store: appendKey of a %T key (keys are strings or int64s)", key))
}

func appendKeyString(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if !isKeyDigit(c) {
			dst = appendTextByte(dst, c)
			i++
			continue
		}
		end, sig := digitRun(s, i)
		dst = append(dst, runMark)
		dst = appendOrderedUint(dst, uint64(end-sig))
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
		dst = appendOrderedUint(dst, uint64(sig-i))
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

func isKeyDigit(c byte) bool { return '0' <= c && c <= '9' }

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

func appendTextByte(dst []byte, c byte) []byte {
	if c == escByte {
		return append(dst, escByte, escZero)
	}
	return append(dst, c)
}

func appendOrderedUint(dst []byte, v uint64) []byte {
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

func keyPrefixEnd(prefix string) (lo, hi []byte, ok bool) {
	lo = make([]byte, 0, len(prefix)+1)
	for i := 0; i < len(prefix); i++ {
		if isKeyDigit(prefix[i]) {
			return nil, nil, false
		}
		lo = appendTextByte(lo, prefix[i])
	}
	return lo, bytesAfterPrefix(lo), true
}

func bytesAfterPrefix(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xFF {
			end := bytes.Clone(p[:i+1])
			end[i]++
			return end
		}
	}
	return nil
}
