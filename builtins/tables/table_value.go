package tables

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/table"
)

// TableValue is the Starlark value of one table, predeclared as `<schema.Name>_tbl`. It holds
// only the schema: every method finds the run's table.View on the calling thread (see Bind), so
// one frozen TableValue serves any number of concurrent runs.
//
// Its methods are all, search, get, get_by_key, count, insert, update and remove; its fields
// are name, key and fields (the schema's field names). len(tbl) is its number of rows (through
// the registry's len). It is not iterable: a plan iterates tbl.all() or tbl.search(where).
type TableValue struct {
	schema  *table.Schema
	name    string
	shape   *shape
	methods map[string]*starlark.Builtin
	calls   []methodCall // by index in tableMethods, for the static check
	// writers are the domain's helpers that write the table, named in the hint of a plan's own
	// write to a table only helpers may write (Schema.Writes); see RegistryWriters.
	writers []string
}

var (
	_ starlark.HasAttrs = (*TableValue)(nil)
)

// NewTableValue returns the value for one table. Registry calls it once per schema.
func NewTableValue(s *table.Schema) *TableValue {
	tv := &TableValue{schema: s, name: s.Name + "_tbl", shape: newShape(s)}
	tv.methods = make(map[string]*starlark.Builtin, len(tableMethods))
	tv.calls = make([]methodCall, len(tableMethods))
	for i, m := range tableMethods {
		tv.methods[m.name] = starlark.NewBuiltin(tv.name+"."+m.name, m.fn).BindReceiver(tv)
		tv.calls[i] = methodCall{callee: tv.name + "." + m.name, signature: tv.name + "." + m.signature()}
	}
	return tv
}

// Schema returns the table's schema.
func (t *TableValue) Schema() *table.Schema { return t.schema }

// String renders the value as <table inventory>.
func (t *TableValue) String() string { return fmt.Sprintf("<table %s>", t.schema.Name) }

// Type is "table".
func (t *TableValue) Type() string { return "table" }

// Freeze does nothing: a table value is immutable.
func (t *TableValue) Freeze() {}

// Truth is always true.
func (t *TableValue) Truth() starlark.Bool { return starlark.True }

// Hash hashes the value's name, so tables may be dict keys.
func (t *TableValue) Hash() (uint32, error) { return starlark.String(t.name).Hash() }

// Attr returns a method or one of the fields name, key and fields. Names that other data APIs
// use (find, filter, delete, ...) get an error that names the method to use instead.
func (t *TableValue) Attr(name string) (starlark.Value, error) {
	if m, ok := t.methods[name]; ok {
		return m, nil
	}
	switch name {
	case "name":
		return starlark.String(t.schema.Name), nil
	case "key":
		return starlark.String(t.schema.Key), nil
	case "fields":
		names := t.schema.FieldNames()
		elems := make([]starlark.Value, len(names))
		for i, n := range names {
			elems[i] = starlark.String(n)
		}
		return starlark.NewList(elems), nil
	}
	if use, ok := methodAliases[name]; ok {
		return nil, fmt.Errorf("%s has no .%s method; use %s", t.name, name, use)
	}
	return nil, nil // Starlark reports the missing attribute with its own did-you-mean
}

// AttrNames lists the methods and fields, sorted.
func (t *TableValue) AttrNames() []string {
	names := []string{"fields", "key", "name"}
	for _, m := range tableMethods {
		names = append(names, m.name)
	}
	slices.Sort(names)
	return names
}

// ThreadLen is the number of rows the run sees. The registry's len calls it.
func (t *TableValue) ThreadLen(thread *starlark.Thread) (int, error) {
	tb, err := t.table(thread)
	if err != nil {
		return 0, err
	}
	return tb.Len(), nil
}

// table finds this table in the run's view.
func (t *TableValue) table(thread *starlark.Thread) (table.Table, error) {
	b, err := boundTo(thread)
	if err != nil {
		return nil, err
	}
	tb, ok := b.view.Table(t.schema.Name)
	if !ok {
		return nil, fmt.Errorf("table %q is not in this run's database (it has %s)", t.schema.Name, strings.Join(b.view.Names(), ", "))
	}
	return tb, nil
}

// rowCost estimates the bytes one row handed to a plan costs: its RowValue and its list slot.
const rowCost = 32 + 16

