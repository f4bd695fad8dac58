package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/storetest"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

func items(t testing.TB, v table.View) table.Table {
	t.Helper()
	tb, ok := v.Table(storetest.Items)
	require.True(t, ok)
	return tb
}

func where(k string, v any) table.Query { return table.Query{Where: map[string]any{k: v}} }

// Open by DSN alone finds the store's schema and rebuilds its domain from the record; a
// database without a store, a second Create and the wrong domain are refused.
func TestOpenByDSN(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	_, err := Open(bg, dsn, Options{})
	require.ErrorIs(t, err, store.ErrNoStore)

	var note strings.Builder
	s, err := Create(bg, dsn, storetest.Domain(), Options{Stderr: &note})
	require.NoError(t, err)
	s.Close()
	assert.Contains(t, note.String(), "schema conformance")
	_, err = Create(bg, dsn, storetest.Domain(), Options{})
	require.ErrorIs(t, err, ErrExists)

	s, err = Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "conformance", s.Domain().Name)
	assert.Equal(t, []string{"items"}, s.Names())
	sc, ok := s.Schema("items")
	require.True(t, ok)
	assert.Equal(t, []string{"category"}, sc.Indexes)
	row, ok, err := items(t, s.StageFor(bg, store.RunLimits{})).Get("b2")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(4), row["qty"])

	other := storetest.Domain()
	other.Name = "other"
	_, err = Open(bg, dsn, Options{Domain: other, Schema: "conformance"})
	var de *store.DomainError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "conformance", de.Holds)

	// A second store in another schema of the same database: Open must then be told which.
	s2, err := Create(bg, dsn, storetest.Domain(), Options{Schema: "second", NoSeed: true})
	require.NoError(t, err)
	defer s2.Close()
	assert.Equal(t, 0, items(t, s2.StageFor(bg, store.RunLimits{})).Len())
	_, err = Open(bg, dsn, Options{})
	assert.ErrorContains(t, err, "2 starplan stores")

	// A schema name is a plain name: it is quoted into SQL and into function bodies.
	for _, bad := range []string{"a$f$b", "x-y", strings.Repeat("s", maxSchemaName+1)} {
		_, err = Create(bg, dsn, storetest.Domain(), Options{Schema: bad})
		assert.ErrorContains(t, err, "schema name", bad)
	}
}

// A domain of every field type: rows read back with the kinds they were written with (floats
// inside lists stay floats, whole numbers where no type is declared stay ints).
func TestRoundTripOfEveryType(t *testing.T) {
	t.Parallel()
	dom := &store.Domain{Name: "kinds", Tables: []*table.Schema{{
		Name: "things", Key: "id", KeyPrefix: "T", KeyDigits: 3,
		Fields: []table.Field{
			{Name: "id", Type: table.TypeString, Required: true},
			{Name: "price", Type: table.TypeFloat},
			{Name: "n", Type: table.TypeInt},
			{Name: "ok", Type: table.TypeBool},
			{Name: "at", Type: table.TypeTimestamp},
			{Name: "tags", Type: table.TypeList, Items: &table.Field{Type: table.TypeFloat}},
			{Name: "extra", Type: table.TypeObject, Additional: true},
		},
	}}}
	s, err := Create(bg, pgtest.DSN(t), dom, Options{})
	require.NoError(t, err)
	defer s.Close()
	want := table.Row{"id": "T001", "price": 80.0, "n": int64(-3), "ok": true, "at": "2025-01-01T09:00:00",
		"tags": []any{1.0, 2.5}, "extra": map[string]any{"a": int64(1), "b": []any{"x", 1.5}, "c": nil}}
	sg := s.StageFor(bg, store.RunLimits{})
	tb, _ := sg.Table("things")
	k, err := tb.Insert(table.Row{"price": 80, "n": -3, "ok": true, "at": "2025-01-01T09:00:00",
		"tags": []any{1, 2.5}, "extra": map[string]any{"a": 1, "b": []any{"x", 1.5}, "c": nil}})
	require.NoError(t, err)
	assert.Equal(t, "T001", k, "a generated key")
	require.NoError(t, s.ApplyPending(bg, sg.Pending(), nil))
	tb, _ = s.StageFor(bg, store.RunLimits{}).Table("things")
	got, ok, err := tb.Get("T001")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, want, got)
	k, err = tb.Insert(table.Row{})
	require.NoError(t, err)
	assert.Equal(t, "T002", k, "the next key follows the committed highest")
}

