package bolt

import (
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

// A read answered by the key or a declared index walks nothing; any other filtered read walks
// the table and is reported with the rows it looked at.
func TestScansAreReported(t *testing.T) {
	s := openTemp(t)
	sg := s.Stage()
	inv := tbl(t, sg, "inventory")
	n := len(find(t, inv, table.Query{}))
	require.Greater(t, n, 2)

	// Answered from indexes: the key, and name (declared), also ignoring case.
	find(t, inv, table.Query{Where: where("item_id", "SG001")})
	rows := find(t, inv, table.Query{Where: where("name", map[string]any{"$ieq": "aVIATOR"})})
	require.Len(t, rows, 1)
	assert.Equal(t, "Aviator", rows[0]["name"])
	find(t, inv, table.Query{Where: where("name", "Aviator", "price", map[string]any{"$lt": 1000})})
	assert.Empty(t, sg.Scans(), "reads answered from an index")

	// Walks: a range, an equality on an undeclared field (twice), an $or.
	find(t, inv, table.Query{Where: where("price", map[string]any{"$lt": 90})})
	find(t, inv, table.Query{Where: where("quantity_in_stock", 23)})
	find(t, inv, table.Query{Where: where("quantity_in_stock", 6)})
	find(t, inv, table.Query{Where: where("$or", []any{where("name", "Aviator"), where("price", 95.0)})})
	assert.Equal(t, []store.Scan{
		{Table: "inventory", Fields: []string{"price"}, Calls: 1, Rows: int64(n)},
		{Table: "inventory", Fields: []string{"quantity_in_stock"}, Calls: 2, Rows: 2 * int64(n)},
		{Table: "inventory", Fields: []string{"name", "price"}, Calls: 1, Rows: int64(n)},
	}, sg.Scans())
}

// The undeclared field's equality finds the same rows a declared index would.
func TestUndeclaredFieldsAreWalkedNotMissed(t *testing.T) {
	s := openTemp(t)
	sg := s.Stage()
	inv := tbl(t, sg, "inventory")
	all := find(t, inv, table.Query{})
	var want []any
	for _, r := range all {
		if r["quantity_in_stock"] == all[0]["quantity_in_stock"] {
			want = append(want, r["item_id"])
		}
	}
	got := find(t, inv, table.Query{Where: where("quantity_in_stock", all[0]["quantity_in_stock"])})
	assert.Equal(t, want, keys(t, got, "item_id"))
}

// An $ieq lookup from the index finds every row equal ignoring case, staged ones too, and only
// those.
func TestIeqFromTheIndex(t *testing.T) {
	s := openTemp(t)
	sg := s.Stage()
	inv := tbl(t, sg, "inventory")
	_, err := inv.Insert(table.Row{"name": "AVIATOR", "quantity_in_stock": int64(1), "price": 1.0})
	require.NoError(t, err)
	_, err = inv.Insert(table.Row{"name": "aviators", "quantity_in_stock": int64(1), "price": 1.0})
	require.NoError(t, err)
	rows := find(t, inv, table.Query{Where: where("name", map[string]any{"$ieq": "Aviator"})})
	names := []any{}
	for _, r := range rows {
		names = append(names, r["name"])
	}
	assert.ElementsMatch(t, []any{"Aviator", "AVIATOR"}, names)
	rows = find(t, inv, table.Query{Where: where("name", "AVIATOR")})
	require.Len(t, rows, 1, "an equality is exact, though its index ignores case")
	assert.Empty(t, sg.Scans())
}

func TestIndexDeclarations(t *testing.T) {
	base := func() *table.Schema {
		return &table.Schema{Name: "t", Key: "id", Fields: []table.Field{
			{Name: "id", Type: table.TypeString}, {Name: "name", Type: table.TypeString},
			{Name: "tags", Type: table.TypeList},
		}}
	}
	for _, tc := range []struct {
		indexes []string
		err     string
	}{
		{[]string{"name"}, ""},
		{[]string{"nme"}, `index on "nme": no such field`},
		{[]string{"id"}, "the key is always indexed"},
		{[]string{"name", "name"}, "declared twice"},
		{[]string{"tags"}, "a list field cannot be indexed"},
	} {
		sc := base()
		sc.Indexes = tc.indexes
		_, err := store.CompileSchema(sc)
		if tc.err == "" {
			assert.NoError(t, err)
			continue
		}
		require.Error(t, err, "%v", tc.indexes)
		assert.Contains(t, err.Error(), tc.err)
	}
}

// A run reports at most MaxScans kinds of walk, however many filters it tries.
func TestScansAreBounded(t *testing.T) {
	sg := openTemp(t).Stage()
	inv := tbl(t, sg, "inventory")
	fields := []string{"item_id", "name", "description", "quantity_in_stock", "price"}
	kinds := 0
	for mask := 1; mask < 1<<len(fields); mask++ { // every non-empty set of fields: 31 filters
		w := map[string]any{}
		for i, f := range fields {
			if mask&(1<<i) != 0 {
				w[f] = map[string]any{"$ne": nil} // no index answers $ne: each walks
			}
		}
		find(t, inv, table.Query{Where: w})
		kinds++
	}
	require.Greater(t, kinds, store.MaxScans)
	assert.Len(t, sg.Scans(), store.MaxScans)
}
