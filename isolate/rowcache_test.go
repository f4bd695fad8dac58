package isolate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// TestRowCacheParity: reads past the worker's row cache bound (a small one, so the test is
// quick) give the in-process result on every run: while the cache fills, when it is full, after
// a commit made new versions of rows it holds, and after it started over.
func TestRowCacheParity(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1, RowCache: 256 << 10}) // about 450 rows
	st := openStore(t)
	var rows []map[string]any
	for i := 7; i <= 3*findPart+100; i++ {
		rows = append(rows, map[string]any{"item_id": fmt.Sprintf("SG%05d", i), "name": fmt.Sprintf("Style %d", i),
			"quantity_in_stock": i % 37, "price": float64(20 + i%180)})
	}
	b, err := json.Marshal(rows)
	require.NoError(t, err)
	_, err = st.Import(bg, "inventory", bytes.NewReader(b), store.JSON, store.Upsert)
	require.NoError(t, err)

	plans := map[string]string{
		"report": reportPlan + `ids = [r["item_id"] for r in rows]
prices = [r["price"] for r in rows]
`,
		"all":    "rows = inventory_tbl.all()\nids = [r[\"item_id\"] for r in rows]\nq = [r[\"quantity_in_stock\"] for r in rows]\n",
		"lambda": "rows = inventory_tbl.search(lambda r: r[\"price\"] > 150)\nids = [(r[\"item_id\"], r[\"price\"]) for r in rows]\n",
		"few":    "ids = [r[\"item_id\"] for r in inventory_tbl.search({\"price\": {\"$gte\": 198}})]\n",
	}
	in := engine.InProcess(mustEnv(t, st))
	check := func(name string) {
		t.Helper()
		jIn, stageIn := job(st, plans[name], sandbox.Limits{})
		jIso, stageIso := job(st, plans[name], sandbox.Limits{})
		want, got := in.Run(bg, jIn), p.Run(bg, jIso)
		require.Equal(t, sandbox.OutcomeOK, got.Outcome, got.Diagnostics.String())
		want.Duration, got.Duration = 0, 0
		require.Equal(t, want, got, name)
		if name != "lambda" {
			assert.Equal(t, stageIn.Pending().Reads, stageIso.Pending().Reads, name)
		}
	}
	cache := func() *rowCache {
		p.mu.Lock()
		defer p.mu.Unlock()
		require.Len(t, p.live, 1)
		for w := range p.live {
			return w.c.sent
		}
		return nil
	}

	for _, name := range []string{"report", "report", "all", "report", "lambda", "all", "all"} {
		check(name)
	}
	c := cache()
	assert.True(t, c.full, "the reads are larger than the cache")
	assert.LessOrEqual(t, c.allowance(), int64(256<<10))
	assert.Positive(t, c.allowance())

	// New versions of some rows the worker holds: the changed rows cross again, whole.
	stage := st.Stage()
	inv, _ := stage.Table("inventory")
	_, err = inv.Update(table.Row{"price": 42.0}, table.Query{Where: map[string]any{"quantity_in_stock": 3}})
	require.NoError(t, err)
	require.NoError(t, st.ApplyPending(bg, stage.Pending(), nil))
	for _, name := range []string{"report", "all", "lambda"} {
		check(name)
	}

	// Runs that use few of the rows held: the full cache starts over, and reads stay right.
	for range 6 {
		check("few")
	}
	assert.False(t, c.full, "the cache started over")
	for _, name := range []string{"report", "all", "report"} {
		check(name)
	}
}

// TestRowCacheRollback: when a frame's rows are not sent (a value that cannot cross replaces
// the answer with an error), the pool forgets the rows it would have kept, so its numbers keep
// naming the worker's rows.
func TestRowCacheRollback(t *testing.T) {
	shape := []string{"item_id", "price"}
	sent := newRowCache(DefaultRowCache)
	var held []table.Row
	send := func(rs ...table.Row) []table.Row {
		var e encoder
		e.reset(msgReply)
		sent.mark()
		if err := e.rows(rs, shape, sent); err != nil {
			sent.rollback()
			return nil
		}
		d := newDecoder(bytes.Clone(e.buf[5:]))
		got := d.rows(&held)
		require.NoError(t, d.err)
		return got
	}
	a, b, c := table.Row{"item_id": "A"}, table.Row{"item_id": "B"}, table.Row{"item_id": "C"}
	bad := table.Row{"item_id": "X", "price": struct{}{}}
	send(a)
	assert.Nil(t, send(b, bad), "the frame is never sent")
	assert.Len(t, sent.order, 1)
	assert.Equal(t, []table.Row{c, b, a}, send(c, b, a))
	assert.Equal(t, []table.Row{a, b, c}, send(a, b, c))
	require.Len(t, held, 3)
	assert.Equal(t, []table.Row{a, c, b}, held)
}
