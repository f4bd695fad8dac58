package bolt

import (
	"context"
	"testing"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/require"
)

// openTemp opens a new store in a fresh temporary directory with the demo data.
func openTemp(t testing.TB) *Store {
	t.Helper()
	return openAt(t, t.TempDir())
}

// openAt opens the store in dir, with the test's residency (setResidency).
func openAt(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{residency: residencyOf(t)})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func tbl(t testing.TB, v table.View, name string) table.Table {
	t.Helper()
	tb, ok := v.Table(name)
	require.True(t, ok, "table %s", name)
	return tb
}

func keys(t testing.TB, rows []table.Row, key string) []any {
	t.Helper()
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = r[key]
	}
	return out
}

func find(t testing.TB, tb table.Table, q table.Query) []table.Row {
	t.Helper()
	rows, err := tb.Find(q)
	require.NoError(t, err)
	return rows
}

func where(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// committed reads a row as the store holds it, through a fresh stage.
func committed(t testing.TB, s *Store, name string, key any) (table.Row, bool) {
	t.Helper()
	row, ok, err := tbl(t, s.Stage(), name).Get(key)
	require.NoError(t, err)
	return row, ok
}

var bg = context.Background()

// Validate checks row against the schema and returns the row as it would be stored: a new map
// with every declared field (nil when the row lacks it), ints given for float fields as float64
// and floats with an integral value given for int fields as int64 (3.0 is accepted as 3, 3.5 is
// not: arithmetic and JSON produce 3.0, and rejecting it would cost a repair round for nothing).
// The first problem found is returned as a *table.FieldError naming the field, the value and the
// rule; an unknown field is rejected with a did-you-mean.
func validate(s *table.Schema, row table.Row) (table.Row, error) {
	c, err := store.CompileSchema(s)
	if err != nil {
		return nil, err
	}
	return c.ValidateRow(row)
}
