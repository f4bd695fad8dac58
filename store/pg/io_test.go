package pg

import (
	"bytes"
	"strings"
	"testing"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/storetest"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A dump imports back into a new store as the same bytes; an upsert counts what it changed; a
// bad record imports nothing and is named; a run that read the table before the import
// conflicts at apply.
func TestDumpImportSeed(t *testing.T) {
	a, err := Create(bg, pgtest.DSN(t), store.Inventory(), Options{})
	require.NoError(t, err)
	defer a.Close()
	var dump bytes.Buffer
	require.NoError(t, a.DumpTo(bg, &dump))
	assert.Contains(t, dump.String(), `"price": 80.0`, "a whole float keeps its fraction")

	b, err := Create(bg, pgtest.DSN(t), store.Inventory(), Options{NoSeed: true})
	require.NoError(t, err)
	defer b.Close()
	for _, name := range b.Names() {
		var one bytes.Buffer
		require.NoError(t, a.ExportTo(bg, &one, name))
		res, err := b.Import(bg, name, &one, store.JSON, Replace)
		require.NoError(t, err)
		assert.Positive(t, res.Inserted)
	}
	var again bytes.Buffer
	require.NoError(t, b.DumpTo(bg, &again))
	assert.Equal(t, dump.String(), again.String())

	sg := b.StageFor(bg, store.RunLimits{})
	inv, _ := sg.Table("inventory")
	_, err = inv.Find(table.Query{Where: map[string]any{"name": "Aviator"}})
	require.NoError(t, err)
	_, err = inv.Update(table.Row{"quantity_in_stock": int64(1)}, table.Query{Where: map[string]any{"item_id": "SG001"}})
	require.NoError(t, err)

	res, err := b.Import(bg, "inventory", strings.NewReader(`[{"item_id": "SG001", "name": "Aviator", "description": "new", "quantity_in_stock": 5, "price": 80},
		{"item_id": "SG999", "name": "New", "description": "d", "quantity_in_stock": 1, "price": 1.5}]`), store.JSON, Upsert)
	require.NoError(t, err)
	assert.Equal(t, ImportResult{Inserted: 1, Updated: 1, Commits: 1}, res)
	assert.ErrorIs(t, b.ApplyPending(bg, sg.Pending(), nil), store.ErrConflict, "the import moved what the run read")

	_, err = b.Import(bg, "inventory", strings.NewReader(`[{"item_id": "SG998", "name": "X", "description": "d", "quantity_in_stock": -1, "price": 1}]`), store.JSON, Upsert)
	require.ErrorContains(t, err, "inventory record 1")
	assert.ErrorContains(t, err, "quantity_in_stock")

	// Seed: refused over data without force; with force the tables hold the seed again.
	assert.ErrorIs(t, b.Seed(bg, false), store.ErrNotEmpty)
	require.NoError(t, b.Seed(bg, true))
	var reseeded bytes.Buffer
	require.NoError(t, b.DumpTo(bg, &reseeded))
	assert.Equal(t, dump.String(), reseeded.String())
	n, err := b.SeedRows()
	require.NoError(t, err)
	assert.Equal(t, 6, n["inventory"])

	c, err := Create(bg, pgtest.DSN(t), storetest.Domain(), Options{Schema: "plain"})
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, "plain", c.SQLSchema())
}

// The db commands' tools: CSV and imports in batches are refused with what to do, and nothing
// is written.
func TestCSVAndBatchesAreRefused(t *testing.T) {
	s, err := Create(bg, pgtest.DSN(t), store.Inventory(), Options{NoSeed: true})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Import(bg, "inventory", strings.NewReader("item_id\nX\n"), store.CSV, Upsert)
	assert.EqualError(t, err, "import: a PostgreSQL store imports JSON only, not csv: use --format json (or COPY in psql for CSV)")
	assert.ErrorContains(t, s.Export(&bytes.Buffer{}, "inventory", store.CSV), "a PostgreSQL store exports JSON only, not csv")
	_, err = s.ImportBatches(bg, "inventory", strings.NewReader(`[]`), store.JSON, 10)
	assert.ErrorContains(t, err, "drop --batch")
	var out bytes.Buffer
	require.NoError(t, s.Export(&out, "inventory", store.JSON))
	assert.Equal(t, "[]\n", out.String())
}
