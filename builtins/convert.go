package builtins

import (
	"fmt"
	"math"
	"math/big"
	"sort"

	"go.starlark.net/starlark"
)

// ToGo converts a Starlark value to plain Go values: nil, bool, int64, float64, string, []any
// (lists and tuples), map[string]any (dicts with string keys). Sets become sorted []any. Integers
// outside int64 and any other kind of value (functions, modules, ...) are errors that name the
// value's type. Values implementing GoValuer convert themselves.
func ToGo(v starlark.Value) (any, error) {
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
		out := make([]any, v.Len())
		for i := range out {
			x, err := ToGo(v.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case starlark.Tuple:
		out := make([]any, len(v))
		for i, e := range v {
			x, err := ToGo(e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case *starlark.Set:
		out := make([]any, 0, v.Len())
		iter := v.Iterate()
		defer iter.Done()
		var e starlark.Value
		for iter.Next(&e) {
			x, err := ToGo(e)
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
			x, err := ToGo(kv[1])
			if err != nil {
				return nil, err
			}
			out[string(k)] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of type %s cannot be stored or returned", v.Type())
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

// IsFinite reports whether a Go number converted by ToGo is usable as data (not NaN or ±Inf).
func IsFinite(v any) bool {
	f, ok := v.(float64)
	return !ok || (!math.IsNaN(f) && !math.IsInf(f, 0))
}
