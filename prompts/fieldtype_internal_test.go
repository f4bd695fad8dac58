package prompts

import (
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