// The SQL tables carry the schema's bounds: another program's write that breaks one is refused
// by the database; and its write of a row is a change a run's apply sees as a conflict (the
// row's version moved, by the trigger).
func TestSQLConstraintsAndOtherWriters(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s, err := Create(bg, dsn, storetest.Domain(), Options{})
	require.NoError(t, err)
	defer s.Close()
	conn, err := pgx.Connect(bg, dsn)
	require.NoError(t, err)
	defer conn.Close(bg)
	_, err = conn.Exec(bg, `UPDATE conformance.items SET qty = -1 WHERE sku = 'a1'`)
	assert.ErrorContains(t, err, "check constraint", "qty has min 0")
	_, err = conn.Exec(bg, `UPDATE conformance.items SET category = NULL WHERE sku = 'a1'`)
	assert.ErrorContains(t, err, "null value", "category is required")

	sg := s.StageFor(bg, store.RunLimits{})
	_, _, err = items(t, sg).Get("a1")
	require.NoError(t, err)
	_, err = items(t, sg).Update(table.Row{"qty": int64(5)}, where("sku", "b1"))
	require.NoError(t, err)
	_, err = conn.Exec(bg, `UPDATE conformance.items SET qty = 9 WHERE sku = 'a1'`)
	require.NoError(t, err)
	err = s.ApplyPending(bg, sg.Pending(), nil)
	var ce *store.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "a1", ce.Conflicts[0].Key)
}

// countingTracer records the SQL of every query.
type countingTracer struct {
	mu   sync.Mutex
	sqls []string
	args [][]any
}

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sqls = append(c.sqls, d.SQL)
	c.args = append(c.args, d.Args)
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *countingTracer) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sqls, c.args = nil, nil
}

// plan returns the EXPLAIN of a traced query, as text.
func plan(t *testing.T, conn *pgx.Conn, sql string, args []any) string {
	t.Helper()
	rows, err := conn.Query(bg, "EXPLAIN "+sql, args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// A get, and a find by an indexed field, is one SQL statement that the database answers from
// an index, not a walk of the table (on a table large enough that a walk would show).
func TestIndexedReadsAreIndexedSelects(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	tr := &countingTracer{}
	dom := storetest.Domain()
	for i := range 5000 {
		dom.Seed[storetest.Items] = append(dom.Seed[storetest.Items], table.Row{"sku": fmt.Sprintf("x%d", i), "category": fmt.Sprintf("c%d", i%500), "qty": int64(i)})
	}
	s, err := Create(bg, dsn, dom, Options{Tracer: tr})
	require.NoError(t, err)
	defer s.Close()
	conn, err := pgx.Connect(bg, dsn)
	require.NoError(t, err)
	defer conn.Close(bg)
	_, err = conn.Exec(bg, "ANALYZE conformance.items")
	require.NoError(t, err)

	sg := s.StageFor(bg, store.RunLimits{})
	tr.reset()
	row, ok, err := items(t, sg).Get("x4321")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(4321), row["qty"])
	require.Len(t, tr.sqls, 1, "a get is one statement")
	p := plan(t, conn, tr.sqls[0], tr.args[0])
	assert.Contains(t, p, "Index Scan using items_pkey", p)
	assert.NotContains(t, p, "Seq Scan on items", p)

	tr.reset()
	rows, err := items(t, sg).Find(where("category", "c7"))
	require.NoError(t, err)
	assert.Len(t, rows, 10)
	require.Len(t, tr.sqls, 1, "a find is one statement")
	p = plan(t, conn, tr.sqls[0], tr.args[0])
	assert.Contains(t, p, "items_category_idx", p)
	assert.NotContains(t, p, "Seq Scan on items", p)
	assert.Empty(t, sg.Scans(), "an indexed read is no scan")

	// last(where) with a filter SQL cannot answer walks from the end, a page at a time: it
	// reads the last page, not the table.
	rows, err = items(t, sg).Find(table.Query{Where: map[string]any{"sku": map[string]any{"$regex": "^x4"}}, Limit: 1, Reverse: true})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, "x4999", rows[0]["sku"])
	require.Len(t, sg.Scans(), 1)
	assert.Equal(t, int64(firstPage), sg.Scans()[0].Rows)

	// A filter on an undeclared field is a scan, and the run's figures say so; its comparison
	// is pushed down, so the scan looks at the rows that pass it.
	_, err = items(t, sg).Find(where("qty", map[string]any{"$gte": 4990}))
	require.NoError(t, err)
	require.Len(t, sg.Scans(), 2)
	assert.Equal(t, []string{"qty"}, sg.Scans()[1].Fields)
	assert.Equal(t, int64(10), sg.Scans()[1].Rows)
}

