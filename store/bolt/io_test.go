package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/starplan/starplan/store"

	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSeed(t *testing.T) {
	s := openTemp(t)
	seeded := dumpString(t, s)
	v := s.Stage()
	sell(t, v, "Moon")
	insertItem(t, v, "SG010")
	require.NoError(t, v.Apply(bg))
	require.NotEqual(t, seeded, dumpString(t, s))

	assert.ErrorIs(t, s.Seed(bg, false), store.ErrNotEmpty)
	require.NoError(t, s.PutSys(bg, "runs", "r1", "kept"))
	stale := s.Stage()
	find(t, tbl(t, stale, "inventory"), table.Query{Where: where("name", "Moon")})
	update(t, stale, "SG001", table.Row{"price": 1})

	require.NoError(t, s.Seed(bg, true))
	assert.Equal(t, seeded, dumpString(t, s), "force puts back exactly the seed rows")
	var run string
	ok, err := s.GetSys("runs", "r1", &run)
	require.NoError(t, err)
	assert.True(t, ok, "seeding keeps system documents")
	assert.ErrorIs(t, stale.Apply(bg), store.ErrConflict, "runs staged before a reseed conflict")

	e, err := Open(t.TempDir(), Options{NoSeed: true})
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, e.Seed(bg, false), "an empty store seeds without force")
	assert.Equal(t, seeded, dumpString(t, e))
}

func TestDumpFormat(t *testing.T) {
	s := openTemp(t)
	var b bytes.Buffer
	require.NoError(t, s.Dump(&b))
	out := b.String()
	assert.True(t, strings.HasPrefix(out, "{\n  \"inventory\": [\n    {\"item_id\": \"SG001\", \"name\": \"Aviator\", \"description\": "), out)
	assert.Contains(t, out, `"quantity_in_stock": 23, "price": 80.0}`, "fields in schema order, floats keep their point")
	assert.Contains(t, out, `"transaction_amount": 500.0, "balance_after_transaction": 500.0, "timestamp": "2025-01-01T09:00:00"}`)
}

func TestExport(t *testing.T) {
	s := openTemp(t)
	var b bytes.Buffer
	require.NoError(t, s.Export(&b, "transactions", JSON))
	assert.JSONEq(t, `[{"transaction_id": "TXN001", "customer_name": "OPENING_BALANCE",
		"transaction_summary": "Daily opening register balance", "transaction_amount": 500.0,
		"balance_after_transaction": 500.0, "timestamp": "2025-01-01T09:00:00"}]`, b.String())

	b.Reset()
	require.NoError(t, s.Export(&b, "inventory", CSV))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 7)
	assert.Equal(t, "item_id,name,description,quantity_in_stock,price", lines[0])
	assert.Equal(t, "SG005,Classic,\"Classic round profile with minimalist metal frames, offering a timeless and versatile style that fits both casual and formal wear.\",10,60.0", lines[5])

	assert.ErrorContains(t, s.Export(&b, "inventroy", CSV), `did you mean "inventory"`)
	assert.ErrorContains(t, s.Export(&b, "inventory", "xml"), "unknown format")
}

func TestExportImportRoundTrip(t *testing.T) {
	for _, format := range []Format{JSON, CSV} {
		t.Run(string(format), func(t *testing.T) {
			src := openTemp(t)
			v := src.Stage()
			_, err := tbl(t, v, "inventory").Insert(table.Row{"name": "Odd, \"quoted\"\nname", "quantity_in_stock": 0, "price": 0.1})
			require.NoError(t, err)
			require.NoError(t, v.Apply(bg))
			dst, err := Open(t.TempDir(), Options{NoSeed: true})
			require.NoError(t, err)
			defer dst.Close()
			for _, name := range src.Names() {
				var b bytes.Buffer
				require.NoError(t, src.Export(&b, name, format))
				_, err := dst.Import(bg, name, &b, format, Replace)
				require.NoError(t, err)
			}
			assert.Equal(t, dumpString(t, src), dumpString(t, dst))
		})
	}
}

