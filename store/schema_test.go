package store

import (
	"math"
	"testing"

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
	row, err := Validate(testSchema, table.Row{
		"id": "a", "name": "héllo", "code": "AB", "color": "red", "qty": 3.0, "level": int32(2),
		"price": 5, "ratio": float32(0.5), "ok": true, "at": "2025-01-01T09:00:00",
	})
	require.NoError(t, err)
	assert.Equal(t, table.Row{
		"id": "a", "name": "héllo", "code": "AB", "color": "red", "qty": int64(3), "level": int64(2),
		"price": 5.0, "ratio": 0.5, "ok": true, "at": "2025-01-01T09:00:00",
	}, row, "ints become float64 for float fields, integral floats int64 for int fields")

	row, err = Validate(testSchema, table.Row{"id": "b", "name": "x", "qty": nil})
	require.NoError(t, err)
	assert.Len(t, row, len(testSchema.Fields), "every declared field is present")
	assert.Nil(t, row["qty"])

	for _, ts := range []string{"2025-01-01", "2025-01-01T09:00", "2025-01-01T09:00:00.123", "2025-01-01T09:00:00Z",
		"2025-01-01T09:00:00+02:00", "2025-01-01T09:00:00.5-07:00", "2025-01-01 09:00:00"} {
		_, err := Validate(testSchema, table.Row{"id": "c", "name": "x", "at": ts})
		assert.NoError(t, err, ts)
	}
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		field string
		value any
		rule  string
	}{
		{"name", nil, "is required"},
		{"name", "", "must not be empty"},
		{"name", "toolong", "must have at most 5 characters"},
		{"name", 5, "must be a string"},
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
		row[tc.field] = tc.value
		_, err := Validate(testSchema, row)
		var fe *table.FieldError
		if assert.ErrorAs(t, err, &fe, "%s = %v", tc.field, tc.value) {
			assert.Equal(t, tc.field, fe.Field)
			assert.Equal(t, tc.rule, fe.Rule, "%s = %v", tc.field, tc.value)
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
	_, err := Validate(testSchema, table.Row{"id": "a", "name": "x", "prise": 3})
	var fe *table.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "prise", fe.Field)
	assert.Equal(t, `is not a field of things (did you mean "price"?)`, fe.Rule)
	assert.Equal(t, `things row a: field "prise" = 3 is not a field of things (did you mean "price"?)`, err.Error())

	_, err = Validate(testSchema, table.Row{"id": "a", "name": "x", "zzzzzz": 3})
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, fe.Rule, "its fields are id, name, code")

	_, err = Validate(testSchema, table.Row{"name": "x"})
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "id", fe.Field, "the key is always required")
	assert.Equal(t, "is required", fe.Rule)
}

func TestValidateRejectsBadSchema(t *testing.T) {
	_, err := Validate(&table.Schema{Name: "x", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeFloat}}}, table.Row{"id": 1.5})
	assert.ErrorContains(t, err, "must be a string or an int")
	_, err = Validate(&table.Schema{Name: "x", Key: "id", KeyPrefix: "A", Fields: []table.Field{{Name: "id", Type: table.TypeInt}}}, table.Row{"id": 1})
	assert.ErrorContains(t, err, "key_prefix needs a string key")
	_, err = Validate(&table.Schema{Name: "x", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeInt}, {Name: "id", Type: table.TypeInt}}}, table.Row{"id": 1})
	assert.ErrorContains(t, err, "declared twice")
	_, err = Validate(&table.Schema{Name: "_x", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeInt}}}, table.Row{"id": 1})
	assert.ErrorContains(t, err, "table name")
}

func TestInventoryRules(t *testing.T) {
	d := Inventory()
	inv, tx := d.Tables[0], d.Tables[1]
	item := table.Row{"item_id": "SG009", "name": "Pilot", "quantity_in_stock": 1, "price": 10}
	_, err := Validate(inv, item)
	require.NoError(t, err)
	for field, bad := range map[string]any{"quantity_in_stock": -1, "price": -5, "name": ""} {
		r := table.Row{}
		for k, v := range item {
			r[k] = v
		}
		r[field] = bad
		_, err := Validate(inv, r)
		var fe *table.FieldError
		require.ErrorAs(t, err, &fe, field)
		assert.Equal(t, field, fe.Field)
	}
	_, err = Validate(tx, table.Row{"transaction_id": "T-1", "customer_name": "a", "transaction_amount": 1,
		"balance_after_transaction": 1, "timestamp": "2025-01-01T00:00:00"})
	assert.ErrorContains(t, err, "must match the pattern TXN[0-9]{3,}")
	_, err = Validate(tx, table.Row{"transaction_id": "TXN002", "customer_name": "a", "transaction_amount": 1,
		"balance_after_transaction": 1, "timestamp": "01/01/2025"})
	assert.ErrorContains(t, err, "ISO-8601")
}
