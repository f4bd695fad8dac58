package tables

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/starplan/starplan/table"
)

// memView is a small in-memory table.View for tests of the Starlark glue. It uses the real
// where compiler and key order, so filters behave as they do against the store; it validates
// writes only as far as these tests need (unknown fields, field types, minimums, duplicate and
// changed keys), and it replaces rather than mutates the rows it has handed out.
type memView struct {
	tables map[string]*memTable
}

type memTable struct {
	schema *table.Schema
	rows   []table.Row // in key order
	finds  int         // calls to Find, for tests that check what a helper asks for
	last   table.Query // the last query Find was given
}

func newMemView(schemas []*table.Schema, data map[string][]table.Row) *memView {
	v := &memView{tables: map[string]*memTable{}}
	for _, s := range schemas {
		t := &memTable{schema: s}
		for _, r := range data[s.Name] {
			t.rows = append(t.rows, maps.Clone(r))
		}
		slices.SortFunc(t.rows, func(a, b table.Row) int { return table.CompareKeys(a[s.Key], b[s.Key]) })
		v.tables[s.Name] = t
	}
	return v
}

func (v *memView) Names() []string { return slices.Sorted(maps.Keys(v.tables)) }

func (v *memView) Table(name string) (table.Table, bool) {
	t, ok := v.tables[name]
	if !ok {
		return nil, false
	}
	return t, true
}

func (t *memTable) Schema() *table.Schema { return t.schema }
func (t *memTable) Len() int              { return len(t.rows) }

