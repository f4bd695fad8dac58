package diffview

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

var update = flag.Bool("update", false, "rewrite golden files")

func inventorySchema() *table.Schema {
	return &table.Schema{Name: "inventory", Key: "item_id", Fields: []table.Field{
		{Name: "item_id", Type: table.TypeString},
		{Name: "name", Type: table.TypeString},
		{Name: "description", Type: table.TypeString},
		{Name: "quantity_in_stock", Type: table.TypeInt},
		{Name: "price", Type: table.TypeFloat},
	}}
}

func transactionsSchema() *table.Schema {
	return &table.Schema{Name: "transactions", Key: "transaction_id", Fields: []table.Field{
		{Name: "transaction_id", Type: table.TypeString},
		{Name: "customer_name", Type: table.TypeString},
		{Name: "transaction_summary", Type: table.TypeString},
		{Name: "transaction_amount", Type: table.TypeFloat},
		{Name: "balance_after_transaction", Type: table.TypeFloat},
		{Name: "timestamp", Type: table.TypeTimestamp},
	}}
}

func schemas() map[string]*table.Schema {
	return map[string]*table.Schema{"inventory": inventorySchema(), "transactions": transactionsSchema()}
}

const (
	aviatorDesc = "Originally designed for pilots, these teardrop-shaped lenses with thin metal frames offer timeless appeal. The large lenses provide excellent coverage while the lightweight construction ensures comfort during long wear."
	classicDesc = "Classic round profile with minimalist metal frames, offering a timeless and versatile style that fits both casual and formal wear."
)

func item(id, name, desc string, qty int64, price float64) table.Row {
	return table.Row{"item_id": id, "name": name, "description": desc, "quantity_in_stock": qty, "price": price}
}

// stock is an update of quantity_in_stock.
func stock(id, name, desc string, price float64, before, after int64) table.Update {
	return table.Update{
		Key:    id,
		Before: item(id, name, desc, before, price),
		After:  item(id, name, desc, after, price),
		Fields: []string{"quantity_in_stock"},
	}
}

func txn(id, customer, summary string, amount, balance float64) table.Row {
	return table.Row{
		"transaction_id": id, "customer_name": customer, "transaction_summary": summary,
		"transaction_amount": amount, "balance_after_transaction": balance, "timestamp": "2025-01-02T10:00:00",
	}
}

// purchase is a two-item sale: two stock updates and two transactions.
func purchase() table.ChangeSet {
	return table.ChangeSet{
		"inventory": {Key: "item_id", Updated: []table.Update{
			stock("SG001", "Aviator", aviatorDesc, 80.0, 23, 21),
			stock("SG002", "Wayfarer", "Featuring thick, angular frames.", 95.0, 6, 5),
		}},
		"transactions": {Key: "transaction_id", Inserted: []table.Row{
			txn("TXN002", "Ana", "Sold 2 Aviator (SG001)", 160.0, 660.0),
			txn("TXN003", "Ana", "Sold 1 Wayfarer (SG002)", 95.0, 755.0),
		}},
	}
}

type testCase struct {
	name    string
	cs      table.ChangeSet
	schemas map[string]*table.Schema
	width   int
}

