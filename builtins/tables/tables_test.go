package tables

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarktest"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/table"
)

// fileOptions are the dialect options the sandbox runs plans with.
var fileOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}

var fixedNow = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// env is one test run: the registry's values over a fresh seeded view.
type env struct {
	reg  builtins.Registry
	view *memView
	out  strings.Builder
}

func newEnv(t testing.TB) *env {
	t.Helper()
	schemas := testSchemas()
	return &env{reg: Registry(schemas), view: newMemView(schemas, seedData())}
}

// exec runs src on a new thread bound to the env's view, with the registry's values, the assert
// module, json and user_request predeclared, plus extra.
func (e *env) exec(t testing.TB, src string, extra starlark.StringDict) (starlark.StringDict, error) {
	t.Helper()
	thread := &starlark.Thread{Name: t.Name(), Print: func(_ *starlark.Thread, msg string) { e.out.WriteString(msg + "\n") }}
	starlarktest.SetReporter(thread, t)
	Bind(thread, e.view, fixedNow)
	return starlark.ExecFileOptions(fileOptions, thread, t.Name()+".star", src, e.predeclared(t, extra))
}

func (e *env) predeclared(t testing.TB, extra starlark.StringDict) starlark.StringDict {
	assertMod, err := starlarktest.LoadAssertModule()
	require.NoError(t, err)
	pre := starlark.StringDict{
		"assert":       assertMod["assert"],
		"freeze":       assertMod["freeze"],
		"json":         json.Module,
		"user_request": starlark.String("Return 2 Aviator sunglasses."),
	}
	for k, v := range e.reg.Predeclared() {
		pre[k] = v
	}
	for k, v := range extra {
		pre[k] = v
	}
	return pre
}

// run is exec that must succeed.
func (e *env) run(t testing.TB, src string) starlark.StringDict {
	t.Helper()
	g, err := e.exec(t, src, nil)
	require.NoError(t, err)
	return g
}

