package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/starplan/starplan/builtins/tables"
)

// The table values tell a helper's write by this file name.
func TestHelpersFileNamesAgree(t *testing.T) {
	assert.Equal(t, HelpersFile, tables.HelpersFile)
}

// A helper writes a table itself or through the file's private functions; private functions are
// never named.
func TestHelperWriters(t *testing.T) {
	got := HelperWriters(`
def pay(o):
    return _record(o)

def _record(o):
    return payments_tbl.insert(o)

def refund(o):
    orders_tbl.update({"status": "refunded"}, {"order_id": o})
    return _record(o)

def look(o):
    return orders_tbl.get_by_key(o)
`)
	assert.Equal(t, map[string][]string{"payments": {"pay", "refund"}, "orders": {"refund"}}, got)
}