func cases() []testCase {
	classicAfter := item("SG005", "Classic", "Classic round profile with slim titanium frames, offering a timeless and versatile style that fits both casual and formal wear. Now with polarised lenses.", 10, 65.0)
	return []testCase{
		{name: "purchase", cs: purchase(), schemas: schemas()},
		{name: "purchase_no_schema", cs: purchase()},
		{name: "purchase_narrow", cs: purchase(), schemas: schemas(), width: 50},
		{name: "insert_only", cs: table.ChangeSet{
			"inventory": {Key: "item_id", Inserted: []table.Row{
				item("SG007", "Cat Eye", "Upswept outer corners and a slim acetate frame.", 8, 85.5),
			}},
			"transactions": {Key: "transaction_id", Inserted: []table.Row{
				{"transaction_id": "TXN002", "customer_name": "Bo", "transaction_amount": 85.5},
			}},
		}},
		{name: "deletion", cs: table.ChangeSet{
			"inventory": {Key: "item_id", Deleted: []table.Row{
				item("SG006", "Moon", "Oversized round style with bold plastic frames, evoking retro aesthetics with a modern twist.", 10, 120.0),
			}},
		}, schemas: schemas()},
		{name: "long_description", cs: table.ChangeSet{
			"inventory": {Key: "item_id", Updated: []table.Update{{
				Key:    "SG005",
				Before: item("SG005", "Classic", classicDesc, 10, 60.0),
				After:  classicAfter,
				Fields: []string{"description", "price"},
			}}},
		}, schemas: schemas()},
		{name: "mixed", cs: table.ChangeSet{
			"inventory": {Key: "item_id",
				Inserted: []table.Row{{"item_id": "SG007", "name": "Round", "quantity_in_stock": int64(4), "price": 45.0}},
				Updated:  []table.Update{stock("SG003", "Mystique", "Inspired by 1950s glamour.", 70.0, 3, 0)},
				Deleted:  []table.Row{{"item_id": "SG004", "name": "Sport", "quantity_in_stock": int64(11), "price": 110.0}},
			},
			"unchanged": {Key: "id"},
		}, schemas: schemas()},
		{name: "values", cs: table.ChangeSet{
			"misc": {Key: "id",
				Inserted: []table.Row{
					{"id": int64(1), "none": nil, "flag": true, "count": int64(-3), "ratio": 0.5, "big": 1e16, "tiny": 1e-5, "whole": 2.0, "empty": ""},
					{"id": int64(2), "none": nil, "flag": false, "count": int64(0), "ratio": math.Copysign(0, -1), "big": 123456789.125, "tiny": 0.0001, "whole": 1e15, "empty": " padded "},
				},
				Updated: []table.Update{{
					Key:    int64(3),
					Before: table.Row{"id": int64(3), "none": nil, "flag": true, "count": int64(3), "code": "1", "tags": []any{"a", int64(1)}, "meta": nil},
					After:  table.Row{"id": int64(3), "none": int64(1), "flag": false, "count": 3.5, "code": int64(1), "tags": []any{"a", "it's"}, "meta": map[string]any{"b": 2.0, "a": nil}},
					Fields: []string{"code", "count", "flag", "meta", "none", "tags"},
				}},
			},
		}},
		{name: "escaping", cs: table.ChangeSet{
			"notes": {Key: "id",
				Inserted: []table.Row{
					{"id": "N1", "text": "a | b", "html": "<b>bold</b> & *stars* _under_ snake_case `code` [link](x) \\"},
				},
				Updated: []table.Update{{
					Key:    "N2",
					Before: table.Row{"id": "N2", "text": "first line\nsecond | line", "html": "plain"},
					After:  table.Row{"id": "N2", "text": "first line\nsecond || line\nthird", "html": "\x1b[2Jhidden\u200bzero\u202eright"},
					Fields: []string{"html", "text"},
				}},
			},
		}},
		{name: "empty", cs: table.ChangeSet{"inventory": {Key: "item_id"}}},
	}
}

func golden(t *testing.T, name string, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run `go test ./diffview -update` to create it")
	assert.Equal(t, string(want), got)
}

func TestGolden(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Schemas: tc.schemas, Width: tc.width}
			var term, color, md, js bytes.Buffer
			require.NoError(t, Terminal(&term, tc.cs, opts))
			opts.Color = true
			require.NoError(t, Terminal(&color, tc.cs, opts))
			require.NoError(t, Markdown(&md, tc.cs, opts))
			require.NoError(t, JSON(&js, tc.cs))

			golden(t, tc.name+".txt", term.String())
			golden(t, tc.name+".color.txt", color.String())
			golden(t, tc.name+".md", md.String())
			golden(t, tc.name+".json", js.String())

			assert.NotContains(t, term.String(), "\x1b", "no colour unless asked")
			assert.True(t, json.Valid(js.Bytes()))
		})
	}
}

