package bolt

import (
	"errors"
	"maps"
	"math"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr(f float64) *float64 { return &f }

var testSchema = &table.Schema{
	Name: "things",
	Key:  "id",
	Fields: []table.Field{
		{Name: "id", Type: table.TypeString},
		{Name: "name", Type: table.TypeString, Required: true, MinLen: 1, MaxLen: 5},
		{Name: "code", Type: table.TypeString, MinLen: 2, Pattern: "[A-Z]+"},
		{Name: "color", Type: table.TypeString, Enum: []string{"red", "blue"}},
		{Name: "qty", Type: table.TypeInt, Min: ptr(0)},
		{Name: "level", Type: table.TypeInt, Min: ptr(1), Max: ptr(3)},
		{Name: "price", Type: table.TypeFloat, Min: ptr(0)},
		{Name: "ratio", Type: table.TypeFloat, Max: ptr(1)},
		{Name: "ok", Type: table.TypeBool},
		{Name: "at", Type: table.TypeTimestamp},
	},
}

func TestValidateAccepts(t *testing.T) {
	row, err := validate(testSchema, table.Row{
		"id": "a", "name": "héllo", "code": "AB", "color": "red", "qty": 3.0, "level": int32(2),
		"price": 5, "ratio": float32(0.5), "ok": true, "at": "2025-01-01T09:00:00",
	})
	require.NoError(t, err)
	assert.Equal(t, table.Row{
		"id": "a", "name": "héllo", "code": "AB", "color": "red", "qty": int64(3), "level": int64(2),
		"price": 5.0, "ratio": 0.5, "ok": true, "at": "2025-01-01T09:00:00",
	}, row, "ints become float64 for float fields, integral floats int64 for int fields")

	row, err = validate(testSchema, table.Row{"id": "b", "name": "x", "qty": nil})
	require.NoError(t, err)
	assert.Len(t, row, len(testSchema.Fields), "every declared field is present")
	assert.Nil(t, row["qty"])

	for _, ts := range []string{"2025-01-01", "2025-01-01T09:00", "2025-01-01T09:00:00.123", "2025-01-01T09:00:00Z",
		"2025-01-01T09:00:00+02:00", "2025-01-01T09:00:00.5-07:00", "2025-01-01 09:00:00"} {
		_, err := validate(testSchema, table.Row{"id": "c", "name": "x", "at": ts})
		assert.NoError(t, err, ts)
	}
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		Field string
		value any
		rule  string
	}{
		{"name", nil, "is required"},
		{"name", "", "must not be empty"},
		{"name", "toolong", "must have at most 5 characters (max_len)"},
		{"name", 5, "must be a string"},
		{"name", "Zo\xc3", "must be valid UTF-8 text (a character was cut in two, perhaps by slicing)"},
		{"code", "A", "must have at least 2 characters"},
		{"code", "ab", "must match the pattern [A-Z]+"},
		{"code", "ABc", "must match the pattern [A-Z]+"}, // the whole value must match
		{"color", "green", `must be one of "red", "blue"`},
		{"qty", -1, "must be an int >= 0"},
		{"qty", 2.5, "must be an int (a whole number) >= 0"},
		{"qty", "3", "must be an int >= 0"},
		{"qty", true, "must be an int >= 0"},
		{"qty", math.Inf(1), "must be an int (a whole number) >= 0"},
		{"qty", uint64(math.MaxUint64), "must be an int >= 0"},
		{"level", 4, "must be an int >= 1 and <= 3"},
		{"level", 0, "must be an int >= 1 and <= 3"},
		{"price", -0.01, "must be a number >= 0"},
		{"price", "9.99", "must be a number >= 0"},
		{"price", false, "must be a number >= 0"},
		{"price", math.NaN(), "must be a finite number"},
		{"ratio", 1.5, "must be a number <= 1"},
		{"ok", "yes", "must be True or False"},
		{"at", "yesterday", "must be an ISO-8601 timestamp such as 2025-01-01T09:00:00"},
		{"at", "2025-13-01T09:00:00", "must be an ISO-8601 timestamp such as 2025-01-01T09:00:00"},
		{"at", 20250101, "must be an ISO-8601 timestamp string such as 2025-01-01T09:00:00"},
	} {
		row := table.Row{"id": "k1", "name": "x"}
		row[tc.Field] = tc.value
		_, err := validate(testSchema, row)
		var fe *table.FieldError
		if assert.ErrorAs(t, err, &fe, "%s = %v", tc.Field, tc.value) {
			assert.Equal(t, tc.Field, fe.Field)
			assert.Equal(t, tc.rule, fe.Rule, "%s = %v", tc.Field, tc.value)
			assert.Equal(t, "things", fe.Table)
			assert.Equal(t, "k1", fe.Key)
			if tc.value == nil || !isNaN(tc.value) {
				assert.Equal(t, tc.value, fe.Value)
			}
		}
	}
}

