package table

import (
	"maps"
	"math"
	"slices"
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
	case TypeMap:
		if m, ok := v.(map[string]any); ok && f.Values != nil {
			for k, e := range m {
				m[k] = RestoreKinds(f.Values, e)
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

// Wildcard, as a part of a where-filter path, stands for every entry of a map field:
// {"payment_methods.*.source": "gift_card"} holds when some payment method's source is
// "gift_card".
const Wildcard = "*"

// splitPath splits a where-filter key into its field and the object keys after it:
// "address.city" is the field address and the key city. A key without a dot is a field.
func splitPath(key string) (string, []string) {
	if !strings.Contains(key, ".") {
		return key, nil
	}
	parts := strings.Split(key, ".")
	return parts[0], parts[1:]
}

// PathChange is one path at which two values of a field differ ("address.city",
// "lines[1].qty"); a side without the path has HadBefore or HasAfter false.
type PathChange struct {
	Path                string
	Before, After       any
	HadBefore, HasAfter bool
}

// MaxPathLeaves bounds the paths one nested value is split into for a diff; past it, the rest
// of a list is one leaf at "path[i:]" and the rest of a dict one at "path{…}".
const MaxPathLeaves = 200

// ChangedPaths lists the paths at which two values of a field differ, in path order. A list or
// dict is split into its scalar parts by path (an empty one is a part itself); numbers differ
// when their values or kinds do. When the values are equal it returns nothing; when they differ
// only where no path shows it (more than MaxPathLeaves parts), the field itself is the one path.
//
// A dict key that only one side has (an entry added to or removed from a map, a key of an
// object) is one change at its path with its whole value, not one per part inside it:
// "payment_methods.gc_3: (absent) → {...}". List elements are compared by index, part by part.
func ChangedPaths(field string, before, after any) []PathChange {
	wb, wa := wholeKeys(before, after)
	was, paths := map[string]any{}, []string{}
	for _, l := range Leaves(field, wb) {
		was[l.Path] = unwhole(l.Value)
		paths = append(paths, l.Path)
	}
	now := map[string]any{}
	for _, l := range Leaves(field, wa) {
		if _, ok := was[l.Path]; !ok {
			paths = append(paths, l.Path)
		}
		now[l.Path] = unwhole(l.Value)
	}
	slices.Sort(paths)
	var out []PathChange
	for _, p := range paths {
		o, hadO := was[p]
		n, hasN := now[p]
		if hadO && hasN && sameValue(o, n) {
			continue
		}
		out = append(out, PathChange{p, o, n, hadO, hasN})
	}
	if len(out) == 0 && !sameValue(before, after) {
		out = append(out, PathChange{field, before, after, true, true})
	}
	return out
}

// wholeValue is a list or dict that a diff shows as one part: the value of a dict key that only
// one side has.
type wholeValue struct{ v any }

// wholeKeys returns copies of a and b in which the list or dict value of every dict key that
// only one of them has, at any depth the two share, is a wholeValue.
func wholeKeys(a, b any) (any, any) {
	if am, ok := a.(map[string]any); ok {
		bm, ok := b.(map[string]any)
		if !ok {
			return a, b
		}
		na, nb := make(map[string]any, len(am)), make(map[string]any, len(bm))
		for k, av := range am {
			bv, both := bm[k]
			switch {
			case both:
				na[k], nb[k] = wholeKeys(av, bv)
			case IsNested(av):
				na[k] = wholeValue{av}
			default:
				na[k] = av
			}
		}
		for k, bv := range bm {
			if _, both := am[k]; !both {
				if IsNested(bv) {
					bv = wholeValue{bv}
				}
				nb[k] = bv
			}
		}
		return na, nb
	}
	if al, ok := a.([]any); ok {
		bl, ok := b.([]any)
		if !ok {
			return a, b
		}
		na, nb := slices.Clone(al), slices.Clone(bl)
		for i := range min(len(al), len(bl)) {
			na[i], nb[i] = wholeKeys(al[i], bl[i])
		}
		return na, nb
	}
	return a, b
}

// unwhole returns v with every wholeValue in it replaced by its value (a leaf past
// MaxPathLeaves holds the rest of a dict, which may hold some).
func unwhole(v any) any {
	switch x := v.(type) {
	case wholeValue:
		return x.v
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = unwhole(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = unwhole(e)
		}
		return out
	}
	return v
}

// UpdatePaths lists the changed paths of an update that changed a list or dict: the changed
// fields in order, each nested one replaced by the paths inside it that changed. It is nil
// when no nested value changed.
func UpdatePaths(before, after Row, fields []string) []string {
	var out []string
	nestedChange := false
	for _, f := range fields {
		if !IsNested(before[f]) || !IsNested(after[f]) {
			out = append(out, f)
			continue
		}
		nestedChange = true
		for _, p := range ChangedPaths(f, before[f], after[f]) {
			out = append(out, p.Path)
		}
	}
	if !nestedChange {
		return nil
	}
	return out
}

// NewUpdate is an updated row with its changed fields and, when a list or dict changed, its
// changed paths.
func NewUpdate(key any, before, after Row, fields []string) Update {
	return Update{Key: key, Before: before, After: after, Fields: fields, Paths: UpdatePaths(before, after, fields)}
}

// sameValue is equality as a diff sees it: equal values of the same kinds (1 and 1.0 differ).
func sameValue(a, b any) bool { return equalValues(a, b, true) }

// Leaf is one scalar part of a value and its path.
type Leaf struct {
	Path  string
	Value any
}

// IsNested reports whether v is a non-empty list or dict: a value whose changes a diff shows by
// path.
func IsNested(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return len(v) > 0
	case []any:
		return len(v) > 0
	}
	return false
}

// Leaves splits a value into its scalar parts by path: a dict by key, a list by index. An empty
// dict or list, and a value that is neither, is a part itself; past MaxPathLeaves parts the rest
// of a list is one part at "path[i:]" and the rest of a dict one at "path{…}".
func Leaves(path string, v any) []Leaf {
	var out []Leaf
	var walk func(path string, v any)
	walk = func(path string, v any) {
		if len(out) >= MaxPathLeaves || !IsNested(v) {
			out = append(out, Leaf{path, v})
			return
		}
		switch v := v.(type) {
		case map[string]any:
			keys := slices.Sorted(maps.Keys(v))
			for i, k := range keys {
				if len(out) >= MaxPathLeaves {
					rest := make(map[string]any, len(keys)-i)
					for _, k := range keys[i:] {
						rest[k] = v[k]
					}
					out = append(out, Leaf{path + "{…}", rest})
					return
				}
				walk(path+PathKey(k), v[k])
			}
		case []any:
			for i, e := range v {
				if len(out) >= MaxPathLeaves {
					out = append(out, Leaf{path + "[" + strconv.Itoa(i) + ":]", v[i:]})
					return
				}
				walk(path+PathIndex(i), e)
			}
		}
	}
	walk(path, v)
	return out
}
