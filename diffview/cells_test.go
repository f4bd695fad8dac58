package diffview

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

func str(s string) *string { return &s }

func TestCellsLayOutEveryKindOfChange(t *testing.T) {
	cs := table.ChangeSet{
		"inventory": {
			Key: "item_id",
			Updated: []table.Update{{
				Key: "SG001",
				Before: table.Row{"item_id": "SG001", "name": "Aviator", "quantity_in_stock": int64(5),
					"description": "Classic aviator sunglasses with a gold metal frame and green lenses.",
					"meta":        map[string]any{"color": "gold", "tags": []any{"a", "b"}, "two words": int64(1)}},
				After: table.Row{"item_id": "SG001", "name": "Aviator", "quantity_in_stock": int64(4),
					"description": "Classic aviator sunglasses with a silver metal frame and green lenses.",
					"meta":        map[string]any{"color": "silver", "tags": []any{"a"}, "two words": int64(1)}},
				Fields: []string{"description", "meta", "quantity_in_stock"},
			}},
			Inserted: []table.Row{{"item_id": "SG009", "name": "<script>alert(1)</script>\x1b[2J", "quantity_in_stock": int64(1)}},
		},
		"transactions": {Key: "transaction_id", Deleted: []table.Row{{"transaction_id": "T1", "amount": 80.0}}},
		"empty":        {Key: "id"},
	}
	got := Cells(cs, Options{Schemas: map[string]*table.Schema{"inventory": inventorySchema()}})
	require.Len(t, got, 2, "tables without changes are left out")

	inv := got[0]
	assert.Equal(t, "inventory", inv.Table)
	assert.Equal(t, "inventory: 1 inserted, 1 updated", inv.Summary)
	require.Len(t, inv.Rows, 2)

	ins := inv.Rows[0]
	assert.Equal(t, RowInserted, ins.Change)
	assert.Equal(t, "SG009", ins.Key)
	require.Len(t, ins.Cells, 3)
	assert.Equal(t, Cell{Path: "item_id", After: str("SG009"), Changed: true}, ins.Cells[0])
	assert.Equal(t, Cell{Path: "name", After: str(`<script>alert(1)</script>\x1b[2J`), Changed: true}, ins.Cells[1],
		"markup stays as it is (the page inserts it as text); a terminal escape is shown escaped")

	up := inv.Rows[1]
	assert.Equal(t, RowUpdated, up.Change)
	paths := []string{}
	for _, c := range up.Cells {
		paths = append(paths, c.Path)
	}
	assert.Equal(t, []string{"item_id", "name", "description", "quantity_in_stock", "meta.color", "meta.tags[1]"}, paths,
		"schema order, then other fields by name; a nested value by the paths that differ")
	assert.Equal(t, Cell{Path: "item_id", Before: str("SG001"), After: str("SG001")}, up.Cells[0], "unchanged fields are context")
	assert.Equal(t, Cell{Path: "quantity_in_stock", Before: str("5"), After: str("4"), Changed: true}, up.Cells[3])
	assert.Equal(t, Cell{Path: "meta.color", Before: str("gold"), After: str("silver"), Changed: true}, up.Cells[4])
	assert.Equal(t, Cell{Path: "meta.tags[1]", Before: str("b"), Changed: true}, up.Cells[5], "a path the value lost has no after")

	desc := up.Cells[2]
	assert.True(t, desc.Changed)
	assert.Equal(t, []Word{
		{Same: "Classic aviator sunglasses with a "},
		{Del: "gold", Ins: "silver"},
		{Same: " metal frame and green lenses."},
	}, desc.Words, "long text is a word diff")

	del := got[1].Rows[0]
	assert.Equal(t, RowDeleted, del.Change)
	assert.Equal(t, Cell{Path: "amount", Before: str("80.0"), Changed: true}, del.Cells[1], "a float keeps its decimal point")
}

func TestSummaryIsOneLineOfCounts(t *testing.T) {
	cs := table.ChangeSet{
		"transactions": {Inserted: []table.Row{{"id": "a"}, {"id": "b"}}},
		"inventory":    {Updated: []table.Update{{Key: "x"}, {Key: "y"}}, Deleted: []table.Row{{"id": "z"}}},
		"empty":        {},
	}
	assert.Equal(t, "inventory: 2 updated, 1 deleted; transactions: 2 inserted", Summary(cs))
	assert.Equal(t, "", Summary(nil))
}