// Two stores on one database (two servers) apply conflicting runs at once: exactly one wins.
// The first apply is held inside its transaction (its verify waits) until the second is seen
// waiting for the first's lock in pg_stat_activity; then the first commits, and the second,
// which reads what the first committed, is a conflict. Without the lock on the tables' version
// rows the second would check the rows before the first committed and write too.
func TestConcurrentAppliersOneWins(t *testing.T) {
	t.Parallel()
	dsn, a, b := twoServers(t)

	for _, tc := range []struct {
		name string
		// run makes the two conflicting dry runs on their stores
		run func(t *testing.T) (first, second *store.Pending)
	}{
		{"same row", func(t *testing.T) (*store.Pending, *store.Pending) {
			x, y := a.StageFor(bg, store.RunLimits{}), b.StageFor(bg, store.RunLimits{})
			_, err := items(t, x).Update(table.Row{"qty": int64(10)}, where("sku", "a1"))
			require.NoError(t, err)
			_, err = items(t, y).Update(table.Row{"qty": int64(20)}, where("sku", "a1"))
			require.NoError(t, err)
			return x.Pending(), y.Pending()
		}},
		{"phantom", func(t *testing.T) (*store.Pending, *store.Pending) {
			x, y := a.StageFor(bg, store.RunLimits{}), b.StageFor(bg, store.RunLimits{})
			_, err := items(t, x).Insert(table.Row{"sku": "p1", "category": "p", "qty": int64(1)})
			require.NoError(t, err)
			found, err := items(t, y).Find(where("category", "p"))
			require.NoError(t, err)
			require.Empty(t, found)
			_, err = items(t, y).Update(table.Row{"qty": int64(0)}, where("sku", "b2"))
			require.NoError(t, err)
			return x.Pending(), y.Pending()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, second := tc.run(t)
			inside, release := make(chan struct{}), make(chan struct{})
			hold := func(table.ChangeSet, store.Committed) error {
				close(inside)
				<-release
				return nil
			}
			firstErr := make(chan error, 1)
			go func() { firstErr <- a.ApplyPending(bg, first, hold) }()
			<-inside
			secondErr := make(chan error, 1)
			go func() { secondErr <- b.ApplyPending(bg, second, nil) }()
			err, done := waitForLockWait(t, dsn, secondErr)
			close(release)
			require.NoError(t, <-firstErr)
			if !done {
				err = <-secondErr
			} else {
				t.Errorf("the second apply did not wait for the first")
			}
			require.ErrorIs(t, err, store.ErrConflict)
		})
	}
	row, _, err := items(t, a.StageFor(bg, store.RunLimits{})).Get("a1")
	require.NoError(t, err)
	assert.Equal(t, int64(10), row["qty"], "the first apply's value, not the second's")
	row, _, err = items(t, a.StageFor(bg, store.RunLimits{})).Get("b2")
	require.NoError(t, err)
	assert.Equal(t, int64(4), row["qty"], "the phantom's loser wrote nothing")
}

// waitForLockWait returns once some session of the database waits for a lock, or with the
// second apply's error (done) if it ended first.
func waitForLockWait(t *testing.T, dsn string, second <-chan error) (err error, done bool) {
	t.Helper()
	conn, err := pgx.Connect(bg, dsn)
	require.NoError(t, err)
	defer conn.Close(bg)
	for {
		select {
		case err := <-second:
			return err, true
		default:
		}
		var n int
		require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		if n > 0 {
			return nil, false
		}
	}
}

