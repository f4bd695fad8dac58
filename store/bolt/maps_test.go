package bolt

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	d "github.com/ostafen/clover/v2/document"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// shopDomain is testdata/domains/shop: users with payment methods by id, products with variants
// by item id (maps of objects holding floats, lists and maps) and a list of maps.
func shopDomain(t testing.TB) *store.Domain {
	t.Helper()
	d, err := store.LoadDomain(os.DirFS("../../testdata/domains/shop"))
	require.NoError(t, err)
	return d
}

func shopSchema(t testing.TB, name string) *store.Schema {
	t.Helper()
	sc, err := shopDomain(t).Schemas()
	require.NoError(t, err)
	return sc[name]
}

// A map's values take their declared kinds at every depth: an int given for a float is a float
// (100 → 100.0), a whole float stays a float, inside lists and maps of maps too.
func TestMapValidateKinds(t *testing.T) {
	users := shopSchema(t, "users")
	row, err := users.ValidateRow(table.Row{"user_id": "U9", "name": "x",
		"payment_methods": map[string]any{
			"gc_1": map[string]any{"source": "gift_card", "balance": int64(57), "refunds": []any{int64(1), 2.5}},
			"cc_1": map[string]any{"source": "credit_card", "balance": 57.0},
		},
		"credit": map[string]any{"USD": 3, "EUR": float32(0.5)},
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"gc_1": map[string]any{"source": "gift_card", "balance": 57.0, "refunds": []any{1.0, 2.5}},
		"cc_1": map[string]any{"source": "credit_card", "balance": 57.0},
	}, row["payment_methods"])
	assert.Equal(t, map[string]any{"USD": 3.0, "EUR": 0.5}, row["credit"])

	products := shopSchema(t, "products")
	row, err = products.ValidateRow(table.Row{"product_id": "P9", "name": "x",
		"variants":      map[string]any{"1234567890": map[string]any{"price": 50, "available": true, "options": map[string]any{"color": "red"}}},
		"price_history": []any{map[string]any{"1234567890": 40}, map[string]any{}},
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"1234567890": map[string]any{"price": 50.0, "available": true, "options": map[string]any{"color": "red"}}}, row["variants"])
	assert.Equal(t, []any{map[string]any{"1234567890": 40.0}, map[string]any{}}, row["price_history"])
}

// Every value and every key of a map is checked; the error names the entry's path.
func TestMapValidateRejectsWithPath(t *testing.T) {
	users, products := shopSchema(t, "users"), shopSchema(t, "products")
	gc := func(kv ...any) map[string]any {
		m := map[string]any{"source": "gift_card"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		schema *store.Schema
		field  string
		value  any
		path   string
		rule   string
	}{
		{"value kind", users, "payment_methods", map[string]any{"gc_1": gc("balance", "57")}, "payment_methods.gc_1.balance", "must be a number"},
		{"value bound", users, "payment_methods", map[string]any{"gc_1": gc("balance", -1.0)}, "payment_methods.gc_1.balance", "must be a number >= 0"},
		{"value enum", users, "payment_methods", map[string]any{"gc_1": map[string]any{"source": "cash"}}, "payment_methods.gc_1.source", "must be one of"},
		{"value required key", users, "payment_methods", map[string]any{"gc_1": map[string]any{"balance": 1.0}}, "payment_methods.gc_1.source", "is required"},
		{"value unknown key", users, "payment_methods", map[string]any{"gc_1": gc("balanse", 1.0)}, "payment_methods.gc_1.balanse", `did you mean "balance"?`},
		{"value not an object", users, "payment_methods", map[string]any{"gc_1": 57.0}, "payment_methods.gc_1", "must be a dict"},
		{"list inside a value", users, "payment_methods", map[string]any{"gc_1": gc("refunds", []any{1.0, "x"})}, "payment_methods.gc_1.refunds[1]", "must be a number"},
		{"key pattern", users, "payment_methods", map[string]any{"gift1": gc()}, "payment_methods.gift1", "cannot be a key: keys here must match the pattern (gc|cc|pp)_[0-9a-z_]+ (keys.pattern)"},
		{"odd key path", users, "payment_methods", map[string]any{"gc-1": gc()}, `payment_methods["gc-1"]`, "keys.pattern"},
		{"key max_len", users, "payment_methods", map[string]any{"gc_" + strings.Repeat("a", 40): gc()}, "payment_methods.gc_" + strings.Repeat("a", 40), "keys here have at most 40 characters (keys.max_len)"},
		{"key not text", users, "credit", map[string]any{"\xff": 1.0}, `credit["\xff"]`, "not valid UTF-8"},
		{"not a dict", users, "credit", []any{1.0}, "credit", "must be a dict (a map from keys to values)"},
		{"scalar value kind", users, "credit", map[string]any{"USD": true}, "credit.USD", "must be a number"},
		{"map in a map", products, "variants", map[string]any{"1234567890": map[string]any{"price": 1.0, "available": true, "options": map[string]any{"color": 3}}}, `variants["1234567890"].options.color`, "must be a string"},
		{"map in a list", products, "price_history", []any{map[string]any{}, map[string]any{"1": "x"}}, `price_history[1]["1"]`, "must be a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := table.Row{tc.schema.Key: "U1", "name": "x", tc.field: tc.value}
			if tc.schema == users && tc.field != "payment_methods" {
				row["payment_methods"] = map[string]any{}
			}
			if tc.schema == products && tc.field != "variants" {
				row["variants"] = map[string]any{}
			}
			_, err := tc.schema.ValidateRow(row)
			var fe *table.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.path, fe.Field)
			assert.Contains(t, fe.Rule, tc.rule)
		})
	}
	_, err := users.ValidateRow(table.Row{"user_id": "U1", "name": "x", "payment_methods": map[string]any{"gc_" + strings.Repeat("a", 37): gc()}})
	assert.NoError(t, err, "a key of keys.max_len characters")
	_, err = users.ValidateRow(table.Row{"user_id": "U1", "name": "x", "payment_methods": map[string]any{}})
	assert.NoError(t, err, "an empty map")
	_, err = users.ValidateRow(table.Row{"user_id": "U1", "name": "x"})
	assert.ErrorContains(t, err, `field "payment_methods" = None is required`)
}

