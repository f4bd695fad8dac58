package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/starplan/starplan/store"

	d "github.com/ostafen/clover/v2/document"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ordersDomain has the nested fields real tables need: an address, line items and an open map
// of options.
var ordersDomain = fstest.MapFS{
	"domain.json": {Data: []byte(`{
		"name": "orders",
		"tables": [{
			"name": "orders",
			"key": "order_id",
			"fields": [
				{"name": "order_id", "type": "string", "required": true},
				{"name": "address", "type": "object", "fields": [
					{"name": "street", "type": "string"},
					{"name": "city", "type": "string", "required": true},
					{"name": "zip", "type": "string", "pattern": "[0-9]{4}"}
				]},
				{"name": "lines", "type": "list", "items": {"type": "object", "fields": [
					{"name": "sku", "type": "string", "required": true},
					{"name": "qty", "type": "int", "required": true, "min": 1},
					{"name": "price", "type": "float", "min": 0}
				]}},
				{"name": "tags", "type": "list", "items": {"type": "string", "max_len": 10}},
				{"name": "options", "type": "object", "additional": true, "max_bytes": 200}
			]
		}]
	}`)},
	"seed.json": {Data: []byte(`{"orders": [
		{"order_id": "O1", "address": {"city": "Oslo", "zip": "0150"},
		 "lines": [{"sku": "SG001", "qty": 2, "price": 80}], "tags": ["gift"], "options": {"wrap": true, "n": 2.0}}
	]}`)},
}

func ordersSchema(t testing.TB) *table.Schema {
	t.Helper()
	d, err := store.LoadDomain(ordersDomain)
	require.NoError(t, err)
	return d.Tables[0]
}

func TestValidateNestedKinds(t *testing.T) {
	row, err := validate(ordersSchema(t), table.Row{
		"order_id": "O2",
		"address":  map[string]any{"city": "Bergen", "street": nil},
		"lines":    []any{map[string]any{"sku": "A", "qty": 2.0, "price": 3}},
		"options":  map[string]any{"n": 2.0, "x": 2.5, "deep": []any{int32(1), map[string]any{"k": float32(4)}}},
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"city": "Bergen", "street": nil}, row["address"])
	assert.Equal(t, []any{map[string]any{"sku": "A", "qty": int64(2), "price": 3.0}}, row["lines"],
		"declared kinds inside a list: int64 for int, float64 for float")
	assert.Equal(t, map[string]any{"n": int64(2), "x": 2.5, "deep": []any{int64(1), map[string]any{"k": int64(4)}}}, row["options"],
		"undeclared positions keep whole numbers as ints, as JSON reads them back")
}

func TestValidateNestedRejectsWithPath(t *testing.T) {
	s := ordersSchema(t)
	for _, tc := range []struct {
		name  string
		Field string
		value any
		path  string
		rule  string
	}{
		{"object kind", "address", "Oslo", "address", "must be a dict"},
		{"key kind", "address", map[string]any{"city": 5}, "address.city", "must be a string"},
		{"required key", "address", map[string]any{"street": "Main"}, "address.city", "is required"},
		{"required key None", "address", map[string]any{"city": nil}, "address.city", "is required"},
		{"unknown key", "address", map[string]any{"city": "Oslo", "cty": "x"}, "address.cty", `is not among the keys of address (did you mean "city"?)`},
		{"pattern", "address", map[string]any{"city": "Oslo", "zip": "x"}, "address.zip", "must match the pattern"},
		{"list kind", "lines", map[string]any{}, "lines", "must be a list"},
		{"element bound", "lines", []any{
			map[string]any{"sku": "A", "qty": 1}, map[string]any{"sku": "B", "qty": 1}, map[string]any{"sku": "C", "qty": 0},
		}, "lines[2].qty", "must be an int >= 1"},
		{"element kind", "tags", []any{"a", 1}, "tags[1]", "must be a string"},
		{"element max_len", "tags", []any{"abcdefghijk"}, "tags[0]", "at most 10 characters"},
		{"odd key path", "address", map[string]any{"city": "Oslo", "two words": 1}, `address["two words"]`, "is not among the keys of address (they are street, city, zip)"},
		{"NaN", "options", map[string]any{"x": []any{1, nanValue()}}, "options.x[1]", "must be a finite number"},
		{"bad text", "options", map[string]any{"x": "\xff"}, "options.x", "valid UTF-8"},
		{"Go kind", "options", map[string]any{"x": struct{}{}}, "options.x", "must be None, a bool"},
		{"max_bytes", "options", map[string]any{"x": strings.Repeat("a", 200)}, "options", "must encode to at most 200 bytes (max_bytes)"},
		{"depth", "options", deepList(table.MaxNesting + 1), "options.x" + strings.Repeat("[0]", table.MaxNesting-1), "nests lists and objects more than 8 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validate(s, table.Row{"order_id": "O9", tc.Field: tc.value})
			var fe *table.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.path, fe.Field)
			assert.Contains(t, fe.Rule, tc.rule)
			assert.Contains(t, err.Error(), fmt.Sprintf("field %q", tc.path))
		})
	}
	_, err := validate(s, table.Row{"order_id": "O9", "options": deepList(table.MaxNesting)})
	assert.NoError(t, err, "MaxNesting levels, counting the field's own, are allowed")
	_, err = validate(s, table.Row{"order_id": "O9", "options": map[string]any{"x": strings.Repeat("a", 150)}})
	assert.NoError(t, err, "within max_bytes")
}