// Many rounds of two servers applying conflicting runs at the same moment: every round exactly
// one applies, and the counter they both increment moves by one per round.
func TestConcurrentAppliersStress(t *testing.T) {
	t.Parallel()
	_, a, b := twoServers(t)
	const rounds = 20
	for i := range rounds {
		var ps [2]*store.Pending
		for j, s := range []*Store{a, b} {
			sg := s.StageFor(bg, store.RunLimits{})
			row, _, err := items(t, sg).Get("a1")
			require.NoError(t, err)
			_, err = items(t, sg).Update(table.Row{"qty": row["qty"].(int64) + 1}, where("sku", "a1"))
			require.NoError(t, err)
			ps[j] = sg.Pending()
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for j, s := range []*Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[j] = s.ApplyPending(bg, ps[j], nil)
			}()
		}
		close(start)
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				require.ErrorIs(t, err, store.ErrConflict, "round %d", i)
			}
		}
		require.Equal(t, 1, ok, "round %d: exactly one apply wins", i)
	}
	row, _, err := items(t, b.StageFor(bg, store.RunLimits{})).Get("a1")
	require.NoError(t, err)
	assert.Equal(t, int64(1+rounds), row["qty"])
}

// A stage's Pending applies on another store of the same database (a dry run on one server,
// the apply on another), once: the same pending change again is a conflict.
func TestApplyOnAnotherServerOnce(t *testing.T) {
	t.Parallel()
	_, a, b := twoServers(t)
	var err error
	sg := a.StageFor(bg, store.RunLimits{})
	_, err = items(t, sg).Update(table.Row{"qty": int64(33)}, where("category", "b"))
	require.NoError(t, err)
	raw, err := json.Marshal(sg.Pending())
	require.NoError(t, err)
	var p store.Pending
	require.NoError(t, json.Unmarshal(raw, &p))
	audit := store.SysDoc{Collection: "runs", ID: "r1", Value: map[string]string{"state": "applied"}}
	require.NoError(t, b.ApplyPending(bg, &p, nil, audit))
	err = a.ApplyPending(bg, &p, nil, audit)
	require.True(t, errors.Is(err, store.ErrConflict), "%v", err)
	n, err := items(t, a.StageFor(bg, store.RunLimits{})).Count(where("qty", int64(33)))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	found, err := a.GetSys("runs", "r1", new(map[string]string))
	require.NoError(t, err)
	assert.True(t, found)
}

