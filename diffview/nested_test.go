package diffview

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

// nestedUpdate changes a city inside an address, one line's quantity, adds a line and changes
// a scalar field.
func nestedUpdate() table.ChangeSet {
	return table.ChangeSet{"orders": {Key: "order_id", Updated: []table.Update{{
		Key: "O1",
		Before: table.Row{"order_id": "O1", "status": "open",
			"address": map[string]any{"city": "Oslo", "zip": "0150"},
			"lines":   []any{map[string]any{"sku": "A", "qty": int64(1)}, map[string]any{"sku": "B", "qty": int64(2)}}},
		After: table.Row{"order_id": "O1", "status": "paid",
			"address": map[string]any{"city": "Bergen", "zip": "0150"},
			"lines": []any{map[string]any{"sku": "A", "qty": int64(1)}, map[string]any{"sku": "B", "qty": int64(3)},
				map[string]any{"sku": "C", "qty": int64(1)}}},
		Fields: []string{"address", "lines", "status"},
	}}}}
}

func TestNestedChangeShowsPaths(t *testing.T) {
	var b strings.Builder
	require.NoError(t, Terminal(&b, nestedUpdate(), Options{}))
	assert.Equal(t, `orders: 1 updated
  ~ O1
      address  address.city: Oslo → Bergen
      lines    lines[1].qty: 2 → 3
               lines[2].qty: (absent) → 1
               lines[2].sku: (absent) → C
      status   open → paid
`, b.String())

	b.Reset()
	require.NoError(t, Markdown(&b, nestedUpdate(), Options{}))
	assert.Contains(t, b.String(), `| updated | O1 | address.city: ~~Oslo~~ → **Bergen** | lines\[1\].qty: ~~2~~ → **3**<br>lines\[2\].qty: ~~(absent)~~ → **1**<br>lines\[2\].sku: ~~(absent)~~ → **C** | ~~open~~ → **paid** |`)

	b.Reset()
	require.NoError(t, JSON(&b, nestedUpdate()))
	var doc map[string]struct {
		Updated []struct {
			Fields []string `json:"fields"`
			Paths  []string `json:"paths"`
		} `json:"updated"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.String()), &doc))
	u := doc["orders"].Updated[0]
	assert.Equal(t, []string{"address", "lines", "status"}, u.Fields, "fields stay the top-level names")
	assert.Equal(t, []string{"address.city", "lines[1].qty", "lines[2].qty", "lines[2].sku", "status"}, u.Paths)
}

// A change of scalars only keeps the JSON shape it always had: no "paths".
func TestJSONScalarUpdateHasNoPaths(t *testing.T) {
	cs := table.ChangeSet{"t": {Key: "id", Updated: []table.Update{{Key: "a",
		Before: table.Row{"id": "a", "n": int64(1)}, After: table.Row{"id": "a", "n": int64(2)}, Fields: []string{"n"}}}}}
	var b strings.Builder
	require.NoError(t, JSON(&b, cs))
	assert.NotContains(t, b.String(), "paths")
}