func nanValue() float64 { var z float64; return z / z }

// deepList is {"x": [[...[1]...]]} with n levels in all, the object's own included.
func deepList(n int) map[string]any {
	var v any = int64(1)
	for range n - 1 {
		v = []any{v}
	}
	return map[string]any{"x": v}
}

func TestCompileNestedSchemaRejects(t *testing.T) {
	list := func(f table.Field) table.Field { return table.Field{Name: "f", Type: table.TypeList, Items: &f} }
	deep := table.Field{Type: table.TypeInt}
	for range table.MaxNesting {
		deep = table.Field{Name: "f", Type: table.TypeList, Items: &deep}
	}
	for _, tc := range []struct {
		name string
		f    table.Field
		want string
	}{
		{"key kind", table.Field{Name: "id", Type: table.TypeList}, `key field "id" must be a string or an int, not list`},
		{"items on a string", table.Field{Name: "f", Type: table.TypeString, Items: &table.Field{Type: table.TypeInt}}, "items applies to list fields"},
		{"fields on a list", table.Field{Name: "f", Type: table.TypeList, Fields: []table.Field{{Name: "a", Type: table.TypeInt}}}, "fields and additional apply to object fields"},
		{"bad item type", list(table.Field{Type: "date"}), `"f[]": unknown type "date"`},
		{"bad key name", table.Field{Name: "f", Type: table.TypeObject, Fields: []table.Field{{Name: "a.b", Type: table.TypeInt}}}, `key name "a.b"`},
		{"twice", table.Field{Name: "f", Type: table.TypeObject, Fields: []table.Field{{Name: "a", Type: table.TypeInt}, {Name: "a", Type: table.TypeInt}}}, `key "a" is declared twice`},
		{"nested key type", table.Field{Name: "f", Type: table.TypeObject, Fields: []table.Field{{Name: "a", Type: "date"}}}, `"f.a": unknown type "date"`},
		{"max_bytes on a string", table.Field{Name: "f", Type: table.TypeString, MaxBytes: 10}, "max_bytes applies to list, object and map fields"},
		{"max_bytes too large", table.Field{Name: "f", Type: table.TypeList, MaxBytes: table.MaxValueBytes + 1}, "max_bytes must be between 0"},
		{"max_bytes inside", list(table.Field{Type: table.TypeList, MaxBytes: 5}), "apply to a table's own fields"},
		{"too deep", deep, "nest more than 8 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &table.Schema{Name: "t", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeString}, tc.f}}
			if tc.f.Name == "id" {
				s.Fields = s.Fields[1:]
			}
			_, err := store.CompileSchema(s)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// Nested values survive every way the store keeps them: the stage, the pending JSON an apply
// may come back as, bbolt through clover, and a reopened store, with their kinds.
func TestNestedRoundTrip(t *testing.T) {
	d, err := store.LoadDomain(ordersDomain)
	require.NoError(t, err)
	dir := t.TempDir()
	s, err := Open(dir, Options{Domain: d})
	require.NoError(t, err)
	v := s.Stage()
	orders := tbl(t, v, "orders")
	seeded, ok, err := orders.Get("O1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []any{map[string]any{"sku": "SG001", "qty": int64(2), "price": 80.0}}, seeded["lines"], "the seed's kinds")
	assert.Equal(t, map[string]any{"wrap": true, "n": int64(2)}, seeded["options"])

	_, err = orders.Insert(table.Row{"order_id": "O2", "address": map[string]any{"city": "Bergen"},
		"lines": []any{map[string]any{"sku": "A", "qty": 1, "price": 2}, map[string]any{"sku": "B", "qty": 3, "price": 0.5}}})
	require.NoError(t, err)
	n, err := orders.Update(table.Row{"address": map[string]any{"city": "Bergen", "zip": "5003"}, "tags": []any{}},
		table.Query{Where: map[string]any{"order_id": "O1"}})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = orders.Update(table.Row{"lines": []any{map[string]any{"sku": "A", "qty": 0}}}, table.Query{})
	var fe *table.FieldError
	require.ErrorAs(t, err, &fe, "update validates nested values too")
	assert.Equal(t, "lines[0].qty", fe.Field)

	raw, err := json.Marshal(v.Pending())
	require.NoError(t, err)
	var p store.Pending
	require.NoError(t, json.Unmarshal(raw, &p))
	require.NoError(t, s.ApplyPending(bg, &p, nil))
	require.NoError(t, s.Close())

	s, err = Open(dir, Options{MustExist: true})
	require.NoError(t, err)
	defer s.Close()
	orders = tbl(t, s.Stage(), "orders")
	o1, _, err := orders.Get("O1")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"city": "Bergen", "zip": "5003"}, o1["address"])
	assert.Equal(t, []any{}, o1["tags"])
	assert.Equal(t, map[string]any{"wrap": true, "n": int64(2)}, o1["options"])
	o2, _, err := orders.Get("O2")
	require.NoError(t, err)
	assert.Equal(t, []any{
		map[string]any{"sku": "A", "qty": int64(1), "price": 2.0},
		map[string]any{"sku": "B", "qty": int64(3), "price": 0.5},
	}, o2["lines"])
	assert.Nil(t, o2["tags"])
}

// Export writes a nested value as JSON (in a CSV cell too), and import reads it back as the
// same value with the same kinds.
func TestNestedExportImport(t *testing.T) {
	d, err := store.LoadDomain(ordersDomain)
	require.NoError(t, err)
	for _, format := range []Format{JSON, CSV} {
		t.Run(string(format), func(t *testing.T) {
			src, err := Open(t.TempDir(), Options{Domain: d})
			require.NoError(t, err)
			defer src.Close()
			dst, err := Open(t.TempDir(), Options{Domain: d, NoSeed: true})
			require.NoError(t, err)
			defer dst.Close()
			var b bytes.Buffer
			require.NoError(t, src.Export(&b, "orders", format))
			_, err = dst.Import(bg, "orders", &b, format, Replace)
			require.NoError(t, err)
			want, _ := committed(t, src, "orders", "O1")
			got, _ := committed(t, dst, "orders", "O1")
			assert.Equal(t, want, got)
		})
	}
}

// Filters on nested values go through the store's indexes and columns like any other: a path's
// equality is never answered from an index of whole values.
func TestNestedWhereThroughTheStore(t *testing.T) {
	d, err := store.LoadDomain(ordersDomain)
	require.NoError(t, err)
	s, err := Open(t.TempDir(), Options{Domain: d})
	require.NoError(t, err)
	defer s.Close()
	orders := tbl(t, s.Stage(), "orders")
	_, err = orders.Insert(table.Row{"order_id": "O2", "address": map[string]any{"city": "Bergen"}, "tags": []any{"rush"}})
	require.NoError(t, err)
	for _, tc := range []struct {
		where map[string]any
		want  []any
	}{
		{where("address.city", "Oslo"), []any{"O1"}},
		{where("address.city", "Bergen", "order_id", "O2"), []any{"O2"}},
		{where("tags", []any{"rush"}), []any{"O2"}},
		{where("tags", map[string]any{"$contains": "gift"}), []any{"O1"}},
		{where("address", map[string]any{"city": "Bergen"}), []any{"O2"}},
	} {
		assert.Equal(t, tc.want, keys(t, find(t, orders, table.Query{Where: tc.where}), "order_id"), "%v", tc.where)
	}
	_, err = orders.Find(table.Query{Where: where("address.cty", "Oslo")})
	assert.ErrorContains(t, err, `did you mean "city"?`)
}

// FuzzNestedValue: whatever value a plan hands over (here any JSON document, as a list field,
// an object field with declared keys and an open one), validation either refuses it with a path
// or returns a value that validates to itself and survives the store's encoding (clover's
// msgpack, read back by decodeRow) and JSON (records, exports) with the same kinds.
func FuzzNestedValue(f *testing.F) {
	for _, seed := range []string{
		`{"city": "Oslo", "zip": "0150"}`, `[{"sku": "A", "qty": 2, "price": 80}]`, `["a", "b"]`,
		`{"wrap": true, "n": 2.0, "x": [1, 2.5, {"k": null}]}`, `[[[[[[[[[1]]]]]]]]]`, `{"city": 5}`,
		`[{"sku": "A", "qty": 0}]`, `{"": {"a b": -1e300}}`, `"x"`, `null`, `[1e20, -0.0, 9007199254740993]`,
	} {
		f.Add([]byte(seed))
	}
	s, err := store.CompileSchema(ordersSchema(f))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		v = store.FromJSON(v)
		for _, name := range []string{"address", "lines", "tags", "options"} {
			row, err := s.ValidateRow(table.Row{"order_id": "O1", name: v})
			if err != nil {
				var fe *table.FieldError
				require.ErrorAs(t, err, &fe)
				require.True(t, strings.HasPrefix(fe.Field, name), "the path %q starts at the field %s", fe.Field, name)
				continue
			}
			again, err := s.ValidateRow(row)
			require.NoError(t, err, "a stored value validates again")
			require.Equal(t, row, again, "and is its own stored form")

			raw, err := d.Encode(encodeDoc(rowDocID(1, 1), row, 1))
			require.NoError(t, err)
			back, _, err := decodeRow(s, raw)
			require.NoError(t, err)
			require.Equal(t, row, back, "through the store's encoding")

			js, err := json.Marshal(row)
			require.NoError(t, err)
			jdec := json.NewDecoder(bytes.NewReader(js))
			jdec.UseNumber()
			var jrow map[string]any
			require.NoError(t, jdec.Decode(&jrow))
			jrow = store.FromJSON(jrow).(map[string]any)
			jrow[name] = table.RestoreKinds(s.FieldsByName[name].Field, jrow[name])
			require.Equal(t, row, table.Row(jrow), "through JSON with the schema's kinds")
		}
	})
}