// Rows come back in natural key order ("k9" before "k10"), which SQL orders by _ord, also when
// the limit is pushed down and with the run's own rows merged in; an int key orders by value.
func TestNaturalOrder(t *testing.T) {
	t.Parallel()
	dom := &store.Domain{Name: "order", Tables: []*table.Schema{
		{Name: "s", Key: "k", Indexes: []string{"g"}, Fields: []table.Field{{Name: "k", Type: table.TypeString}, {Name: "g", Type: table.TypeString}}},
		{Name: "n", Key: "k", Fields: []table.Field{{Name: "k", Type: table.TypeInt}}},
	}}
	dom.Seed = map[string][]table.Row{"s": {}, "n": {}}
	for _, k := range []string{"k10", "k9", "k1", "k100", "k09", "j5"} {
		dom.Seed["s"] = append(dom.Seed["s"], table.Row{"k": k, "g": "x"})
	}
	for _, k := range []int64{10, -3, 9, 100} {
		dom.Seed["n"] = append(dom.Seed["n"], table.Row{"k": k})
	}
	st, err := Create(bg, pgtest.DSN(t), dom, Options{})
	require.NoError(t, err)
	defer st.Close()
	keys := func(rows []table.Row) []any {
		out := []any{}
		for _, r := range rows {
			out = append(out, r["k"])
		}
		return out
	}
	sg := st.StageFor(bg, store.RunLimits{})
	s, _ := sg.Table("s")
	rows, err := s.Find(table.Query{})
	require.NoError(t, err)
	assert.Equal(t, []any{"j5", "k1", "k09", "k9", "k10", "k100"}, keys(rows))
	rows, err = s.Find(table.Query{Where: map[string]any{"g": "x"}, Limit: 2, Reverse: true})
	require.NoError(t, err)
	assert.Equal(t, []any{"k100", "k10"}, keys(rows))
	_, err = s.Insert(table.Row{"k": "k11", "g": "x"})
	require.NoError(t, err)
	_, err = s.Remove(table.Query{Where: map[string]any{"k": "k100"}})
	require.NoError(t, err)
	rows, err = s.Find(table.Query{Where: map[string]any{"g": "x"}, Limit: 2, Reverse: true})
	require.NoError(t, err)
	assert.Equal(t, []any{"k11", "k10"}, keys(rows), "the run's own rows merged, its removal hidden")
	rows, err = s.Find(table.Query{Where: map[string]any{"g": map[string]any{"$ne": "y"}}, Limit: 2, Reverse: true})
	require.NoError(t, err)
	assert.Equal(t, []any{"k11", "k10"}, keys(rows), "the same through a walk in pages")
	last, ok, err := sg.LastRow("s")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "k100", last["k"], "LastRow reads the committed rows")

	n, _ := sg.Table("n")
	rows, err = n.Find(table.Query{})
	require.NoError(t, err)
	assert.Equal(t, []any{int64(-3), int64(9), int64(10), int64(100)}, keys(rows))
	row, ok, err := n.Get(9)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(9), row["k"])
	_, err = n.Update(table.Row{"k": int64(9)}, table.Query{Where: map[string]any{"k": 10}})
	assert.ErrorContains(t, err, "is the key")
	_, err = n.Remove(table.Query{Where: map[string]any{"k": map[string]any{"$lt": 0}}})
	require.NoError(t, err)
	require.NoError(t, st.ApplyPending(bg, sg.Pending(), nil))
	rows, err = st.StageFor(bg, store.RunLimits{}).(*Stage).tables["n"].Find(table.Query{})
	require.NoError(t, err)
	assert.Equal(t, []any{int64(9), int64(10), int64(100)}, keys(rows))
}

// A payload notified on one store reaches the listeners of every store on the same schema, in
// order; a store of another schema hears nothing.
func TestNotifyReachesEveryListener(t *testing.T) {
	t.Parallel()
	dsn, a, b := twoServers(t)
	other, err := Create(bg, dsn, storetest.Domain(), Options{Schema: "elsewhere"})
	require.NoError(t, err)
	defer other.Close()

	ctx, cancel := context.WithCancel(bg)
	var wg sync.WaitGroup
	got := map[string]chan string{"a": make(chan string, 10), "b": make(chan string, 10), "other": make(chan string, 10)}
	for name, s := range map[string]*Store{"a": a, "b": b, "other": other} {
		ready := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Listen(ctx, func() { close(ready) }, func(p string) { got[name] <- p })
			assert.ErrorIs(t, err, context.Canceled)
		}()
		<-ready
	}
	require.NoError(t, a.Notify(bg, "one"))
	require.NoError(t, b.Notify(bg, "two"))
	for _, name := range []string{"a", "b"} {
		assert.Equal(t, "one", <-got[name])
		assert.Equal(t, "two", <-got[name])
	}
	require.NoError(t, other.Notify(bg, "mine"))
	assert.Equal(t, "mine", <-got["other"], "the other store hears its own, and only its own")
	assert.Error(t, a.Notify(bg, strings.Repeat("x", MaxNotifyBytes+1)))
	cancel()
	wg.Wait()
}

// A domain that gained a table since its store was made opens with the table added, empty.
func TestOpenAddsNewTables(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s, err := Create(bg, dsn, storetest.Domain(), Options{})
	require.NoError(t, err)
	s.Close()
	dom := storetest.Domain()
	dom.Tables = append(dom.Tables, &table.Schema{Name: "extra", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeInt}}})
	s, err = Open(bg, dsn, Options{Domain: dom})
	require.NoError(t, err)
	defer s.Close()
	sg := s.StageFor(bg, store.RunLimits{})
	tb, ok := sg.Table("extra")
	require.True(t, ok)
	_, err = tb.Insert(table.Row{"id": 7})
	require.NoError(t, err)
	require.NoError(t, s.ApplyPending(bg, sg.Pending(), nil))
	assert.Equal(t, 1, items2lenExtra(t, s))
}