func TestImportUpsertAndReplace(t *testing.T) {
	s := openTemp(t)
	csv := "item_id,name,quantity_in_stock,price\n" +
		"SG001,Aviator,30,80\n" + // updated
		"SG002,Wayfarer,6,95\n" + // differs only by the description, now empty: updated
		",Round,5,50\n" + // new, key generated
		"SG020,Shield,1,150.5\n" // new
	res, err := s.Import(bg, "inventory", strings.NewReader(csv), CSV, Upsert)
	require.NoError(t, err)
	assert.Equal(t, ImportResult{Inserted: 2, Updated: 2, Commits: 1}, res)
	row, _ := committed(t, s, "inventory", "SG001")
	assert.Equal(t, int64(30), row["quantity_in_stock"])
	assert.Equal(t, 80.0, row["price"])
	row, ok := committed(t, s, "inventory", "SG021")
	require.True(t, ok, "the generated key follows the highest in the store and the file")
	assert.Equal(t, "Round", row["name"])
	assert.Equal(t, 8, tbl(t, s.Stage(), "inventory").Len(), "upsert keeps the other rows")

	res, err = s.Import(bg, "inventory", strings.NewReader(csv), CSV, Upsert)
	require.NoError(t, err)
	assert.Equal(t, ImportResult{Inserted: 1, Unchanged: 3, Commits: 1}, res, "the generated key is new again")

	res, err = s.Import(bg, "inventory", strings.NewReader(`[{"item_id": "SG001", "name": "Aviator", "quantity_in_stock": 1, "price": 80.5}]`), JSON, Replace)
	require.NoError(t, err)
	assert.Equal(t, ImportResult{Updated: 1, Deleted: 8, Commits: 1}, res)
	assert.Equal(t, 1, tbl(t, s.Stage(), "inventory").Len())

	res, err = s.Import(bg, "transactions", strings.NewReader(`{"inventory": [], "transactions": [{"customer_name": "Bo", "transaction_amount": 5, "balance_after_transaction": 505, "timestamp": "2025-02-01T10:00:00"}]}`), JSON, Upsert)
	require.NoError(t, err, "the dump format is accepted")
	assert.Equal(t, ImportResult{Inserted: 1, Commits: 1}, res)
	_, ok = committed(t, s, "transactions", "TXN002")
	assert.True(t, ok)
}

func TestImportRejectsAndImportsNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format Format
		data   string
		want   string // the whole message
		record int
		line   int
	}{
		{
			name:   "bad value names record, line, field and rule",
			format: CSV,
			data:   "item_id,name,quantity_in_stock,price\nSG001,A,1,1\nSG002,B,2,2\nSG003,C,-3,3\n",
			want:   `import inventory: record 3, line 4: field "quantity_in_stock" = -3 must be an int >= 0 and <= 1000000000; nothing was imported`,
			record: 3, line: 4,
		},
		{
			name:   "unparsable number",
			format: CSV,
			data:   "item_id,name,quantity_in_stock,price\nSG001,A,1,cheap\n",
			want:   `import inventory: record 1, line 2, column 11: field "price" = "cheap" must be a number >= 0 and <= 1000000; nothing was imported`,
			record: 1, line: 2,
		},
		{
			name:   "multi-line quoted cell keeps line numbers right",
			format: CSV,
			data:   "item_id,name,description,quantity_in_stock,price\nSG001,A,\"two\nlines\",1,1\nSG002,,x,1,1\n",
			want:   `import inventory: record 2, line 4: field "name" is empty: it is required; nothing was imported`,
			record: 2, line: 4,
		},
		{
			name:   "missing required cell",
			format: CSV,
			data:   "item_id,name,quantity_in_stock,price\nSG001,A,,1\n",
			want:   `import inventory: record 1, line 2: field "quantity_in_stock" is empty: it is required; nothing was imported`,
			record: 1, line: 2,
		},
		{
			name:   "wrong number of cells",
			format: CSV,
			data:   "item_id,name,quantity_in_stock,price\nSG001,A,1,1\nSG002,B,2\n",
			want:   `import inventory: record 2, line 3: 3 cells, but the header names 4 fields; nothing was imported`,
			record: 2, line: 3,
		},
		{
			name:   "bare quote",
			format: CSV,
			data:   "item_id,name,quantity_in_stock,price\nSG001,A \"B\",1,1\n",
			want:   `import inventory: record 1, line 2: malformed CSV: bare " in non-quoted-field; nothing was imported`,
			record: 1, line: 2,
		},
		{
			name:   "unterminated quote",
			format: CSV,
			data:   "item_id,name,quantity_in_stock,price\nSG001,\"A,1,1\n",
			want:   `import inventory: record 1, line 2: malformed CSV: extraneous or missing " in quoted-field; nothing was imported`,
			record: 1, line: 2,
		},
		{
			name:   "unknown column",
			format: CSV,
			data:   "item_id,name,qty,price\nSG001,A,1,1\n",
			want:   `import inventory: line 1: header: column "qty" is not a field of inventory (did you mean "quantity_in_stock"?); nothing was imported`,
			line:   1,
		},
		{
			name:   "empty file",
			format: CSV,
			data:   "",
			want:   `import inventory: empty CSV: the first line must name the fields; nothing was imported`,
		},
		{
			name:   "duplicate key",
			format: CSV,
			data:   "item_id,name,quantity_in_stock,price\nSG001,A,1,1\nSG001,B,1,1\n",
			want:   `import inventory: record 2, line 3: inventory row SG001: duplicate key: record 1 has the same item_id; nothing was imported`,
			record: 2, line: 3,
		},
		{
			name:   "json bad row",
			format: JSON,
			data:   "[\n  {\"item_id\": \"SG001\", \"name\": \"A\", \"quantity_in_stock\": 1, \"price\": 1},\n  {\"item_id\": \"SG002\", \"name\": \"B\", \"quantity_in_stock\": 1, \"price\": 1, \"colour\": \"red\"}\n]",
			want:   `import inventory: record 2, line 3: field "colour" = "red" is not a field of inventory (its fields are item_id, name, description, quantity_in_stock, price); nothing was imported`,
			record: 2, line: 3,
		},
		{
			name:   "json syntax",
			format: JSON,
			data:   "[\n  {\"item_id\": \"SG001\",\n   \"name\": \"A\" \"quantity_in_stock\": 1}\n]",
			want:   `import inventory: record 1, line 3: malformed JSON: invalid character '"' after object key:value pair; nothing was imported`,
			record: 1, line: 3,
		},
		{
			name:   "json not an object",
			format: JSON,
			data:   `[{"item_id": "SG001", "name": "A", "quantity_in_stock": 1, "price": 1}, 7]`,
			want:   `import inventory: record 2, line 1: want an object with the row's fields, found a JSON number; nothing was imported`,
			record: 2, line: 1,
		},
		{
			name:   "json not an array",
			format: JSON,
			data:   `"rows"`,
			want:   `import inventory: line 1: want a JSON array of row objects; nothing was imported`,
			line:   1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTemp(t)
			before := dumpString(t, s)
			_, err := s.Import(bg, "inventory", strings.NewReader(tc.data), tc.format, Replace)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			var ie *ImportError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tc.record, ie.Record)
			assert.Equal(t, tc.line, ie.Line)
			assert.Equal(t, before, dumpString(t, s), "nothing is imported")
		})
	}
}