// TestStarlarkScripts runs every testdata/tables/*.star script against a fresh seeded view.
// The scripts check the language surface with the assert module.
func TestStarlarkScripts(t *testing.T) {
	files, err := filepath.Glob("../../testdata/tables/*.star")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			e := newEnv(t)
			thread := &starlark.Thread{Name: file, Print: func(_ *starlark.Thread, msg string) { e.out.WriteString(msg + "\n") }}
			starlarktest.SetReporter(thread, t)
			Bind(thread, e.view, fixedNow)
			_, err := starlark.ExecFileOptions(fileOptions, thread, file, nil, e.predeclared(t, nil))
			if err != nil {
				var evalErr *starlark.EvalError
				if errors.As(err, &evalErr) {
					t.Fatal(evalErr.Backtrace())
				}
				t.Fatal(err)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	reg := Registry(testSchemas())
	names := map[string]builtins.Helper{}
	for _, h := range reg {
		_, dup := names[h.Name]
		require.False(t, dup, "duplicate name %s", h.Name)
		names[h.Name] = h
		assert.NotEmpty(t, h.Signature, h.Name)
		assert.NotEmpty(t, h.Doc, h.Name)
		assert.NotContains(t, h.Doc, "\n", h.Name)
		assert.NotEmpty(t, h.Example, h.Name)
		_, err := (&syntax.FileOptions{}).Parse(h.Name+".example", h.Example, 0)
		assert.NoError(t, err, "the example of %s must be Starlark", h.Name)
	}
	groups := map[string]builtins.Group{
		"inventory_tbl": builtins.GroupTable, "transactions_tbl": builtins.GroupTable,
		"tbl.all": builtins.GroupTable, "tbl.search": builtins.GroupTable, "tbl.get": builtins.GroupTable,
		"tbl.get_by_key": builtins.GroupTable, "tbl.count": builtins.GroupTable, "tbl.insert": builtins.GroupTable,
		"tbl.update": builtins.GroupTable, "tbl.remove": builtins.GroupTable, "tbl.last": builtins.GroupTable,
		"now":          builtins.GroupDomain,
		"user_request": builtins.GroupInput, "answer_text": builtins.GroupContract, "STATUS": builtins.GroupContract,
		"len": builtins.GroupLanguage,
	}
	for name, group := range groups {
		h, ok := names[name]
		if assert.True(t, ok, "missing %s", name) {
			assert.Equal(t, group, h.Group, name)
		}
	}
	assert.Len(t, reg, len(groups))
	for _, name := range []string{"user_request", "answer_text", "STATUS", "tbl.search"} {
		assert.Nil(t, names[name].Value, "%s has no predeclared value", name)
	}
	assert.True(t, names["len"].Hidden)
	assert.NotContains(t, reg.Documented().Names(), "len")
	assert.Equal(t, "inventory_tbl: table (key item_id; fields item_id, name, description, quantity_in_stock, price)", names["inventory_tbl"].Signature)

	pre := reg.Predeclared()
	assert.ElementsMatch(t, []string{"inventory_tbl", "transactions_tbl", "now", "len"}, keys(pre), "a domain's own helpers are Starlark (helpers.star)")
}

func keys(d starlark.StringDict) []string {
	out := make([]string, 0, len(d))
	for k := range d {
		out = append(out, k)
	}
	return out
}

func TestRegistryOfOneTable(t *testing.T) {
	reg := Registry(testSchemas()[:1])
	assert.Equal(t, []string{"STATUS", "answer_text", "inventory_tbl", "len", "now",
		"tbl.all", "tbl.count", "tbl.get", "tbl.get_by_key", "tbl.insert", "tbl.last", "tbl.remove", "tbl.search", "tbl.update",
		"user_request"}, reg.Names())
	assert.Len(t, Registry(nil), 5, "now, the input, the contract globals and len remain")
}

// TestExamplesRun runs every documented example, so the reference never shows a call that fails.
func TestExamplesRun(t *testing.T) {
	e := newEnv(t)
	tb, _ := e.view.Table("inventory")
	sg001, _, _ := tb.Get("SG001")
	for _, h := range e.reg.Documented() {
		t.Run(h.Name, func(t *testing.T) {
			_, err := e.exec(t, h.Example, starlark.StringDict{"row": NewRow(tb.Schema(), sg001)})
			assert.NoError(t, err, h.Example)
		})
	}
}

func TestHelpersNeedABoundView(t *testing.T) {
	e := newEnv(t)
	calls := []string{
		"inventory_tbl.all()", "inventory_tbl.search({})", "inventory_tbl.get(None)", `inventory_tbl.get_by_key("SG001")`,
		"inventory_tbl.count()", "len(inventory_tbl)", `inventory_tbl.insert({"item_id": "X"})`,
		`inventory_tbl.update({"price": 1}, lambda r: True)`, "inventory_tbl.remove(lambda r: True)",
		"inventory_tbl.last()", "now()",
	}
	for _, call := range calls {
		t.Run(call, func(t *testing.T) {
			thread := &starlark.Thread{Name: "unbound"}
			_, err := starlark.ExecFileOptions(fileOptions, thread, "unbound.star", call, e.reg.Predeclared())
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrNotBound)
			assert.ErrorContains(t, err, "the host must call tables.Bind")
		})
	}
}

func TestTableMissingFromView(t *testing.T) {
	e := newEnv(t)
	delete(e.view.tables, "transactions")
	_, err := e.exec(t, "transactions_tbl.all()", nil)
	assert.ErrorContains(t, err, `transactions_tbl.all: table "transactions" is not in this run's database (it has inventory)`)
}