func items2lenExtra(t *testing.T, s store.Store) int {
	tb, _ := s.StageFor(bg, store.RunLimits{}).Table("extra")
	return tb.Len()
}

// A declared index holds values of any length a schema allows (a hash index: a B-tree entry is
// limited to about 2,700 bytes), and is still what a find by that field uses.
func TestLongIndexedValue(t *testing.T) {
	t.Parallel()
	dom := &store.Domain{Name: "long", Tables: []*table.Schema{{Name: "docs", Key: "id", Indexes: []string{"body"},
		Fields: []table.Field{{Name: "id", Type: table.TypeString}, {Name: "body", Type: table.TypeString, MaxLen: 8000}}}}}
	s, err := Create(bg, pgtest.DSN(t), dom, Options{})
	require.NoError(t, err)
	defer s.Close()
	// 6,000 bytes that do not compress (an index entry is compressed before its size counts).
	var b strings.Builder
	for x := uint32(1); b.Len() < 6000; {
		x = x*1664525 + 1013904223
		b.WriteByte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-"[x>>26])
	}
	body := b.String()
	sg := s.StageFor(bg, store.RunLimits{})
	tb, _ := sg.Table("docs")
	_, err = tb.Insert(table.Row{"id": "d1", "body": body})
	require.NoError(t, err)
	require.NoError(t, s.ApplyPending(bg, sg.Pending(), nil))
	sg = s.StageFor(bg, store.RunLimits{})
	tb, _ = sg.Table("docs")
	rows, err := tb.Find(where("body", body))
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Empty(t, sg.Scans())
}

// A server that dies mid-apply (its connection ended while the apply is inside its transaction,
// after the checks, before the commit) leaves the store as it was, its audit record unwritten;
// the same pending change then applies, once.
func TestApplyKilledMidwayWritesNothing(t *testing.T) {
	// Not parallel: the kill finds the apply's backend by its lock in pg_locks, which lists every
	// database's locks (and relation ids of another database may match this one's pg_class).
	// The package's other tests each have a database of their own (pgtest.DSN) and run in
	// parallel, after the sequential ones.
	dsn := pgtest.DSN(t)
	s, err := Create(bg, dsn, storetest.Domain(), Options{})
	require.NoError(t, err)
	defer s.Close()
	admin, err := pgx.Connect(bg, dsn)
	require.NoError(t, err)
	defer admin.Close(bg)
	sg := s.StageFor(bg, store.RunLimits{})
	_, err = items(t, sg).Update(table.Row{"qty": int64(50)}, where("category", "a"))
	require.NoError(t, err)
	_, err = items(t, sg).Insert(table.Row{"sku": "k1", "category": "k", "qty": int64(1)})
	require.NoError(t, err)
	p := sg.Pending()
	audit := store.SysDoc{Collection: "runs", ID: "r1", Value: "applied"}
	kill := func(table.ChangeSet, store.Committed) error {
		// The apply's own backend is the one holding the tables' lock.
		_, err := admin.Exec(bg, `SELECT pg_terminate_backend(pid) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = '_starplan_tables' AND l.mode = 'RowShareLock' AND l.granted AND l.pid <> pg_backend_pid()`)
		return err
	}
	err = s.ApplyPending(bg, p, kill, audit)
	require.Error(t, err)
	assert.NotErrorIs(t, err, store.ErrConflict)
	tb := items(t, s.StageFor(bg, store.RunLimits{}))
	n, err := tb.Count(where("qty", int64(50)))
	require.NoError(t, err)
	assert.Equal(t, 0, n, "no row of the killed apply")
	_, found, err := tb.Get("k1")
	require.NoError(t, err)
	assert.False(t, found)
	found, err = s.GetSys("runs", "r1", new(string))
	require.NoError(t, err)
	assert.False(t, found, "nor its audit record")

	require.NoError(t, s.ApplyPending(bg, p, nil, audit))
	assert.ErrorIs(t, s.ApplyPending(bg, p, nil, audit), store.ErrConflict)
	n, err = items(t, s.StageFor(bg, store.RunLimits{})).Count(where("qty", int64(50)))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}

