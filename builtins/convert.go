package builtins

import (
	"fmt"
	"math/big"
	"sort"

	"go.starlark.net/starlark"
)

// Bounds of ToGo: a value shared many times over (l = [l, l], forty times) would otherwise
// expand to 2^40 nodes, and a value that contains itself would recurse until the stack ran out.
const (
	MaxConvertNodes = 1_000_000 // values converted in one call
	MaxConvertDepth = 100       // nesting of lists, tuples and dicts
)

// ToGo converts a Starlark value to plain Go values: nil, bool, int64, float64, string, []any
// (lists and tuples), map[string]any (dicts with string keys). Sets become sorted []any. Integers
// outside int64 and any other kind of value (functions, modules, ...) are errors that name the
// value's type; so are values of more than MaxConvertNodes nodes or MaxConvertDepth levels (a
// value that contains itself is one of those). Values implementing GoValuer convert themselves.
func ToGo(v starlark.Value) (any, error) {
	c := converter{nodes: MaxConvertNodes}
	return c.toGo(v, 0)
}

type converter struct{ nodes int }

func (c *converter) toGo(v starlark.Value, depth int) (any, error) {
	if c.nodes--; c.nodes < 0 {
		return nil, fmt.Errorf("value too large: more than %d elements", MaxConvertNodes)
	}
	if depth > MaxConvertDepth {
		return nil, fmt.Errorf("value nested more than %d levels deep (does it contain itself?)", MaxConvertDepth)
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(v), nil
	case starlark.Int:
		i, ok := v.Int64()
		if !ok {
			return nil, fmt.Errorf("integer %s is too large (must fit in 64 bits)", v)
		}
		return i, nil
	case starlark.Float:
		return float64(v), nil
	case starlark.String:
		return string(v), nil
	case GoValuer:
		return v.GoValue(), nil
	case *starlark.List:
		return c.elems(v, v.Len(), depth)
	case starlark.Tuple:
		return c.elems(v, len(v), depth)
	case *starlark.Set:
		out := make([]any, 0, v.Len())
		iter := v.Iterate()
		defer iter.Done()
		var e starlark.Value
		for iter.Next(&e) {
			x, err := c.toGo(e, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
		return out, nil
	case starlark.IterableMapping:
		items := v.Items()
		out := make(map[string]any, len(items))
		for _, kv := range items {
			k, ok := kv[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("dict key %s is a %s; only string keys are allowed here", kv[0], kv[0].Type())
			}
			x, err := c.toGo(kv[1], depth+1)
			if err != nil {
				return nil, err
			}
			out[string(k)] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of type %s cannot be stored or returned", v.Type())
}

func (c *converter) elems(seq starlark.Indexable, n, depth int) ([]any, error) {
	out := make([]any, n)
	for i := range out {
		x, err := c.toGo(seq.Index(i), depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// GoValuer is implemented by Starlark values that wrap a plain Go value (such as table rows).
type GoValuer interface {
	GoValue() any
}

// FromGo converts a plain Go value (the kinds ToGo returns, plus int, int32, float32, []string,
// []map[string]any and *big.Int) to a new, unfrozen Starlark value. Unknown kinds are rendered with
// fmt as strings, so a result is always produced.
func FromGo(v any) starlark.Value {
	switch v := v.(type) {
	case nil:
		return starlark.None
	case bool:
		return starlark.Bool(v)
	case int64:
		return starlark.MakeInt64(v)
	case int:
		return starlark.MakeInt(v)
	case int32:
		return starlark.MakeInt64(int64(v))
	case *big.Int:
		return starlark.MakeBigInt(v)
	case float64:
		return starlark.Float(v)
	case float32:
		return starlark.Float(v)
	case string:
		return starlark.String(v)
	case []any:
		elems := make([]starlark.Value, len(v))
		for i, e := range v {
			elems[i] = FromGo(e)
		}
		return starlark.NewList(elems)
	case []string:
		elems := make([]starlark.Value, len(v))
		for i, e := range v {
			elems[i] = starlark.String(e)
		}
		return starlark.NewList(elems)
	case []map[string]any:
		elems := make([]starlark.Value, len(v))
		for i, e := range v {
			elems[i] = FromGo(e)
		}
		return starlark.NewList(elems)
	case map[string]any:
		d := starlark.NewDict(len(v))
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			_ = d.SetKey(starlark.String(k), FromGo(v[k])) // a new dict with string keys cannot fail
		}
		return d
	}
	return starlark.String(fmt.Sprint(v))
}
