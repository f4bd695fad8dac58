package pg

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/store/storetest"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A dump imports back into a new store as the same bytes; an upsert counts what it changed; a
// bad record imports nothing and is named; a run that read the table before the import
// conflicts at apply.
func TestDumpImportSeed(t *testing.T) {
	t.Parallel()
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
		require.NoError(t, a.ExportTo(bg, &one, name, store.JSON))
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
	require.ErrorContains(t, err, "import inventory: record 1")
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

// An import in batches is refused with what to do, and nothing is written.
func TestBatchesAreRefused(t *testing.T) {
	t.Parallel()
	s, err := Create(bg, pgtest.DSN(t), store.Inventory(), Options{NoSeed: true})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.ImportBatches(bg, "inventory", strings.NewReader(`[]`), store.JSON, 10)
	assert.ErrorContains(t, err, "drop --batch")
	var out bytes.Buffer
	require.NoError(t, s.Export(&out, "inventory", store.JSON))
	assert.Equal(t, "[]\n", out.String())
}

// exports is every table of st exported as CSV and as JSON, and its dump.
func exports(t *testing.T, st interface {
	store.Exporter
	Names() []string
}) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range st.Names() {
		for _, f := range []store.Format{store.CSV, store.JSON} {
			var b bytes.Buffer
			require.NoError(t, st.Export(&b, name, f))
			out[name+"."+string(f)] = b.String()
		}
	}
	var d bytes.Buffer
	require.NoError(t, st.Dump(&d))
	out["dump"] = d.String()
	return out
}

// The same CSV imported into a bbolt store and a PostgreSQL store exports as the same bytes, as
// CSV and as JSON (and dumps the same): one reader and one writer (store.ReadCSV, CSVWriter,
// JSONValue) serve both. The file has what CSV makes hard: a semicolon separator, quoted cells
// with commas, quotes and a line break, empty cells (None), floats that are whole, tiny or huge,
// +5 and 007, a record without its key (generated after the file's and the table's highest), a
// byte-order mark. A bbolt store's CSV export imports into PostgreSQL as the same bytes too,
// for the map domain's nested values.
func TestCSVImportExportMatchesBolt(t *testing.T) {
	t.Parallel()
	csv := "\ufeffitem_id;name;description;quantity_in_stock;price\n" +
		"SG010;\"Aviator; gold\";\"says \"\"hi\"\"\nand more\";+5;80\n" +
		"SG002;Tiny;;007;0.0000001\n" +
		";Keyless;generated;1;1.5e5\n" +
		"SG100;Huge;x; 3 ;1E-300\n"
	for _, mode := range []ImportMode{Upsert, Replace} {
		b, err := bolt.Open(t.TempDir(), bolt.Options{Domain: store.Inventory()})
		require.NoError(t, err)
		defer b.Close()
		p, err := Create(bg, pgtest.DSN(t), store.Inventory(), Options{})
		require.NoError(t, err)
		defer p.Close()
		rb, err := b.Import(bg, "inventory", strings.NewReader(csv), store.CSV, mode)
		require.NoError(t, err)
		rp, err := p.Import(bg, "inventory", strings.NewReader(csv), store.CSV, mode)
		require.NoError(t, err)
		assert.Equal(t, rb, rp, "the same counts")
		want, got := exports(t, b), exports(t, p)
		assert.Equal(t, want, got)
		assert.Contains(t, got["inventory.csv"], "SG101,Keyless,generated,1,150000.0\n", "the key after the file's highest")
		assert.Contains(t, got["inventory.csv"], "\"says \"\"hi\"\"\nand more\"")
	}

	b, err := bolt.Open(t.TempDir(), bolt.Options{Domain: storetest.MapDomain()})
	require.NoError(t, err)
	defer b.Close()
	var wallets bytes.Buffer
	require.NoError(t, b.Export(&wallets, storetest.Wallets, store.CSV))
	assert.Contains(t, wallets.String(), `"{""cc_1"":{""source"":""credit_card""}`, "a map is JSON in its cell")
	p, err := Create(bg, pgtest.DSN(t), storetest.MapDomain(), Options{NoSeed: true})
	require.NoError(t, err)
	defer p.Close()
	res, err := p.Import(bg, storetest.Wallets, bytes.NewReader(wallets.Bytes()), store.CSV, Replace)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Inserted)
	assert.Equal(t, exports(t, b), exports(t, p))
}

// A broken CSV imports nothing and says where: a malformed line (a bare quote) by its line; bad
// cells by record, line, column and field, every one; a key that comes twice by both records.
// The table is as it was after each.
func TestCSVImportRefusesBrokenFiles(t *testing.T) {
	t.Parallel()
	s, err := Create(bg, pgtest.DSN(t), store.Inventory(), Options{})
	require.NoError(t, err)
	defer s.Close()
	before := exports(t, s)
	for _, tc := range []struct {
		name, csv string
		want      []string
	}{
		{"malformed line", "item_id,name,description,quantity_in_stock,price\nSG050,A,d,1,1\nSG051,B\"roken,d,1,1\n",
			[]string{"import inventory: record 2, line 3", "malformed CSV", "nothing was imported"}},
		{"bad cells", "item_id,name,description,quantity_in_stock,price\nSG050,A,d,abc,1\nSG051,B,d,1,-2\nSG052,C,d,1\n",
			[]string{"3 records are wrong; nothing was imported", "record 1, line 2, column 11: field \"quantity_in_stock\"", "record 2, line 3: field \"price\" = -2", "record 3, line 4: 4 cells, but the header names 5 fields"}},
		{"duplicate key", "item_id,name,description,quantity_in_stock,price\nSG050,A,d,1,1\nSG050,B,d,1,1\n",
			[]string{"record 2, line 3", "duplicate key: record 1 has the same item_id"}},
		{"unknown column", "item_id,nmae\nSG050,A\n", []string{"header: column \"nmae\" is not a field of inventory", "did you mean"}},
		{"empty", "", []string{"empty CSV"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Import(bg, "inventory", strings.NewReader(tc.csv), store.CSV, Upsert)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
			assert.Equal(t, before, exports(t, s), "nothing was written")
		})
	}
}

