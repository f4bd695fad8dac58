package pg

import (
	"bytes"
	"context"
	"encoding/json"
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
		where = append(where, "t."+q(f)+" = "+arg(r.eq[f]))
	}
	for _, b := range r.bounds {
		col, op, ph := "t."+q(b.field), "<=", arg(b.val)
		if b.ge {
			op = ">="
		}
		switch {
		case b.float:
			col, ph = col+"::float8", ph+"::float8"
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
		b.WriteString("t._version, t." + q(t.s.Key))
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

// Predicate reads: as store/bolt records them (see its reads.go), so that a Pending reads the
// same in either store: the filter, the key range the walk covered, and the committed rows it
// matched there (their number and a digest of their keys and versions). At apply, a read whose
// table's version has not moved holds at once; otherwise the filter runs again, as SQL, over
// that range.

const (
	bigRead      = 256
	maxPredReads = 64
	maxWhereJSON = 8 << 10

	predRows    = "rows"
	predCount   = "count"
	predNextKey = "next_key"
)

type readObs struct {
	countOnly bool
	count     int
	keys      []verKey
	stop      any
	stopped   bool
}

type verKey struct {
	key any
	ver int64
}

func (o *readObs) add(key any, ver int64) {
	if o == nil {
		return
	}
	o.count++
	if !o.countOnly && len(o.keys) <= bigRead {
		o.keys = append(o.keys, verKey{key, ver})
	}
}

func (o *readObs) stopAt(k any) {
	if o != nil {
		o.stop, o.stopped = k, true
	}
}

type predRead struct {
	kind     string
	where    map[string]any
	from, to any
	ver      int64
	n        int64
	digest   uint64
}

func (t *stageTable) notePred(p predRead) {
	if t.readAll {
		return
	}
	if len(t.preds) >= maxPredReads || (p.kind == predRows && p.n > bigRead) {
		t.readAll, t.allVer = true, t.minPredVer(p.ver)
		t.preds = nil
		return
	}
	for _, q := range t.preds {
		if q.kind == p.kind && q.ver == p.ver && q.n == p.n && q.digest == p.digest &&
			sameBound(q.from, p.from) && sameBound(q.to, p.to) && whereEqual(q.where, p.where) {
			return
		}
	}
	t.preds = append(t.preds, p)
}

func (t *stageTable) minPredVer(ver int64) int64 {
	for _, q := range t.preds {
		ver = min(ver, q.ver)
	}
	return ver
}

func (t *stageTable) noteWalk(where map[string]any, reverse bool, o *readObs, ver int64) {
	p := predRead{kind: predRows, where: where, ver: ver, n: int64(o.count)}
	if o.countOnly {
		p.kind = predCount
	} else {
		if o.stopped {
			if reverse {
				p.from = o.stop
			} else {
				p.to = o.stop
			}
		}
		p.digest = digestOf(o.keys)
	}
	t.notePred(p)
}

func sameBound(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return table.CompareKeys(a, b) == 0
}

func whereEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// digestOf is store/bolt's order-independent digest of (key, version) pairs.
func digestOf(keys []verKey) uint64 {
	var sum uint64
	for _, k := range keys {
		var h uint64
		switch x := k.key.(type) {
		case string:
			h = fnvString(fnvString(fnvOffset, "s"), x)
		case int64:
			var buf [24]byte
			h = fnvString(fnvString(fnvOffset, "i"), string(strconv.AppendInt(buf[:0], x, 10)))
		default:
			h = fnvString(fnvOffset, fmt.Sprintf("%T:%v", x, x))
		}
		for i := range 8 {
			h = (h ^ uint64(byte(k.ver>>(8*i)))) * fnvPrime
		}
		sum += h
	}
	return sum
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

func (t *stageTable) pendingPreds(name string) (reads []store.PendingRead, all bool, allVer int64) {
	for _, p := range t.preds {
		r := store.PendingRead{Table: name, Version: p.ver, Pred: p.kind, From: p.from, To: p.to, N: p.n}
		if p.kind == predRows {
			r.Digest = strconv.FormatUint(p.digest, 16)
		}
		if len(p.where) > 0 {
			raw, err := json.Marshal(p.where)
			if err != nil || len(raw) > maxWhereJSON {
				return nil, true, t.minPredVer(p.ver)
			}
			r.Where = raw
		}
		reads = append(reads, r)
	}
	return reads, false, 0
}

// predCheck is a pending predicate read, normalised for the apply.
type predCheck struct {
	s        *store.Schema
	kind     string
	where    map[string]any
	m        *table.Matcher
	from, to any
	ver      int64
	n        int64
	digest   uint64
}

func normalizePred(sc *store.Schema, r store.PendingRead) (predCheck, error) {
	pc := predCheck{s: sc, kind: r.Pred, ver: r.Version, n: r.N}
	switch r.Pred {
	case predRows, predCount, predNextKey:
	default:
		return pc, fmt.Errorf("pending read of %s: unknown kind %q", sc.Name, r.Pred)
	}
	if r.Pred == predRows {
		d, err := strconv.ParseUint(r.Digest, 16, 64)
		if err != nil {
			return pc, fmt.Errorf("pending read of %s: digest %q: %w", sc.Name, r.Digest, err)
		}
		pc.digest = d
	}
	if len(r.Where) > 0 {
		dec := json.NewDecoder(bytes.NewReader(r.Where))
		dec.UseNumber()
		var w map[string]any
		if err := dec.Decode(&w); err != nil {
			return pc, fmt.Errorf("pending read of %s: where: %w", sc.Name, err)
		}
		pc.where = store.FromJSON(w).(map[string]any)
	}
	m, err := table.Compile(sc.Schema, pc.where)
	if err != nil {
		return pc, fmt.Errorf("pending read of %s: %w", sc.Name, err)
	}
	pc.m = m
	for _, b := range []struct {
		in  any
		out *any
	}{{r.From, &pc.from}, {r.To, &pc.to}} {
		if b.in == nil {
			continue
		}
		k, err := sc.NormKey(store.FromJSON(b.in))
		if err != nil {
			return pc, fmt.Errorf("pending read of %s: range: %w", sc.Name, err)
		}
		*b.out = k
	}
	return pc, nil
}

// holds reports whether the read finds now, in tx, what it found at the dry run; tableVer is
// the table's version in tx.
func (pc *predCheck) holds(ctx context.Context, db querier, t *sqlTable, tableVer int64) (bool, error) {
	if tableVer == pc.ver {
		return true, nil // nothing was committed to the table since the read
	}
	switch pc.kind {
	case predNextKey:
		best, _, err := t.maxNum(ctx, db, nil)
		return best == pc.n, err
	}
	r := t.pushdown(pc.m, pc.where)
	if pc.from != nil {
		r.from = ordKey(pc.from)
	}
	if pc.to != nil {
		r.to = ordKey(pc.to)
	}
	if pc.kind == predCount && r.exact {
		r.keysOnly = true
	}
	_, recs, err := t.fetch(ctx, db, r)
	if err != nil {
		return false, err
	}
	var keys []verKey
	n := int64(0)
	for _, rc := range recs {
		if !r.keysOnly && !pc.m.Match(rc.row) {
			continue
		}
		n++
		keys = append(keys, verKey{rc.key, rc.ver})
	}
	if n != pc.n {
		return false, nil
	}
	return pc.kind != predRows || digestOf(keys) == pc.digest, nil
}

func (pc *predCheck) describe() string {
	rows := pc.s.Name + " rows"
	if len(pc.where) > 0 {
		rows += " matching " + describeWhere(pc.where)
	}
	switch pc.kind {
	case predNextKey:
		return fmt.Sprintf("the next generated key of %s changed after the run made one", pc.s.Name)
	case predCount:
		return fmt.Sprintf("the number of %s changed after the run counted them", rows)
	}
	switch {
	case pc.from != nil:
		rows = fmt.Sprintf("%s from %s on", rows, table.FormatValue(pc.from))
	case pc.to != nil:
		rows = fmt.Sprintf("%s up to %s", rows, table.FormatValue(pc.to))
	}
	return "the " + rows + " changed after the run read them (a row was inserted, changed or removed)"
}

func describeWhere(where map[string]any) string {
	raw, err := json.Marshal(where)
	if err != nil || len(raw) > 120 {
		return "the run's filter"
	}
	return string(raw)
}

// maxNum returns the highest number among t's committed keys of the generated form (prefix and
// digits; -1: none), and, when skip is given, the highest among those skip does not rule out.
func (t *sqlTable) maxNum(ctx context.Context, db querier, skip func(key any) bool) (committed, best int64, err error) {
	committed, best = -1, -1
	if t.s.KeyPrefix == "" {
		return -1, -1, nil
	}
	sql := "SELECT " + q(t.s.Key) + " FROM " + t.name
	var args []any
	if lo, hi, ok := store.KeyPrefixEnd(t.s.KeyPrefix); ok {
		sql += " WHERE _ord >= $1"
		args = append(args, lo)
		if hi != nil {
			sql += " AND _ord < $2"
			args = append(args, hi)
		}
	} else {
		sql += " WHERE left(" + q(t.s.Key) + ", $1) = $2"
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