func isNaN(v any) bool { f, ok := v.(float64); return ok && math.IsNaN(f) }

func TestValidateUnknownAndMissing(t *testing.T) {
	_, err := validate(testSchema, table.Row{"id": "a", "name": "x", "prise": 3})
	var fe *table.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "prise", fe.Field)
	assert.Equal(t, `is not a field of things (did you mean "price"?)`, fe.Rule)
	assert.Equal(t, `things row a: field "prise" = 3 is not a field of things (did you mean "price"?)`, err.Error())

	_, err = validate(testSchema, table.Row{"id": "a", "name": "x", "zzzzzz": 3})
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, fe.Rule, "its fields are id, name, code")

	_, err = validate(testSchema, table.Row{"name": "x"})
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "id", fe.Field, "the key is always required")
	assert.Equal(t, "is required", fe.Rule)
}

func TestValidateRejectsBadSchema(t *testing.T) {
	_, err := validate(&table.Schema{Name: "x", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeFloat}}}, table.Row{"id": 1.5})
	assert.ErrorContains(t, err, "must be a string or an int")
	_, err = validate(&table.Schema{Name: "x", Key: "id", KeyPrefix: "A", Fields: []table.Field{{Name: "id", Type: table.TypeInt}}}, table.Row{"id": 1})
	assert.ErrorContains(t, err, "key_prefix needs a string key")
	_, err = validate(&table.Schema{Name: "x", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeInt}, {Name: "id", Type: table.TypeInt}}}, table.Row{"id": 1})
	assert.ErrorContains(t, err, "declared twice")
	_, err = validate(&table.Schema{Name: "_x", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeInt}}}, table.Row{"id": 1})
	assert.ErrorContains(t, err, "table name")
}

func TestInventoryRules(t *testing.T) {
	d := store.Inventory()
	inv, tx := d.Tables[0], d.Tables[1]
	item := table.Row{"item_id": "SG009", "name": "Pilot", "quantity_in_stock": 1, "price": 10}
	_, err := validate(inv, item)
	require.NoError(t, err)
	for field, bad := range map[string]any{"quantity_in_stock": -1, "price": -5, "name": ""} {
		r := table.Row{}
		for k, v := range item {
			r[k] = v
		}
		r[field] = bad
		_, err := validate(inv, r)
		var fe *table.FieldError
		require.ErrorAs(t, err, &fe, field)
		assert.Equal(t, field, fe.Field)
	}
	_, err = validate(tx, table.Row{"transaction_id": "T-1", "customer_name": "a", "transaction_amount": 1,
		"balance_after_transaction": 1, "timestamp": "2025-01-01T00:00:00"})
	assert.ErrorContains(t, err, "must match the pattern TXN[0-9]{3,9}")
	_, err = validate(tx, table.Row{"transaction_id": "TXN002", "customer_name": "a", "transaction_amount": 1,
		"balance_after_transaction": 1, "timestamp": "01/01/2025"})
	assert.ErrorContains(t, err, "ISO-8601")
}