// Comparisons pushed down as SQL select every row the filter matches, at the edges too: a
// strict comparison, an int compared with a float beyond 2^53 (float8 rounds both), strings in
// byte order whatever the database's collation.
func TestPushedDownComparisons(t *testing.T) {
	t.Parallel()
	dom := &store.Domain{Name: "cmp", Tables: []*table.Schema{{Name: "v", Key: "k", Fields: []table.Field{
		{Name: "k", Type: table.TypeString}, {Name: "n", Type: table.TypeInt}, {Name: "f", Type: table.TypeFloat}, {Name: "s", Type: table.TypeString}}}}}
	dom.Seed = map[string][]table.Row{"v": {
		{"k": "a", "n": int64(1<<53 + 1), "f": 0.5, "s": "B"},
		{"k": "b", "n": int64(2), "f": 2.0, "s": "a"},
		{"k": "c", "n": nil, "f": nil, "s": nil},
	}}
	s, err := Create(bg, pgtest.DSN(t), dom, Options{})
	require.NoError(t, err)
	defer s.Close()
	for _, tc := range []struct {
		where map[string]any
		want  []any
	}{
		{map[string]any{"n": map[string]any{"$gt": float64(1 << 53)}}, []any{"a"}},
		{map[string]any{"n": map[string]any{"$gt": int64(2)}}, []any{"a"}},
		{map[string]any{"n": map[string]any{"$gte": 2, "$lt": 3.5}}, []any{"b"}},
		{map[string]any{"f": map[string]any{"$gt": 0.5}}, []any{"b"}},
		{map[string]any{"f": map[string]any{"$lte": int64(2)}}, []any{"a", "b"}},
		{map[string]any{"s": map[string]any{"$lt": "a"}}, []any{"a"}},
		{map[string]any{"s": map[string]any{"$gte": "B", "$lte": "a"}}, []any{"a", "b"}},
		{map[string]any{"k": map[string]any{"$gt": "a"}, "s": map[string]any{"$ne": "x"}}, []any{"b", "c"}},
	} {
		tb, _ := s.StageFor(bg, store.RunLimits{}).Table("v")
		rows, err := tb.Find(table.Query{Where: tc.where})
		require.NoError(t, err)
		got := []any{}
		for _, r := range rows {
			got = append(got, r["k"])
		}
		assert.Equal(t, tc.want, got, "%v", tc.where)
		n, err := tb.Count(table.Query{Where: tc.where})
		require.NoError(t, err)
		assert.Equal(t, len(tc.want), n)
	}
}