// rowList wraps rows as lazy row values in a new list, charging the run's memory budget. The
// row values are allocated in one block.
func (t *TableValue) rowList(thread *starlark.Thread, op string, rows []table.Row) (*starlark.List, error) {
	if err := builtins.Charge(thread, op, int64(len(rows))*rowCost); err != nil {
		return nil, err
	}
	block := make([]RowValue, len(rows))
	elems := make([]starlark.Value, len(rows))
	for i, r := range rows {
		block[i] = RowValue{shape: t.shape, base: r}
		elems[i] = &block[i]
	}
	return starlark.NewList(elems), nil
}

// method is one method of a table value, with its documentation.
type method struct {
	name    string
	params  builtins.Params // for the signature and the static check; fn unpacks the same
	returns string
	doc     string
	fn      func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)
}

// signature is how to call the method, after "tbl.": "update(fields, where) -> int".
func (m *method) signature() string {
	return fmt.Sprintf("%s(%s) -> %s", m.name, m.params, m.returns)
}

// methodIndex returns the index of the named method in tableMethods, or -1.
func methodIndex(name string) int {
	for i := range tableMethods {
		if tableMethods[i].name == name {
			return i
		}
	}
	return -1
}

// methodCall is how the static check names one method of one table value in its messages.
type methodCall struct {
	callee    string // inventory_tbl.update
	signature string // inventory_tbl.update(fields, where) -> int
}

// whereDoc is how every method documents its where argument.
const whereDoc = `where is a dict evaluated in Go ({field: value}, {field: {"$lt": 100}}, {"$or": [...]}; operators $eq $ne $lt $lte $gt $gte $in $nin $ieq $contains $icontains $startswith $regex) or a function row -> bool`

// tableMethods are the methods of every table value, in the order the reference lists them.
var tableMethods = []method{
	{"all", nil, "list of rows", "Returns every row in key order.", allMethod},
	{"search", builtins.Params{{Name: "where"}}, "list of rows", "Returns the rows that match where, in key order (every row when where is None); " + whereDoc + ".", searchMethod},
	{"get", builtins.Params{{Name: "where"}}, "row or None", "Returns the first row in key order that matches where (any row when where is None), or None.", getMethod},
	{"last", builtins.Params{{Name: "where", Default: "None"}}, "row or None", "Returns the last row in key order that matches where, or None.", lastMethod},
	{"get_by_key", builtins.Params{{Name: "key"}}, "row or None", "Returns the row with that key, or None.", getByKeyMethod},
	{"count", builtins.Params{{Name: "where", Default: "None"}}, "int", "Counts the rows that match where (every row when where is None).", countMethod},
	{"insert", builtins.Params{{Name: "row"}}, "key", "Adds a row (a dict of field values, validated against the schema) and returns its key; a missing key is generated when the table says how.", insertMethod},
	{"update", builtins.Params{{Name: "fields"}, {Name: "where"}}, "int", "Sets fields on every row that matches where and returns how many rows changed; where is required (lambda row: True changes every row). A row value passed as fields contributes only the fields the plan changed in it; a row value passed as where matches that row by its key.", updateMethod},
	{"remove", builtins.Params{{Name: "where"}}, "int", "Removes every row that matches where and returns how many were removed; where is required (lambda row: True removes every row).", removeMethod},
}

// methodDocs documents the methods once, with examples on tv.
func methodDocs(tv *TableValue) builtins.Registry {
	reg := make(builtins.Registry, 0, len(tableMethods))
	for _, m := range tableMethods {
		reg = append(reg, builtins.Helper{
			Name:      "tbl." + m.name,
			Group:     builtins.GroupTable,
			Signature: "tbl." + m.signature(),
			Doc:       m.doc,
			Example:   methodExample(m.name, tv),
		})
	}
	return reg
}

// methodAliases maps method names from other data APIs to what to call instead.
var methodAliases = map[string]string{
	"find": ".search(where) for a list of rows, or .get(where) for the first one", "filter": ".search(where)",
	"select": ".search(where)", "query": ".search(where)", "where": ".search(where)", "find_all": ".search(where)",
	"find_one": ".get(where)", "first": ".get(where)", "get_one": ".get(where)", "search_one": ".get(where)",
	"get_by_id": ".get_by_key(key)", "lookup": ".get_by_key(key)", "by_key": ".get_by_key(key)",
	"get_all": ".all()", "list": ".all()", "rows": ".all()", "scan": ".all()", "items": ".all()",
	"delete": ".remove(where)", "delete_where": ".remove(where)", "remove_where": ".remove(where)",
	"add": ".insert(row)", "append": ".insert(row)", "create": ".insert(row)", "insert_one": ".insert(row)", "put": ".insert(row)",
	"upsert": ".update(fields, where), or .insert(row) when .get_by_key(key) is None", "set": ".update(fields, where)",
	"modify": ".update(fields, where)", "update_where": ".update(fields, where)", "update_one": ".update(fields, where)",
	"size": "len(tbl) or .count(where)", "length": "len(tbl) or .count(where)", "len": "len(tbl) or .count(where)",
}

