package bolt

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A refused CSV cell names its record, line and column, the field, the cell and what to write;
// every one of a file is reported, and nothing is imported.
func TestImportCSVRefusesGoNumberSyntax(t *testing.T) {
	s := openTemp(t)
	before := dumpString(t, s)
	data := "item_id,name,quantity_in_stock,price\n" +
		"SG001,A,1_000,1\n" +
		"SG002,B, 5 ,+2.5\n" + // white space around a number, and a leading +, are fine
		"SG003,C,2,Inf\n" +
		"SG004,\"D\nE\",0x10,1\n" +
		"SG005,F,1e3,1\n"
	_, err := s.Import(bg, "inventory", strings.NewReader(data), CSV, Replace)
	require.Error(t, err)
	assert.Equal(t, `import inventory: 4 records are wrong; nothing was imported:
  record 1, line 2, column 9: field "quantity_in_stock" = "1_000" has "_" between digits (Go's syntax, not a CSV number's): write 1000
  record 3, line 4, column 11: field "price" = "Inf" must be a finite number: CSV has no Inf or NaN (leave the cell empty for no value)
  record 4, line 6, column 4: field "quantity_in_stock" = "0x10" is Go's hexadecimal (0x) syntax, not a CSV number: write 16
  record 5, line 7, column 9: field "quantity_in_stock" = "1e3" has an exponent, which an int in CSV does not: write 1000`, err.Error())
	var ie *ImportError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 9, ie.Col)
	assert.Equal(t, before, dumpString(t, s))

	fixed := strings.NewReplacer("1_000", "1000", "Inf", "3", "0x10", "16", "1e3", "1000").Replace(data)
	_, err = s.Import(bg, "inventory", strings.NewReader(fixed), CSV, Replace)
	require.NoError(t, err)
	row, ok := committed(t, s, "inventory", "SG002")
	require.True(t, ok)
	assert.Equal(t, int64(5), row["quantity_in_stock"])
	assert.Equal(t, 2.5, row["price"])
}

// Issue 25 asks that every refusal of a CSV number name its line and column: a cell that is no
// number at all ("7x", "abc", a non-ASCII digit), or no bool, is refused with the field's rule
// and its column, as Go's number syntaxes are.
func TestImportCSVNonNumberNamesItsColumn(t *testing.T) {
	s := openTemp(t)
	for _, cell := range []string{"7x", "abc", "٣"} {
		data := "item_id,name,quantity_in_stock,price\nSG001,A," + cell + ",1\n"
		_, err := s.Import(bg, "inventory", strings.NewReader(data), CSV, Replace)
		require.Error(t, err, cell)
		assert.Contains(t, err.Error(), "line 2, column 9", cell)
		var ie *ImportError
		if assert.ErrorAs(t, err, &ie, cell) {
			assert.Equal(t, 9, ie.Col, cell)
		}
	}
	_, err := s.Import(bg, "inventory", strings.NewReader("item_id,name,quantity_in_stock,price\nSG001,A,1, cheap\n"), CSV, Replace)
	assert.EqualError(t, err, `import inventory: record 1, line 2, column 11: field "price" = " cheap" must be a number >= 0 and <= 1000000; nothing was imported`)

	d, err := store.LoadDomain(libraryDomain)
	require.NoError(t, err)
	lib, err := Open(t.TempDir(), Options{Domain: d})
	require.NoError(t, err)
	t.Cleanup(func() { lib.Close() })
	_, err = lib.Import(bg, "books", strings.NewReader("book_id,title,on_loan\n1,Emma,yes\n"), CSV, Replace)
	assert.EqualError(t, err, `import books: record 1, line 2, column 8: field "on_loan" = "yes" must be True or False; nothing was imported`)
}

// A batched CSV import refuses the same cells, and writes nothing from the batch of the first.
func TestImportBatchesCSVRefusesGoNumberSyntax(t *testing.T) {
	s := openTemp(t)
	data := "item_id,name,quantity_in_stock,price\nSG101,A,1,1\nSG102,B,1,NaN\n"
	res, err := s.ImportBatches(bg, "inventory", strings.NewReader(data), CSV, 1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `record 2, line 3, column 11: field "price" = "NaN" must be a finite number`)
	assert.Equal(t, 1, res.Inserted, "the batch before the bad record")
	_, ok := committed(t, s, "inventory", "SG102")
	assert.False(t, ok)
}

