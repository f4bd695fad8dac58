package pg

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Reads pushed down as SQL.
//
// A read of a where-filter selects, in one statement, the table's version and the committed
// rows the filter's top-level equalities and comparisons on scalar fields allow (an equality on
// the key or a declared index is answered by that index: a get is one indexed SELECT), in the
// key's natural order (_ord), with the filter's limit when equalities are the whole filter. Every row
// is then checked with the compiled filter in Go, which is the one definition of what matches;
// so SQL only has to return a superset. The one statement is the read's consistent snapshot:
// the rows and the table version come from the same moment.

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// sqlRead is what a read asks of SQL.
type sqlRead struct {
	eq       map[string]any // field → value: top-level equalities pushed down
	bounds   []bound        // top-level comparisons pushed down, as (weaker) bounds
	from, to []byte         // inclusive _ord bounds; nil: open
	after    []byte         // exclusive bound in the walk's direction (a page's start); nil: none
	reverse  bool
	limit    int  // 0: every row
	indexed  bool // an equality on the key or a declared index was pushed (no scan)
	exact    bool // the pushed equalities are the whole filter: SQL's rows are the matches
	keysOnly bool // only the keys and versions are needed (the rows are not decoded)
}

// bound is a comparison of a scalar column with a value that every row the filter matches
// satisfies: `col >= val` (ge) or `col <= val`. A strict comparison is pushed as the non-strict
// one, and a number of the other kind (an int with a float) is compared as float8 on both sides:
// rounding keeps a non-strict order, so the SQL selects a superset of the matches, which the
// compiled filter then checks.
type bound struct {
	field string
	ge    bool
	val   any
	float bool // compare as float8
	text  bool // compare bytes (COLLATE "C"), as the filter compares strings
}

// bounds returns the comparisons of where's top-level conditions ({"price": {"$lt": 100}}) on
// int, float and string fields that SQL can prefilter by.
func (t *sqlTable) bounds(where map[string]any) []bound {
	var out []bound
	for k, v := range where {
		ops, ok := v.(map[string]any)
		fd := t.s.FieldsByName[k]
		if !ok || fd == nil {
			continue
		}
		for op, x := range ops {
			var ge bool
			switch op {
			case "$gt", "$gte":
				ge = true
			case "$lt", "$lte":
			default:
				continue
			}
			b := bound{field: k, ge: ge}
			i, isInt := store.ToInt(x)
			f, isFloat := x.(float64)
			switch {
			case fd.Type == table.TypeString:
				str, ok := x.(string)
				if !ok {
					continue
				}
				b.val, b.text = str, true
			case fd.Type == table.TypeInt && isInt:
				b.val = i
			case (fd.Type == table.TypeInt || fd.Type == table.TypeFloat) && isFloat && !math.IsNaN(f):
				b.val, b.float = f, true
			case fd.Type == table.TypeFloat && isInt:
				b.val, b.float = float64(i), true
			default:
				continue
			}
			out = append(out, b)
		}
	}
	return out
}

// pushdown says what SQL can answer of m, compiled from where.
func (t *sqlTable) pushdown(m *table.Matcher, where map[string]any) sqlRead {
	r := sqlRead{eq: map[string]any{}}
	for f, v := range m.Equalities() {
		fd := t.s.FieldsByName[f]
		if fd == nil || fd.Nested() || fd.Type == table.TypeTimestamp || v == nil {
			continue // a timestamp's equality is not one of text (the filter compares instants)
		}
		nv, rule := fd.Check(v)
		if rule != "" {
			continue
		}
		r.eq[f] = nv
		if t.s.Indexed[f] {
			r.indexed = true
		}
	}
	r.bounds = t.bounds(where)
	r.exact = len(r.eq) == len(where)
	for k, v := range where {
		if _, pushed := r.eq[k]; !pushed {
			r.exact = false
		}
		if _, op := v.(map[string]any); op {
			r.exact = false
		}
	}
	return r
}

