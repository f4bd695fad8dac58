package tables

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/table"
)

// shape is what the rows of one table share: the schema and the order of its fields.
type shape struct {
	schema *table.Schema
	order  []string       // the key first when the schema does not declare it, then the fields
	index  map[string]int // field name → position in order
}

func newShape(s *table.Schema) *shape {
	sh := &shape{schema: s, index: make(map[string]int, len(s.Fields)+1)}
	if s.Key != "" && s.Field(s.Key) == nil {
		sh.order = append(sh.order, s.Key)
	}
	sh.order = append(sh.order, s.FieldNames()...)
	for i, name := range sh.order {
		sh.index[name] = i
	}
	return sh
}

func (sh *shape) row(r table.Row) *RowValue { return &RowValue{shape: sh, base: r} }

// RowValue is one row handed to a plan. It behaves as a Starlark dict (its Type is "dict"):
// r["price"], r.get("x", d), "x" in r, len(r), iteration over the keys, keys(), values(),
// items(), str(r), json.encode(r), dict(r), r == other_row, r | other. Keys come in the schema's
// field order, then any other keys sorted.
//
// It wraps the view's shared row without copying it, and converts a value to Starlark only when
// the plan reads it, so handing a plan 100,000 rows builds no dicts. Writes (r["price"] = 5,
// r.update(...), r.pop(...)) first copy the row into the value's own map: the database does not
// change until the row is passed to a table's update, and other readers of the shared row never
// see the write. A value stored in a row is converted to plain data (builtins.ToGo), so a
// function cannot be stored. A list or dict read from a row is converted once and is the row's
// own, as in Python: row["address"]["city"] = "Bergen" changes the row (folded into its copy
// before the row is used as data, see sync), never the shared row. copy() copies them deeply.
//
// Known limit: comparing a plain dict with a row with the dict on the left ({...} == row)
// panics inside go.starlark.net, whose dict comparison assumes that any "dict" is a *Dict; the
// sandbox reports the panic as a failed run. row == {...} works.
type RowValue struct {
	shape *shape
	base  table.Row // the view's row: shared, never written
	own   table.Row // the row's own copy after its first write; nil until then
	// views are the lists and dicts of nested fields as handed to the plan, by field. A plan may
	// change them in place, as in Python (row["address"]["city"] = "Bergen"); sync folds those
	// changes into own before the row is read as data. A frozen row hands out copies instead.
	views     map[string]starlark.Value
	itercount int32 // active iterators; writes are refused while > 0
	frozen    bool
}

var (
	_ starlark.IterableMapping = (*RowValue)(nil)
	_ starlark.HasSetKey       = (*RowValue)(nil)
	_ starlark.HasAttrs        = (*RowValue)(nil)
	_ starlark.Comparable      = (*RowValue)(nil)
	_ starlark.HasBinary       = (*RowValue)(nil)
	_ starlark.Sequence        = (*RowValue)(nil)
	_ builtins.GoValuer        = (*RowValue)(nil)
)

func (r *RowValue) data() table.Row {
	if r.own != nil {
		return r.own
	}
	return r.base
}

// GoValue returns a deep copy of the row's current fields (its own edits included, also those
// made inside its lists and dicts), so that a caller may keep or change it without touching the
// shared row. It implements builtins.GoValuer. A nested value the plan filled with something that
// is not data (a function) keeps its last value here; table calls report it (see sync).
func (r *RowValue) GoValue() any {
	_ = r.sync()
	d := r.data()
	out := make(table.Row, len(d))
	for k, v := range d {
		out[k] = deepCopy(v)
	}
	return out
}

// item is the Starlark value of field k, whose Go value is v: a nested value is converted once
// and the same list or dict handed out on every read, so that changing it in place changes the
// row, as in Python.
func (r *RowValue) item(k string, v any) starlark.Value {
	switch v.(type) {
	case []any, map[string]any:
	default:
		return builtins.FromGo(v)
	}
	if r.frozen {
		view := builtins.FromGo(v) // a frozen row may be shared between threads: a frozen copy
		view.Freeze()
		return view
	}
	if view, ok := r.views[k]; ok {
		return view
	}
	view := builtins.FromGo(v)
	if r.views == nil {
		r.views = make(map[string]starlark.Value)
	}
	r.views[k] = view
	return view
}