// Every string is bounded: a field without max_len holds at most table.DefaultMaxLen characters,
// and a domain may declare more. A huge value is refused without counting its characters.
func TestStringsAreBoundedByDefault(t *testing.T) {
	s := &table.Schema{Name: "notes", Key: "id", Fields: []table.Field{
		{Name: "id", Type: table.TypeString},
		{Name: "text", Type: table.TypeString},
		{Name: "long", Type: table.TypeString, MaxLen: 5000},
	}}
	ok := strings.Repeat("é", table.DefaultMaxLen)
	_, err := validate(s, table.Row{"id": "a", "text": ok})
	require.NoError(t, err)
	_, err = validate(s, table.Row{"id": "a", "text": ok + "x"})
	assert.ErrorContains(t, err, `must have at most 1000 characters (max_len)`)
	_, err = validate(s, table.Row{"id": "a", "long": strings.Repeat("x", 4000)})
	assert.NoError(t, err, "a domain may raise the bound")
	huge := strings.Repeat("x", 16<<20)
	_, err = validate(s, table.Row{"id": "a", "text": huge})
	assert.ErrorContains(t, err, "at most 1000 characters")
	_, err = validate(s, table.Row{"id": huge})
	assert.ErrorContains(t, err, "at most 1000 characters", "keys too")

	s.Fields[1].MaxLen = -1
	_, err = validate(s, table.Row{"id": "a"})
	assert.ErrorContains(t, err, "max_len must be >= 0")
}

// Keys of the generated form stay incrementable: their number is at most key_max.
func TestKeyNumbersAreBounded(t *testing.T) {
	s := &table.Schema{Name: "ledger", Key: "id", KeyPrefix: "TXN", KeyDigits: 3, Fields: []table.Field{
		{Name: "id", Type: table.TypeString, Pattern: "TXN[0-9]{3,}"},
	}}
	for _, id := range []string{"TXN001", "TXN999999999"} {
		_, err := validate(s, table.Row{"id": id})
		assert.NoError(t, err, id)
	}
	for _, id := range []string{"TXN1000000000", "TXN" + strings.Repeat("9", 26), "TXN9223372036854775807"} {
		_, err := validate(s, table.Row{"id": id})
		assert.ErrorContains(t, err, "must carry a number of at most 999999999 (key_max)", id)
	}
	s.KeyMax = 50
	_, err := validate(s, table.Row{"id": "TXN051"})
	assert.ErrorContains(t, err, "at most 50 (key_max)")

	bad := *s
	bad.KeyMax = math.MaxInt64
	_, err = validate(&bad, table.Row{"id": "TXN001"})
	assert.ErrorContains(t, err, "leaves no room to increment")
	bad.KeyPrefix, bad.KeyMax = "", 10
	_, err = validate(&bad, table.Row{"id": "TXN001"})
	assert.ErrorContains(t, err, "key_max must be > 0 and needs a key_prefix")
}

// A text key is at most MaxKeyBytes long: the key index holds it encoded, and bbolt refuses long
// keys at commit, after the run was approved. Found at validation, the run fails with the rule;
// the longest key of the shape that encodes longest commits and reads back.
func TestKeysAreBoundedInLength(t *testing.T) {
	d, err := store.LoadDomain(fstest.MapFS{"domain.json": {Data: []byte(`{"name": "keys", "tables": [{"name": "k", "key": "id",
		"fields": [{"name": "id", "type": "string", "max_len": 100000}, {"name": "v", "type": "int"}]}]}`)}})
	require.NoError(t, err)
	s, err := Open(t.TempDir(), Options{Domain: d})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Stage().tables["k"].Insert(table.Row{"id": strings.Repeat("k", store.MaxKeyBytes+1)})
	assert.ErrorContains(t, err, "a key may have at most 4096")
	sg := s.Stage()
	long := strings.Repeat("0-", store.MaxKeyBytes/2) // one-digit runs between other bytes encode longest
	_, err = sg.tables["k"].Insert(table.Row{"id": long, "v": 1})
	require.NoError(t, err)
	require.NoError(t, sg.Apply(bg))
	row, ok := committed(t, s, "k", long)
	require.True(t, ok)
	assert.Equal(t, int64(1), row["v"])
}

