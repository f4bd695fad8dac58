package store

import (
	"reflect"
	"slices"

	"github.com/starplan/starplan/table"
)

// ChangedFields lists the fields whose stored values differ between rows a and b, sorted; a
// field absent from one row and null in the other has not changed.
func ChangedFields(a, b table.Row) []string {
	var out []string
	for k, v := range b {
		if !EqualValue(a[k], v) {
			out = append(out, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok && a[k] != nil {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// EqualRows reports whether rows a and b store the same values (see ChangedFields), without
// listing what changed.
func EqualRows(a, b table.Row) bool {
	for k, v := range b {
		if !EqualValue(a[k], v) {
			return false
		}
	}
	for k, v := range a {
		if _, ok := b[k]; !ok && v != nil {
			return false
		}
	}
	return true
}

// EqualValue compares stored values; rows are normalised by the schema, so kinds match.
func EqualValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string, bool, int64:
		return a == b
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || (x != x && y != y))
	}
	return reflect.DeepEqual(a, b)
}
