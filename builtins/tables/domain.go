package tables

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/table"
)

// tableArg unpacks the optional table argument of a domain helper, defaulting to dflt.
func tableArg(name string, v starlark.Value, dflt *TableValue) (*TableValue, error) {
	switch v := v.(type) {
	case nil:
		return dflt, nil
	case *TableValue:
		return v, nil
	case starlark.String:
		return nil, fmt.Errorf("%s: pass the table value, %s_tbl, not the string %s", name, string(v), v)
	}
	return nil, fmt.Errorf("%s: the first argument must be a table such as %s, not %s", name, dflt.name, describe(v))
}

// getCurrentBalance returns the get_current_balance builtin; ledger is its default table.
func getCurrentBalance(ledger *TableValue) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var tv starlark.Value
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "tbl?", &tv); err != nil {
			return nil, err
		}
		t, err := tableArg(b.Name(), tv, ledger)
		if err != nil {
			return nil, err
		}
		if t.schema.Field(BalanceField) == nil {
			return nil, fmt.Errorf("%s: %s has no %s field; pass the ledger, %s", b.Name(), t.name, BalanceField, ledger.name)
		}
		tb, err := t.table(thread)
		if err != nil {
			return nil, fail(b, err)
		}
		rows, err := tb.Find(table.Query{Reverse: true, Limit: 1})
		if err != nil {
			return nil, fail(b, err)
		}
		if len(rows) == 0 {
			return starlark.Float(0), nil
		}
		switch v := rows[0][BalanceField].(type) {
		case nil:
			return starlark.Float(0), nil
		case float64:
			return starlark.Float(v), nil
		case int64:
			return starlark.Float(v), nil
		default:
			return nil, fmt.Errorf("%s: the newest row %s has %s = %s, not a number", b.Name(),
				table.FormatValue(rows[0][t.schema.Key]), BalanceField, table.FormatValue(v))
		}
	}
}

// idShape is the prefix and digit count of the keys next_transaction_id makes for t.
func (t *TableValue) idShape() (prefix string, digits int) {
	prefix, digits = t.schema.KeyPrefix, t.schema.KeyDigits
	if prefix == "" {
		prefix = DefaultIDPrefix
	}
	if digits <= 0 {
		digits = DefaultIDDigits
	}
	return prefix, digits
}

// formatID renders prefix plus n zero-padded to digits: TXN002.
func formatID(prefix string, digits, n int) string {
	return fmt.Sprintf("%s%0*d", prefix, digits, n)
}

// nextTransactionID returns the next_transaction_id builtin; dflt is its default table.
func nextTransactionID(dflt *TableValue) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var tv starlark.Value
		var prefixArg starlark.Value = starlark.None
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "tbl?", &tv, "prefix?", &prefixArg); err != nil {
			return nil, err
		}
		t, err := tableArg(b.Name(), tv, dflt)
		if err != nil {
			return nil, err
		}
		if !t.textKey() {
			return nil, fmt.Errorf("%s: %s has keys that are not text (%s); it needs a table with keys such as %q", b.Name(), t.name, t.schema.Key, formatID(DefaultIDPrefix, DefaultIDDigits, 1))
		}
		prefix, digits := t.idShape()
		switch p := prefixArg.(type) {
		case starlark.NoneType:
		case starlark.String:
			prefix = string(p)
		default:
			return nil, fmt.Errorf("%s: prefix must be a string such as %q, not %s", b.Name(), prefix, describe(prefixArg))
		}
		tb, err := t.table(thread)
		if err != nil {
			return nil, fail(b, err)
		}
		// In natural key order the last key of the form prefix+digits has the highest number.
		pattern := "^" + regexp.QuoteMeta(prefix) + "[0-9]+$"
		rows, err := tb.Find(table.Query{
			Where:   map[string]any{t.schema.Key: map[string]any{"$regex": pattern}},
			Reverse: true,
			Limit:   1,
		})
		if err != nil {
			return nil, fail(b, err)
		}
		next := 1
		if len(rows) > 0 {
			key, ok := rows[0][t.schema.Key].(string)
			if !ok || !strings.HasPrefix(key, prefix) {
				return nil, fmt.Errorf("%s: the view returned key %s for prefix %q", b.Name(), table.FormatValue(rows[0][t.schema.Key]), prefix)
			}
			n, err := strconv.Atoi(key[len(prefix):])
			if err != nil || n == int(^uint(0)>>1) {
				return nil, fmt.Errorf("%s: the highest key %q has a number too large to increment", b.Name(), key)
			}
			next = n + 1
		}
		if prefix == t.schema.KeyPrefix && int64(next) > t.schema.MaxKeyNum() {
			return nil, fmt.Errorf("%s: every %s key up to %s is taken; the table's key_max is %d", b.Name(), t.name,
				formatID(prefix, digits, int(t.schema.MaxKeyNum())), t.schema.MaxKeyNum())
		}
		return starlark.String(formatID(prefix, digits, next)), nil
	}
}