// Every bad record of a file is reported at once (up to MaxImportErrors, then a count), so that
// one pass fixes the file.
func TestImportReportsEveryBadRecord(t *testing.T) {
	s := openTemp(t)
	before := dumpString(t, s)
	data := "item_id,name,quantity_in_stock,price\nSG001,A,x,1\nSG002,B,1\nSG003,C,,1\nSG004,D,1,1\nSG005,E,1,-2\n"
	_, err := s.Import(bg, "inventory", strings.NewReader(data), CSV, Replace)
	require.Error(t, err)
	assert.Equal(t, `import inventory: 4 records are wrong; nothing was imported:
  record 1, line 2, column 9: field "quantity_in_stock" = "x" must be an int >= 0 and <= 1000000000
  record 2, line 3: 3 cells, but the header names 4 fields
  record 3, line 4: field "quantity_in_stock" is empty: it is required
  record 5, line 6: field "price" = -2 must be a number >= 0 and <= 1000000`, err.Error())
	var all *ImportErrors
	require.ErrorAs(t, err, &all)
	assert.Len(t, all.Errs, 4)
	assert.Equal(t, before, dumpString(t, s))

	var b strings.Builder
	b.WriteString("item_id,name,quantity_in_stock,price\n")
	for i := range 50 {
		fmt.Fprintf(&b, "SG%03d,A,-1,1\n", i+1)
	}
	_, err = s.Import(bg, "inventory", strings.NewReader(b.String()), CSV, Replace)
	require.ErrorAs(t, err, &all)
	assert.Len(t, all.Errs, MaxImportErrors)
	assert.Equal(t, 50-MaxImportErrors, all.More)
	assert.Contains(t, err.Error(), "50 records are wrong")
	assert.Contains(t, err.Error(), fmt.Sprintf("and %d more", 50-MaxImportErrors))
}

// A file a spreadsheet wrote with semicolons (locales with a decimal comma) imports as it is.
func TestImportSemicolonCSV(t *testing.T) {
	s := openTemp(t)
	data := "\ufeffitem_id;name;quantity_in_stock;price\nSG001;\"Aviator; large\";7;80\n"
	res, err := s.Import(bg, "inventory", strings.NewReader(data), CSV, Replace)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Inserted+res.Updated)
	var out strings.Builder
	require.NoError(t, s.Export(&out, "inventory", JSON))
	assert.Contains(t, out.String(), `"Aviator; large"`)
}

func TestImportFieldErrorIsReachable(t *testing.T) {
	s := openTemp(t)
	_, err := s.Import(bg, "inventory", strings.NewReader("item_id,name,quantity_in_stock,price\nSG001,A,1,-1\n"), CSV, Upsert)
	var fe *table.FieldError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, "price", fe.Field)
	assert.Equal(t, int64(-1), fe.Value)
	_, err = s.Import(bg, "nope", strings.NewReader(""), CSV, Upsert)
	assert.ErrorContains(t, err, `unknown table "nope"`)
}

// An import error quotes the file's value as JSON writes it, not as Python or Go print it: true
// and null, not True and None; an integer too large for an int as digits, not 1.2345678901234567e+19.
// The file's own text is gone once a record is decoded, and JSON is the language it was written in.
func TestImportErrorQuotesValuesAsJSON(t *testing.T) {
	s := openTemp(t)
	rec := func(name, qty, price string) string {
		return `[{"item_id": "A", "name": ` + name + `, "quantity_in_stock": ` + qty + `, "price": ` + price + `}]`
	}
	for data, want := range map[string]string{
		rec(`"N"`, "12345678901234567890", "1"):                `field "quantity_in_stock" = 12345678901234567000 must be an int (a whole number)`,
		rec(`"N"`, "true", "1"):                                `field "quantity_in_stock" = true must be an int`,
		rec(`"N"`, "1", "1e7"):                                 `field "price" = 10000000 must be a number`,
		rec(`"N"`, "1.5", "1"):                                 `field "quantity_in_stock" = 1.5 must be an int (a whole number)`,
		rec(`["x", true, null, 1.5e30]`, "1", "1"):             `field "name" = ["x", true, null, 1.5e+30] must be a string`,
		rec(`{"b": false, "a": "é"}`, "1", "1"):                `field "name" = {"a": "é", "b": false} must be a string`,
		rec(`[`+strings.Repeat(`false, `, 100)+`0]`, "1", "1"): `field "name" = [false, false,`,
	} {
		_, err := s.Import(bg, "inventory", strings.NewReader(data), JSON, Replace)
		require.Error(t, err, data)
		assert.Contains(t, err.Error(), want)
		assert.NotRegexp(t, `True|False|None|e\+19`, err.Error())
		assert.Less(t, len(err.Error()), 400, "a long value is cut")
	}
	_, err := s.Import(bg, "inventory", strings.NewReader("item_id,name,quantity_in_stock,price\nA,N,1,2.5e6\n"), CSV, Replace)
	assert.ErrorContains(t, err, `field "price" = 2500000 must be a number`, "a CSV cell too")
}

