package diffview

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/table"
)

// indexed is the inventory domain's schemas with their indexes, as the server passes them.
func indexed() map[string]*table.Schema {
	inv, txn := inventorySchema(), transactionsSchema()
	inv.Indexes, txn.Indexes = []string{"name"}, []string{"customer_name"}
	return map[string]*table.Schema{"inventory": inv, "transactions": txn}
}

// sale is one Wayfarer sold to a customer: the stock update and its ledger entry.
func sale(customer string) table.ChangeSet {
	return table.ChangeSet{
		"inventory":    {Key: "item_id", Updated: []table.Update{stock("SG002", "Wayfarer", aviatorDesc, 95.0, 6, 3)}},
		"transactions": {Key: "transaction_id", Inserted: []table.Row{txn("TXN002", customer, "Purchase of 3 x Wayfarer", 285.0, 1285.0)}},
	}
}

func TestHeadlineSaysWhatChangesRowByRow(t *testing.T) {
	// The row's name, the changed field with both values, the new entry's customer and amount;
	// never the long description the row also holds.
	assert.Equal(t, "SG002 Wayfarer: quantity_in_stock 6→3; +TXN002 Alice 285.0", Headline(sale("Alice"), Options{Schemas: indexed()}))
	// Without indexes: the first number and the first text; without schemas, the columns are
	// in name order after the key.
	assert.Equal(t, "SG002 quantity_in_stock 6→3; +TXN002 Alice 285.0", Headline(sale("Alice"), Options{Schemas: schemas()}))
	assert.Equal(t, "SG002 quantity_in_stock 6→3; +TXN002 1285.0 Alice", Headline(sale("Alice"), Options{}))
	assert.Empty(t, Headline(table.ChangeSet{}, Options{}))
	assert.Empty(t, Headline(table.ChangeSet{"inventory": {Key: "item_id"}}, Options{}))

	// A value with spaces is quoted, so it reads as one value.
	assert.Equal(t, "SG002 Wayfarer: quantity_in_stock 6→3; +TXN002 'Walk-in customer' 285.0", Headline(sale("Walk-in customer"), Options{Schemas: indexed()}))

	// Every kind of change: a deleted row, a long text edited, a nested path, a field added,
	// and more changed fields than are named.
	cs := table.ChangeSet{
		"inventory": {Key: "item_id",
			Updated: []table.Update{{
				Key:    "SG001",
				Before: table.Row{"item_id": "SG001", "name": "Aviator", "description": aviatorDesc, "price": 80.0, "quantity_in_stock": int64(5), "meta": map[string]any{"color": "gold"}},
				After:  table.Row{"item_id": "SG001", "name": "Aviator", "description": classicDesc, "price": 75.0, "quantity_in_stock": int64(4), "meta": map[string]any{"color": "silver"}, "tag": "new"},
				Fields: []string{"description", "meta", "price", "quantity_in_stock", "tag"},
			}},
			Deleted: []table.Row{item("SG005", "Classic", classicDesc, 0, 60.0)},
		},
	}
	assert.Equal(t, "SG001 Aviator: description edited, quantity_in_stock 5→4, price 80.0→75.0 +2 fields; -SG005 Classic 0", Headline(cs, Options{Schemas: indexed()}))
	cs["inventory"].Updated[0].Fields = []string{"meta", "tag"}
	assert.Equal(t, "SG001 Aviator: meta.color gold→silver, tag +new; -SG005 Classic 0", Headline(cs, Options{Schemas: indexed()}))
	// A value that reads like its old one is shown as Python's repr.
	same := table.ChangeSet{"t": {Key: "id", Updated: []table.Update{{Key: int64(1), Before: table.Row{"id": int64(1), "v": "1"}, After: table.Row{"id": int64(1), "v": int64(1)}, Fields: []string{"v"}}}}}
	assert.Equal(t, "1 v '1'→1", Headline(same, Options{}))
}