// sync folds the plan's in-place changes of nested values (see item) into the row's own copy.
// It fails when a nested value no longer holds data (a function stored inside it), naming the
// field.
func (r *RowValue) sync() error {
	if r.frozen {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(r.views)) {
		g, err := builtins.ToGo(r.views[k])
		if err != nil {
			return fmt.Errorf("row field %q: %v; rows hold None, bools, numbers, strings, lists and dicts", k, err)
		}
		if cur, ok := r.data()[k]; ok && table.ValuesEqual(cur, g) {
			continue
		}
		if r.own == nil {
			r.own = maps.Clone(r.base)
			if r.own == nil {
				r.own = table.Row{}
			}
		}
		r.own[k] = g
	}
	return nil
}

// changes returns the fields the plan changed in this row (set to a new value or added), as
// update(fields=row) applies them. Removed fields are not changes. Callers sync first.
func (r *RowValue) changes() table.Row {
	out := table.Row{}
	for k, v := range r.own {
		if old, ok := r.base[k]; !ok || !table.ValuesEqual(old, v) {
			out[k] = deepCopy(v)
		}
	}
	return out
}

// String renders the row as a dict literal, keys in order: {"item_id": "SG001", ...}.
func (r *RowValue) String() string {
	var b strings.Builder
	b.WriteByte('{')
	d := r.data()
	for i, k := range r.keys() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(starlark.String(k).String())
		b.WriteString(": ")
		b.WriteString(builtins.Repr(r.item(k, d[k]))) // floats as Python prints them
	}
	b.WriteByte('}')
	return b.String()
}

// Type is "dict": a row is a dict to a plan (isinstance(row, dict), type(row) == "dict").
func (r *RowValue) Type() string { return "dict" }

// Freeze makes the row refuse writes, its lists and dicts included.
func (r *RowValue) Freeze() {
	if r.frozen {
		return
	}
	_ = r.sync()
	r.frozen = true
	for _, v := range r.views {
		v.Freeze()
	}
}

// Truth reports whether the row has any field.
func (r *RowValue) Truth() starlark.Bool { return len(r.data()) > 0 }

// Hash fails: like dicts, rows are not hashable.
func (r *RowValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: dict") }

// Len is the number of fields the row has.
func (r *RowValue) Len() int { return len(r.data()) }

// Get returns the value of a field. A missing field is not found, with an error that names the
// fields (with a did-you-mean), which r["..."] reports and "..." in r ignores.
func (r *RowValue) Get(k starlark.Value) (starlark.Value, bool, error) {
	s, ok := k.(starlark.String)
	if !ok {
		return nil, false, nil
	}
	if v, ok := r.data()[string(s)]; ok {
		return r.item(string(s), v), true, nil
	}
	return nil, false, r.missing(string(s))
}

// missing explains a read of a key the row does not have.
func (r *RowValue) missing(name string) error {
	sch := r.shape.schema
	if _, declared := r.shape.index[name]; declared {
		return fmt.Errorf("key %q not in this %s row: the field has no value here; use row.get(%q) to get None instead", name, sch.Name, name)
	}
	msg := fmt.Sprintf("key %q not in row: %s rows have the fields %s", name, sch.Name, strings.Join(r.shape.order, ", "))
	if near := table.Nearest(name, r.shape.order); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return fmt.Errorf("%s", msg)
}

// keys lists the row's keys: schema fields first in declaration order, then others sorted.
func (r *RowValue) keys() []string {
	d := r.data()
	out := make([]string, 0, len(d))
	for _, k := range r.shape.order {
		if _, ok := d[k]; ok {
			out = append(out, k)
		}
	}
	if len(out) < len(d) {
		extra := make([]string, 0, len(d)-len(out))
		for k := range d {
			if _, known := r.shape.index[k]; !known {
				extra = append(extra, k)
			}
		}
		slices.Sort(extra)
		out = append(out, extra...)
	}
	return out
}

// Items returns the (key, value) pairs in key order.
func (r *RowValue) Items() []starlark.Tuple {
	d := r.data()
	keys := r.keys()
	out := make([]starlark.Tuple, len(keys))
	for i, k := range keys {
		out[i] = starlark.Tuple{starlark.String(k), r.item(k, d[k])}
	}
	return out
}

// Iterate yields the keys in order.
func (r *RowValue) Iterate() starlark.Iterator {
	r.itercount++
	return &rowIterator{row: r, keys: r.keys()}
}

type rowIterator struct {
	row  *RowValue
	keys []string
	i    int
}

func (it *rowIterator) Next(p *starlark.Value) bool {
	if it.i >= len(it.keys) {
		return false
	}
	*p = starlark.String(it.keys[it.i])
	it.i++
	return true
}

func (it *rowIterator) Done() {
	if it.row != nil {
		it.row.itercount--
		it.row = nil
	}
}

// writable returns the row's own map for a write, copying the shared row on the first one.
func (r *RowValue) writable(op string) (table.Row, error) {
	if r.frozen {
		return nil, fmt.Errorf("cannot %s frozen row", op)
	}
	if r.itercount > 0 {
		return nil, fmt.Errorf("cannot %s row during iteration", op)
	}
	if err := r.sync(); err != nil {
		return nil, err
	}
	r.views = nil // a write may replace or remove a field: later reads start from own
	if r.own == nil {
		r.own = maps.Clone(r.base)
		if r.own == nil {
			r.own = table.Row{}
		}
	}
	return r.own, nil
}

// SetKey implements r[k] = v on the row's own copy. Keys are strings; values must be data.
func (r *RowValue) SetKey(k, v starlark.Value) error {
	s, ok := k.(starlark.String)
	if !ok {
		return fmt.Errorf("row keys are field names (strings), not %s", describe(k))
	}
	x, err := builtins.ToGo(v)
	if err != nil {
		return fmt.Errorf("cannot store in row field %q: %v; rows hold None, bools, numbers, strings, lists and dicts", string(s), err)
	}
	own, err := r.writable("insert into")
	if err != nil {
		return err
	}
	own[string(s)] = x
	return nil
}

// CompareSameType compares a row with another row or dict: equal when they have the same keys
// and equal values (1 == 1.0, as in Starlark). Only == and != are defined.
func (r *RowValue) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	switch op {
	case syntax.EQL, syntax.NEQ:
		eq, err := r.equal(y, depth)
		if op == syntax.NEQ {
			eq = !eq
		}
		return eq, err
	}
	return false, fmt.Errorf("%s %s %s not implemented", r.Type(), op, y.Type())
}