func TestErrorsKeepTheirCause(t *testing.T) {
	e := newEnv(t)

	_, err := e.exec(t, `inventory_tbl.search({"quantity": {"$gt": 1}})`, nil)
	var qe *table.QueryError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, "quantity_in_stock", qe.Suggestion)
	assert.ErrorContains(t, err, `inventory_tbl.search: inventory: unknown field "quantity"`)
	assert.ErrorContains(t, err, `(did you mean "quantity_in_stock"?)`)

	_, err = e.exec(t, `inventory_tbl.update({"quantity_in_stock": -1}, {"item_id": "SG001"})`, nil)
	var fe *table.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "quantity_in_stock", fe.Field)
	assert.ErrorContains(t, err, `inventory_tbl.update: inventory row SG001: field "quantity_in_stock" = -1 must be >= 0`)

	_, err = e.exec(t, `inventory_tbl.insert({"item_id": "SG001", "name": "Again", "quantity_in_stock": 1, "price": 1.0})`, nil)
	require.ErrorAs(t, err, &fe)
	assert.ErrorContains(t, err, "duplicate key")

	_, err = e.exec(t, `
def bad(row):
    return row["qty"] > 1
inventory_tbl.search(bad)`, nil)
	var wf *WhereFuncError
	require.ErrorAs(t, err, &wf)
	assert.Equal(t, "SG001", wf.Key)
	var inner *starlark.EvalError
	require.ErrorAs(t, wf.Err, &inner)
	assert.ErrorContains(t, err, `inventory_tbl.search: the where function failed on row "SG001": key "qty" not in row`)
	assert.ErrorContains(t, err, `(did you mean "quantity_in_stock"?)`)

	_, err = e.exec(t, `inventory_tbl.remove(None)`, nil)
	assert.ErrorIs(t, err, ErrWhereRequired)
	assert.ErrorContains(t, err, "use lambda row: True to change every row")
}

func TestRowsAreLazyAndCopyOnWrite(t *testing.T) {
	e := newEnv(t)
	g := e.run(t, `
rows = inventory_tbl.search({"price": {"$lt": 100}})
first = rows[0]
first["price"] = 5
first["note"] = "scratch"
`)
	tb := e.view.tables["inventory"]
	shared := tb.rows[0]
	assert.Equal(t, 80.0, shared["price"], "the view's row is untouched")
	assert.NotContains(t, shared, "note")

	rows := g["rows"].(*starlark.List)
	rv := rows.Index(1).(*RowValue)
	assert.Nil(t, rv.own, "an unchanged row has no copy of its own")
	assert.Equal(t, reflect.ValueOf(tb.rows[1]).UnsafePointer(), reflect.ValueOf(rv.base).UnsafePointer(),
		"rows wrap the view's maps without copying them")

	first := g["first"].(*RowValue)
	assert.Equal(t, table.Row{"price": int64(5), "note": "scratch"}, first.changes())
	got := first.GoValue().(table.Row)
	assert.Equal(t, int64(5), got["price"])
	got["name"] = "changed by the caller"
	assert.Equal(t, "Aviator", shared["name"], "GoValue returns a copy")
	assert.Equal(t, "Aviator", first.own["name"], "GoValue returns a copy")
}

// TestConcurrentRunsShareValues runs plans on several goroutines at once, each with its own view,
// over one registry: the shared values hold no run state (run with -race).
func TestConcurrentRunsShareValues(t *testing.T) {
	schemas := testSchemas()
	reg := Registry(schemas)
	pre := reg.Predeclared()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			view := newMemView(schemas, seedData())
			thread := &starlark.Thread{Name: fmt.Sprint("run", i)}
			Bind(thread, view, fixedNow.Add(time.Duration(i)*time.Second))
			src := fmt.Sprintf(`
for n in range(20):
    inventory_tbl.update({"quantity_in_stock": %d + n}, {"item_id": "SG001"})
    last = transactions_tbl.last()
    transactions_tbl.insert({"transaction_id": "TXN%%d" %% (100 + n), "customer_name": "c", "transaction_amount": 1.0, "balance_after_transaction": last["balance_after_transaction"] + 1, "timestamp": now()})
if inventory_tbl.get_by_key("SG001")["quantity_in_stock"] != %d + 19:
    fail("lost an update")
if len(transactions_tbl) != 21 or transactions_tbl.last()["balance_after_transaction"] != 520.0:
    fail("ledger is wrong: %%d rows, last %%s" %% (len(transactions_tbl), transactions_tbl.last()))
if now() != "2025-03-14T15:09:%02d":
    fail("now is " + now())
`, i*100, i*100, 26+i)
			_, errs[i] = starlark.ExecFileOptions(fileOptions, thread, "run.star", src, pre)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "run %d", i)
	}
}