// A JSON file that starts with a UTF-8 byte-order mark (as Windows tools write it) is read, as a
// CSV file with one is, by the scan and by encoding/json alike (FuzzReadJSONRecords holds them
// together): no "invalid character 'ï'", a character the file does not hold. The mark's bytes
// count in the columns of line 1, as they are the file's.
func TestImportJSONSkipsByteOrderMark(t *testing.T) {
	s := openTemp(t)
	row := `{"item_id": "SG601", "name": "N", "quantity_in_stock": 1, "price": 2.5}`
	for _, data := range []string{"\ufeff[" + row + "]", "\ufeff{\"inventory\": [" + row + "]}"} {
		res, err := s.Import(bg, "inventory", strings.NewReader(data), JSON, Upsert)
		require.NoError(t, err, data)
		assert.Equal(t, 1, res.Inserted+res.Updated+res.Unchanged, data)
		got, ok := committed(t, s, "inventory", "SG601")
		require.True(t, ok, data)
		assert.Equal(t, 2.5, got["price"])
	}
	_, err := s.Import(bg, "inventory", strings.NewReader("\ufeff["+row+"] x"), JSON, Upsert)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "ï")
	var ie *ImportError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, [2]int{1, len("\ufeff[") + len(row) + len("] x")}, [2]int{ie.Line, ie.Col}, err.Error())
	_, err = s.Import(bg, "inventory", strings.NewReader("\ufeff\ufeff[]"), JSON, Upsert)
	assert.Error(t, err, "one mark is skipped, not any number")
}

// The JSON reader streams: a file handed over a byte at a time reports the same records and
// lines as one read whole, including past a member it skips.
func TestImportJSONStreamLines(t *testing.T) {
	skipped := `{"inventory": [
  {"item_id": "SG001", "name": "A",
   "quantity_in_stock": 1, "price": 1}
], "transactions": [`
	cases := []struct {
		name, data string
		want       string
	}{
		{"bad value on a later line of a record",
			"[\n  {\"item_id\": \"SG001\", \"name\": \"A\", \"quantity_in_stock\": 1, \"price\": 1},\n\n  {\"item_id\": \"SG002\",\n   \"name\": \"B\",\n   \"quantity_in_stock\": -1, \"price\": 1}\n]",
			`import inventory: record 2, line 4: field "quantity_in_stock" = -1 must be an int >= 0 and <= 1000000000; nothing was imported`},
		{"malformed JSON",
			"[\n  {\"item_id\": \"SG001\", \"name\": \"A\", \"quantity_in_stock\": 1, \"price\": 1},\n  {\"item_id\": \"SG002\",\n   \"name\" \"B\"}\n]",
			`import inventory: record 2, line 4: malformed JSON: invalid character '"' after object key; nothing was imported`},
		{"a number for a record",
			"[\n  {\"item_id\": \"SG001\", \"name\": \"A\", \"quantity_in_stock\": 1, \"price\": 1},\n\n  7\n]",
			`import inventory: record 2, line 4: want an object with the row's fields, found a JSON number; nothing was imported`},
		{"after a skipped member",
			strings.Replace(skipped, `"inventory"`, `"other"`, 1) + "\n  {\"item_id\": \"SG001\",\n  \"name\": \"A\", \"price\": 1}]}",
			`import inventory: the JSON object has no "inventory" member; nothing was imported`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTemp(t)
			_, whole := s.Import(bg, "inventory", strings.NewReader(tc.data), JSON, Upsert)
			require.Error(t, whole)
			assert.Equal(t, tc.want, whole.Error())
			_, bytewise := s.Import(bg, "inventory", iotest.OneByteReader(strings.NewReader(tc.data)), JSON, Upsert)
			require.Error(t, bytewise)
			assert.Equal(t, whole.Error(), bytewise.Error())
		})
	}

	s := openTemp(t)
	data := skipped + "\n  {\"customer_name\": \"Bo\", \"transaction_amount\": 5,\n   \"balance_after_transaction\": 505, \"colour\": 1, \"timestamp\": \"2025-02-01T10:00:00\"}]}"
	_, err := s.Import(bg, "transactions", iotest.OneByteReader(strings.NewReader(data)), JSON, Upsert)
	var ie *ImportError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 1, ie.Record)
	assert.Equal(t, 5, ie.Line, "lines count through the skipped inventory member")

	_, err = s.Import(bg, "inventory", iotest.TimeoutReader(strings.NewReader("[\n"+strings.Repeat(" ", 4096))), JSON, Upsert)
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, iotest.ErrTimeout, "a failing reader is its own error, not malformed JSON")
	assert.NotContains(t, err.Error(), "malformed")
}

