package prompts

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/starplan/starplan/table"
)

// The schema block shows what a list or object holds, and how a filter reaches inside it.
func TestFieldTypeShowsNestedTypes(t *testing.T) {
	one := 1.0
	lines := table.Field{Name: "lines", Type: table.TypeList, Required: true, Items: &table.Field{Type: table.TypeObject, Fields: []table.Field{
		{Name: "sku", Type: table.TypeString, Required: true},
		{Name: "qty", Type: table.TypeInt, Required: true, Min: &one},
	}}}
	assert.Equal(t, `list of object {sku: string; qty: int >= 1} (an element: {"lines": {"$contains": x}})`, fieldType(lines))
	address := table.Field{Name: "address", Type: table.TypeObject, Additional: true, Fields: []table.Field{
		{Name: "city", Type: table.TypeString, Required: true}, {Name: "zip", Type: table.TypeString, Pattern: "[0-9]{4}"},
	}}
	assert.Equal(t, `object {city: string; zip: string, matching [0-9]{4}, optional; other keys: any}, optional (a key: {"address.city": x})`, fieldType(address))
	assert.Equal(t, `list, optional (an element: {"tags": {"$contains": x}})`, fieldType(table.Field{Name: "tags", Type: table.TypeList}))
}

// A map shows its values' type, its keys' pattern, and how a filter reaches any entry.
func TestFieldTypeShowsMaps(t *testing.T) {
	pms := table.Field{Name: "payment_methods", Type: table.TypeMap, Required: true, Keys: &table.KeyRule{Pattern: "gc_[0-9]+"},
		Values: &table.Field{Type: table.TypeObject, Fields: []table.Field{
			{Name: "source", Type: table.TypeString, Required: true}, {Name: "balance", Type: table.TypeFloat},
		}}}
	assert.Equal(t, `map (keys matching gc_[0-9]+) of object {source: string; balance: float, optional} (a dict by key; any entry: {"payment_methods.*.source": x}; .items() iterates it)`, fieldType(pms))
	credit := table.Field{Name: "credit", Type: table.TypeMap, Values: &table.Field{Type: table.TypeFloat}}
	assert.Equal(t, `map of float, optional (a dict by key; any entry: {"credit.*": x}; .items() iterates it)`, fieldType(credit))
}

// A sample row's nested value is cut like its text: a few elements and keys, each string short,
// floats with their ".0", so one large value cannot fill the prompt.
func TestCompactValueBoundsNestedValues(t *testing.T) {
	long := strings.Repeat("x", 1000)
	big := make([]any, 1000)
	for i := range big {
		big[i] = map[string]any{"price": 80.0, "note": long, "a": int64(1), "b": nil, "c": true}
	}
	got := compactValue(big)
	assert.Less(t, len(got), 600, got)
	assert.Contains(t, got, `"… 997 more"`)
	assert.Contains(t, got, `"…":"2 more keys"`)
	assert.Equal(t, `[{"a":1,"b":null,"c":true,"…":"2 more keys"},80.0,"`+strings.Repeat("x", MaxSampleChars-1)+`…"]`,
		compactValue([]any{map[string]any{"a": int64(1), "b": nil, "c": true, "d": 1, "e": 2}, 80.0, long}))
}
