package engine

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// nestedOrdersDomain is a domain with nested fields: an address object and a list of line items.
var nestedOrdersDomain = fstest.MapFS{
	"domain.json": {Data: []byte(`{
		"name": "orders",
		"tables": [{
			"name": "orders",
			"key": "order_id",
			"key_prefix": "O",
			"key_digits": 3,
			"fields": [
				{"name": "order_id", "type": "string", "required": true},
				{"name": "address", "type": "object", "fields": [
					{"name": "city", "type": "string", "required": true},
					{"name": "zip", "type": "string"}
				]},
				{"name": "lines", "type": "list", "items": {"type": "object", "fields": [
					{"name": "sku", "type": "string", "required": true},
					{"name": "qty", "type": "int", "required": true, "min": 1},
					{"name": "price", "type": "float", "min": 0}
				]}}
			]
		}]
	}`)},
	"policy.json": {Data: []byte(`{"name": "orders", "contract": {"statuses": ["success"], "write_status": "success", "answer_max_sentences": 2, "answer_max_chars": 400}}`)},
	"seed.json": {Data: []byte(`{"orders": [
		{"order_id": "O001", "address": {"city": "Oslo"}, "lines": [{"sku": "A", "qty": 1, "price": 80}, {"sku": "B", "qty": 2, "price": 5}]}
	]}`)},
}

// A plan reads inside nested values, changes them in place as in Python and writes new ones;
// the run's changes, its audit record and the store after apply all hold the same values with
// the same kinds.
func TestPlanReadsAndWritesNestedValues(t *testing.T) {
	d, err := store.LoadDomain(nestedOrdersDomain)
	require.NoError(t, err)
	e := domainEngine(t, d)
	plan := `
o = orders_tbl.get({"address.city": "Oslo"})
city = o["address"]["city"]
o["lines"][1]["qty"] = 3
o["address"]["city"] = "Bergen"
o["address"]["zip"] = "5003"
orders_tbl.update(o, {"order_id": o["order_id"]})
lines = [{"sku": "C", "qty": 2.0, "price": 3}]
orders_tbl.insert({"order_id": "O002", "address": {"city": city}, "lines": lines})
lines[0]["qty"] = 99
STATUS = "success"
answer_text = "moved " + city + " to " + orders_tbl.get({"order_id": "O001"})["address"]["city"]
`
	res, err := e.Run(context.Background(), Request{Reply: plan})
	require.NoError(t, err)
	require.True(t, res.Pending, res.Diagnostics.String())
	assert.Equal(t, "moved Oslo to Bergen", res.AnswerText)
	tc := res.Changes["orders"]
	require.Len(t, tc.Updated, 1)
	assert.Equal(t, map[string]any{"city": "Bergen", "zip": "5003"}, tc.Updated[0].After["address"])
	assert.Equal(t, []any{
		map[string]any{"sku": "A", "qty": int64(1), "price": 80.0},
		map[string]any{"sku": "B", "qty": int64(3), "price": 5.0},
	}, tc.Updated[0].After["lines"])
	assert.Equal(t, []string{"address.city", "address.zip", "lines[1].qty"}, tc.Updated[0].Paths, "the change set names the changed paths")
	require.Len(t, tc.Inserted, 1)
	assert.Equal(t, []any{map[string]any{"sku": "C", "qty": int64(2), "price": 3.0}}, tc.Inserted[0]["lines"],
		"a plan's 2.0 is an int where an int is declared, its 3 a float where a float is; a list is stored as it was when written")

	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.Equal(t, res.Changes, rec.Changes, "the record reads back with the run's kinds, nested ones too")

	_, err = e.Apply(context.Background(), res.RunID)
	require.NoError(t, err)
	got := row(t, e.Store(), "orders", "O001")
	assert.Equal(t, map[string]any{"city": "Bergen", "zip": "5003"}, got["address"])
}

// A refused nested value is reported by its path, with no hint meant for a missing row key.
func TestPlanRefusedNestedValueNamesItsPath(t *testing.T) {
	d, err := store.LoadDomain(nestedOrdersDomain)
	require.NoError(t, err)
	e := domainEngine(t, d)
	for _, tc := range []struct{ plan, msg string }{
		{`orders_tbl.insert({"address": {"cty": "Oslo"}})`, `field "address.cty" = "Oslo" is not among the keys of address (did you mean "city"?)`},
		{`orders_tbl.insert({"address": {"city": "Oslo"}, "lines": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 0}]})`, `field "lines[1].qty" = 0 must be an int >= 1`},
		{`orders_tbl.search({"address.cty": "Oslo"})`, `"cty" is not among the keys of address; they are city, zip`}, // found by the check, before the run
	} {
		res, err := e.Run(context.Background(), Request{Reply: tc.plan + "\nSTATUS, answer_text = \"success\", \"ok\"\n"})
		require.NoError(t, err)
		require.NotEmpty(t, res.Diagnostics, tc.plan)
		assert.Contains(t, res.Diagnostics[0].Message, tc.msg)
		assert.NotContains(t, res.Diagnostics[0].Hint, "row.get")
	}
}