func TestNowIsFixedAndFormatted(t *testing.T) {
	e := newEnv(t)
	g := e.run(t, "a = now()\nb = now()")
	assert.Equal(t, starlark.String("2025-03-14T15:09:26"), g["a"])
	assert.Equal(t, g["a"], g["b"])

	thread := &starlark.Thread{}
	loc := time.FixedZone("UTC+2", 2*3600)
	Bind(thread, e.view, fixedNow.In(loc))
	v, err := starlark.Call(thread, e.reg.Predeclared()["now"], nil, nil)
	require.NoError(t, err)
	assert.Equal(t, starlark.String("2025-03-14T17:09:26"), v, "rendered in the location given to Bind")
}

// largeEnv is an env whose inventory has n rows.
func largeEnv(b testing.TB, n int) *env {
	schemas := testSchemas()
	rows := make([]table.Row, n)
	for i := range rows {
		rows[i] = table.Row{
			"item_id":           fmt.Sprintf("SG%06d", i),
			"name":              fmt.Sprintf("Model %d", i),
			"description":       "A pair of sunglasses with a long enough description to be realistic.",
			"quantity_in_stock": int64(i % 50),
			"price":             float64(i%200) + 0.5,
		}
	}
	data := seedData()
	data["inventory"] = rows
	return &env{reg: Registry(schemas), view: newMemView(schemas, data)}
}