func TestCompileMapSchemaRejects(t *testing.T) {
	float := &table.Field{Type: table.TypeFloat}
	for _, tc := range []struct {
		name string
		f    table.Field
		want string
	}{
		{"no values", table.Field{Name: "f", Type: table.TypeMap}, `"f": a map declares the type of its values`},
		{"values on an object", table.Field{Name: "f", Type: table.TypeObject, Values: float}, "values and keys apply to map fields"},
		{"keys on a list", table.Field{Name: "f", Type: table.TypeList, Keys: &table.KeyRule{Pattern: "a"}}, "values and keys apply to map fields"},
		{"bad key pattern", table.Field{Name: "f", Type: table.TypeMap, Values: float, Keys: &table.KeyRule{Pattern: "("}}, `"f": keys: pattern:`},
		{"negative key max_len", table.Field{Name: "f", Type: table.TypeMap, Values: float, Keys: &table.KeyRule{MaxLen: -1}}, "keys: max_len must be >= 0"},
		{"bad value type", table.Field{Name: "f", Type: table.TypeMap, Values: &table.Field{Type: "money"}}, `"f[]": unknown type "money"`},
		{"named values", table.Field{Name: "f", Type: table.TypeMap, Values: &table.Field{Name: "v", Type: table.TypeFloat}}, "values: name, max_bytes and read_only apply to a table's own fields"},
		{"nested map without values", table.Field{Name: "f", Type: table.TypeList, Items: &table.Field{Type: table.TypeMap}}, `"f[]": a map declares the type of its values`},
		{"indexed", table.Field{Name: "f", Type: table.TypeMap, Values: float}, "a map field cannot be indexed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &table.Schema{Name: "t", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeString}, tc.f}}
			if tc.name == "indexed" {
				s.Indexes = []string{"f"}
			}
			_, err := store.CompileSchema(s)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// The seed's maps come back from the store with their kinds, after a write through a stage, the
// pending JSON an apply may come back as, and a reopen.
func TestMapRoundTripThroughTheStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Domain: shopDomain(t)})
	require.NoError(t, err)
	v := s.Stage()
	users := tbl(t, v, "users")
	u1, ok, err := users.Get("U1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"source": "gift_card", "balance": 100.0}, u1["payment_methods"].(map[string]any)["gc_2"], "the seed's 100 is a float")

	pms := map[string]any{"gc_1": map[string]any{"source": "gift_card", "balance": 57.0}, "gc_3": map[string]any{"source": "gift_card", "balance": 0.0}}
	_, err = users.Update(table.Row{"payment_methods": pms, "credit": map[string]any{"USD": 2.0}}, table.Query{Where: where("user_id", "U2")})
	require.NoError(t, err)
	_, err = users.Update(table.Row{"payment_methods": map[string]any{"gc_1": map[string]any{"source": "gift_card", "balance": "57"}}}, table.Query{})
	var fe *table.FieldError
	require.ErrorAs(t, err, &fe, "update validates map values too")
	assert.Equal(t, "payment_methods.gc_1.balance", fe.Field)

	raw, err := json.Marshal(v.Pending())
	require.NoError(t, err)
	var p store.Pending
	require.NoError(t, json.Unmarshal(raw, &p))
	require.NoError(t, s.ApplyPending(bg, &p, nil))
	require.NoError(t, s.Close())

	s, err = Open(dir, Options{MustExist: true})
	require.NoError(t, err)
	defer s.Close()
	u2, _ := committed(t, s, "users", "U2")
	assert.Equal(t, pms, u2["payment_methods"])
	assert.Equal(t, map[string]any{"USD": 2.0}, u2["credit"])
}

// Where paths reach into maps: an entry by its key, or any entry with *.
func TestMapWhereThroughTheStore(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Domain: shopDomain(t)})
	require.NoError(t, err)
	defer s.Close()
	users, products := tbl(t, s.Stage(), "users"), tbl(t, s.Stage(), "products")
	for _, tc := range []struct {
		tb    table.Table
		where map[string]any
		want  []any
	}{
		{users, where("payment_methods.*.source", "gift_card"), []any{"U1"}},
		{users, where("payment_methods.*.source", "paypal"), []any{"U2"}},
		{users, where("payment_methods.*.source", map[string]any{"$in": []any{"paypal", "credit_card"}}), []any{"U1", "U2"}},
		{users, where("payment_methods.gc_1.balance", 57), []any{"U1"}},
		{users, where("payment_methods.gc_2.balance", map[string]any{"$gte": 100}), []any{"U1"}},
		{users, where("payment_methods.*.balance", map[string]any{"$gt": 60, "$lt": 99}), []any{}},
		{users, where("payment_methods.*.balance", map[string]any{"$gt": 50, "$lt": 99}), []any{"U1"}},
		{users, where("payment_methods.*.refunds", map[string]any{"$contains": 2.5}), []any{"U1"}},
		{users, where("payment_methods.gc_9.source", nil), []any{"U1", "U2"}},
		{users, where("credit.USD", 1031), []any{"U1"}},
		{users, where("credit", map[string]any{"USD": 1031.0, "EUR": 0.5}), []any{"U1"}},
		{products, where("variants.*.options.color", "gold"), []any{"P1"}},
		{products, where("variants.*.available", false, "variants.*.price", 80), []any{"P1"}},
	} {
		got := keys(t, find(t, tc.tb, table.Query{Where: tc.where}), tc.tb.Schema().Key)
		assert.Equal(t, tc.want, got, "%v", tc.where)
	}
	for where, want := range map[string]string{
		"payment_methods.*.sorce":  `"sorce" is not among the keys of payment_methods.*`,
		"payment_methods.*.*":      "payment_methods.* is an object: * stands for any entry of a map field only",
		"name.*":                   "name is a string: * stands for any entry of a map field only",
		"name.x":                   "name is a string and has no keys",
		"payment_methods.*.balanc": `did you mean "balance"?`,
	} {
		_, err := users.Find(table.Query{Where: map[string]any{where: 1}})
		assert.ErrorContains(t, err, want, where)
	}
	_, err = users.Find(table.Query{Where: where("payment_methods.*.balance", "57")})
	assert.ErrorContains(t, err, `field "payment_methods.*.balance" is a float, so $eq needs a number`)
	_, err = users.Find(table.Query{Where: where("credit", map[string]any{"$lt": 3})})
	assert.ErrorContains(t, err, "is a map and has no order")
}