// fetch runs r against t: the table's version and the committed rows, sorted by key.
func (t *sqlTable) fetch(ctx context.Context, db querier, r sqlRead) (int64, []*rec, error) {
	var where []string
	args := []any{t.s.Name}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	for _, f := range slices.Sorted(mapsKeys(r.eq)) {
		where = append(where, "t."+t.col(f)+" = "+arg(r.eq[f]))
	}
	for _, b := range r.bounds {
		col, op, ph := "t."+t.col(b.field), "<=", arg(b.val)
		if b.ge {
			op = ">="
		}
		switch {
		case b.float:
			col, ph = col+"::float8", ph+"::float8"
		case t.mapped && !b.text:
			ph += "::bigint" // a mapped integer or numeric column: a bound beyond its type's range is no error
		case b.text:
			col = col + ` COLLATE "C"`
		}
		where = append(where, col+" "+op+" "+ph)
	}
	if r.from != nil {
		where = append(where, "t._ord >= "+arg(r.from))
	}
	if r.to != nil {
		where = append(where, "t._ord <= "+arg(r.to))
	}
	if r.after != nil {
		if r.reverse {
			where = append(where, "t._ord < "+arg(r.after))
		} else {
			where = append(where, "t._ord > "+arg(r.after))
		}
	}
	var b strings.Builder
	b.WriteString("SELECT v.ver, r.* FROM (SELECT ver FROM ")
	b.WriteString(ident(t.schema, verTable))
	b.WriteString(" WHERE name = $1) v LEFT JOIN LATERAL (SELECT ")
	if r.keysOnly {
		b.WriteString("t._version, " + t.keySel)
	} else {
		b.WriteString(t.sel)
	}
	b.WriteString(" FROM " + t.name + " t")
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	if r.limit > 0 {
		b.WriteString(" ORDER BY t._ord")
		if r.reverse {
			b.WriteString(" DESC")
		}
		b.WriteString(" LIMIT " + strconv.Itoa(r.limit))
	}
	b.WriteString(") r ON true")
	rows, err := db.Query(ctx, b.String(), args...)
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", t.s.Name, err)
	}
	defer rows.Close()
	var ver int64 = -1
	var out []*rec
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return 0, nil, fmt.Errorf("read %s: %w", t.s.Name, err)
		}
		v, ok := vals[0].(int64)
		if !ok {
			return 0, nil, fmt.Errorf("read %s: the table has no version row in %s", t.s.Name, verTable)
		}
		ver = v
		if vals[1] == nil {
			continue // no row: the left join's null row
		}
		if r.keysOnly {
			out = append(out, &rec{key: vals[2], ver: vals[1].(int64)})
			continue
		}
		rc, err := t.decode(vals[1:])
		if err != nil {
			return 0, nil, err
		}
		out = append(out, rc)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", t.s.Name, err)
	}
	if ver < 0 {
		return 0, nil, fmt.Errorf("read %s: the table has no version row in %s (the store is damaged)", t.s.Name, verTable)
	}
	slices.SortFunc(out, func(a, b *rec) int {
		if r.reverse {
			return table.CompareKeys(b.key, a.key)
		}
		return table.CompareKeys(a.key, b.key)
	})
	return ver, out, nil
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// holds reports whether predicate read pc finds now, in tx, what it found at the dry run; tableVer is
// the table's version in tx.
func holds(ctx context.Context, db querier, pc *store.PredCheck, t *sqlTable, tableVer int64) (bool, error) {
	if tableVer == pc.Ver {
		return true, nil // nothing was committed to the table since the read
	}
	switch pc.Kind {
	case store.PredNextKey:
		best, _, err := t.maxNum(ctx, db, nil)
		return best == pc.N, err
	}
	r := t.pushdown(pc.M, pc.Where)
	if pc.From != nil {
		r.from = ordKey(pc.From)
	}
	if pc.To != nil {
		r.to = ordKey(pc.To)
	}
	if pc.Kind == store.PredCount && r.exact {
		r.keysOnly = true
	}
	_, recs, err := t.fetch(ctx, db, r)
	if err != nil {
		return false, err
	}
	var keys []store.VerKey
	n := int64(0)
	for _, rc := range recs {
		if !r.keysOnly && !pc.M.Match(rc.row) {
			continue
		}
		n++
		keys = append(keys, store.VerKey{Key: rc.key, Ver: rc.ver})
	}
	if n != pc.N {
		return false, nil
	}
	return pc.Kind != store.PredRows || store.ReadDigest(keys) == pc.Digest, nil
}

func (t *sqlTable) maxNum(ctx context.Context, db querier, skip func(key any) bool) (committed, best int64, err error) {
	committed, best = -1, -1
	if t.s.KeyPrefix == "" {
		return -1, -1, nil
	}
	sql := "SELECT " + t.col(t.s.Key) + "::text FROM " + t.name
	var args []any
	if lo, hi, ok := store.KeyPrefixEnd(t.s.KeyPrefix); ok {
		sql += " WHERE _ord >= $1"
		args = append(args, lo)
		if hi != nil {
			sql += " AND _ord < $2"
			args = append(args, hi)
		}
	} else {
		sql += " WHERE left(" + t.col(t.s.Key) + ", $1) = $2"
		args = append(args, len([]rune(t.s.KeyPrefix)), t.s.KeyPrefix)
	}
	// Among keys of the form, the last in natural order has the highest number: walk down.
	rows, err := db.Query(ctx, sql+" ORDER BY _ord DESC", args...)
	if err != nil {
		return -1, -1, fmt.Errorf("read %s: %w", t.s.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return -1, -1, err
		}
		n, ok := t.s.KeyNum(k)
		if !ok {
			continue
		}
		if committed < 0 {
			committed = n
		}
		if skip == nil || !skip(k) {
			best = n
			break
		}
	}
	return committed, best, rows.Err()
}