func TestEmpty(t *testing.T) {
	for _, cs := range []table.ChangeSet{nil, {}, {"t": nil}, {"t": {Key: "id"}}} {
		var term, md, js bytes.Buffer
		require.NoError(t, Terminal(&term, cs, Options{Color: true}))
		require.NoError(t, Markdown(&md, cs, Options{}))
		require.NoError(t, JSON(&js, cs))
		assert.Equal(t, "no changes\n", term.String())
		assert.Equal(t, "No changes.\n", md.String())
		assert.Equal(t, "{}\n", js.String())
	}
}

// sgrRE matches the colour codes the terminal view itself emits.
var sgrRE = regexp.MustCompile(`\x1b\[(0|1|2|31|32)m`)

func TestPlanDataCannotStyleTheView(t *testing.T) {
	cs := table.ChangeSet{"t": {Key: "id", Inserted: []table.Row{
		{"id": "x\x1b[2J", "v": "\x1b]8;;http://evil\x07click\u202egnp.exe\u200b\x9b31m\xff"},
	}}}
	for _, color := range []bool{false, true} {
		var out bytes.Buffer
		require.NoError(t, Terminal(&out, cs, Options{Color: color}))
		s := sgrRE.ReplaceAllString(out.String(), "")
		assert.NotContains(t, s, "\x1b")
		assert.NotContains(t, s, "\x07")
		assert.NotContains(t, s, "\u202e")
		assert.NotContains(t, s, "\u200b")
		assert.NotContains(t, s, "\u009b")
		assert.Contains(t, s, `x\x1b[2J`)
		assert.Contains(t, s, `\x1b]8;;http://evil\x07click\u202egnp.exe\u200b\x9b31m\xff`)
	}
}

func TestColourMarksOldAndNew(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Terminal(&out, purchase(), Options{Color: true}))
	assert.Contains(t, out.String(), "\x1b[31m23\x1b[0m → \x1b[32m21\x1b[0m")
}

func TestRecordsWrapToWidth(t *testing.T) {
	for _, width := range []int{40, 60, 100} {
		for _, tc := range cases() {
			var out bytes.Buffer
			require.NoError(t, Terminal(&out, tc.cs, Options{Width: width, Schemas: tc.schemas}))
			for _, line := range strings.Split(out.String(), "\n") {
				assert.LessOrEqual(t, strWidth(line), width, "%s at width %d: %q", tc.name, width, line)
			}
		}
	}
}

func TestGridWhenItFits(t *testing.T) {
	var wide, narrow bytes.Buffer
	require.NoError(t, Terminal(&wide, purchase(), Options{Width: 200, Schemas: schemas()}))
	require.NoError(t, Terminal(&narrow, purchase(), Options{Width: 100, Schemas: schemas()}))
	assert.Contains(t, wide.String(), "  + TXN002          Ana            Sold 2 Aviator (SG001)")
	assert.Contains(t, narrow.String(), "  + TXN002\n      customer_name")
}

func TestWordDiff(t *testing.T) {
	pairs := [][2]string{
		{aviatorDesc, strings.ReplaceAll(aviatorDesc, "pilots", "aviators and pilots")},
		{"red wooden frames", "blue metal frames"},
		{"a  b", "a b"},
		{"", "new words"},
		{"old words", ""},
		{"line one\nline two", "line one\nline 2\n"},
		{"日本 の 眼鏡", "日本 の サングラス"},
	}
	for _, p := range pairs {
		var a, b strings.Builder
		for _, c := range wordDiff(p[0], p[1]) {
			a.WriteString(c.Same + c.Del)
			b.WriteString(c.Same + c.Ins)
			if c.Same == "" {
				assert.True(t, c.Del != "" || c.Ins != "", "an edit changes something")
			}
		}
		assert.Equal(t, p[0], a.String(), "old side of %q", p)
		assert.Equal(t, p[1], b.String(), "new side of %q", p)
	}
	assert.Equal(t, []change{{Del: "red wooden", Ins: "blue metal"}, {Same: " frames"}},
		wordDiff("red wooden frames", "blue metal frames"), "edits split only by spaces are joined")
}

