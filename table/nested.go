package table

import (
	"math"
	"strconv"
	"strings"
)

// RestoreKinds converts the numbers inside a decoded value to the kinds f declares, at any
// depth: an int64 where a float is declared becomes a float64, a whole float64 where an int is
// declared an int64. A codec with one number type (JSON: audit records, exports) loses the kind
// of 80.0; the schema gives it back. Positions without a declared type keep what they hold (the
// store keeps whole numbers there as ints, so JSON does not change them). Lists and maps are
// changed in place; f nil returns v unchanged.
func RestoreKinds(f *Field, v any) any {
	if f == nil || v == nil {
		return v
	}
	switch f.Type {
	case TypeFloat:
		switch x := v.(type) {
		case int64:
			return float64(x)
		case int:
			return float64(x)
		}
	case TypeInt:
		if x, ok := v.(float64); ok && x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x)
		}
	case TypeList:
		if l, ok := v.([]any); ok && f.Items != nil {
			for i, e := range l {
				l[i] = RestoreKinds(f.Items, e)
			}
		}
	case TypeObject:
		if m, ok := v.(map[string]any); ok {
			for k, e := range m {
				if sub := f.Field(k); sub != nil {
					m[k] = RestoreKinds(sub, e)
				}
			}
		}
	}
	return v
}

// PathKey is how an object key extends a value's path: ".city" for a name, `["two words"]`
// otherwise. Validation errors, where-filters and diffs spell paths the same way:
// address.city, lines[2].qty.
func PathKey(k string) string {
	ident := k != ""
	for i, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			ident = false
			break
		}
	}
	if ident {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

// PathIndex is how a list index extends a value's path: "[2]".
func PathIndex(i int) string { return "[" + strconv.Itoa(i) + "]" }

// splitPath splits a where-filter key into its field and the object keys after it:
// "address.city" is the field address and the key city. A key without a dot is a field.
func splitPath(key string) (string, []string) {
	if !strings.Contains(key, ".") {
		return key, nil
	}
	parts := strings.Split(key, ".")
	return parts[0], parts[1:]
}
