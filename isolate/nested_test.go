package isolate

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

// A plan in a worker reads nested values and writes new ones: rows, filters with paths and the
// written values cross the wire with their kinds.
func TestWorkerRunsAPlanOverNestedValues(t *testing.T) {
	d, err := store.LoadDomain(fstest.MapFS{
		"domain.json": {Data: []byte(`{"name": "orders", "tables": [{"name": "orders", "key": "order_id", "fields": [
			{"name": "order_id", "type": "string", "required": true},
			{"name": "address", "type": "object", "fields": [{"name": "city", "type": "string"}]},
			{"name": "lines", "type": "list", "items": {"type": "object", "fields": [
				{"name": "qty", "type": "int"}, {"name": "price", "type": "float"}]}}
		]}]}`)},
		"seed.json": {Data: []byte(`{"orders": [{"order_id": "O1", "address": {"city": "Oslo"}, "lines": [{"qty": 2, "price": 80}]}]}`)},
	})
	require.NoError(t, err)
	st, err := bolt.Open(t.TempDir(), bolt.Options{Domain: d})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	p := newPool(t, Options{})
	j, stage := job(st, `
o = orders_tbl.get({"address.city": "Oslo"})
l = o["lines"][0]
orders_tbl.insert({"order_id": "O2", "address": {"city": o["address"]["city"]}, "lines": [{"qty": l["qty"] + 1, "price": 3}]})
o["lines"][0]["qty"] = 5
orders_tbl.update(o, {"order_id": "O1"})
STATUS = "success"
answer_text = "%s %r %r" % (o["address"]["city"], l["qty"], l["price"])
`, sandbox.Limits{})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "Oslo 5 80.0", res.Globals["answer_text"], "l is the row's own line, edited in place")
	ins := stage.ChangeSet()["orders"].Inserted
	require.Len(t, ins, 1)
	assert.Equal(t, []any{map[string]any{"qty": int64(3), "price": 3.0}}, ins[0]["lines"])
	up := stage.ChangeSet()["orders"].Updated
	require.Len(t, up, 1)
	assert.Equal(t, []string{"lines"}, up[0].Fields)
	assert.Equal(t, []any{map[string]any{"qty": int64(5), "price": 80.0}}, up[0].After["lines"], "an in-place edit crosses back from the worker")
}