// Records without a key get theirs once every key of the file is known, in file order, and their
// problems are reported in record order with the others.
func TestImportGeneratedKeysStreamed(t *testing.T) {
	s := openTemp(t)
	rows := `[{"customer_name": "A", "transaction_amount": 1, "balance_after_transaction": 501, "timestamp": "2025-02-01T10:00:00"},
 {"transaction_id": "TXN007", "customer_name": "B", "transaction_amount": 1, "balance_after_transaction": 502, "timestamp": "2025-02-01T10:00:00"},
 {"customer_name": "C", "transaction_amount": 1, "balance_after_transaction": 503, "timestamp": "2025-02-01T10:00:00"}]`
	res, err := s.Import(bg, "transactions", strings.NewReader(rows), JSON, Upsert)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Inserted)
	for key, who := range map[string]string{"TXN008": "A", "TXN007": "B", "TXN009": "C"} {
		row, ok := committed(t, s, "transactions", key)
		require.True(t, ok, key)
		assert.Equal(t, who, row["customer_name"], key)
	}

	bad := strings.Replace(strings.Replace(rows, `"balance_after_transaction": 503`, `"balance_after_transaction": "x"`, 1),
		`"customer_name": "B"`, `"customer_name": "B", "colour": 1`, 1)
	_, err = s.Import(bg, "transactions", strings.NewReader(bad), JSON, Upsert)
	var all *ImportErrors
	require.ErrorAs(t, err, &all)
	require.Len(t, all.Errs, 2)
	assert.Equal(t, []int{2, 3}, []int{all.Errs[0].Record, all.Errs[1].Record})
	assert.Equal(t, 3, all.Errs[1].Line)
}

// Past MaxImportErrors an import reports the first bad records of the file, whichever were
// found first.
func TestImportReportsFirstBadRecords(t *testing.T) {
	s := openTemp(t)
	var b strings.Builder
	b.WriteString("item_id,name,quantity_in_stock,price\n")
	for i := range 30 {
		if i < 5 {
			fmt.Fprintf(&b, "SG%03d,A,-1,1\n", i+1) // found when the row is checked
		} else {
			fmt.Fprintf(&b, "SG%03d,A,1\n", i+1) // found by the reader
		}
	}
	_, err := s.Import(bg, "inventory", strings.NewReader(b.String()), CSV, Replace)
	var all *ImportErrors
	require.ErrorAs(t, err, &all)
	require.Len(t, all.Errs, MaxImportErrors)
	assert.Equal(t, 30-MaxImportErrors, all.More)
	for i, ie := range all.Errs {
		assert.Equal(t, i+1, ie.Record)
	}
}