// each calls fn with the index of every row that matches q, in q's order, until fn says stop.
func (t *memTable) each(q table.Query, fn func(i int) bool) error {
	m, err := table.Compile(t.schema, q.Where)
	if err != nil {
		return err
	}
	n := len(t.rows)
	for j := range n {
		i := j
		if q.Reverse {
			i = n - 1 - j
		}
		r := t.rows[i]
		if !m.Match(r) {
			continue
		}
		if q.Match != nil {
			ok, err := q.Match(r)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		if !fn(i) {
			break
		}
	}
	return nil
}

func (t *memTable) Find(q table.Query) ([]table.Row, error) {
	t.finds++
	t.last = q
	var out []table.Row
	err := t.each(q, func(i int) bool {
		out = append(out, t.rows[i])
		return q.Limit == 0 || len(out) < q.Limit
	})
	return out, err
}

func (t *memTable) Count(q table.Query) (int, error) {
	n := 0
	err := t.each(q, func(int) bool { n++; return true })
	return n, err
}

func (t *memTable) index(key any) (int, bool) {
	return slices.BinarySearchFunc(t.rows, key, func(r table.Row, k any) int { return table.CompareKeys(r[t.schema.Key], k) })
}

func (t *memTable) Get(key any) (table.Row, bool, error) {
	if i, ok := t.index(key); ok {
		return t.rows[i], true, nil
	}
	return nil, false, nil
}

// validate normalises and checks one row.
func (t *memTable) validate(r table.Row) error {
	key := r[t.schema.Key]
	for name, v := range r {
		f := t.schema.Field(name)
		if f == nil {
			return &table.FieldError{Table: t.schema.Name, Key: key, Field: name, Value: v, Rule: "is not a field of " + t.schema.Name}
		}
		if v == nil {
			if f.Required {
				return &table.FieldError{Table: t.schema.Name, Key: key, Field: name, Value: v, Rule: "is required"}
			}
			continue
		}
		switch f.Type {
		case table.TypeString, table.TypeTimestamp:
			if _, ok := v.(string); !ok {
				return &table.FieldError{Table: t.schema.Name, Key: key, Field: name, Value: v, Rule: "must be a string"}
			}
		case table.TypeInt:
			if _, ok := v.(int64); !ok {
				return &table.FieldError{Table: t.schema.Name, Key: key, Field: name, Value: v, Rule: "must be an int"}
			}
		case table.TypeFloat:
			switch x := v.(type) {
			case int64:
				r[name] = float64(x)
			case float64:
			default:
				return &table.FieldError{Table: t.schema.Name, Key: key, Field: name, Value: v, Rule: "must be a number"}
			}
		}
		if f.Min != nil {
			if n, ok := r[name].(float64); ok && n < *f.Min {
				return &table.FieldError{Table: t.schema.Name, Key: key, Field: name, Value: v, Rule: fmt.Sprintf("must be >= %v", *f.Min)}
			}
			if n, ok := r[name].(int64); ok && float64(n) < *f.Min {
				return &table.FieldError{Table: t.schema.Name, Key: key, Field: name, Value: v, Rule: fmt.Sprintf("must be >= %v", *f.Min)}
			}
		}
	}
	for _, f := range t.schema.Fields {
		if _, ok := r[f.Name]; f.Required && !ok {
			return &table.FieldError{Table: t.schema.Name, Key: key, Field: f.Name, Rule: "is required"}
		}
	}
	return nil
}

func (t *memTable) Insert(row table.Row) (any, error) {
	r := maps.Clone(row)
	if r == nil {
		r = table.Row{}
	}
	if r[t.schema.Key] == nil && t.schema.KeyPrefix != "" {
		n := 0
		for _, x := range t.rows {
			if k, ok := x[t.schema.Key].(string); ok && strings.HasPrefix(k, t.schema.KeyPrefix) {
				var m int
				if _, err := fmt.Sscanf(k[len(t.schema.KeyPrefix):], "%d", &m); err == nil && m > n {
					n = m
				}
			}
		}
		r[t.schema.Key] = fmt.Sprintf("%s%0*d", t.schema.KeyPrefix, t.schema.KeyDigits, n+1)
	}
	if err := t.validate(r); err != nil {
		return nil, err
	}
	i, dup := t.index(r[t.schema.Key])
	if dup {
		return nil, &table.FieldError{Table: t.schema.Name, Key: r[t.schema.Key], Rule: "duplicate key"}
	}
	t.rows = slices.Insert(t.rows, i, r)
	return r[t.schema.Key], nil
}

func (t *memTable) Update(fields table.Row, q table.Query) (int, error) {
	var idx []int
	if err := t.each(q, func(i int) bool { idx = append(idx, i); return true }); err != nil {
		return 0, err
	}
	updated := make(map[int]table.Row, len(idx))
	for _, i := range idx {
		old := t.rows[i]
		r := maps.Clone(old)
		maps.Copy(r, fields)
		if table.CompareKeys(r[t.schema.Key], old[t.schema.Key]) != 0 {
			return 0, &table.FieldError{Table: t.schema.Name, Key: old[t.schema.Key], Field: t.schema.Key, Value: r[t.schema.Key], Rule: "is the key and cannot change"}
		}
		if err := t.validate(r); err != nil {
			return 0, err
		}
		if !maps.EqualFunc(r, old, func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
			updated[i] = r
		}
	}
	for i, r := range updated {
		t.rows[i] = r // replace: rows already handed out stay as they were
	}
	return len(updated), nil
}

func (t *memTable) Remove(q table.Query) (int, error) {
	drop := map[int]bool{}
	if err := t.each(q, func(i int) bool { drop[i] = true; return true }); err != nil {
		return 0, err
	}
	kept := t.rows[:0:0]
	for i, r := range t.rows {
		if !drop[i] {
			kept = append(kept, r)
		}
	}
	t.rows = kept
	return len(drop), nil
}

func f64(v float64) *float64 { return &v }

// testSchemas are the demo domain's tables, as the store declares them.
func testSchemas() []*table.Schema {
	return []*table.Schema{
		{
			Name: "inventory", Key: "item_id", Doc: "Sunglasses the shop sells.",
			Fields: []table.Field{
				{Name: "item_id", Type: table.TypeString, Required: true},
				{Name: "name", Type: table.TypeString, Required: true},
				{Name: "description", Type: table.TypeString},
				{Name: "quantity_in_stock", Type: table.TypeInt, Required: true, Min: f64(0)},
				{Name: "price", Type: table.TypeFloat, Required: true, Min: f64(0)},
			},
		},
		{
			Name: "transactions", Key: "transaction_id", Doc: "The register's ledger.",
			KeyPrefix: "TXN", KeyDigits: 3,
			Fields: []table.Field{
				{Name: "transaction_id", Type: table.TypeString, Required: true},
				{Name: "customer_name", Type: table.TypeString, Required: true},
				{Name: "transaction_summary", Type: table.TypeString},
				{Name: "transaction_amount", Type: table.TypeFloat, Required: true},
				{Name: "balance_after_transaction", Type: table.TypeFloat, Required: true},
				{Name: "timestamp", Type: table.TypeTimestamp, Required: true},
			},
		},
	}
}

// seedData is the demo store (shared/eval/seed-store.json), with short descriptions.
func seedData() map[string][]table.Row {
	return map[string][]table.Row{
		"inventory": {
			{"item_id": "SG001", "name": "Aviator", "description": "Teardrop-shaped lenses with thin metal frames.", "quantity_in_stock": int64(23), "price": 80.0},
			{"item_id": "SG002", "name": "Wayfarer", "description": "Thick, angular frames with retro charm.", "quantity_in_stock": int64(6), "price": 95.0},
			{"item_id": "SG003", "name": "Mystique", "description": "Frames that sweep upward at the outer corners.", "quantity_in_stock": int64(3), "price": 70.0},
			{"item_id": "SG004", "name": "Sport", "description": "Wraparound sunglasses with rubber grips.", "quantity_in_stock": int64(11), "price": 110.0},
			{"item_id": "SG005", "name": "Classic", "description": "Classic round profile with minimalist metal frames.", "quantity_in_stock": int64(10), "price": 60.0},
			{"item_id": "SG006", "name": "Moon", "description": "Oversized round style with bold plastic frames.", "quantity_in_stock": int64(10), "price": 120.0},
		},
		"transactions": {
			{"transaction_id": "TXN001", "customer_name": "OPENING_BALANCE", "transaction_summary": "Daily opening register balance", "transaction_amount": 500.0, "balance_after_transaction": 500.0, "timestamp": "2025-01-01T09:00:00"},
		},
	}
}