// importFile is a JSON file of n inventory items, SG001 on; bad, when not "", replaces record
// n's price with it.
func importFile(n int, bad string) string {
	var b strings.Builder
	b.WriteString("[")
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(",\n")
		}
		price := "20.5"
		if i == n && bad != "" {
			price = bad
		}
		fmt.Fprintf(&b, `{"item_id": "SG%03d", "name": "Item %d", "description": "d", "quantity_in_stock": 5, "price": %s}`, i, i, price)
	}
	return b.String() + "]"
}

// indexDefs are the definitions of the indexes of s's inventory table.
func indexDefs(t *testing.T, s *Store) []string {
	rows, err := s.Pool().Query(bg, "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'inventory' ORDER BY indexname", s.SQLSchema())
	require.NoError(t, err)
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return defs
}

// An import is streamed to the table in batches as it is read, and is still all or nothing: a
// bad record at the file's end (after several batches were copied), a duplicate key far from
// its first, or a file cut short leave the table as it was, empty (its indexes, dropped for
// the copy, there again) or not; each bad record is named, those after the first too. A good
// file's rows are all there, with the table's indexes made again as they were.
func TestImportStreamsAllOrNothing(t *testing.T) {
	t.Parallel()
	n := testtier.Size(3*importBatch+7, 50_000)
	s, err := Create(bg, pgtest.DSN(t), store.Inventory(), Options{NoSeed: true})
	require.NoError(t, err)
	defer s.Close()
	indexes := indexDefs(t, s)
	require.Len(t, indexes, 3, "the key, _ord and the name index")
	count := func() int {
		var c int
		require.NoError(t, s.Pool().QueryRow(bg, "SELECT count(*) FROM "+s.tables["inventory"].name).Scan(&c))
		return c
	}
	for _, mode := range []ImportMode{Replace, Upsert} {
		before := count()
		_, err = s.Import(bg, "inventory", strings.NewReader(importFile(n, "-1")), store.JSON, mode)
		require.ErrorContains(t, err, fmt.Sprintf("record %d", n))
		assert.ErrorContains(t, err, "price")
		assert.Equal(t, before, count(), "nothing imported")
		assert.Equal(t, indexes, indexDefs(t, s))

		twoBad := strings.Replace(importFile(n, "-2"), `"quantity_in_stock": 5`, `"quantity_in_stock": -5`, 1)
		_, err = s.Import(bg, "inventory", strings.NewReader(twoBad), store.JSON, mode)
		var bad *store.ImportErrors
		require.ErrorAs(t, err, &bad)
		require.Len(t, bad.Errs, 2, "the file is read on past the first bad record: %v", err)
		assert.Equal(t, 1, bad.Errs[0].Record)
		assert.Equal(t, n, bad.Errs[1].Record)
		assert.Equal(t, before, count())

		dup := strings.Replace(importFile(n, ""), fmt.Sprintf(`"SG%03d"`, n), `"SG001"`, 1)
		_, err = s.Import(bg, "inventory", strings.NewReader(dup), store.JSON, mode)
		require.ErrorContains(t, err, "duplicate key: record 1 has the same item_id")
		assert.Equal(t, before, count())

		cut := importFile(n, "")
		_, err = s.Import(bg, "inventory", strings.NewReader(cut[:len(cut)-30]), store.JSON, mode)
		require.ErrorContains(t, err, "not JSON")
		assert.Equal(t, before, count())
		assert.Equal(t, indexes, indexDefs(t, s))

		res, err := s.Import(bg, "inventory", strings.NewReader(importFile(n, "")), store.JSON, mode)
		require.NoError(t, err)
		if before == 0 {
			assert.Equal(t, ImportResult{Inserted: n, Commits: 1}, res)
		} else {
			assert.Equal(t, ImportResult{Unchanged: n}, res)
		}
		assert.Equal(t, n, count())
		assert.Equal(t, indexes, indexDefs(t, s), "the indexes are made again as they were")
	}
	for _, notObject := range []string{`[1]`, `[null]`, `{"inventory": [[]]}`} {
		_, err = s.Import(bg, "inventory", strings.NewReader(notObject), store.JSON, Upsert)
		assert.ErrorContains(t, err, "record 1: want an object with the row's fields", notObject)
	}
	// The indexes work: a get by the indexed name.
	sg := s.StageFor(bg, store.RunLimits{})
	inv, _ := sg.Table("inventory")
	rows, err := inv.Find(table.Query{Where: map[string]any{"name": fmt.Sprintf("Item %d", n)}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, fmt.Sprintf("SG%03d", n), rows[0]["item_id"])
}