func TestWordDiffManyWords(t *testing.T) {
	// More distinct words than there are code points below the surrogates.
	var a, b strings.Builder
	for i := range 60000 {
		a.WriteString(" w")
		a.WriteString(strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i))
		if i%1000 != 0 {
			b.WriteString(" w" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i))
		}
	}
	var olds, news strings.Builder
	for _, c := range wordDiff(a.String(), b.String()) {
		olds.WriteString(c.Same + c.Del)
		news.WriteString(c.Same + c.Ins)
	}
	assert.Equal(t, a.String(), olds.String())
	assert.Equal(t, b.String(), news.String())
}

func TestWrap(t *testing.T) {
	lines := func(s string, width int) []string {
		var tx text
		tx.add(s, plain)
		var out []string
		for _, l := range wrap(tx, width) {
			var sb strings.Builder
			l.write(&sb, false)
			out = append(out, sb.String())
		}
		return out
	}
	assert.Equal(t, []string{"one two", "three"}, lines("one two three", 9))
	assert.Equal(t, []string{"see", "https://exa", "mple.com/lo", "ng ok"}, lines("see https://example.com/long ok", 11))
	assert.Equal(t, []string{"日本の", "眼鏡 ab"}, lines("日本の眼鏡 ab", 7), "wide characters take two columns")
	assert.Equal(t, []string{"a", "", "b"}, lines("a\n\nb", 10))
}

func TestSpacingChangeIsVisible(t *testing.T) {
	var tx strings.Builder
	changeText("a  b"+strings.Repeat(" x", 20), "a b"+strings.Repeat(" x", 20)).write(&tx, false)
	assert.True(t, strings.HasPrefix(tx.String(), "a[-  -]{+ +}b x"), tx.String())
}

func TestPyFloat(t *testing.T) {
	for f, want := range map[float64]string{
		80: "80.0", 0: "0.0", 0.5: "0.5", 0.1: "0.1", 1e15: "1000000000000000.0", 1e16: "1e+16",
		1.5e300: "1.5e+300", 1e-4: "0.0001", 1e-5: "1e-05", -2.25: "-2.25", 123456789.125: "123456789.125",
	} {
		assert.Equal(t, want, pyFloat(f), "%v", f)
	}
}

