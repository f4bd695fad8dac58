package pg

import (
	"strings"
	"testing"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/storetest"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An upgrade changes the SQL objects, not only the recorded definition: another program's
// INSERT meets the new CHECK constraints and NOT NULL, the new index exists and the dropped one
// does not, and a field no row holds a value in is dropped with its column (which the bbolt
// store refuses, see storetest's DropsAndRemakesEmptyOnes).
func TestUpgradeChangesTheSQLObjects(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	zero, ten := 0.0, 10.0
	first := storetest.Domain()
	first.Tables[0].Fields = append(first.Tables[0].Fields, table.Field{Name: "note", Type: table.TypeString})
	s, err := Create(bg, dsn, storetest.Defined(t, first), Options{})
	require.NoError(t, err)
	defer s.Close()

	next := storetest.Domain()
	it := next.Tables[0]
	it.Fields[2].Max = &ten                                                                             // qty <= 10 (was >= 0 only)
	it.Fields = append(it.Fields, table.Field{Name: "bin", Type: table.TypeInt, Min: &zero, Max: &ten}) // note is gone
	it.Fields[1].Enum = []string{"a", "b", "c"}                                                         // category one of a, b, c
	it.Indexes = []string{"bin"}                                                                        // category's index is gone
	require.NoError(t, s.UpgradeDomain(bg, storetest.Defined(t, next)))

	s, err = Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer s.Close()
	insert := func(cols string, vals ...any) error {
		ph := ""
		for i := range vals {
			if i > 0 {
				ph += ", "
			}
			ph += "$" + string(rune('1'+i))
		}
		_, err := s.Pool().Exec(bg, "INSERT INTO conformance.items ("+cols+") VALUES ("+ph+")", vals...)
		return err
	}
	require.NoError(t, insert("sku, category, qty, bin", "x1", "c", int64(10), int64(3)), "a row that fits")
	assert.ErrorContains(t, insert("sku, category, qty", "x2", "a", int64(11)), "items_qty_check", "the new bound")
	assert.ErrorContains(t, insert("sku, category, qty", "x3", "z", int64(1)), "items_category_check", "the new enum")
	assert.ErrorContains(t, insert("sku, category, qty, bin", "x4", "a", int64(1), int64(11)), "items_bin_check", "the new field's bound")
	assert.ErrorContains(t, insert("sku, category, qty, note", "x5", "a", int64(1), "n"), `column "note" of relation "items" does not exist`)

	var idx []string
	rows, err := s.Pool().Query(bg, "SELECT indexname FROM pg_indexes WHERE schemaname = 'conformance' AND tablename = 'items' AND indexname LIKE '%_idx' ORDER BY 1")
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		idx = append(idx, n)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"items_bin_idx"}, idx)

	rep, err := s.Check(bg, store.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep)
}

// An upgrade by a process that opened the store before another upgraded it is refused: its
// schemas are not the store's any more.
func TestUpgradeRefusesAStaleDefinition(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, err := Create(bg, dsn, storetest.Defined(t, storetest.Domain()), Options{})
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer b.Close()
	next := storetest.Domain()
	next.Tables[0].Fields = append(next.Tables[0].Fields, table.Field{Name: "note", Type: table.TypeString})
	require.NoError(t, a.UpgradeDomain(bg, storetest.Defined(t, next)))
	next.Tables[0].Fields = append(next.Tables[0].Fields, table.Field{Name: "bin", Type: table.TypeInt})
	err = b.UpgradeDomain(bg, storetest.Defined(t, next))
	assert.ErrorContains(t, err, "the store's domain definition changed since this process opened it")
}

// Another server, which opened the store before the upgrade, applies and imports nothing after
// it: its schemas are not the store's any more (ErrUpgraded, nothing written), even for a run it
// made before. Opened again, it applies.
func TestUpgradeStopsStaleWriters(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, err := Create(bg, dsn, storetest.Defined(t, storetest.Domain()), Options{})
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer b.Close()
	sg := b.StageFor(bg, store.RunLimits{})
	items, _ := sg.Table(storetest.Items)
	_, err = items.Update(table.Row{"qty": int64(7)}, table.Query{Where: map[string]any{"sku": "a1"}})
	require.NoError(t, err)

	next := storetest.Domain()
	next.Tables[0].Fields = append(next.Tables[0].Fields, table.Field{Name: "note", Type: table.TypeString})
	require.NoError(t, a.UpgradeDomain(bg, storetest.Defined(t, next)))

	err = b.ApplyPending(bg, sg.Pending(), nil)
	assert.ErrorIs(t, err, ErrUpgraded)
	assert.ErrorContains(t, err, "restart this server")
	_, err = b.Import(bg, storetest.Items, strings.NewReader(`[{"sku": "z1", "category": "z", "qty": 1}]`), store.JSON, Upsert)
	assert.ErrorIs(t, err, ErrUpgraded)

	c, err := Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer c.Close()
	row, ok, err := mustGet(t, c, "a1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(1), row["qty"], "nothing was written")
	require.NoError(t, c.ApplyPending(bg, sg.Pending(), nil), "the same run, through a store opened on the new definition")
	row, _, _ = mustGet(t, c, "a1")
	assert.Equal(t, int64(7), row["qty"])
}

func mustGet(t *testing.T, s *Store, sku string) (table.Row, bool, error) {
	t.Helper()
	items, ok := s.StageFor(bg, store.RunLimits{}).Table(storetest.Items)
	require.True(t, ok)
	return items.Get(sku)
}