// BenchmarkSearchSum is the speed case: search 100k rows with a dict filter and sum the
// prices of the matches in Starlark. The in-memory view scans every row (the store may index).
func BenchmarkSearchSum(b *testing.B) {
	e := largeEnv(b, 100_000)
	const src = `
def plan():
    rows = inventory_tbl.search({"price": {"$lt": 100}, "quantity_in_stock": {"$gt": 10}})
    total = 0.0
    for r in rows:
        total += r["price"]
    return len(rows), total
`
	thread := &starlark.Thread{Name: "bench"}
	Bind(thread, e.view, fixedNow)
	g, err := starlark.ExecFileOptions(fileOptions, thread, "bench.star", src, e.predeclared(b, nil))
	require.NoError(b, err)
	plan := g["plan"]
	b.ReportAllocs()
	var matched int
	for b.Loop() {
		res, err := starlark.Call(thread, plan, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		matched, _ = starlark.AsInt32(res.(starlark.Tuple)[0])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/row")
	b.ReportMetric(float64(matched), "matches")
}

// BenchmarkIterateAll iterates every one of 100k lazy rows and reads one field of each.
func BenchmarkIterateAll(b *testing.B) {
	e := largeEnv(b, 100_000)
	const src = `
def plan():
    total = 0.0
    for r in inventory_tbl.all():
        total += r["price"]
    return total
`
	thread := &starlark.Thread{Name: "bench"}
	Bind(thread, e.view, fixedNow)
	g, err := starlark.ExecFileOptions(fileOptions, thread, "bench.star", src, e.predeclared(b, nil))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := starlark.Call(thread, g["plan"], nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/row")
}

func BenchmarkGetByKey(b *testing.B) {
	e := largeEnv(b, 100_000)
	thread := &starlark.Thread{Name: "bench"}
	Bind(thread, e.view, fixedNow)
	method, err := e.reg.Predeclared()["inventory_tbl"].(*TableValue).Attr("get_by_key")
	require.NoError(b, err)
	args := starlark.Tuple{starlark.String("SG054321")}
	b.ReportAllocs()
	for b.Loop() {
		v, err := starlark.Call(thread, method, args, nil)
		if err != nil || v == starlark.None {
			b.Fatal(v, err)
		}
	}
}

func BenchmarkGetByDict(b *testing.B) {
	e := largeEnv(b, 100_000)
	thread := &starlark.Thread{Name: "bench"}
	Bind(thread, e.view, fixedNow)
	g, err := starlark.ExecFileOptions(fileOptions, thread, "bench.star",
		`def plan(): return inventory_tbl.get({"name": "Model 54321"})`, e.predeclared(b, nil))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		v, err := starlark.Call(thread, g["plan"], nil, nil)
		if err != nil || v == starlark.None {
			b.Fatal(v, err)
		}
	}
}

// TestDictOnTheLeftOfARow pins a known limit: go.starlark.net's dict comparison assumes that any
// value of type "dict" is a *starlark.Dict, so {...} == row panics (the sandbox turns the panic
// into a failed run), while row == {...} works. If this test fails, upstream fixed it: drop the
// limit from RowValue's documentation.
func TestDictOnTheLeftOfARow(t *testing.T) {
	e := newEnv(t)
	g := e.run(t, `
r = inventory_tbl.get_by_key("SG005")
right = r == dict(r)
`)
	assert.Equal(t, starlark.True, g["right"])
	assert.Panics(t, func() {
		_, _ = e.exec(t, `ok = dict(inventory_tbl.get_by_key("SG005")) == inventory_tbl.get_by_key("SG005")`, nil)
	})
}

// errView is a view whose one table fails every call with errBroken.
type errView struct{ schema *table.Schema }

var errBroken = errors.New("the view is broken")

func (v errView) Names() []string { return []string{v.schema.Name} }
func (v errView) Table(name string) (table.Table, bool) {
	return errTable(v), name == v.schema.Name
}

type errTable errView

func (t errTable) Schema() *table.Schema                      { return t.schema }
func (t errTable) Len() int                                   { return 0 }
func (t errTable) Find(table.Query) ([]table.Row, error)      { return nil, errBroken }
func (t errTable) Count(table.Query) (int, error)             { return 0, errBroken }
func (t errTable) Get(any) (table.Row, bool, error)           { return nil, false, errBroken }
func (t errTable) Insert(table.Row) (any, error)              { return nil, errBroken }
func (t errTable) Update(table.Row, table.Query) (int, error) { return 0, errBroken }
func (t errTable) Remove(table.Query) (int, error)            { return 0, errBroken }

// TestViewErrorsPropagate checks that every helper returns the view's error with its cause.
func TestViewErrorsPropagate(t *testing.T) {
	schemas := testSchemas()
	reg := Registry(schemas)
	for _, tc := range []struct {
		schema *table.Schema
		call   string
	}{
		{schemas[0], "inventory_tbl.all()"},
		{schemas[0], "inventory_tbl.search({})"},
		{schemas[0], "inventory_tbl.get(None)"},
		{schemas[0], `inventory_tbl.get_by_key("SG001")`},
		{schemas[0], `inventory_tbl.count({"name": "x"})`},
		{schemas[0], `inventory_tbl.insert({"item_id": "X"})`},
		{schemas[0], `inventory_tbl.update({"price": 1}, lambda r: True)`},
		{schemas[0], "inventory_tbl.remove(lambda r: True)"},
		{schemas[1], "transactions_tbl.last()"},
	} {
		t.Run(tc.call, func(t *testing.T) {
			thread := &starlark.Thread{}
			Bind(thread, errView{tc.schema}, fixedNow)
			_, err := starlark.ExecFileOptions(fileOptions, thread, "broken.star", tc.call, reg.Predeclared())
			assert.ErrorIs(t, err, errBroken)
			assert.ErrorContains(t, err, ": the view is broken")
		})
	}
}

func TestSearchIsChargedToTheBudget(t *testing.T) {
	e := largeEnv(t, 100_000)
	thread := &starlark.Thread{}
	Bind(thread, e.view, fixedNow)
	builtins.SetBudget(thread, builtins.NewBudget(2<<20))
	pre := e.reg.Predeclared()
	_, err := starlark.ExecFileOptions(fileOptions, thread, "budget.star", `inventory_tbl.search({"price": {"$lt": 10}})`, pre)
	require.NoError(t, err, "5,000 rows fit")
	_, err = starlark.ExecFileOptions(fileOptions, thread, "budget.star", `inventory_tbl.all()`, pre)
	var mem *builtins.MemoryError
	require.ErrorAs(t, err, &mem)
	assert.Equal(t, "inventory_tbl.all", mem.Op)
	assert.Equal(t, int64(100_000*rowCost), mem.Bytes)
}

func TestWhereFunctionErrorsKeepTheirCause(t *testing.T) {
	e := newEnv(t)
	sentinel := errors.New("sentinel")
	boom := starlark.NewBuiltin("boom", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return nil, sentinel
	})
	_, err := e.exec(t, `inventory_tbl.count(lambda row: boom())`, starlark.StringDict{"boom": boom})
	assert.ErrorIs(t, err, sentinel)
	var wf *WhereFuncError
	require.ErrorAs(t, err, &wf)
	assert.Equal(t, "SG001", wf.Key)

	// A builtin is a fine where function; so is a def with **kwargs.
	g := e.run(t, `
def f(row, **kw):
    return row["price"] > 100
n = inventory_tbl.count(f)
m = inventory_tbl.count(len)
`)
	assert.Equal(t, starlark.MakeInt(2), g["n"])
	assert.Equal(t, starlark.MakeInt(6), g["m"])
}

func TestNumericKeys(t *testing.T) {
	numbered := &table.Schema{Name: "numbered", Key: "n", Fields: []table.Field{{Name: "n", Type: table.TypeInt}}}
	e := &env{reg: Registry([]*table.Schema{numbered}), view: newMemView([]*table.Schema{numbered}, map[string][]table.Row{
		"numbered": {{"n": int64(1)}, {"n": int64(2)}},
	})}
	// Numeric keys: get_by_key wants a number.
	g := e.run(t, `
a = numbered_tbl.get_by_key(2)
b = numbered_tbl.get_by_key(2.0)
c = numbered_tbl.get_by_key(3)
`)
	assert.Equal(t, `{"n": 2}`, g["a"].String())
	assert.Equal(t, `{"n": 2}`, g["b"].String())
	assert.Equal(t, starlark.None, g["c"])
	_, err := e.exec(t, `numbered_tbl.get_by_key("2")`, nil)
	assert.ErrorContains(t, err, `numbered keys (n) are numbers, not string "2"`)
	_, err = e.exec(t, `numbered_tbl.get_by_key(1 << 70)`, nil)
	assert.ErrorContains(t, err, "is too large (must fit in 64 bits)")
	_, err = e.exec(t, `numbered_tbl.search("x")`, nil)
	assert.ErrorContains(t, err, `where must be a dict such as {"n": "x"}`, "a table with only its key uses the key in examples")
	g = e.run(t, "last = numbered_tbl.last()\nnone = numbered_tbl.last({\"n\": 7})")
	assert.Equal(t, `{"n": 2}`, g["last"].String())
	assert.Equal(t, starlark.None, g["none"])
}

func TestSchemasWithoutDocsOrDeclaredKeys(t *testing.T) {
	s := &table.Schema{Name: "events", Key: "id", Fields: []table.Field{{Name: "at", Type: table.TypeTimestamp}, {Name: "n", Type: table.TypeInt}}}
	reg := Registry([]*table.Schema{s})
	h, _ := reg.Lookup("events_tbl")
	assert.Equal(t, "The events table; rows are dicts keyed by field name, in id order; len(tbl) counts its rows.", h.Doc)
	assert.Equal(t, "rows = events_tbl.all()", h.Example)

	// The undeclared key comes first; other keys sort after the fields.
	r := NewRow(s, table.Row{"zz": "last", "n": int64(1), "id": "e1", "aa": []any{int64(1), map[string]any{"k": "v"}}})
	assert.Equal(t, []string{"id", "n", "aa", "zz"}, r.keys())
	assert.Equal(t, `{"id": "e1", "n": 1, "aa": [1, {"k": "v"}], "zz": "last"}`, r.String())
	assert.Same(t, s, NewTableValue(s).Schema())

	// GoValue copies nested values deeply; changes compare them deeply, numbers by value.
	got := r.GoValue().(table.Row)
	got["aa"].([]any)[1].(map[string]any)["k"] = "changed"
	assert.Equal(t, "v", r.base["aa"].([]any)[1].(map[string]any)["k"])
	thread := &starlark.Thread{}
	_, err := starlark.ExecFileOptions(fileOptions, thread, "nested.star", `
r["aa"] = [1.0, {"k": "v"}]
r["n"] = 1.0
r["id"] = "e1"
`, starlark.StringDict{"r": r})
	require.NoError(t, err)
	assert.Empty(t, r.changes(), "equal values are not changes")
	for _, src := range []string{`r["aa"] = [1, {"k": "w"}]`, `r["aa"] = [1]`, `r["aa"] = [2, {"k": "v"}]`, `r["aa"] = [1, {"j": "v"}]`, `r["aa"] = [1, {"k": "v", "j": 1}]`, `r["aa"] = "x"`, `r["n"] = "1"`, `r["new"] = None`} {
		c := NewRow(s, r.base)
		_, err := starlark.ExecFileOptions(fileOptions, thread, "nested.star", src, starlark.StringDict{"r": c})
		require.NoError(t, err)
		assert.Len(t, c.changes(), 1, src)
	}
	assert.True(t, table.ValuesEqual(1, int64(1)))
	assert.False(t, table.ValuesEqual(1, "1"))
	Bind(thread, newMemView([]*table.Schema{s}, nil), fixedNow)
	_, err = starlark.ExecFileOptions(fileOptions, thread, "nokey.star", `events_tbl.get_by_key(None)`, Registry([]*table.Schema{s}).Predeclared())
	assert.ErrorContains(t, err, "events_tbl.get_by_key: the key is None; pass a key value")
	empty := NewRow(s, nil)
	require.NoError(t, empty.SetKey(starlark.String("id"), starlark.String("e2")))
	assert.Equal(t, table.Row{"id": "e2"}, empty.GoValue())
	assert.Equal(t, "<table events>", NewTableValue(s).String())
}

func TestRowAsWhereOfAnotherTable(t *testing.T) {
	// A row of another table matches by all of its fields, which the other table lacks.
	e := newEnv(t)
	_, err := e.exec(t, `transactions_tbl.search(inventory_tbl.get_by_key("SG001"))`, nil)
	assert.ErrorContains(t, err, `transactions_tbl.search: transactions: unknown field "description"`)
}

// A nested value read from a row is the row's own: changing it in place changes the row's
// copy, which update(fields=row) applies, never the shared row; a frozen row's are frozen.
func TestNestedValuesChangeInPlace(t *testing.T) {
	s := &table.Schema{Name: "orders", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeString}, {Name: "address", Type: table.TypeObject, Additional: true}}}
	base := table.Row{"id": "o1", "address": map[string]any{"city": "Oslo"}}
	r := NewRow(s, base)
	thread := &starlark.Thread{}
	_, err := starlark.ExecFileOptions(fileOptions, thread, "nested.star", `
a = r["address"]
a["city"] = "Bergen"
r["address"]["zip"] = "5003"
`, starlark.StringDict{"r": r})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"city": "Oslo"}, base["address"], "the shared row is untouched")
	require.NoError(t, r.sync())
	assert.Equal(t, table.Row{"address": map[string]any{"city": "Bergen", "zip": "5003"}}, r.changes())
	assert.Equal(t, table.Row{"id": "o1", "address": map[string]any{"city": "Bergen", "zip": "5003"}}, r.GoValue())

	bad := NewRow(s, base)
	_, err = starlark.ExecFileOptions(fileOptions, thread, "bad.star", `r["address"]["f"] = len`, starlark.StringDict{"r": bad})
	require.NoError(t, err)
	assert.ErrorContains(t, bad.sync(), `row field "address": a value of type builtin_function_or_method cannot be stored`)

	frozen := NewRow(s, base)
	frozen.Freeze()
	_, err = starlark.ExecFileOptions(fileOptions, thread, "frozen.star", `r["address"]["city"] = "x"`, starlark.StringDict{"r": frozen})
	assert.ErrorContains(t, err, "frozen")
}

// A row prints its floats as Python prints them, nested ones included (str, print, % and
// str.format of a row all come here).
func TestRowPrintsFloatsAsPython(t *testing.T) {
	s := &table.Schema{Name: "events", Key: "id", Fields: []table.Field{{Name: "n", Type: table.TypeInt}}}
	r := NewRow(s, table.Row{"id": "e1", "n": int64(1), "p": 1234567.0, "q": []any{1e16, math.Inf(1), map[string]any{"k": 0.0001}}})
	assert.Equal(t, `{"id": "e1", "n": 1, "p": 1234567.0, "q": [1e+16, inf, {"k": 0.0001}]}`, r.String())
}

// NewRow wraps r as a row value of a table with schema s, without copying it (tests build rows
// as table values do).
func NewRow(s *table.Schema, r table.Row) *RowValue { return newShape(s).row(r) }
