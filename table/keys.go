package table

import (
	"fmt"
	"math"
	"strings"
)

// CompareKeys orders key values naturally and returns -1, 0 or +1. The order is total:
//
//   - nil < bools < numbers < strings < anything else;
//   - false < true;
//   - numbers by value, int64 and float64 mixed exactly (int64(5) and float64(5) are equal, so
//     one key); NaN sorts before every other number;
//   - strings with runs of ASCII digits compared as numbers, so "TXN9" < "TXN10" < "txn10"; other
//     bytes compare as bytes (UTF-8 byte order is code point order). Strings that are equal under
//     that rule but differ ("a01" and "a1") fall back to a plain comparison, so only equal strings
//     compare 0;
//   - values of other kinds compare by their printed form (this allocates; keys are never such).
//
// CompareKeys does not allocate for nil, bool, number and string keys.
func CompareKeys(a, b any) int {
	ra, rb := keyRank(a), keyRank(b)
	if ra != rb {
		if ra < rb {
			return -1
		}
		return 1
	}
	switch ra {
	case rankNil:
		return 0
	case rankBool:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case rankNumber:
		return compareNumbers(a, b)
	case rankString:
		return compareNatural(a.(string), b.(string))
	}
	return strings.Compare(fmt.Sprintf("%T%v", a, a), fmt.Sprintf("%T%v", b, b))
}

const (
	rankNil = iota
	rankBool
	rankNumber
	rankString
	rankOther
)

func keyRank(v any) int {
	switch v.(type) {
	case nil:
		return rankNil
	case bool:
		return rankBool
	case int64, float64, int, int32, float32:
		return rankNumber
	case string:
		return rankString
	}
	return rankOther
}

// number is a numeric value that is either an exact int64 or a float64.
type number struct {
	i     int64
	f     float64
	isInt bool
}

// asNumber converts the numeric kinds a Row may hold (and the Go kinds a caller may pass).
func asNumber(v any) (number, bool) {
	switch x := v.(type) {
	case int64:
		return number{i: x, isInt: true}, true
	case float64:
		return number{f: x}, true
	case int:
		return number{i: int64(x), isInt: true}, true
	case int32:
		return number{i: int64(x), isInt: true}, true
	case float32:
		return number{f: float64(x)}, true
	}
	return number{}, false
}

func compareNumbers(a, b any) int {
	x, _ := asNumber(a)
	y, _ := asNumber(b)
	return x.cmp(y)
}

// cmp compares two numbers exactly (also an int64 with a float64 near 2^63). NaN sorts first.
func (x number) cmp(y number) int {
	switch {
	case x.isInt && y.isInt:
		return cmpInt(x.i, y.i)
	case x.isInt:
		return -cmpFloatInt(y.f, x.i)
	case y.isInt:
		return cmpFloatInt(x.f, y.i)
	}
	xn, yn := math.IsNaN(x.f), math.IsNaN(y.f)
	switch {
	case xn && yn:
		return 0
	case xn:
		return -1
	case yn:
		return 1
	case x.f < y.f:
		return -1
	case x.f > y.f:
		return 1
	}
	return 0
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpFloatInt compares f with i exactly.
func cmpFloatInt(f float64, i int64) int {
	switch {
	case math.IsNaN(f):
		return -1
	case f < -0x1p63:
		return -1
	case f >= 0x1p63:
		return 1
	}
	t := math.Trunc(f)
	if c := cmpInt(int64(t), i); c != 0 {
		return c
	}
	switch {
	case f > t:
		return 1
	case f < t:
		return -1
	}
	return 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// compareNatural compares strings with digit runs as numbers, then breaks ties plainly.
func compareNatural(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			// Take both digit runs, skip their leading zeros, compare by length then digits.
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			da, db := trimZeros(a[si:i]), trimZeros(b[sj:j])
			if len(da) != len(db) {
				if len(da) < len(db) {
					return -1
				}
				return 1
			}
			if c := strings.Compare(da, db); c != 0 {
				return c
			}
			continue
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		i++
		j++
	}
	switch {
	case len(a)-i < len(b)-j:
		return -1
	case len(a)-i > len(b)-j:
		return 1
	}
	return strings.Compare(a, b)
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