// A nested CSV cell is one JSON value and nothing after it.
func TestImportCSVNestedCellIsOneJSONValue(t *testing.T) {
	d, err := store.LoadDomain(os.DirFS("../../testdata/domains/orders"))
	require.NoError(t, err)
	for _, tc := range []struct{ cell, want string }{
		{`"[] ]"`, `record 1, line 2, column 25: field "lines" = "[] ]" is not JSON text ("]" follows the value): write the list as JSON, such as ["a", 2.5]`},
		{`"[{""sku"": ""A"", ""qty"": 1, ""price"": 2}] x"`, `is not JSON text ("x" follows the value)`},
		{`"[1,"`, `is not JSON text (unexpected EOF)`},
	} {
		s := openDomain(t, d, false)
		data := "order_id,customer,placed,total,lines\nO001,Ada,2025-01-01,1.5," + tc.cell + "\n"
		_, err := s.Import(bg, "orders", strings.NewReader(data), CSV, Replace)
		require.Error(t, err, tc.cell)
		assert.Contains(t, err.Error(), tc.want)
	}
	s := openDomain(t, d, false)
	data := "order_id,customer,placed,total,lines\nO001,Ada,2025-01-01,1.5,\" [{\"\"sku\"\": \"\"A\"\", \"\"qty\"\": 1, \"\"price\"\": 2}] \"\n"
	_, err = s.Import(bg, "orders", strings.NewReader(data), CSV, Replace)
	require.NoError(t, err, "white space around the value is fine")
	row, ok := committed(t, s, "orders", "O001")
	require.True(t, ok)
	assert.Equal(t, []any{map[string]any{"sku": "A", "qty": int64(1), "price": 2.0}}, row["lines"])
}

// A JSON import refuses anything after the file's value but white space, naming its line and
// column, whichever reader (the scan, or encoding/json) reached the end; and imports nothing.
func TestImportJSONRefusesWhatFollowsTheValue(t *testing.T) {
	const rec = `{"item_id": "SG001", "name": "A", "quantity_in_stock": 1, "price": 1.0}`
	follows := func(line, col int, text, what string) string {
		return fmt.Sprintf(`import inventory: line %d, column %d: malformed JSON: %q follows the end of the %s: a file is one JSON array of records (or an object of tables, as a dump); remove what follows, or move its records into the array; nothing was imported`, line, col, text, what)
	}
	for _, tc := range []struct{ data, want string }{
		{"[" + rec + "] trailing garbage", follows(1, len(rec)+4, "trailing garbage", "array")},
		{"[" + rec + "]\n {\"x\":1} ]]]\n", follows(2, 2, `{"x":1} ]]]`, "array")},
		{"[]x", follows(1, 3, "x", "array")},
		{"[\n" + rec + ",\n 5] and more, much more than is shown\nsecond line", `record 2, line 3: want an object`},
		{"[" + rec + "]\n\n\t" + strings.Repeat("long ", 10) + "\nnext line", follows(3, 2, "long long long long long…", "array")},
		{`{"inventory": [` + rec + `], "transactions": []} x`, follows(1, len(rec)+39, "x", "object")},
		{`{"inventory": [` + rec + `]}, {}`, follows(1, len(rec)+18, ", {}", "object")},
		{`{"inventory": [` + rec + `], "transactions": [}`, `malformed JSON: invalid character '}' looking for beginning of value`},
		{`{"inventory": [` + rec + `], "transactions": []`, `malformed JSON: EOF`},
	} {
		s := openTemp(t)
		before := dumpString(t, s)
		_, err := s.Import(bg, "inventory", strings.NewReader(tc.data), JSON, Replace)
		require.Error(t, err, tc.data)
		if strings.HasPrefix(tc.want, "import ") {
			assert.Equal(t, tc.want, err.Error())
		} else {
			assert.Contains(t, err.Error(), tc.want)
		}
		assert.Equal(t, before, dumpString(t, s))
		sc := s.schemas["inventory"]
		for _, chunk := range []int{1, 7, 64, len(tc.data)} {
			compareReaders(t, sc, func() io.Reader { return &chunkReader{data: []byte(tc.data), n: chunk} }, 0)
		}
	}
	s := openTemp(t)
	for _, data := range []string{"[" + rec + "]", "[" + rec + "] \n\t\r\n  \n", `{"inventory": [` + rec + `], "transactions": []}` + "\n"} {
		_, err := s.Import(bg, "inventory", strings.NewReader(data), JSON, Replace)
		assert.NoError(t, err, "white space after the value is fine: %q", data)
	}
}