func TestMarkdownEscape(t *testing.T) {
	assert.Equal(t, `a \| b<br>c`, mdEscape("a | b\nc"))
	assert.Equal(t, `snake_case \_x\_ \*y\* \~\~z\~\~ \<b\> \&amp; \\`, mdEscape(`snake_case _x_ *y* ~~z~~ <b> &amp; \`))
}

func TestJSONShape(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, JSON(&out, purchase()))
	var doc map[string]struct {
		Key      string           `json:"key"`
		Inserted []map[string]any `json:"inserted"`
		Updated  []struct {
			Key    string         `json:"key"`
			Before map[string]any `json:"before"`
			After  map[string]any `json:"after"`
			Fields []string       `json:"fields"`
		} `json:"updated"`
		Deleted []map[string]any `json:"deleted"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	assert.Equal(t, "item_id", doc["inventory"].Key)
	require.Len(t, doc["inventory"].Updated, 2)
	assert.Equal(t, "SG001", doc["inventory"].Updated[0].Key)
	assert.Equal(t, []string{"quantity_in_stock"}, doc["inventory"].Updated[0].Fields)
	assert.NotNil(t, doc["inventory"].Inserted)
	assert.Len(t, doc["transactions"].Inserted, 2)
	assert.Contains(t, out.String(), `"transaction_amount": 160.0`)
}

func TestJSONEscapesFormatCharacters(t *testing.T) {
	v := "a\u200bb\u202ec\U000e0001d\x1b"
	var out bytes.Buffer
	require.NoError(t, JSON(&out, table.ChangeSet{"t": {Key: "id", Inserted: []table.Row{{"id": v}}}}))
	assert.Contains(t, out.String(), `"a\u200bb\u202ec\udb40\udc01d\u001b"`)
	var doc map[string]struct{ Inserted []table.Row }
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	assert.Equal(t, v, doc["t"].Inserted[0]["id"], "the escapes decode to the same string")
}

func TestJSONRejectsNaN(t *testing.T) {
	nan := 0.0
	nan /= nan
	var out bytes.Buffer
	err := JSON(&out, table.ChangeSet{"t": {Key: "id", Inserted: []table.Row{{"id": "a", "x": nan}}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nan")
	assert.Zero(t, out.Len())
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterError(t *testing.T) {
	assert.EqualError(t, Terminal(failingWriter{}, purchase(), Options{}), "disk full")
	assert.EqualError(t, Markdown(failingWriter{}, purchase(), Options{}), "disk full")
	assert.EqualError(t, JSON(failingWriter{}, purchase()), "disk full")
}

func BenchmarkTerminal(b *testing.B) {
	cs := table.ChangeSet{"inventory": {Key: "item_id", Updated: []table.Update{
		stock("SG001", "Aviator", aviatorDesc, 80.0, 23, 21),
		stock("SG002", "Wayfarer", "Featuring thick, angular frames.", 95.0, 6, 5),
	}}}
	opts := Options{Color: true, Schemas: schemas()}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := Terminal(&buf, cs, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPurchase(b *testing.B) {
	cs, opts := purchase(), Options{Color: true, Schemas: schemas()}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		_ = Terminal(&buf, cs, opts)
		_ = Markdown(&buf, cs, opts)
		_ = JSON(&buf, cs)
	}
}

// TestViaShown: a row a helper wrote says so in every view; a plan's own row says nothing.
func TestViaShown(t *testing.T) {
	cs := table.ChangeSet{"payments": {
		Key:      "payment_id",
		Inserted: []table.Row{{"payment_id": "PAY003", "amount": 5.0}, {"payment_id": "PAY004", "amount": 1.0}},
		Updated:  []table.Update{{Key: "PAY001", Before: table.Row{"payment_id": "PAY001", "amount": 1.0}, After: table.Row{"payment_id": "PAY001", "amount": 2.0}, Fields: []string{"amount"}}},
		Deleted:  []table.Row{},
		Via:      map[string]string{"PAY003": "pay", "PAY001": "refund"},
	}}
	var term, md, js bytes.Buffer
	require.NoError(t, Terminal(&term, cs, Options{}))
	require.NoError(t, Markdown(&md, cs, Options{}))
	require.NoError(t, JSON(&js, cs))
	assert.Contains(t, term.String(), "PAY003  (by pay)")
	assert.Contains(t, term.String(), "PAY001  (by refund)")
	assert.NotContains(t, term.String(), "PAY004  (by")
	assert.Contains(t, md.String(), "| inserted by pay | PAY003 |")
	assert.Contains(t, md.String(), "| updated by refund | PAY001 |")
	assert.Contains(t, md.String(), "| inserted | PAY004 |")
	var doc map[string]struct {
		Via map[string]string `json:"via"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	assert.Equal(t, map[string]string{"PAY003": "pay", "PAY001": "refund"}, doc["payments"].Via)
	cells := Cells(cs, Options{})
	require.Len(t, cells, 1)
	var via []string
	for _, r := range cells[0].Rows {
		via = append(via, r.Key+":"+r.Via)
	}
	assert.Equal(t, []string{"PAY003:pay", "PAY004:", "PAY001:refund"}, via)
}