// Another program's INSERT without _ord, or UPDATE of a key, gets the _ord starplan would
// write (computed by a trigger in SQL, the same encoding as in Go), so its rows sort in place.
func TestOtherWritersGetOrd(t *testing.T) {
	t.Parallel()
	dom := &store.Domain{Name: "ord", Tables: []*table.Schema{
		{Name: "s", Key: "k", Fields: []table.Field{{Name: "k", Type: table.TypeString}}},
		{Name: "n", Key: "k", Fields: []table.Field{{Name: "k", Type: table.TypeInt}}},
	}}
	dsn := pgtest.DSN(t)
	s, err := Create(bg, dsn, dom, Options{})
	require.NoError(t, err)
	defer s.Close()
	conn, err := pgx.Connect(bg, dsn)
	require.NoError(t, err)
	defer conn.Close(bg)
	strs := []string{"", "a", "a0", "a00", "a01", "a1", "a001x", "a1x", "a10", "0", "000", "007", "7", "x" + strings.Repeat("9", 300),
		strings.Repeat("0", 250) + "1", "é9ü10", "TXN009", "TXN10", "a/1", "a:1", "a\x7f1", "1.5", "-3"}
	for _, k := range strs {
		_, err := conn.Exec(bg, `INSERT INTO ord.s (k) VALUES ($1)`, k)
		require.NoError(t, err)
	}
	ints := []int64{0, 1, -1, 1 << 62, -(1 << 62), 9223372036854775807, -9223372036854775808}
	for _, k := range ints {
		_, err := conn.Exec(bg, `INSERT INTO ord.n (k) VALUES ($1)`, k)
		require.NoError(t, err)
	}
	_, err = conn.Exec(bg, `UPDATE ord.s SET k = 'b2' WHERE k = 'a1'`)
	require.NoError(t, err)
	rep, err := s.Check(bg, store.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep.Problems)
	assert.Equal(t, []store.TableCount{{Table: "n", Rows: len(ints)}, {Table: "s", Rows: len(strs)}}, rep.Tables)
	rows, err := conn.Query(bg, `SELECT k FROM ord.s ORDER BY _ord`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for i := 1; i < len(got); i++ {
		assert.Negative(t, table.CompareKeys(got[i-1], got[i]), "%q before %q", got[i-1], got[i])
	}
}

// An apply that PostgreSQL ends for a deadlock with another program's transaction runs again:
// the other program holds a row the apply replaces, then changes another row of the table (its
// trigger wants the table's version row, which the apply holds). The apply is the one ended;
// its second attempt waits for the other to commit and then applies.
func TestApplyRetriesAfterDeadlock(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s, err := Create(bg, dsn, storetest.Domain(), Options{})
	require.NoError(t, err)
	defer s.Close()
	sg := s.StageFor(bg, store.RunLimits{})
	_, err = items(t, sg).Update(table.Row{"qty": int64(70)}, where("sku", "a1"))
	require.NoError(t, err)
	p := sg.Pending()

	other, err := pgx.Connect(bg, dsn)
	require.NoError(t, err)
	defer other.Close(bg)
	// The apply's session looks for the deadlock first (after 1 s, PostgreSQL's default), so it
	// is the one ended; the other looks only after 30 s.
	if _, err := other.Exec(bg, `SET deadlock_timeout = '30s'`); err != nil {
		t.Skipf("the test's role may not set deadlock_timeout: %v", err)
	}
	tx, err := other.Begin(bg)
	require.NoError(t, err)
	_, err = tx.Exec(bg, `SELECT 1 FROM conformance.items WHERE sku = 'a1' FOR UPDATE`)
	require.NoError(t, err)
	applied := make(chan error, 1)
	go func() { applied <- s.ApplyPending(bg, p, nil) }()
	_, done := waitForLockWait(t, dsn, applied)
	require.False(t, done, "the apply waits for the other program's row")
	_, err = tx.Exec(bg, `UPDATE conformance.items SET qty = 8 WHERE sku = 'b1'`)
	require.NoError(t, err, "the apply, not the other program, was ended for the deadlock")
	require.NoError(t, tx.Commit(bg))
	require.NoError(t, <-applied, "the apply ran again and applied")
	tb := items(t, s.StageFor(bg, store.RunLimits{}))
	row, _, err := tb.Get("a1")
	require.NoError(t, err)
	assert.Equal(t, int64(70), row["qty"])
	row, _, err = tb.Get("b1")
	require.NoError(t, err)
	assert.Equal(t, int64(8), row["qty"])
}

// LockSys holds its lock across processes (here: two stores opened on one schema, as two servers
// would): the second waits until the first unlocks. (A process that dies holding it loses it
// with its connection: the two-server kill tests, TestKillServerMidApply, would hang otherwise.)
func TestLockSysExcludesAnotherStore(t *testing.T) {
	t.Parallel()
	_, a, b := twoServers(t)

	unlock, err := a.LockSys(bg, "audit_chain")
	require.NoError(t, err)
	short, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	_, err = b.LockSys(short, "audit_chain")
	cancel()
	require.Error(t, err, "held by the other store")
	other, err := b.LockSys(bg, "runs") // another collection's lock is another lock
	require.NoError(t, err)
	other()

	got := make(chan error, 1)
	go func() {
		u, err := b.LockSys(bg, "audit_chain")
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	require.NoError(t, <-got, "free once the first unlocked")
}

// twoServers makes a store of the conformance domain on a new database and opens it twice, as
// two servers would, each with its own connections; both close at the test's end.
func twoServers(t *testing.T) (dsn string, a, b *Store) {
	t.Helper()
	dsn = pgtest.DSN(t)
	a, err := Create(bg, dsn, storetest.Domain(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b, err = Open(bg, dsn, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return dsn, a, b
}
