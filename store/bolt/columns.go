package bolt

import (
	"math"
	"slices"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
)

// A scan of a large table is memory-bound: each row is a map whose lookup touches several cache
// lines, about 50-100 ns a row at 100,000 rows. For the filters plans write most
// ({"price": {"$lt": 100}, "quantity_in_stock": {"$gt": 10}}) the store keeps numeric fields
// as columns too (float64s in key order, built on first use) and skips the rows a column proves
// cannot match. The prefilter is only ever a necessary condition: every row it lets through is
// still checked by the compiled filter, and anything it cannot decide exactly (a missing value,
// an int beyond 2^53, an operand it does not understand) passes. So the compiler's semantics stay
// the one source of truth; the columns only save work.

// minColumnScan is the table size from which scans use numeric columns.
const minColumnScan = 1024

// rangeCond is one numeric comparison of a top-level field condition.
type rangeCond struct {
	col []float64
	op  string // $lt $lte $gt $gte $eq
	x   float64
}

// prefilter is a conjunction of range conditions over positions in the committed order.
type prefilter struct {
	conds []rangeCond
	// complete says the conditions are the whole filter: then a row whose values are all known
	// matches exactly when the conditions hold, and the row map need not be looked at.
	complete bool
}

// check evaluates the conditions for the row at position i. pass is false only when a column
// proves that a condition fails; sure says every value was known, so pass is exact for the
// conditions (numbers compared by value, as the where compiler does).
func (p *prefilter) check(i int) (pass, sure bool) {
	sure = true
	for _, c := range p.conds {
		v := c.col[i]
		if v != v { // NaN: unknown, let the filter decide
			sure = false
			continue
		}
		switch c.op {
		case "$lt":
			if !(v < c.x) {
				return false, true
			}
		case "$lte":
			if !(v <= c.x) {
				return false, true
			}
		case "$gt":
			if !(v > c.x) {
				return false, true
			}
		case "$gte":
			if !(v >= c.x) {
				return false, true
			}
		case "$eq":
			if v != c.x {
				return false, true
			}
		}
	}
	return true, sure
}

// prefilterFor derives the numeric conditions of where that columns can check: top-level entries
// {"field": {"$lt": number, ...}} on int and float fields, with operands exactly representable
// as float64. Entries it does not understand are left out; since every top-level entry must hold,
// checking a subset is still a necessary condition. It returns nil when there is nothing to use.
// The caller holds the Store's read lock and has compiled where successfully.
func (t *resident) prefilterFor(where map[string]any) *prefilter {
	if len(t.order) < minColumnScan || len(where) == 0 {
		return nil
	}
	p := &prefilter{complete: true}
	for name, v := range where {
		f := t.s.FieldsByName[name]
		ops, ok := v.(map[string]any)
		if f == nil || (f.Type != table.TypeInt && f.Type != table.TypeFloat) || !ok || len(ops) == 0 {
			p.complete = false
			continue
		}
		for op, arg := range ops {
			x, ok := exactFloat(arg)
			switch {
			case !ok:
				p.complete = false
			case op == "$lt" || op == "$lte" || op == "$gt" || op == "$gte" || op == "$eq":
				p.conds = append(p.conds, rangeCond{col: t.column(name), op: op, x: x})
			default:
				p.complete = false
			}
		}
	}
	if len(p.conds) == 0 {
		return nil
	}
	return p
}

// exactFloat returns v as a float64 when v is a number that float64 holds exactly.
func exactFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return exactFloat(float64(x))
	}
	if i, ok := store.ToInt(v); ok && i >= -(1<<53) && i <= 1<<53 {
		return float64(i), true
	}
	return 0, false
}

// colValue is a field value as a column holds it: the number, or NaN when it is not a number
// that float64 holds exactly.
func colValue(v any) float64 {
	if f, ok := exactFloat(v); ok {
		return f
	}
	return math.NaN()
}

// column returns the field's column, aligned with t.order, building it on first use.
func (t *resident) column(f string) []float64 {
	t.idxMu.Lock()
	defer t.idxMu.Unlock()
	if c, ok := t.cols[f]; ok {
		return c
	}
	table.AddShared(int64(8 * len(t.order)))
	c := make([]float64, len(t.order))
	for i, r := range t.order {
		c[i] = colValue(r.row[f])
	}
	if t.cols == nil {
		t.cols = make(map[string][]float64)
	}
	t.cols[f] = c
	return c
}

// putColumns keeps the built columns aligned with t.order after put changed position i (found:
// the key was there before; nr nil: removed). The caller holds idxMu.
func (t *resident) putColumns(i int, found bool, nr *rec) {
	for f, c := range t.cols {
		switch {
		case nr != nil && found:
			c[i] = colValue(nr.row[f])
		case nr != nil:
			c = slices.Insert(c, i, colValue(nr.row[f]))
		case found:
			c = slices.Delete(c, i, i+1)
		}
		t.cols[f] = c
	}
}
