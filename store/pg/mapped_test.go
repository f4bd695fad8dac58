package pg

import (
	"context"
	"strings"
	"testing"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// TestMappedTableRefused: a domain that maps a table onto an existing SQL table is refused by
// Create with an error that names the table and says what to do, until the catalog check and
// adoption at init exist; nothing is created.
func TestMappedTableRefused(t *testing.T) {
	dom := &store.Domain{Name: "mapped", Tables: []*table.Schema{{Name: "orders", Key: "id",
		SQL:    &table.SQLMapping{Table: "public.orders"},
		Fields: []table.Field{{Name: "id", Type: table.TypeString}}}}}
	_, err := Create(context.Background(), pgtest.DSN(t), dom, Options{})
	if err == nil || !strings.Contains(err.Error(), "table orders") || !strings.Contains(err.Error(), "remove the property") {
		t.Fatalf("Create of a mapped domain: %v", err)
	}
}
