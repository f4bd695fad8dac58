package pg

import (
	"context"
	"strings"
	"testing"

	"errors"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/storetest"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fptr(x float64) *float64 { return &x }

// ordersDomain maps table orders onto public.orders: id → order_no (int key), customer →
// cust (varchar(40)), qty (int, 0..100000, an integer column), price (float), paid (bool),
// note (optional string), tags (list → jsonb).
func ordersDomain() *store.Domain {
	return &store.Domain{Name: "shop", Tables: []*table.Schema{{
		Name: "orders", Key: "id", Indexes: []string{"customer"},
		SQL: &table.SQLMapping{Table: "public.orders", Columns: map[string]string{"id": "order_no", "customer": "cust"}},
		Fields: []table.Field{
			{Name: "id", Type: table.TypeInt, Required: true, Min: fptr(1), Max: fptr(1e9)},
			{Name: "customer", Type: table.TypeString, Required: true, MaxLen: 40},
			{Name: "qty", Type: table.TypeInt, Required: true, Min: fptr(0), Max: fptr(100000)},
			{Name: "price", Type: table.TypeFloat, Required: true},
			{Name: "paid", Type: table.TypeBool, Required: true},
			{Name: "note", Type: table.TypeString},
			{Name: "tags", Type: table.TypeList, Items: &table.Field{Type: table.TypeString}},
		},
	}}}
}

// ordersSQL is a table that fits ordersDomain, as another program made it, with rows, a column
// of its own (created_at, with a default) and a trigger of its own that counts row updates.
const ordersSQL = `
CREATE TABLE public.orders (
	order_no integer PRIMARY KEY,
	cust varchar(40) NOT NULL,
	qty integer NOT NULL,
	price numeric NOT NULL,
	paid boolean NOT NULL DEFAULT false,
	note text,
	tags jsonb,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE public.order_updates (n int NOT NULL);
INSERT INTO public.order_updates VALUES (0);
CREATE FUNCTION public.count_updates() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE public.order_updates SET n = n + 1; RETURN NEW; END $$;
CREATE TRIGGER count_updates BEFORE UPDATE ON public.orders FOR EACH ROW EXECUTE FUNCTION public.count_updates();
INSERT INTO public.orders (order_no, cust, qty, price, paid, note, tags) VALUES
	(1, 'alice', 2, 9.5, true, 'first', '["a"]'),
	(2, 'bob', 1, 20, false, NULL, NULL),
	(10, 'carol', 5, 0.1, false, NULL, '[]');
`

func sqlExec(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	_, err := conn.Exec(bg, sql, args...)
	require.NoError(t, err, sql)
}

func pgConnect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(bg, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// A table that breaks every rule of the catalog check: Create lists every mismatch in one
// error, each naming the table, the column, what it found and what to change, and creates
// nothing.
func TestMappingMismatchesListed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	conn := pgConnect(t, dsn)
	sqlExec(t, conn, `CREATE TABLE public.bad (
		order_no text,                   -- the key: not unique, and text for an int field
		cust char(10),                   -- char pads; nullable for a required field
		qty integer NOT NULL,            -- int field without bounds
		price real NOT NULL,             -- real rounds
		paid text NOT NULL,              -- not boolean
		note varchar(5) NOT NULL,        -- optional field on NOT NULL; 5 < the field's 256
		tags integer GENERATED ALWAYS AS (qty * 2) STORED, -- generated; not json
		extra text NOT NULL,             -- unmapped NOT NULL without default
		_version text                    -- not bigint
	)`)
	sqlExec(t, conn, `CREATE VIEW public.aview AS SELECT 1 AS id`)
	dom := ordersDomain()
	dom.Tables[0].SQL.Table = "public.bad"
	dom.Tables[0].Fields[2].Min, dom.Tables[0].Fields[2].Max = nil, nil
	dom.Tables[0].Fields[0].Min, dom.Tables[0].Fields[0].Max = nil, nil
	dom.Tables[0].Fields[1].MaxLen = 0
	dom.Tables[0].Fields[5].MaxLen = 0
	dom.Tables = append(dom.Tables,
		&table.Schema{Name: "missing", Key: "id", SQL: &table.SQLMapping{Table: "public.nosuch"}, Fields: []table.Field{{Name: "id", Type: table.TypeString, Required: true}}},
		&table.Schema{Name: "viewed", Key: "id", SQL: &table.SQLMapping{Table: "public.aview"}, Fields: []table.Field{{Name: "id", Type: table.TypeInt, Required: true}}},
		&table.Schema{Name: "twice", Key: "order_no", SQL: &table.SQLMapping{Table: "public.bad"}, Fields: []table.Field{{Name: "order_no", Type: table.TypeString, Required: true}}},
		&table.Schema{Name: "wrongcol", Key: "id", SQL: &table.SQLMapping{Table: "public.order_x", Columns: map[string]string{"id": "idd"}}, Fields: []table.Field{{Name: "id", Type: table.TypeString, Required: true}}},
	)
	sqlExec(t, conn, `CREATE TABLE public.order_x (id text PRIMARY KEY)`)
	sqlExec(t, conn, `CREATE TABLE public.bad2 (
		id bigint UNIQUE,                              -- unique but nullable
		n integer GENERATED ALWAYS AS IDENTITY,        -- not writable
		whole numeric(10, 2) NOT NULL,                 -- fractions for an int field
		small numeric(5, 0) NOT NULL,                  -- bounds beyond 5 digits
		cents numeric(10, 2) NOT NULL                  -- rounds a float
	)`)
	dom.Tables = append(dom.Tables,
		&table.Schema{Name: "bad2", Key: "id", SQL: &table.SQLMapping{Table: "public.bad2"}, Fields: []table.Field{
			{Name: "id", Type: table.TypeInt, Required: true},
			{Name: "n", Type: table.TypeInt, Required: true, Min: fptr(0), Max: fptr(10)},
			{Name: "whole", Type: table.TypeInt, Required: true},
			{Name: "small", Type: table.TypeInt, Required: true, Min: fptr(0), Max: fptr(1e6)},
			{Name: "cents", Type: table.TypeFloat, Required: true},
		}},
		&table.Schema{Name: "own", Key: "id", SQL: &table.SQLMapping{Table: "shop._starplan_tables"}, Fields: []table.Field{{Name: "id", Type: table.TypeString, Required: true}}},
		&table.Schema{Name: "parted", Key: "id", SQL: &table.SQLMapping{Table: "public.parted"}, Fields: []table.Field{{Name: "id", Type: table.TypeInt, Required: true}}},
	)
	sqlExec(t, conn, `CREATE TABLE public.parted (id bigint PRIMARY KEY) PARTITION BY RANGE (id)`)
	_, err := Create(bg, dsn, dom, Options{})
	var me *MappingError
	require.ErrorAs(t, err, &me)
	msg := err.Error()
	for _, want := range []string{
		"table orders (public.bad) column order_no: of type text, and field id is int",
		"column order_no: the key field id's column is neither the primary key nor unique; make it the primary key",
		"column cust: of type character(10), and field customer is string (char(n) pads",
		"column cust: nullable, and field customer is required",
		`column qty: of type integer, and field qty is int without min and max within integer's range -2147483648..2147483647`,
		"column price: of type real, and field price is float (real keeps about 6 digits",
		"column paid: of type text, and field paid is bool",
		"column note: of type character varying(5), and field note is string of up to 1000 characters",
		"column note: NOT NULL, and field note is optional",
		"column tags: of type integer, and field tags is list; a list field needs a jsonb or json column",
		"column tags: a generated column (field tags maps onto it)",
		"column extra: NOT NULL without a default, and no field maps onto it",
		"column _version: a column _version of type text",
		"table missing (public.nosuch): no such table; create it first",
		"table viewed (public.aview): it is not a table",
		"table twice (public.bad): table orders maps onto it too",
		`table wrongcol (public.order_x) column idd: no such column (field id maps onto it); add the column, or map the field onto one of the table's columns with sql.columns (did you mean "id"?)`,
		"table wrongcol (public.order_x) column id: NOT NULL without a default, and no field maps onto it",
		`table bad2 (public.bad2) column id: the key field id's column is unique but nullable; ALTER COLUMN "id" SET NOT NULL`,
		`table bad2 (public.bad2) column n: GENERATED ALWAYS AS IDENTITY (field n maps onto it); starplan writes every field it maps: ALTER COLUMN "n" SET GENERATED BY DEFAULT`,
		`table bad2 (public.bad2) column whole: of type numeric(10,2), and field whole is int (a numeric with fractions would read back rounded)`,
		`table bad2 (public.bad2) column small: of type numeric(5,0), and field small is int without min and max within -99999..99999`,
		`table bad2 (public.bad2) column cents: of type numeric(10,2), and field cents is float (numeric(p, s) rounds what is written`,
		`table own (shop._starplan_tables): the store's own schema shop names a table of its own so`,
		`table parted (public.parted): it is a partitioned table`,
	} {
		assert.Contains(t, msg, want)
	}
	assert.Len(t, me.Problems, 25, msg)
	assert.Contains(t, msg, "(25 problems); nothing was created")

	var n int
	require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'shop'`).Scan(&n))
	assert.Zero(t, n, "no schema made")
	require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'order_x'`).Scan(&n))
	assert.Equal(t, 1, n, "no column added")
}