// Export writes a map as JSON (in a CSV cell too) with its floats' fractions, and import reads
// it back with its kinds.
func TestMapExportImport(t *testing.T) {
	dom := shopDomain(t)
	for _, format := range []Format{JSON, CSV} {
		t.Run(string(format), func(t *testing.T) {
			src := openDomain(t, dom, true)
			dst := openDomain(t, dom, false)
			var b bytes.Buffer
			require.NoError(t, src.Export(&b, "users", format))
			assert.Contains(t, b.String(), "57.0")
			assert.Contains(t, b.String(), "100.0", "the seed's 100 is written as the float it is")
			_, err := dst.Import(bg, "users", &b, format, Replace)
			require.NoError(t, err)
			want, _ := committed(t, src, "users", "U1")
			got, _ := committed(t, dst, "users", "U1")
			assert.Equal(t, want, got)
			assert.Equal(t, 57.0, got["payment_methods"].(map[string]any)["gc_1"].(map[string]any)["balance"])
		})
	}
	dst := openDomain(t, dom, false)
	_, err := dst.Import(bg, "users", strings.NewReader(`[{"user_id": "U1", "name": "x", "payment_methods": {"gc_1": {"source": "gift_card", "balance": "57"}}}]`), JSON, Replace)
	assert.ErrorContains(t, err, `field "payment_methods.gc_1.balance" = "57" must be a number`)
	_, err = dst.Import(bg, "users", strings.NewReader("user_id,name,payment_methods\nU1,x,[1]\n"), CSV, Replace)
	assert.ErrorContains(t, err, "must be a dict (a map from keys to values)")
	_, err = dst.Import(bg, "users", strings.NewReader("user_id,name,payment_methods\nU1,x,{gc_1}\n"), CSV, Replace)
	assert.ErrorContains(t, err, `such as {"gc_1": 57.0}`)
}

