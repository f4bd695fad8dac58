package store

import (
	"strings"
	"testing"

	"github.com/starplan/starplan/table"
)

// TestSQLMappingChecked: each rule of a table's "sql" property refuses what breaks it, naming
// the problem.
func TestSQLMappingChecked(t *testing.T) {
	base := func(m *table.SQLMapping) *table.Schema {
		return &table.Schema{Name: "orders", Key: "id", SQL: m, Fields: []table.Field{
			{Name: "id", Type: table.TypeString}, {Name: "qty", Type: table.TypeInt}}}
	}
	if _, err := CompileSchema(base(&table.SQLMapping{Table: "public.orders", Columns: map[string]string{"qty": "quantity"}})); err != nil {
		t.Fatalf("a good mapping: %v", err)
	}
	for _, c := range []struct {
		m    *table.SQLMapping
		want string
	}{
		{&table.SQLMapping{Table: "orders"}, "must be schema.table"},
		{&table.SQLMapping{Table: "public.or\"ders"}, "must be schema.table"},
		{&table.SQLMapping{Table: "public.orders", Columns: map[string]string{"qtty": "q"}}, `no field "qtty"`},
		{&table.SQLMapping{Table: "public.orders", Columns: map[string]string{"qty": "id"}}, "both map onto column id"},
		{&table.SQLMapping{Table: "public.orders", Columns: map[string]string{"qty": "_version"}}, "a column the PostgreSQL store adds"},
		{&table.SQLMapping{Table: "public.orders", Columns: map[string]string{"qty": ""}}, "must be 1 to 63 bytes"},
	} {
		_, err := CompileSchema(base(c.m))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error containing %q", c.m, err, c.want)
		}
	}
}