// A table that fits is adopted: its rows and its own columns kept, none of its triggers fired,
// _version and _ord added; runs read and write it through the mapped columns; another program's
// plain SQL is a concurrent change (conflict at apply); db check finds nothing wrong; export
// reads the rows; a second store cannot adopt it again.
func TestMappedTableAdopted(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	conn := pgConnect(t, dsn)
	sqlExec(t, conn, ordersSQL)
	dom := ordersDomain()
	dom.Seed = map[string][]table.Row{"orders": {{"id": int64(99), "customer": "seed", "qty": int64(1), "price": 1.0, "paid": false}}}
	s, err := Create(bg, dsn, dom, Options{})
	require.NoError(t, err)
	defer s.Close()

	var updates int
	require.NoError(t, conn.QueryRow(bg, `SELECT n FROM public.order_updates`).Scan(&updates))
	assert.Zero(t, updates, "adoption fired none of the table's triggers")
	var created int
	require.NoError(t, conn.QueryRow(bg, `SELECT count(DISTINCT created_at) FROM public.orders`).Scan(&created))
	assert.Equal(t, 1, created)

	sg := s.StageFor(bg, store.RunLimits{})
	tb, ok := sg.Table("orders")
	require.True(t, ok)
	assert.Equal(t, 3, tb.Len(), "the rows kept; the seed not loaded into a table that holds rows")
	row, ok, err := tb.Get(int64(1))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, table.Row{"id": int64(1), "customer": "alice", "qty": int64(2), "price": 9.5, "paid": true, "note": "first", "tags": []any{"a"}}, row)
	rows, err := tb.Find(table.Query{Where: map[string]any{"customer": "carol"}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, 0.1, rows[0]["price"])
	// An equality and a comparison on a float field in a numeric column.
	assert.Len(t, mustFind(t, tb, table.Query{Where: map[string]any{"price": 0.1}}), 1)
	assert.Len(t, mustFind(t, tb, table.Query{Where: map[string]any{"price": map[string]any{"$lt": 10}}}), 2)
	assert.Len(t, mustFind(t, tb, table.Query{Where: map[string]any{"price": int64(20)}}), 1)
	// A comparison beyond the integer column's range is pushed down without error.
	assert.Len(t, mustFind(t, tb, table.Query{Where: map[string]any{"qty": map[string]any{"$lt": int64(1) << 40}}}), 3)
	assert.Len(t, mustFind(t, tb, table.Query{Where: map[string]any{"id": map[string]any{"$gt": int64(-1) << 40}}}), 3)
	var keys []any
	for _, r := range mustFind(t, tb, table.Query{}) {
		keys = append(keys, r["id"])
	}
	assert.Equal(t, []any{int64(1), int64(2), int64(10)}, keys, "key order")

	// A run writes through the mapped columns.
	_, err = tb.Update(table.Row{"qty": int64(7)}, table.Query{Where: map[string]any{"customer": "bob"}})
	require.NoError(t, err)
	k, err := tb.Insert(table.Row{"id": int64(11), "customer": "dave", "qty": int64(3), "price": 2.25, "paid": false, "tags": []any{"x", "y"}})
	require.NoError(t, err)
	assert.Equal(t, int64(11), k)
	_, err = tb.Remove(table.Query{Where: map[string]any{"id": int64(10)}})
	require.NoError(t, err)
	require.NoError(t, s.ApplyPending(bg, sg.Pending(), nil))
	var qty int
	var created11 bool
	require.NoError(t, conn.QueryRow(bg, `SELECT qty FROM public.orders WHERE order_no = 2`).Scan(&qty))
	assert.Equal(t, 7, qty)
	require.NoError(t, conn.QueryRow(bg, `SELECT created_at IS NOT NULL FROM public.orders WHERE order_no = 11`).Scan(&created11))
	assert.True(t, created11, "the insert left the unmapped column to its default")
	require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM public.orders WHERE order_no = 10`).Scan(&qty))
	assert.Zero(t, qty)

	// Another program's UPDATE between a dry run and its apply: conflict naming the row.
	sg = s.StageFor(bg, store.RunLimits{})
	tb, _ = sg.Table("orders")
	_, err = tb.Update(table.Row{"qty": int64(8)}, table.Query{Where: map[string]any{"id": int64(1)}})
	require.NoError(t, err)
	sqlExec(t, conn, `UPDATE public.orders SET note = 'changed' WHERE order_no = 1`)
	err = s.ApplyPending(bg, sg.Pending(), nil)
	var ce *store.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "orders", ce.Conflicts[0].Table)
	assert.Equal(t, int64(1), ce.Conflicts[0].Key)
	// Another program's INSERT moves a predicate read (the table's version, by its trigger
	// keyed by the domain table's name).
	sg = s.StageFor(bg, store.RunLimits{})
	tb, _ = sg.Table("orders")
	_, err = tb.Find(table.Query{Where: map[string]any{"paid": false}})
	require.NoError(t, err)
	_, err = tb.Update(table.Row{"paid": true}, table.Query{Where: map[string]any{"id": int64(2)}})
	require.NoError(t, err)
	sqlExec(t, conn, `INSERT INTO public.orders (order_no, cust, qty, price, paid) VALUES (50, 'eve', 1, 3, false)`)
	err = s.ApplyPending(bg, sg.Pending(), nil)
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "orders")

	rep, err := s.Check(bg, store.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems, "the other program's insert got its _ord from the trigger")
	var out strings.Builder
	require.NoError(t, s.Export(&out, "orders", store.JSON))
	assert.Contains(t, out.String(), `"customer": "eve"`)

	_, err = Create(bg, dsn, dom, Options{Schema: "second"})
	var me *MappingError
	require.ErrorAs(t, err, &me)
	assert.Contains(t, err.Error(), "the starplan store in schema shop holds it already")

	// Opened again by DSN alone, the mapping comes back from the record.
	s2, err := Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer s2.Close()
	tb, _ = s2.StageFor(bg, store.RunLimits{}).Table("orders")
	assert.Equal(t, 4, tb.Len())

	// No CHECK constraint on a mapped table: another program's value outside a field's bounds
	// is db check's to report, and a run cannot write the row back.
	sqlExec(t, conn, `UPDATE public.orders SET qty = -5 WHERE order_no = 2`)
	rep, err = s2.Check(bg, store.CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Problems, 1)
	assert.Contains(t, rep.Problems[0].Message, "qty")
	tb, _ = s2.StageFor(bg, store.RunLimits{}).Table("orders")
	_, err = tb.Update(table.Row{"note": "x"}, table.Query{Where: map[string]any{"id": int64(2)}})
	assert.ErrorContains(t, err, "qty")
	sqlExec(t, conn, `UPDATE public.orders SET qty = 5 WHERE order_no = 2`)

	// db check sees a mapped table altered since: a trigger dropped, a column made NOT NULL.
	sqlExec(t, conn, `DROP TRIGGER _starplan_bump ON public.orders`)
	sqlExec(t, conn, `UPDATE public.orders SET note = '' WHERE note IS NULL`)
	sqlExec(t, conn, `ALTER TABLE public.orders ALTER COLUMN note SET NOT NULL`)
	rep, err = s2.Check(bg, store.CheckOptions{})
	require.NoError(t, err)
	var probs []string
	for _, p := range rep.Problems {
		probs = append(probs, p.Message)
	}
	assert.Len(t, probs, 2, "%q", probs)
	assert.Contains(t, strings.Join(probs, "\n"), `mapped onto public.orders: its trigger _starplan_bump is gone (other programs' writes to it are not seen as changes); create it again: CREATE TRIGGER _starplan_bump BEFORE UPDATE ON "public"."orders" FOR EACH ROW EXECUTE FUNCTION "shop"."_starplan_bump"()`)
	assert.Contains(t, strings.Join(probs, "\n"), `mapped onto public.orders column note: NOT NULL, and field note is optional`)
}

func mustFind(t testing.TB, tb table.Table, q table.Query) []table.Row {
	t.Helper()
	rows, err := tb.Find(q)
	require.NoError(t, err)
	return rows
}

// Another program keeps writing to a mapped table (plain SQL increments of rows 1 and 2, and
// inserts, through its own connection) while runs read a row, add 10 to it and apply, or read
// the rows of kind b and insert one. Every apply is either applied with exactly its change or a
// conflict naming the table (and, for a row, its key); the final rows equal a model of what was
// applied plus what the other program did: no update is lost. Every fourth run also gets a
// write of the other program between its dry run and its apply (to its row, or a row of kind
// b), which must make it conflict; a run whose reads the other program does not touch (rows 3
// and 4, kind b) must apply, its table's version moved or not.
func TestMappedTableWithAnotherWriter(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	conn := pgConnect(t, dsn)
	sqlExec(t, conn, `CREATE TABLE public.accts (id bigint PRIMARY KEY, bal bigint NOT NULL, kind text NOT NULL)`)
	const nrows = 4
	for k := 1; k <= nrows; k++ {
		sqlExec(t, conn, `INSERT INTO public.accts VALUES ($1, 100, 'a')`, k)
	}
	dom := &store.Domain{Name: "bank", Tables: []*table.Schema{{
		Name: "accounts", Key: "id", SQL: &table.SQLMapping{Table: "public.accts", Columns: map[string]string{"balance": "bal"}},
		Fields: []table.Field{
			{Name: "id", Type: table.TypeInt, Required: true},
			{Name: "balance", Type: table.TypeInt, Required: true},
			{Name: "kind", Type: table.TypeString, Required: true},
		},
	}}}
	s, err := Create(bg, dsn, dom, Options{})
	require.NoError(t, err)
	defer s.Close()

	// The other program: increments of a row chosen in turn, and now and then an insert.
	other := pgConnect(t, dsn)
	stop := make(chan struct{})
	done := make(chan error, 1)
	otherAdds := make([]int64, nrows+1)
	otherInserts := 0
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			k := 1 + i%2
			if _, err := other.Exec(bg, `UPDATE public.accts SET bal = bal + 1 WHERE id = $1`, k); err != nil {
				done <- err
				return
			}
			otherAdds[k]++
			if i%7 == 0 {
				if _, err := other.Exec(bg, `INSERT INTO public.accts VALUES ($1, 0, 'a')`, 1000+i); err != nil {
					done <- err
					return
				}
				otherInserts++
			}
			time.Sleep(100 * time.Microsecond) // leave the runs on rows 1 and 2 a chance (only the mix depends on it)
		}
	}()

	runs := testtier.Size(40, 400)
	applied := make([]int64, nrows+1)
	inserted := map[int64]bool{}
	conflicts, forced := 0, 0
	for i := 0; i < runs; i++ {
		k := int64(1 + i%nrows)
		sg := s.StageFor(bg, store.RunLimits{})
		tb, _ := sg.Table("accounts")
		newKey := int64(2000 + i)
		if i%3 == 2 {
			// A predicate read, then an insert.
			_, err := tb.Find(table.Query{Where: map[string]any{"kind": "b"}})
			require.NoError(t, err)
			_, err = tb.Insert(table.Row{"id": newKey, "balance": int64(1), "kind": "b"})
			require.NoError(t, err)
		} else {
			row, ok, err := tb.Get(k)
			require.NoError(t, err)
			require.True(t, ok)
			_, err = tb.Update(table.Row{"balance": row["balance"].(int64) + 10}, table.Query{Where: map[string]any{"id": k}})
			require.NoError(t, err)
		}
		force := i%4 == 3
		if force {
			forced++
			if i%3 == 2 {
				sqlExec(t, conn, `INSERT INTO public.accts VALUES ($1, 0, 'b')`, 3000+i)
			} else {
				sqlExec(t, conn, `UPDATE public.accts SET kind = 'a' WHERE id = $1`, k) // a change of the row, its value the same
			}
		}
		err := s.ApplyPending(bg, sg.Pending(), nil)
		var ce *store.ConflictError
		switch {
		case err == nil:
			require.False(t, force, "run %d applied over another program's write between its dry run and its apply", i)
			if i%3 == 2 {
				inserted[newKey] = true
			} else {
				applied[k] += 10
			}
		case errors.As(err, &ce):
			require.False(t, !force && (i%3 == 2 || k > 2), "run %d conflicts though nothing it read changed: %v", i, err)
			conflicts++
			c := ce.Conflicts[0]
			assert.Equal(t, "accounts", c.Table)
			if i%3 != 2 && c.Read == "" {
				assert.Equal(t, k, c.Key, "the conflict names the row")
			}
		default:
			require.NoError(t, err)
		}
	}
	close(stop)
	require.NoError(t, <-done)

	for k := int64(1); k <= nrows; k++ {
		var bal int64
		require.NoError(t, conn.QueryRow(bg, `SELECT bal FROM public.accts WHERE id = $1`, k).Scan(&bal))
		assert.Equal(t, 100+applied[k]+otherAdds[k], bal, "row %d: 100 + the runs' applied +10s + the other program's +1s", k)
	}
	var n int
	require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM public.accts WHERE id >= 2000 AND id < 3000`).Scan(&n))
	assert.Equal(t, len(inserted), n, "the runs' inserts that applied, and no other")
	require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM public.accts WHERE id >= 1000 AND id < 2000`).Scan(&n))
	assert.Equal(t, otherInserts, n)
	assert.GreaterOrEqual(t, conflicts, forced)
	assert.NotEmpty(t, inserted)
	t.Logf("%d runs: %d conflicts (%d forced), %d applied inserts", runs, conflicts, forced, len(inserted))
	rep, err := s.Check(bg, store.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// mappedOpener makes, for the conformance suite, a store whose every table is mapped onto a
// table another program made in schema ext, its columns named c_FIELD and of other types than
// the store's own (varchar, numeric(19, 0), numeric, json): the suite holds of mapped tables too.
func mappedOpener(t testing.TB, dom *store.Domain) store.Store {
	t.Helper()
	dsn := pgtest.DSN(t)
	conn := pgConnect(t, dsn)
	sqlExec(t, conn, `CREATE SCHEMA ext`)
	d := *dom
	d.Tables = nil
	for _, sc := range dom.Tables {
		m := *sc
		m.SQL = &table.SQLMapping{Table: "ext." + sc.Name, Columns: map[string]string{}}
		var cols []string
		for _, f := range sc.Fields {
			col := "c_" + f.Name
			m.SQL.Columns[f.Name] = col
			typ := map[string]string{table.TypeString: "varchar", table.TypeTimestamp: "text", table.TypeInt: "numeric(19, 0)",
				table.TypeFloat: "numeric", table.TypeBool: "boolean"}[f.Type]
			if typ == "" {
				typ = "json"
			}
			switch {
			case f.Name == sc.Key:
				typ += " PRIMARY KEY"
			case f.Required:
				typ += " NOT NULL"
			}
			cols = append(cols, q(col)+" "+typ)
		}
		sqlExec(t, conn, "CREATE TABLE "+ident("ext", sc.Name)+" ("+strings.Join(cols, ", ")+")")
		d.Tables = append(d.Tables, &m)
	}
	s, err := Create(bg, dsn, &d, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformanceMapped(t *testing.T) {
	t.Parallel()
	storetest.Run(t, mappedOpener)
}

// The db tools on a mapped table: import (upsert and replace) goes through the mapped columns
// and keeps the table's own column; seed never replaces a mapped table's rows, with force too;
// an upgrade that keeps the mapped table as it is goes through, one that changes it is
// refused; a store whose schema was dropped leaves _version and _ord on the table, and a new
// store adopts it again.
func TestMappedTableTools(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	conn := pgConnect(t, dsn)
	sqlExec(t, conn, ordersSQL)
	dom := storeDefined(t, ordersDomain())
	dom.Seed = map[string][]table.Row{"orders": {{"id": int64(99), "customer": "seed", "qty": int64(1), "price": 1.0, "paid": false}}}
	s, err := Create(bg, dsn, dom, Options{})
	require.NoError(t, err)
	defer s.Close()

	res, err := s.Import(bg, "orders", strings.NewReader(`[{"id": 2, "customer": "bob", "qty": 4, "price": 20, "paid": true}, {"id": 7, "customer": "gus", "qty": 1, "price": 5.5, "paid": false}]`), store.JSON, Upsert)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Inserted)
	assert.Equal(t, 1, res.Updated)
	var qty int
	var created bool
	require.NoError(t, conn.QueryRow(bg, `SELECT qty, created_at IS NOT NULL FROM public.orders WHERE order_no = 2`).Scan(&qty, &created))
	assert.Equal(t, 4, qty)
	assert.True(t, created)

	require.NoError(t, s.Seed(bg, true))
	var n int
	require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM public.orders`).Scan(&n))
	assert.Equal(t, 4, n, "seed --force left the mapped table's rows")

	res, err = s.Import(bg, "orders", strings.NewReader(`[{"id": 7, "customer": "gus", "qty": 2, "price": 5.5, "paid": false}]`), store.JSON, Replace)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Deleted)
	require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM public.orders`).Scan(&n))
	assert.Equal(t, 1, n)

	same := ordersDomain()
	same.Doc = "the same tables, another doc"
	require.NoError(t, s.UpgradeDomain(bg, storeDefined(t, same)))
	s, err = Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer s.Close()
	changed := ordersDomain()
	changed.Tables[0].Fields[5].MaxLen = 10
	err = s.UpgradeDomain(bg, storeDefined(t, changed))
	assert.ErrorContains(t, err, "is mapped onto an existing SQL table, which an upgrade does not alter")

	// A mapped table the store has not adopted is refused at Open, not created.
	more := ordersDomain()
	more.Tables = append(more.Tables, &table.Schema{Name: "later", Key: "id", SQL: &table.SQLMapping{Table: "public.order_updates"},
		Fields: []table.Field{{Name: "id", Type: table.TypeInt, Required: true}}})
	_, err = Open(bg, dsn, Options{Domain: more})
	assert.ErrorContains(t, err, "table later is mapped onto public.order_updates, which the store has not adopted")

	s.Close()
	sqlExec(t, conn, `DROP SCHEMA shop CASCADE`)
	s, err = Create(bg, dsn, dom, Options{})
	require.NoError(t, err, "adopted again")
	defer s.Close()
	tb, _ := s.StageFor(bg, store.RunLimits{}).Table("orders")
	row, ok, err := tb.Get(int64(7))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(2), row["qty"])
	rep, err := s.Check(bg, store.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

func storeDefined(t testing.TB, dom *store.Domain) *store.Domain { return storetest.Defined(t, dom) }

// waitForLockWaiters returns once n sessions of the database wait for a lock; it fails t if
// one of ends reports first.
func waitForLockWaiters(t *testing.T, dsn string, n int, ends ...<-chan error) {
	t.Helper()
	conn := pgConnect(t, dsn)
	for {
		for _, c := range ends {
			select {
			case err := <-c:
				t.Fatalf("ended before %d sessions waited: %v", n, err)
			default:
			}
		}
		var waiting int
		require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		if waiting >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Another program's single UPDATE of a row while an apply that replaces that row holds its
// table's version row and waits (here for a second table's version row, which a third session
// holds): the UPDATE's statement trigger takes the version row before the UPDATE takes the row,
// as the apply does, so the UPDATE waits for the apply instead of holding the row the apply
// needs next. Both go through: the apply applies, then the UPDATE adds 1. (With the trigger
// AFTER the statement, the UPDATE held the row and waited for the version row: a deadlock,
// which ended the apply — a conflict on its retry — or the other program's statement.)
func TestOtherProgramsStatementWaitsForApply(t *testing.T) {
	t.Parallel()
	for _, mapped := range []bool{true, false} {
		t.Run(map[bool]string{true: "mapped", false: "own"}[mapped], func(t *testing.T) { testStatementWaitsForApply(t, mapped) })
	}
}

func testStatementWaitsForApply(t *testing.T, mapped bool) {
	dsn := pgtest.DSN(t)
	conn := pgConnect(t, dsn)
	accounts := &table.Schema{Name: "accounts", Key: "id",
		Fields: []table.Field{{Name: "id", Type: table.TypeInt, Required: true}, {Name: "balance", Type: table.TypeInt, Required: true}}}
	update := `UPDATE bank.accounts SET balance = balance + 1 WHERE id = 1`
	if mapped {
		sqlExec(t, conn, `CREATE TABLE public.accts (id bigint PRIMARY KEY, bal bigint NOT NULL); INSERT INTO public.accts VALUES (1, 100)`)
		accounts.SQL = &table.SQLMapping{Table: "public.accts", Columns: map[string]string{"balance": "bal"}}
		update = `UPDATE public.accts SET bal = bal + 1 WHERE id = 1`
	}
	dom := &store.Domain{Name: "bank", Tables: []*table.Schema{accounts,
		{Name: "zlog", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeInt, Required: true}}},
	}}
	if !mapped {
		dom.Seed = map[string][]table.Row{"accounts": {{"id": int64(1), "balance": int64(100)}}}
	}
	s, err := Create(bg, dsn, dom, Options{})
	require.NoError(t, err)
	defer s.Close()
	sg := s.StageFor(bg, store.RunLimits{})
	tb, _ := sg.Table("accounts")
	_, err = tb.Update(table.Row{"balance": int64(110)}, table.Query{Where: map[string]any{"id": int64(1)}})
	require.NoError(t, err)
	lg, _ := sg.Table("zlog")
	_, err = lg.Insert(table.Row{"id": int64(1)})
	require.NoError(t, err)

	blocker, err := conn.Begin(bg)
	require.NoError(t, err)
	_, err = blocker.Exec(bg, `SELECT ver FROM bank._starplan_tables WHERE name = 'zlog' FOR UPDATE`)
	require.NoError(t, err)
	applied := make(chan error, 1)
	go func() { applied <- s.ApplyPending(bg, sg.Pending(), nil) }()
	waitForLockWaiters(t, dsn, 1, applied) // the apply holds accounts' version row, waits for zlog's

	other := pgConnect(t, dsn)
	updated := make(chan error, 1)
	go func() {
		_, err := other.Exec(bg, update)
		updated <- err
	}()
	waitForLockWaiters(t, dsn, 2, applied, updated)
	require.NoError(t, blocker.Rollback(bg))
	require.NoError(t, <-applied, "the apply applied")
	require.NoError(t, <-updated, "the other program's statement went through")
	tb, _ = s.StageFor(bg, store.RunLimits{}).Table("accounts")
	row, _, err := tb.Get(int64(1))
	require.NoError(t, err)
	assert.Equal(t, int64(111), row["balance"])
}

// A table the connection's role does not own (adoption alters it) is a mismatch the catalog
// check lists, not an SQL error halfway through; nothing is created.
func TestMappingNeedsTheTablesOwner(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	conn := pgConnect(t, dsn)
	var db, super string
	require.NoError(t, conn.QueryRow(bg, `SELECT current_database(), current_user`).Scan(&db, &super))
	role := "mapper_" + db
	if _, err := conn.Exec(bg, `CREATE ROLE `+q(role)+` LOGIN`); err != nil {
		t.Skipf("the test's role may not create roles: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			c.Exec(context.Background(), `DROP OWNED BY `+q(role))
			c.Exec(context.Background(), `DROP ROLE `+q(role))
			c.Close(context.Background())
		}
	})
	sqlExec(t, conn, ordersSQL)
	sqlExec(t, conn, `GRANT CREATE ON DATABASE `+q(db)+` TO `+q(role))
	sqlExec(t, conn, `GRANT USAGE ON SCHEMA public TO `+q(role))
	roleDSN := dsn + " user=" + role
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		u.User = url.User(role)
		roleDSN = u.String()
	}
	_, err := Create(bg, roleDSN, ordersDomain(), Options{})
	var me *MappingError
	require.ErrorAs(t, err, &me)
	assert.Contains(t, err.Error(), "table orders (public.orders): it is owned by role "+super+", and this connection's role is not a member of it")
	var n int
	require.NoError(t, conn.QueryRow(bg, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'shop'`).Scan(&n))
	assert.Zero(t, n)
}