func receiver(b *starlark.Builtin) *TableValue { return b.Receiver().(*TableValue) }

// fail wraps an error of a method with the method's name, keeping the cause for errors.As.
func fail(b *starlark.Builtin, err error) error { return fmt.Errorf("%s: %w", b.Name(), err) }

func allMethod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	t := receiver(b)
	return t.find(thread, b, table.Query{})
}

func (t *TableValue) find(thread *starlark.Thread, b *starlark.Builtin, q table.Query) (starlark.Value, error) {
	tb, err := t.table(thread)
	if err != nil {
		return nil, fail(b, err)
	}
	rows, err := tb.Find(q)
	if err != nil {
		return nil, fail(b, err)
	}
	list, err := t.rowList(thread, b.Name(), rows)
	if err != nil {
		return nil, err
	}
	return list, nil
}

func searchMethod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var where starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "where", &where); err != nil {
		return nil, err
	}
	t := receiver(b)
	q, err := t.query(thread, where, false)
	if err != nil {
		return nil, fail(b, err)
	}
	return t.find(thread, b, q)
}

func getMethod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var where starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "where", &where); err != nil {
		return nil, err
	}
	return oneRow(thread, b, where, false)
}

func lastMethod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var where starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "where?", &where); err != nil {
		return nil, err
	}
	return oneRow(thread, b, where, true)
}

// oneRow is the first row in key order (the last, with reverse) that matches where, or None.
func oneRow(thread *starlark.Thread, b *starlark.Builtin, where starlark.Value, reverse bool) (starlark.Value, error) {
	t := receiver(b)
	q, err := t.query(thread, where, false)
	if err != nil {
		return nil, fail(b, err)
	}
	q.Limit, q.Reverse = 1, reverse
	tb, err := t.table(thread)
	if err != nil {
		return nil, fail(b, err)
	}
	rows, err := tb.Find(q)
	if err != nil {
		return nil, fail(b, err)
	}
	if len(rows) == 0 {
		return starlark.None, nil
	}
	return t.shape.row(rows[0]), nil
}

func getByKeyMethod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var key starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "key", &key); err != nil {
		return nil, err
	}
	t := receiver(b)
	k, err := t.keyValue(key)
	if err != nil {
		return nil, fail(b, err)
	}
	tb, err := t.table(thread)
	if err != nil {
		return nil, fail(b, err)
	}
	row, ok, err := tb.Get(k)
	if err != nil {
		return nil, fail(b, err)
	}
	if !ok {
		return starlark.None, nil
	}
	return t.shape.row(row), nil
}

// keyValue converts a key argument and checks it against the key field's declared type.
func (t *TableValue) keyValue(key starlark.Value) (any, error) {
	if _, ok := key.(*RowValue); ok {
		return nil, fmt.Errorf("pass the row's key, row[%q], not the row", t.schema.Key)
	}
	example := "a key value"
	if f := t.schema.Field(t.schema.Key); f != nil {
		switch f.Type {
		case table.TypeString, table.TypeTimestamp:
			example = `a string such as "` + t.exampleKey() + `"`
			if _, ok := key.(starlark.String); !ok {
				return nil, fmt.Errorf("%s keys (%s) are strings such as %q, not %s; to find rows by another field use .get(where)", t.schema.Name, t.schema.Key, t.exampleKey(), describe(key))
			}
		case table.TypeInt, table.TypeFloat:
			example = "a number"
			switch key.(type) {
			case starlark.Int, starlark.Float:
			default:
				return nil, fmt.Errorf("%s keys (%s) are numbers, not %s", t.schema.Name, t.schema.Key, describe(key))
			}
		}
	}
	v, err := builtins.ToGo(key)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("the key is None; pass %s", example)
	}
	return v, nil
}