func (r *RowValue) equal(y starlark.Value, depth int) (bool, error) {
	ym, ok := y.(starlark.Mapping)
	if !ok || starlark.Len(y) != r.Len() {
		return false, nil
	}
	if yr, ok := y.(*RowValue); ok {
		if yr == r {
			return true, nil
		}
	}
	for k, v := range r.data() {
		yv, found, _ := ym.Get(starlark.String(k))
		if !found {
			return false, nil
		}
		if eq, err := starlark.EqualDepth(r.item(k, v), yv, depth-1); err != nil || !eq {
			return false, err
		}
	}
	return true, nil
}

// Binary implements r | mapping and mapping | r: a new plain dict with the right side's values
// winning, as for dicts.
func (r *RowValue) Binary(op syntax.Token, y starlark.Value, side starlark.Side) (starlark.Value, error) {
	if op != syntax.PIPE {
		return nil, nil
	}
	other, ok := y.(starlark.IterableMapping)
	if !ok {
		return nil, nil
	}
	left, right := starlark.IterableMapping(r), other
	if side == starlark.Right {
		left, right = other, r
	}
	out := starlark.NewDict(r.Len() + starlark.Len(other))
	for _, m := range []starlark.IterableMapping{left, right} {
		for _, kv := range m.Items() {
			if err := out.SetKey(kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Attr returns a dict method bound to the row.
func (r *RowValue) Attr(name string) (starlark.Value, error) {
	if m, ok := rowMethods[name]; ok {
		return m.BindReceiver(r), nil
	}
	return nil, nil
}

// AttrNames lists the dict methods a row has.
func (r *RowValue) AttrNames() []string { return rowMethodNames }

var rowMethods = map[string]*starlark.Builtin{
	"clear":      starlark.NewBuiltin("clear", rowClear),
	"copy":       starlark.NewBuiltin("copy", rowCopy),
	"get":        starlark.NewBuiltin("get", rowGet),
	"items":      starlark.NewBuiltin("items", rowItems),
	"keys":       starlark.NewBuiltin("keys", rowKeys),
	"pop":        starlark.NewBuiltin("pop", rowPop),
	"popitem":    starlark.NewBuiltin("popitem", rowPopitem),
	"setdefault": starlark.NewBuiltin("setdefault", rowSetdefault),
	"update":     starlark.NewBuiltin("update", rowUpdate),
	"values":     starlark.NewBuiltin("values", rowValues),
}

var rowMethodNames = slices.Sorted(maps.Keys(rowMethods))

func rowOf(b *starlark.Builtin) *RowValue { return b.Receiver().(*RowValue) }

func rowGet(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var key starlark.Value
	var dflt starlark.Value = starlark.None
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &key, &dflt); err != nil {
		return nil, err
	}
	if v, found, _ := rowOf(b).Get(key); found {
		return v, nil
	}
	return dflt, nil
}

func rowKeys(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	keys := rowOf(b).keys()
	elems := make([]starlark.Value, len(keys))
	for i, k := range keys {
		elems[i] = starlark.String(k)
	}
	return starlark.NewList(elems), nil
}

func rowValues(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	r := rowOf(b)
	d := r.data()
	keys := r.keys()
	elems := make([]starlark.Value, len(keys))
	for i, k := range keys {
		elems[i] = r.item(k, d[k])
	}
	return starlark.NewList(elems), nil
}

func rowItems(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	items := rowOf(b).Items()
	elems := make([]starlark.Value, len(items))
	for i, kv := range items {
		elems[i] = kv
	}
	return starlark.NewList(elems), nil
}

// rowCopy returns an independent row value with the same fields and the same origin, so that
// update(fields=copy) still applies only what the plan changed.
func rowCopy(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	r := rowOf(b)
	if err := r.sync(); err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	c := &RowValue{shape: r.shape, base: r.base}
	if r.own != nil {
		c.own = maps.Clone(r.own)
		for k, v := range c.own { // the copy's lists and dicts are its own, as dict.copy's are not
			c.own[k] = deepCopy(v)
		}
	}
	return c, nil
}

func rowUpdate(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 1 {
		return nil, fmt.Errorf("update: got %d arguments, want at most 1", len(args))
	}
	r := rowOf(b)
	if _, err := r.writable("update"); err != nil {
		return nil, fmt.Errorf("update: %w", err)
	}
	// Collect first, so that a bad pair leaves the row unchanged.
	var pairs []starlark.Tuple
	if len(args) == 1 {
		switch src := args[0].(type) {
		case starlark.IterableMapping:
			pairs = src.Items()
		default:
			iter := starlark.Iterate(src)
			if iter == nil {
				return nil, fmt.Errorf("update: got %s, want a dict or an iterable of pairs", src.Type())
			}
			defer iter.Done()
			var pair starlark.Value
			for i := 0; iter.Next(&pair); i++ {
				t, ok := pair.(starlark.Tuple)
				if !ok {
					if l, isList := pair.(*starlark.List); isList {
						t = make(starlark.Tuple, l.Len())
						for j := range t {
							t[j] = l.Index(j)
						}
						ok = true
					}
				}
				if !ok || len(t) != 2 {
					return nil, fmt.Errorf("update: element #%d is not a (key, value) pair", i)
				}
				pairs = append(pairs, t)
			}
		}
	}
	pairs = append(pairs, kwargs...)
	for _, kv := range pairs {
		if err := r.SetKey(kv[0], kv[1]); err != nil {
			return nil, fmt.Errorf("update: %w", err)
		}
	}
	return starlark.None, nil
}

func rowPop(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var key, dflt starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &key, &dflt); err != nil {
		return nil, err
	}
	r := rowOf(b)
	v, found, missingErr := r.Get(key)
	if !found {
		if dflt != nil {
			return dflt, nil
		}
		if missingErr == nil {
			missingErr = fmt.Errorf("key %s not in row", key)
		}
		return nil, fmt.Errorf("pop: %w", missingErr)
	}
	own, err := r.writable("pop from")
	if err != nil {
		return nil, fmt.Errorf("pop: %w", err)
	}
	delete(own, string(key.(starlark.String)))
	return v, nil
}

func rowPopitem(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	r := rowOf(b)
	keys := r.keys()
	if len(keys) == 0 {
		return nil, fmt.Errorf("popitem: empty row")
	}
	own, err := r.writable("pop from")
	if err != nil {
		return nil, fmt.Errorf("popitem: %w", err)
	}
	k := keys[len(keys)-1]
	v := builtins.FromGo(own[k])
	delete(own, k)
	return starlark.Tuple{starlark.String(k), v}, nil
}

func rowSetdefault(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var key starlark.Value
	var dflt starlark.Value = starlark.None
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &key, &dflt); err != nil {
		return nil, err
	}
	r := rowOf(b)
	if v, found, _ := r.Get(key); found {
		return v, nil
	}
	if err := r.SetKey(key, dflt); err != nil {
		return nil, fmt.Errorf("setdefault: %w", err)
	}
	return dflt, nil
}

func rowClear(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	r := rowOf(b)
	own, err := r.writable("clear")
	if err != nil {
		return nil, fmt.Errorf("clear: %w", err)
	}
	clear(own)
	return starlark.None, nil
}

// deepCopy copies the lists and dicts inside a row value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	}
	return v
}