func TestHeadlineIsSafeOnATerminal(t *testing.T) {
	// A customer name that would clear the screen, reverse the text and fake a second row.
	hostile := "\x1b[2JAlice\u202e; SG001 quantity_in_stock 1→0"
	got := Headline(sale(hostile), Options{Schemas: indexed()})
	assert.Equal(t, got, termsafe.Escape(got, 0), "no control or format character is left as itself")
	assert.NotContains(t, got, "\x1b")
	assert.Contains(t, got, `+TXN002 '\x1b[2JAlice\u202e; SG…`, "quoted, escaped and cut at 24 characters")
	assert.Equal(t, 1, strings.Count(got, "SG00"+"2"), "the fake row stays inside its quotes")
	// A line break in a key is escaped too: the headline is one line.
	nl := table.ChangeSet{"t": {Key: "id", Inserted: []table.Row{{"id": "a\nb"}}}}
	assert.Equal(t, `+'a\nb'`, Headline(nl, Options{}))
}

func TestHeadlineIsBounded(t *testing.T) {
	rows := make([]table.Row, 1000)
	for i := range rows {
		rows[i] = txn("TXN"+strconv.Itoa(1000+i), "Alice", "sale", 10, 10)
	}
	got := Headline(table.ChangeSet{"transactions": {Key: "transaction_id", Inserted: rows}}, Options{Schemas: indexed()})
	assert.LessOrEqual(t, utf8.RuneCountInString(got), MaxHeadline)
	require.Regexp(t, `^\+TXN1000 Alice 10\.0; \+TXN1001 Alice 10\.0; .*; … [0-9]+ more rows$`, got)
	shown := strings.Count(got, "+TXN")
	assert.Equal(t, "… "+strconv.Itoa(1000-shown)+" more rows", got[strings.LastIndex(got, "… "):], "the rows left out are counted")

	// One row too long to show whole is cut; with others, they are counted after it.
	long := strings.Repeat("x", 30)
	wide := table.Row{"id": "K"}
	for i := range 10 {
		wide["f"+strconv.Itoa(i)] = long
	}
	up := table.Update{Key: "K", Before: table.Row{"id": "K"}, After: wide, Fields: []string{}}
	for i := range 10 {
		up.Fields = append(up.Fields, "f"+strconv.Itoa(i))
	}
	one := Headline(table.ChangeSet{"t": {Key: "id", Updated: []table.Update{up}}}, Options{})
	assert.Equal(t, "K f0 +"+long[:23]+"…, f1 +"+long[:23]+"…, f2 +"+long[:23]+"… +7 fields", one, "values cut at 24, fields after the third counted")
	keys := table.ChangeSet{"t": {Key: "id", Inserted: []table.Row{{"id": strings.Repeat("k", 200)}}, Deleted: []table.Row{{"id": "gone"}}}}
	two := Headline(keys, Options{})
	assert.Equal(t, "+"+strings.Repeat("k", 23)+"…; -gone", two)
	big := make([]table.Row, 0, 40)
	for i := range 40 {
		big = append(big, table.Row{"id": strconv.Itoa(i), "a": long, "b": long})
	}
	got = Headline(table.ChangeSet{"t": {Key: "id", Inserted: big}}, Options{})
	assert.LessOrEqual(t, utf8.RuneCountInString(got), MaxHeadline)
	assert.True(t, strings.HasSuffix(got, " more rows"), got)
}

func TestBoundedCutsAFirstPartThatDoesNotFit(t *testing.T) {
	got := bounded([]string{strings.Repeat("a", 300)}, 3, 60)
	assert.Equal(t, strings.Repeat("a", 44)+"…; … 2 more rows", got)
	assert.Equal(t, 60, utf8.RuneCountInString(got))
	assert.Equal(t, strings.Repeat("a", 59)+"…", bounded([]string{strings.Repeat("a", 300)}, 1, 60))
}
