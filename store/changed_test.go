package store

import (
	"math"
	"testing"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
)

// EqualRows says what an empty ChangedFields says, without listing the fields.
func TestEqualRowsIsNoChangedFields(t *testing.T) {
	rows := []table.Row{
		nil, {}, {"a": nil}, {"a": int64(1)}, {"a": int64(2)}, {"a": 1.0}, {"a": math.NaN()}, {"a": "x"},
		{"a": "x", "b": nil}, {"a": "x", "b": true}, {"b": true}, {"a": []any{"x"}}, {"a": []any{"y"}},
		{"a": map[string]any{"k": int64(1)}}, {"a": map[string]any{"k": int64(1)}, "c": nil},
	}
	for _, a := range rows {
		for _, b := range rows {
			assert.Equal(t, len(ChangedFields(a, b)) == 0, EqualRows(a, b), "%v vs %v", a, b)
		}
	}
}