// exampleKey is a plausible key for messages, as keySample writes it.
func (t *TableValue) exampleKey() string { return strings.Trim(keySample(t.schema), `"`) }

func countMethod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var where starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "where?", &where); err != nil {
		return nil, err
	}
	t := receiver(b)
	tb, err := t.table(thread)
	if err != nil {
		return nil, fail(b, err)
	}
	if where == starlark.None {
		return starlark.MakeInt(tb.Len()), nil
	}
	q, err := t.query(thread, where, false)
	if err != nil {
		return nil, fail(b, err)
	}
	n, err := tb.Count(q)
	if err != nil {
		return nil, fail(b, err)
	}
	return starlark.MakeInt(n), nil
}

func insertMethod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var rowArg starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "row", &rowArg); err != nil {
		return nil, err
	}
	t := receiver(b)
	if err := t.checkWrite(thread, b); err != nil {
		return nil, err
	}
	row, err := t.rowArg(rowArg, "row")
	if err != nil {
		return nil, fail(b, err)
	}
	tb, err := t.table(thread)
	if err != nil {
		return nil, fail(b, err)
	}
	key, err := tb.Insert(row)
	if err != nil {
		return nil, fail(b, err)
	}
	t.recordVia(thread, writingHelper(thread), []any{key})
	return builtins.FromGo(key), nil
}

// rowArg converts a dict (or a row value) argument to a table.Row.
func (t *TableValue) rowArg(v starlark.Value, param string) (table.Row, error) {
	if rv, ok := v.(*RowValue); ok {
		if err := rv.sync(); err != nil {
			return nil, fmt.Errorf("%s: %w", param, err)
		}
		return rv.GoValue().(table.Row), nil
	}
	if _, ok := v.(starlark.IterableMapping); !ok {
		return nil, fmt.Errorf("%s must be a dict of field values such as {%q: ...}, not %s", param, t.firstField(), describe(v))
	}
	x, err := builtins.ToGo(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", param, err)
	}
	return x.(map[string]any), nil
}

// firstField is a field name for examples in messages: the first one that is not the key.
func (t *TableValue) firstField() string {
	for _, f := range t.schema.Fields {
		if f.Name != t.schema.Key {
			return f.Name
		}
	}
	return t.schema.Key
}

func updateMethod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var fieldsArg, where starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "fields", &fieldsArg, "where?", &where); err != nil {
		return nil, err
	}
	t := receiver(b)
	if err := t.checkWrite(thread, b); err != nil {
		return nil, err
	}
	var fields table.Row
	if rv, ok := fieldsArg.(*RowValue); ok {
		if err := rv.sync(); err != nil {
			return nil, fail(b, fmt.Errorf("fields: %w", err))
		}
		fields = rv.changes()
	} else {
		var err error
		if fields, err = t.rowArg(fieldsArg, "fields"); err != nil {
			return nil, fail(b, err)
		}
	}
	q, err := t.query(thread, where, true)
	if err != nil {
		return nil, fail(b, err)
	}
	tb, err := t.table(thread)
	if err != nil {
		return nil, fail(b, err)
	}
	if len(fields) == 0 {
		return starlark.MakeInt(0), nil // nothing to change
	}
	var keys []any
	helper := writingHelper(thread)
	if helper != "" {
		if keys, err = t.matchedKeys(tb, q); err != nil {
			return nil, fail(b, err)
		}
	}
	n, err := tb.Update(fields, q)
	if err != nil {
		return nil, fail(b, err)
	}
	t.recordVia(thread, helper, keys)
	return starlark.MakeInt(n), nil
}

func removeMethod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var where starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "where?", &where); err != nil {
		return nil, err
	}
	t := receiver(b)
	if err := t.checkWrite(thread, b); err != nil {
		return nil, err
	}
	q, err := t.query(thread, where, true)
	if err != nil {
		return nil, fail(b, err)
	}
	tb, err := t.table(thread)
	if err != nil {
		return nil, fail(b, err)
	}
	var keys []any
	helper := writingHelper(thread)
	if helper != "" {
		if keys, err = t.matchedKeys(tb, q); err != nil {
			return nil, fail(b, err)
		}
	}
	n, err := tb.Remove(q)
	if err != nil {
		return nil, fail(b, err)
	}
	t.recordVia(thread, helper, keys)
	return starlark.MakeInt(n), nil
}