// The generated key stops at key_max instead of overflowing.
func TestGeneratedKeyStopsAtKeyMax(t *testing.T) {
	s := openTemp(t)
	v := s.Stage()
	tx := tbl(t, v, "transactions")
	_, err := tx.Insert(txnRow("TXN999999999", 1))
	require.NoError(t, err)
	_, err = tx.Insert(table.Row{"customer_name": "Ann", "transaction_amount": 1.0, "balance_after_transaction": 1.0, "timestamp": "2025-01-02T10:00:00"})
	assert.ErrorContains(t, err, "(key_max)")
}

// Int bounds are compared exactly, also beyond 2^53.
func TestIntBoundsAreExact(t *testing.T) {
	s := &table.Schema{Name: "n", Key: "id", Fields: []table.Field{
		{Name: "id", Type: table.TypeString},
		{Name: "qty", Type: table.TypeInt, Min: ptr(-(1 << 53)), Max: ptr(1 << 53)},
	}}
	_, err := validate(s, table.Row{"id": "a", "qty": int64(1 << 53)})
	require.NoError(t, err)
	_, err = validate(s, table.Row{"id": "a", "qty": int64(1<<53 + 1)})
	assert.ErrorContains(t, err, "must be an int >= -9007199254740992 and <= 9007199254740992")
	_, err = validate(s, table.Row{"id": "a", "qty": int64(-(1 << 53) - 1)})
	assert.Error(t, err)
}

// TestValidateOwnedIsValidate checks that validating an import's own row in place gives what
// validate gives for a copy: the same row, or the same error (the key it names as given).
func TestValidateOwnedIsValidate(t *testing.T) {
	s, err := store.CompileSchema(testSchema)
	require.NoError(t, err)
	ints, err := store.CompileSchema(&table.Schema{Name: "n", Key: "id", Fields: []table.Field{
		{Name: "id", Type: table.TypeInt}, {Name: "qty", Type: table.TypeInt, Min: ptr(0)}, {Name: "l", Type: table.TypeList}}})
	require.NoError(t, err)
	for _, tc := range []struct {
		s   *store.Schema
		row table.Row
	}{
		{s, table.Row{"id": "a", "name": "héllo", "code": "AB", "color": "red", "qty": 3.0, "level": int32(2),
			"price": 5, "ratio": float32(0.5), "ok": true, "at": "2025-01-01T09:00:00"}},
		{s, table.Row{"id": "b", "name": "x", "qty": nil}},
		{s, table.Row{"id": "k1", "name": "toolong"}},
		{s, table.Row{"id": "k1", "name": "x", "qty": 2.5}},
		{s, table.Row{"id": "k1", "name": "x", "prise": 3}},
		{s, table.Row{"name": "x"}},
		{s, table.Row{"id": "k1", "code": "AB"}},
		{ints, table.Row{"id": 3.0, "qty": -1.0}},
		{ints, table.Row{"id": 3.0, "qty": 2.0, "l": []any{int64(1), "x"}}},
		{ints, table.Row{"id": 3.5}},
	} {
		for range 20 { // map order varies: so might which bad field is named first
			want, wantErr := tc.s.ValidateRow(maps.Clone(tc.row))
			got, gotErr := tc.s.ValidateOwned(maps.Clone(tc.row))
			if wantErr != nil {
				require.Error(t, gotErr)
				var a, b *table.FieldError
				if errors.As(wantErr, &a) && errors.As(gotErr, &b) && a.Field == b.Field {
					assert.Equal(t, wantErr.Error(), gotErr.Error())
					assert.Equal(t, a.Key, b.Key, "the key as given")
				}
				continue
			}
			require.NoError(t, gotErr)
			assert.Equal(t, want, got)
		}
	}
}