// An import larger than reserveMin grows the file ahead of bbolt (see reserveFile); the store it
// leaves opens, verifies and checks sound.
func TestImportLargeCommit(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSeed: true})
	require.NoError(t, err)
	var b bytes.Buffer
	b.WriteString("[")
	n := 0
	for size := int64(0); size < reserveMin+reserveMin/8; n++ { // just past it
		row := table.Row{"item_id": fmt.Sprintf("SG%03d", n+1), "name": fmt.Sprintf("Item %d", n+1),
			"description": strings.Repeat("d", 200), "quantity_in_stock": int64(n % 50), "price": 1.5}
		size += store.RowSize(row) + 64
		if n > 0 {
			b.WriteString(",\n")
		}
		line, err := json.Marshal(row)
		require.NoError(t, err)
		b.Write(line)
	}
	b.WriteString("]")
	res, err := s.Import(bg, "inventory", &b, JSON, Upsert)
	require.NoError(t, err)
	assert.Equal(t, n, res.Inserted)
	require.NoError(t, s.Close())

	s = openAt(t, dir)
	row, ok := committed(t, s, "inventory", fmt.Sprintf("SG%03d", n))
	require.True(t, ok)
	assert.Equal(t, fmt.Sprintf("Item %d", n), row["name"])
	require.NoError(t, s.Close())
	rep, err := Check(dir, store.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

// reserveFile grows bbolt's file through bbolt's own handle to whole pages, only for large
// commits, never shrinks it, and leaves the store locked and sound.
func TestReserveFile(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, "data.db"))
		require.NoError(t, err)
		return fi.Size()
	}
	before := size()
	var page, used int64
	reserve := func(need int64) {
		require.NoError(t, s.bolt.db.View(func(tx *bbolt.Tx) error {
			page, used = int64(tx.DB().Info().PageSize), tx.Size()
			reserveFile(s.bolt.file, tx, need)
			return nil
		}))
	}
	reserve(reserveMin - 1)
	assert.Equal(t, before, size(), "a small commit grows nothing")
	reserve(reserveMin)
	grown := size()
	assert.GreaterOrEqual(t, grown, used+3*reserveMin)
	assert.Zero(t, grown%page, "whole pages")
	require.NoError(t, s.bolt.file.Truncate(grown+16*page)) // longer than the next target
	reserve(reserveMin)
	assert.Equal(t, grown+16*page, size(), "never shrinks")

	_, err := Open(dir, Options{LockTimeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, store.ErrInUse, "the store is still locked")
	require.NoError(t, s.Close())
	rep, err := Check(dir, store.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	openAt(t, dir)
}

// endless reads as "[" followed by spaces forever, calling onRead before each read.
type endless struct {
	first  []byte
	onRead func()
}

func (e *endless) Read(p []byte) (int, error) {
	if e.onRead != nil {
		e.onRead()
	}
	if len(e.first) > 0 {
		n := copy(p, e.first)
		e.first = e.first[n:]
		return n, nil
	}
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// A file that never ends a record is refused once it passes MaxRecordBytes, and a cancelled
// import stops while reading one, in JSON and in CSV: neither fills memory nor runs on.
func TestImportOfAnEndlessRecordStops(t *testing.T) {
	s := openTemp(t)
	limit := recordLimit
	if !testtier.Long() {
		recordLimit = 1 << 20 // the bound at work; the long tier reads the real 64 MiB
	}
	_, err := s.Import(bg, "inventory", &endless{first: []byte("[")}, JSON, Upsert)
	recordLimit = limit
	require.ErrorIs(t, err, errRecordTooLarge)
	assert.Contains(t, err.Error(), "64 MiB")

	for _, format := range []Format{JSON, CSV} {
		ctx, cancel := context.WithCancel(bg)
		reads := 0
		first := "["
		if format == CSV {
			first = "item_id,name\nSG100,"
		}
		r := &endless{first: []byte(first), onRead: func() {
			if reads++; reads == 5 {
				cancel()
			}
		}}
		_, err := s.Import(ctx, "inventory", r, format, Upsert)
		require.ErrorIs(t, err, context.Canceled, format)
		assert.Less(t, reads, 10, "the import stops at the next read after the cancellation")
		cancel()
	}
}

// TestSeenKeysIsAMapOfEveryKey holds seenKeys to a map of every key: runs in key order (kept in
// its block), keys out of it (in its map), a key again in either, of both kinds of key, where
// natural order and bytes differ ("SG9" before "SG10").
func TestSeenKeysIsAMapOfEveryKey(t *testing.T) {
	for _, kind := range []string{"string", "int"} {
		t.Run(kind, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			key := func(n int) any {
				if kind == "int" {
					return int64(n - 50)
				}
				return fmt.Sprintf("SG%d", n)
			}
			for round := range 200 {
				var s seenKeys
				want := map[any]int{}
				next := rng.IntN(100)
				for num := range 60 {
					var n int
					switch {
					case round%4 == 0 || rng.IntN(4) > 0: // mostly ascending, some rounds only
						next += rng.IntN(3) // 0: the last key again
						n = next
					default:
						n = rng.IntN(200)
					}
					k := key(n)
					j, dup := s.add(k, num)
					wj, wdup := want[k]
					require.Equal(t, wdup, dup, "round %d, record %d, key %v", round, num, k)
					if dup {
						require.Equal(t, wj, j, "round %d, record %d, key %v", round, num, k)
						continue
					}
					want[k] = num
				}
				for n := range 200 {
					_, in := want[key(n)]
					require.Equal(t, in, s.has(key(n)), "round %d, key %v", round, key(n))
				}
				if round%4 == 0 {
					require.Nil(t, s.out, "keys in order are all in the block")
				}
			}
		})
	}
}

// FuzzSeenKeys holds seenKeys to a map of every key for any sequence of keys a file may hold:
// data is cut into string keys at each ',' (so keys may repeat, ascend in runs, hold digits
// whose natural order differs from their bytes', or be empty), and each is also read as an
// int64 key where it parses as one.
func FuzzSeenKeys(f *testing.F) {
	f.Add("SG1,SG2,SG10,SG9,SG2,SG01")
	f.Add(",0,00,-1,a0,a00,a0")
	f.Add("9223372036854775807,-9223372036854775808,0,-0,+1,1")
	f.Fuzz(func(t *testing.T, data string) {
		keys := strings.Split(data, ",")
		var strs, ints seenKeys
		wantStr, wantInt := map[string]int{}, map[int64]int{}
		for num, k := range keys {
			j, dup := strs.add(k, num)
			wj, wdup := wantStr[k]
			require.Equal(t, wdup, dup, "string key %q, record %d", k, num)
			if dup {
				require.Equal(t, wj, j, "string key %q, record %d", k, num)
			} else {
				wantStr[k] = num
			}
			n, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				continue
			}
			j, dup = ints.add(n, num)
			wj, wdup = wantInt[n]
			require.Equal(t, wdup, dup, "int key %d, record %d", n, num)
			if dup {
				require.Equal(t, wj, j, "int key %d, record %d", n, num)
			} else {
				wantInt[n] = num
			}
		}
		for _, k := range keys {
			require.True(t, strs.has(k), "string key %q", k)
			_, in := wantStr[k+"\x00x"]
			require.Equal(t, in, strs.has(k+"\x00x"), "string key %q", k+"\x00x")
		}
		for n := range wantInt {
			require.True(t, ints.has(n), "int key %d", n)
			if n < math.MaxInt64 {
				_, in := wantInt[n+1]
				require.Equal(t, in, ints.has(n+1), "int key %d", n+1)
			}
		}
	})
}

// An import error quotes a short excerpt of what it read, never a whole foreign file: a file
// that is not a table (a process's environment read as CSV, a JSON object with one huge key)
// is named by its start.
func TestImportErrorsQuoteAnExcerpt(t *testing.T) {
	s := openTemp(t)
	secret := strings.Repeat("SECRET=abcdefgh\x00", 4096)
	for _, tc := range []struct {
		format Format
		input  string
	}{
		{CSV, secret + "\n"},
		{CSV, "item_id," + secret + "\n"},
		{CSV, "item_id,item_id" + "\n"},
		{JSON, `[{"item_id": "SG001", "` + strings.Repeat("k", 64<<10) + `": 1}]`},
		{JSON, `[{"item_id": "SG001", "name": "` + strings.Repeat("n", 64<<10) + `"}]`},
	} {
		_, err := s.Import(bg, "inventory", strings.NewReader(tc.input), tc.format, Upsert)
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 1024, "%.300s", err)
	}
}