// ErrWhereRequired is the cause of the error update and remove return without a where: a plan
// must say which rows it changes.
var ErrWhereRequired = errors.New("where is required")

// query converts a where argument. nil (omitted) and None select every row unless required;
// a required where must also not be an empty dict.
func (t *TableValue) query(thread *starlark.Thread, where starlark.Value, required bool) (table.Query, error) {
	requiredErr := func(what string) error {
		return fmt.Errorf("%w (got %s): pass a dict such as {%q: %q} or a function row -> bool; use lambda row: True to change every row",
			ErrWhereRequired, what, t.schema.Key, t.exampleKey())
	}
	switch w := where.(type) {
	case nil, starlark.NoneType:
		if required {
			return table.Query{}, requiredErr("None")
		}
		return table.Query{}, nil
	case *RowValue:
		if k, ok := w.base[t.schema.Key]; ok && k != nil && w.shape.schema == t.schema {
			return table.Query{Where: map[string]any{t.schema.Key: k}}, nil
		}
		return table.Query{Where: w.GoValue().(table.Row)}, nil
	case starlark.IterableMapping:
		x, err := builtins.ToGo(w)
		if err != nil {
			return table.Query{}, fmt.Errorf("where: %w", err)
		}
		m := x.(map[string]any)
		if required && len(m) == 0 {
			return table.Query{}, requiredErr("an empty dict")
		}
		return table.Query{Where: m}, nil
	case starlark.Callable:
		if err := checkArity(w); err != nil {
			return table.Query{}, err
		}
		return table.Query{Match: t.matchFunc(thread, w)}, nil
	case starlark.String:
		return table.Query{}, fmt.Errorf("where must be a dict such as {%q: %s} or a function such as lambda row: ..., not %s; to fetch a row by its key use .get_by_key(%s)",
			t.firstField(), w, describe(w), w)
	}
	return table.Query{}, fmt.Errorf("where must be a dict such as {%q: ...} or a function such as lambda row: ..., not %s", t.firstField(), describe(where))
}

// checkArity refuses a where function that cannot take one row.
func checkArity(c starlark.Callable) error {
	fn, ok := c.(*starlark.Function)
	if !ok {
		return nil
	}
	positional := fn.NumParams() - fn.NumKwonlyParams()
	if fn.HasVarargs() {
		positional--
	}
	if fn.HasKwargs() {
		positional--
	}
	required := 0
	for i := range positional {
		if fn.ParamDefault(i) == nil {
			required++
		}
	}
	switch {
	case positional == 0 && !fn.HasVarargs():
		//lint:ignore ST1005 the message ends in the Python a plan writes: lambda row: ...
		return fmt.Errorf("the where function %s takes no arguments; it is called with each row: lambda row: ...", fn.Name())
	case required > 1:
		//lint:ignore ST1005 the message ends in the Python a plan writes: lambda row: ...
		return fmt.Errorf("the where function %s needs %d arguments; it is called with one, the row: lambda row: ...", fn.Name(), required)
	}
	return nil
}

// WhereFuncError is a where function that failed on a row. It keeps the Starlark error (an
// *starlark.EvalError) as its cause.
type WhereFuncError struct {
	Key any // the key of the row it failed on
	Err error
}

// Error names the row and the function's error.
func (e *WhereFuncError) Error() string {
	return fmt.Sprintf("the where function failed on row %s: %v", table.FormatValue(e.Key), e.Err)
}

// Unwrap returns the function's error.
func (e *WhereFuncError) Unwrap() error { return e.Err }

// matchFunc wraps a Starlark function as a table.Query.Match: the function's truthiness.
func (t *TableValue) matchFunc(thread *starlark.Thread, fn starlark.Callable) func(table.Row) (bool, error) {
	return func(r table.Row) (bool, error) {
		res, err := starlark.Call(thread, fn, starlark.Tuple{t.shape.row(r)}, nil)
		if err != nil {
			return false, &WhereFuncError{Key: r[t.schema.Key], Err: err}
		}
		return bool(res.Truth()), nil
	}
}

// describe names a value's kind for messages: `string "x"`, `int 5`, `a list`.
func describe(v starlark.Value) string {
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return "None"
	case starlark.String, starlark.Int, starlark.Float, starlark.Bool:
		return v.Type() + " " + builtins.Repr(v)
	}
	return "a " + v.Type() // list, dict, tuple, set, function, table, ...
}
