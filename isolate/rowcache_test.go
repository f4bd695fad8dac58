package isolate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// TestRowCacheParity: reads past the worker's row cache bound (a small one, so the test is
// quick) give the in-process result on every run: while the cache fills, when it is full, after
// a commit made new versions of rows it holds, and after it started over.
func TestRowCacheParity(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1, RowCache: 256 << 10}) // about 450 rows
	st := openStore(t)
	var rows []map[string]any
	for i := 7; i <= 2*findPart+100; i++ { // three parts: a first, a middle and a short last one
		rows = append(rows, map[string]any{"item_id": fmt.Sprintf("SG%05d", i), "name": fmt.Sprintf("Style %d", i),
			"quantity_in_stock": i % 37, "price": float64(20 + i%180)})
	}
	b, err := json.Marshal(rows)
	require.NoError(t, err)
	_, err = st.Import(bg, "inventory", bytes.NewReader(b), bolt.JSON, bolt.Upsert)
	require.NoError(t, err)

	plans := map[string]string{
		"report": reportPlan + `ids = [r["item_id"] for r in rows]
prices = [r["price"] for r in rows]
`,
		"all":    "rows = inventory_tbl.all()\nids = [r[\"item_id\"] for r in rows]\nq = [r[\"quantity_in_stock\"] for r in rows]\n",
		"lambda": "rows = inventory_tbl.search(lambda r: r[\"price\"] > 150)\nids = [(r[\"item_id\"], r[\"price\"]) for r in rows]\n",
		"few":    "ids = [r[\"item_id\"] for r in inventory_tbl.search({\"price\": {\"$gte\": 198}})]\n",
	}
	in := mustEnv(t, st)
	check := func(name string) {
		t.Helper()
		jIn, stageIn := job(st, plans[name], sandbox.Limits{})
		jIso, stageIso := job(st, plans[name], sandbox.Limits{})
		want, got := in.Run(bg, jIn), p.Run(bg, jIso)
		require.Equal(t, sandbox.OutcomeOK, got.Outcome, got.Diagnostics.String())
		want.Duration, got.Duration = 0, 0
		want.Phases, got.Phases = sandbox.Phases{}, sandbox.Phases{} // times, too
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

	// Runs that use few of the rows held: the full cache is stale, the worker is replaced, and
	// reads stay right.
	for range 6 {
		check("few")
	}
	c2 := cache()
	assert.True(t, c != c2, "a new worker")
	assert.False(t, c2.full)
	assert.Equal(t, c2.allowance(), p.rowBudget.used.Load(), "the old worker's rows are no longer counted")
	for _, name := range []string{"report", "all", "report"} {
		check(name)
	}
	assert.True(t, c2 == cache(), "the same worker")
	assert.True(t, c2.full)
	assert.Equal(t, c2.allowance(), p.rowBudget.used.Load())
}

// TestRowCacheRollback: when a frame's rows are not sent (a value that cannot cross replaces
// the answer with an error), the pool forgets the rows it would have kept, so its numbers keep
// naming the worker's rows.
func TestRowCacheRollback(t *testing.T) {
	shape := []string{"item_id", "price"}
	sent := newRowCache(DefaultRowCache, nil)
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

// TestRowCacheStaleReplaced: a worker whose full cache recent runs hardly used is replaced
// before a run, never run with limits that leave out the rows it still holds. A run with no
// search would never tell the worker to drop them: the limits of each run must count exactly
// what the worker holds. (Asserted on the records, not on a memory watch that a short run
// may escape.)
func TestRowCacheStaleReplaced(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1, RowCache: 128 << 10})
	st := openStore(t)
	var rows []map[string]any
	for i := 7; i <= 2*findPart; i++ {
		rows = append(rows, map[string]any{"item_id": fmt.Sprintf("SG%05d", i), "name": fmt.Sprintf("Style %d", i),
			"quantity_in_stock": i % 37, "price": float64(20 + i%180)})
	}
	b, err := json.Marshal(rows)
	require.NoError(t, err)
	_, err = st.Import(bg, "inventory", bytes.NewReader(b), bolt.JSON, bolt.Upsert)
	require.NoError(t, err)
	type rec struct {
		c   *rowCache
		pid int
	}
	now := func() rec {
		p.mu.Lock()
		defer p.mu.Unlock()
		require.Len(t, p.live, 1)
		for w := range p.live {
			return rec{w.c.sent, w.cmd.Process.Pid}
		}
		return rec{}
	}
	run := func(src string) {
		t.Helper()
		j, _ := job(st, src, sandbox.Limits{})
		res := p.Run(bg, j)
		require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	}
	run("n = len(inventory_tbl.all())\n")
	first := now()
	require.True(t, first.c.full)
	held := first.c.allowance()
	require.Positive(t, held)

	replaced := false
	for range 8 {
		before := now()
		kept := before.c.allowance()
		run("s = 0\nfor i in range(1000):\n    s += i\n") // no search: no rows list reaches the worker
		after := now()
		if after.c == before.c {
			assert.Equal(t, before.pid, after.pid)
			assert.Equal(t, kept, after.c.allowance(), "the worker still holds its rows: the record must count them")
			continue
		}
		replaced = true
		assert.NotEqual(t, before.pid, after.pid, "a stale cache goes with its worker")
		assert.Zero(t, after.c.allowance())
		assert.Zero(t, p.rowBudget.used.Load(), "the old worker's rows no longer count")
	}
	assert.True(t, replaced, "the full cache went unused for 8 runs")
}

// TestRowCacheAfterWrite: once a run has written, the rows it reads may be its own staged
// versions, which no later run sees: they are not kept, so a loop of update then search adds
// nothing to the record (nor pins the parent's maps of versions never applied).
func TestRowCacheAfterWrite(t *testing.T) {
	st := openStore(t)
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	src := "for i in range(300):\n    inventory_tbl.update({\"price\": float(i)}, where={\"item_id\": \"SG001\"})\n    r = inventory_tbl.search({\"item_id\": \"SG001\"})\n"
	j, _ := job(st, "n = len(inventory_tbl.all())\n", sandbox.Limits{})
	require.Equal(t, sandbox.OutcomeOK, p.Run(bg, j).Outcome)
	var c *rowCache
	p.mu.Lock()
	for w := range p.live {
		c = w.c.sent
	}
	p.mu.Unlock()
	before := len(c.order)
	require.Positive(t, before)
	j, _ = job(st, src, sandbox.Limits{})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Len(t, c.order, before, "no staged version is kept")
	j, _ = job(st, "n = len(inventory_tbl.all())\n", sandbox.Limits{})
	require.Equal(t, sandbox.OutcomeOK, p.Run(bg, j).Outcome)
	assert.Len(t, c.order, before, "the next run reads the rows held")
}