// FuzzMapValue: whatever value a plan hands a map field (any JSON document), validation either
// refuses it with a path inside the field or returns a value that validates to itself and
// survives the store's encoding (msgpack, read back by decodeRow) and JSON (records, exports)
// with the same kinds.
func FuzzMapValue(f *testing.F) {
	for _, seed := range []string{
		`{"gc_1": {"source": "gift_card", "balance": 57.0, "refunds": [10, 2.5]}}`, `{"cc_1": {"source": "credit_card", "last4": "4242"}}`,
		`{"USD": 1031, "EUR": 0.5}`, `{"gc-1": {"source": "paypal"}}`, `{"": 1}`, `[{"1": 2}]`, `[{"a": "b"}, {}]`,
		`{"1234567890": {"price": 50, "available": true, "options": {"color": "red"}}}`, `{"x": null}`, `{"gc_1": 1e300}`,
	} {
		f.Add([]byte(seed))
	}
	users, products := shopSchema(f, "users"), shopSchema(f, "products")
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		v = store.FromJSON(v)
		for _, tc := range []struct {
			s     *store.Schema
			field string
			base  table.Row
		}{
			{users, "payment_methods", table.Row{"user_id": "U1", "name": "x"}},
			{users, "credit", table.Row{"user_id": "U1", "name": "x", "payment_methods": map[string]any{}}},
			{products, "variants", table.Row{"product_id": "P1", "name": "x"}},
			{products, "price_history", table.Row{"product_id": "P1", "name": "x", "variants": map[string]any{}}},
		} {
			in := table.Row{tc.field: v}
			for k, x := range tc.base {
				in[k] = x
			}
			row, err := tc.s.ValidateRow(in)
			if err != nil {
				var fe *table.FieldError
				require.ErrorAs(t, err, &fe)
				require.True(t, strings.HasPrefix(fe.Field, tc.field), "the path %q starts at the field %s", fe.Field, tc.field)
				continue
			}
			again, err := tc.s.ValidateRow(row)
			require.NoError(t, err, "a stored value validates again")
			require.Equal(t, row, again, "and is its own stored form")

			raw, ok := appendDoc(nil, rowDocID(1, 1), row, 1)
			require.True(t, ok)
			back, _, err := decodeRow(tc.s, raw)
			require.NoError(t, err)
			require.Equal(t, row, back, "through the store's encoding")
			cl, err := d.Encode(encodeDoc(rowDocID(1, 1), row, 1))
			require.NoError(t, err)
			back, _, err = decodeRow(tc.s, cl)
			require.NoError(t, err)
			require.Equal(t, row, back, "through clover's encoding")

			js, err := json.Marshal(row)
			require.NoError(t, err)
			jdec := json.NewDecoder(bytes.NewReader(js))
			jdec.UseNumber()
			var jrow map[string]any
			require.NoError(t, jdec.Decode(&jrow))
			jrow = store.FromJSON(jrow).(map[string]any)
			for name, f := range tc.s.FieldsByName {
				jrow[name] = table.RestoreKinds(f.Field, jrow[name])
			}
			require.Equal(t, row, table.Row(jrow), "through JSON with the schema's kinds")
		}
	})
}
