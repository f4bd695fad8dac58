package pg

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Stage is one run's view of the store (store.Stage). Its writes stay in an overlay in memory;
// each read is one SQL statement over the committed rows (its own consistent snapshot, rows
// and table version together), merged with the overlay. It records the version of every row it
// read or replaced and every filter it walked, as store/bolt's does, so that ApplyPending can
// tell what moved. A Stage is for one goroutine at a time; it holds no connection between calls.
type Stage struct {
	st     *Store
	tables map[string]*stageTable

	// startVer is the highest table version when the stage started; a read that sees a table
	// at a higher one makes the stage moved.
	startVer int64
	moved    bool

	meter  store.Meter
	broken error // an error the stage met where it could not return it (Len, StageFor)
	scans  []store.Scan
}

// StageFor starts a run's staged view (store.Store's StageFor).
func (s *Store) StageFor(ctx context.Context, limits store.RunLimits) store.Stage {
	return s.stage(ctx, limits)
}

func (s *Store) stage(ctx context.Context, limits store.RunLimits) *Stage {
	sg := &Stage{st: s, tables: make(map[string]*stageTable, len(s.names)), meter: store.NewMeter(ctx, limits)}
	for _, name := range s.names {
		sg.tables[name] = &stageTable{sg: sg, t: s.tables[name], s: s.schemas[name], writes: map[any]*write{}, reads: map[any]int64{}}
	}
	err := s.pool.QueryRow(ctx, "SELECT coalesce(max(ver), 0) FROM "+ident(s.schema, verTable)).Scan(&sg.startVer)
	if err != nil {
		sg.broken = fmt.Errorf("start a run on the PostgreSQL store: %w", err)
	}
	return sg
}

// Names lists the tables a plan may use, sorted.
func (sg *Stage) Names() []string { return slices.Clone(sg.st.names) }

// Table returns the named table of the view.
func (sg *Stage) Table(name string) (table.Table, bool) {
	t, ok := sg.tables[name]
	if !ok {
		return nil, false
	}
	return t, true
}

// Moved reports whether a read of the run saw a table committed to after the stage started.
func (sg *Stage) Moved() bool { return sg.moved }

// Scans returns the run's reads that walked a table although they filtered on some field.
func (sg *Stage) Scans() []store.Scan { return slices.Clone(sg.scans) }

func (sg *Stage) sawVer(ver int64) {
	if ver > sg.startVer {
		sg.moved = true
	}
}

func (sg *Stage) bg() context.Context {
	if ctx := sg.meter.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

func (sg *Stage) noteScan(name string, where map[string]any, n int64) {
	fields := filterFields(where, nil)
	if len(fields) == 0 {
		return
	}
	slices.Sort(fields)
	fields = slices.Compact(fields)
	for i := range sg.scans {
		if sc := &sg.scans[i]; sc.Table == name && slices.Equal(sc.Fields, fields) {
			sc.Calls++
			sc.Rows += n
			return
		}
	}
	if len(sg.scans) < store.MaxScans {
		sg.scans = append(sg.scans, store.Scan{Table: name, Fields: fields, Calls: 1, Rows: n})
	}
}

func filterFields(where map[string]any, into []string) []string {
	for k, v := range where {
		if !strings.HasPrefix(k, "$") {
			if i := strings.IndexByte(k, '.'); i >= 0 {
				k = k[:i]
			}
			into = append(into, k)
			continue
		}
		if list, ok := v.([]any); ok {
			for _, x := range list {
				if sub, ok := x.(map[string]any); ok {
					into = filterFields(sub, into)
				}
			}
		}
	}
	return into
}

// stageTable is one table of a Stage (table.Table).
type stageTable struct {
	sg     *Stage
	t      *sqlTable
	s      *store.Schema
	writes map[any]*write
	reads  map[any]int64
	preds  store.PredReads // what the run's reads depend on beyond their rows
}

type write struct {
	key    any
	row    table.Row // nil: removed
	base   int64     // the committed version replaced; 0: none
	before table.Row
}

type cand struct {
	key    any
	row    table.Row
	ver    int64
	own    bool
	hidden bool
}

func (t *stageTable) Schema() *table.Schema { return t.s.Schema }

// visit calls fn for each visible row m matches, in key order (reversed when asked), until fn
// returns false; limit (0: none) is how many rows fn will take at most, which SQL may be told
// when the filter is all equalities. It returns the table's version. o is told every committed
// row m matches up to where the walk stopped, also one the run's own write hides.
func (t *stageTable) visit(m *table.Matcher, where map[string]any, reverse bool, limit int, o *store.ReadObs, fn func(c cand) bool) (int64, error) {
	if err := t.sg.meter.Err(); err != nil {
		return 0, err
	}
	r := t.t.pushdown(m, where)
	r.reverse = reverse
	// A count of what SQL answers exactly needs the keys and versions, not the rows.
	r.keysOnly = r.exact && o != nil && o.CountOnly
	var ver int64
	var recs []*rec
	var err error
	switch {
	case r.exact && limit > 0:
		r.limit = limit + len(t.writes) // the run's own writes hide at most that many
		ver, recs, err = t.t.fetch(t.sg.bg(), t.sg.st.pool, r)
	case limit > 0:
		ver, recs, err = t.walkPages(m, r, limit)
	default:
		ver, recs, err = t.t.fetch(t.sg.bg(), t.sg.st.pool, r)
	}
	if err != nil {
		return 0, t.sg.fail(err)
	}
	t.sg.sawVer(ver)
	if !r.indexed {
		t.sg.noteScan(t.s.Name, where, int64(len(recs)))
	}
	all := make([]cand, 0, len(recs))
	for i, rc := range recs {
		if m.Slow() || (i+1)%store.ScanCheckEvery == 0 {
			if err := t.sg.meter.Err(); err != nil {
				return 0, err
			}
		}
		if !r.exact && !m.Match(rc.row) {
			continue
		}
		_, written := t.writes[rc.key]
		all = append(all, cand{key: rc.key, row: rc.row, ver: rc.ver, hidden: written})
	}
	if len(t.writes) > 0 {
		for k, w := range t.writes {
			if w.row != nil && m.Match(w.row) {
				all = append(all, cand{key: k, row: w.row, own: true})
			}
		}
		sortCands(all, reverse)
	}
	for _, c := range all {
		if !c.own {
			o.Add(c.key, c.ver)
		}
		if c.hidden {
			continue
		}
		if !fn(c) {
			o.StopAt(c.key)
			break
		}
	}
	return ver, nil
}

// firstPage and maxPage bound the pages walkPages reads.
const (
	firstPage = 64
	maxPage   = 4096
)

// walkPages reads the committed rows r selects in key order (reversed when asked), a page at a
// time, in one snapshot (a REPEATABLE READ read-only transaction), until the rows read hold
// limit rows the run sees that m matches (its own rows in that range counted) or the table
// ends: a last(where) over a large table reads its last rows, not all of them. The rows read
// are the committed rows of the range walked, as visit needs them.
func (t *stageTable) walkPages(m *table.Matcher, r sqlRead, limit int) (ver int64, recs []*rec, err error) {
	ctx := t.sg.bg()
	err = pgx.BeginTxFunc(ctx, t.sg.st.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		recs = nil
		page := firstPage
		for {
			r.limit = page
			v, got, err := t.t.fetch(ctx, tx, r)
			if err != nil {
				return err
			}
			ver = v
			recs = append(recs, got...)
			if len(got) < page {
				return nil // the table's end
			}
			bound := got[len(got)-1].key
			seen := 0
			for _, rc := range recs {
				if _, written := t.writes[rc.key]; !written && m.Match(rc.row) {
					seen++
				}
			}
			for k, w := range t.writes {
				c := table.CompareKeys(k, bound)
				if r.reverse {
					c = -c
				}
				if c <= 0 && w.row != nil && m.Match(w.row) {
					seen++
				}
			}
			if seen >= limit {
				return nil
			}
			if err := t.sg.meter.Err(); err != nil {
				return err
			}
			r.after = ordKey(bound)
			page = min(page*4, maxPage)
		}
	})
	return ver, recs, err
}

// fail turns a failed read of the database into the run's error.
func (sg *Stage) fail(err error) error {
	if e := sg.meter.Err(); e != nil {
		return e
	}
	return err
}

func sortCands(all []cand, reverse bool) {
	slices.SortStableFunc(all, func(a, b cand) int {
		c := table.CompareKeys(a.key, b.key)
		if reverse {
			c = -c
		}
		if c == 0 {
			switch {
			case a.hidden && !b.hidden:
				return -1
			case b.hidden && !a.hidden:
				return 1
			}
		}
		return c
	})
}

// Len counts the visible rows, recording how many committed rows there were.
func (t *stageTable) Len() int {
	_ = t.sg.call()
	var ver, n int64
	err := t.sg.st.pool.QueryRow(t.sg.bg(), "SELECT v.ver, (SELECT count(*) FROM "+t.t.name+") FROM "+ident(t.t.schema, verTable)+" v WHERE v.name = $1", t.s.Name).Scan(&ver, &n)
	if err != nil {
		if t.sg.broken == nil {
			t.sg.broken = t.sg.fail(fmt.Errorf("count %s: %w", t.s.Name, err))
		}
		return 0
	}
	t.sg.sawVer(ver)
	t.preds.Note(store.PredRead{Kind: store.PredCount, Ver: ver, N: n})
	for _, w := range t.writes {
		switch {
		case w.row != nil && w.before == nil:
			n++
		case w.row == nil && w.before != nil:
			n--
		}
	}
	return int(n)
}

// query returns the visible rows matching q, at most limit (0: all), recording the walk.
func (t *stageTable) query(q table.Query, limit int) ([]cand, error) {
	m, err := table.Compile(t.s.Schema, q.Where)
	if err != nil {
		return nil, err
	}
	o := &store.ReadObs{}
	var out []cand
	if q.Match == nil {
		ver, err := t.visit(m, q.Where, q.Reverse, limit, o, func(c cand) bool {
			out = append(out, c)
			return limit <= 0 || len(out) < limit
		})
		if err != nil {
			return nil, err
		}
		t.preds.NoteWalk(q.Where, q.Reverse, o, ver)
		return out, nil
	}
	var pre []cand
	ver, err := t.visit(m, q.Where, q.Reverse, 0, o, func(c cand) bool { pre = append(pre, c); return true })
	if err != nil {
		return nil, err
	}
	t.preds.NoteWalk(q.Where, q.Reverse, o, ver)
	for _, c := range pre {
		ok, err := q.Match(c.row)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, c)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

// Find returns the visible rows that match q in key order, recording the read.
func (t *stageTable) Find(q table.Query) ([]table.Row, error) {
	if err := t.sg.call(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if room, ok := t.sg.meter.ReadRoom(); q.Match == nil && ok {
		// One row past the run's rows_read limit is enough to fail it.
		if left := room + 1; limit <= 0 || left < limit {
			limit = max(left, 1)
		}
	}
	cs, err := t.query(q, limit)
	if err != nil {
		return nil, err
	}
	rows := make([]table.Row, len(cs))
	for i, c := range cs {
		rows[i] = c.row
	}
	return rows, t.sg.meter.Read(len(rows))
}

func (t *stageTable) noteRead(key any, ver int64) {
	if _, ok := t.reads[key]; !ok {
		t.reads[key] = ver
	}
}

// Count returns how many visible rows match q, recording how many committed rows matched.
func (t *stageTable) Count(q table.Query) (int, error) {
	if q.Where == nil && q.Match == nil {
		n := t.Len()
		if t.sg.broken != nil {
			return 0, t.sg.broken
		}
		return n, t.sg.meter.Err()
	}
	if err := t.sg.call(); err != nil {
		return 0, err
	}
	if q.Match != nil {
		cs, err := t.query(q, 0)
		return len(cs), err
	}
	m, err := table.Compile(t.s.Schema, q.Where)
	if err != nil {
		return 0, err
	}
	n := 0
	o := &store.ReadObs{CountOnly: true}
	ver, err := t.visit(m, q.Where, false, 0, o, func(cand) bool { n++; return true })
	if err != nil {
		return 0, err
	}
	t.preds.NoteWalk(q.Where, false, o, ver)
	return n, nil
}

// committedRow reads the committed row with key k (nil: none): one indexed SELECT.
func (t *stageTable) committedRow(k any) (*rec, error) {
	ver, recs, err := t.t.fetch(t.sg.bg(), t.sg.st.pool, sqlRead{eq: map[string]any{t.s.Key: k}, indexed: true, exact: true})
	if err != nil {
		return nil, t.sg.fail(err)
	}
	t.sg.sawVer(ver)
	if len(recs) == 0 {
		return nil, nil
	}
	return recs[0], nil
}

// Get returns the visible row with the given key, recording the read (also of a missing key).
func (t *stageTable) Get(key any) (table.Row, bool, error) {
	if err := t.sg.call(); err != nil {
		return nil, false, err
	}
	k, err := t.s.NormKey(key)
	if err != nil {
		return nil, false, err
	}
	if w := t.writes[k]; w != nil {
		if w.row == nil {
			return nil, false, nil
		}
		return w.row, true, t.sg.meter.Read(1)
	}
	r, err := t.committedRow(k)
	if err != nil {
		return nil, false, err
	}
	if r == nil {
		t.noteRead(k, 0)
		return nil, false, nil
	}
	t.noteRead(k, r.ver)
	return r.row, true, t.sg.meter.Read(1)
}

// Insert validates row, generates a missing key when the schema has a key prefix, and stages it.
func (t *stageTable) Insert(row table.Row) (any, error) {
	if err := t.sg.call(); err != nil {
		return nil, err
	}
	r := maps.Clone(row)
	if r == nil {
		r = table.Row{}
	}
	if r[t.s.Key] == nil && t.s.KeyPrefix != "" {
		n, err := t.nextNum()
		if err != nil {
			return nil, err
		}
		r[t.s.Key] = t.s.FormatKey(n)
	}
	v, err := t.s.ValidateRow(r)
	if err != nil {
		return nil, err
	}
	k := v[t.s.Key]
	w := t.writes[k]
	var cur *rec
	if w == nil {
		if cur, err = t.committedRow(k); err != nil {
			return nil, err
		}
	}
	if (w != nil && w.row != nil) || (w == nil && cur != nil) {
		return nil, &table.FieldError{Table: t.s.Name, Key: k, Value: k,
			Rule: fmt.Sprintf("duplicate key: a row with %s %s already exists", t.s.Key, table.FormatValue(k))}
	}
	if w == nil {
		if err := t.sg.room(t, 1); err != nil {
			return nil, err
		}
	}
	if err := t.sg.meter.Charge(store.RowSize(v) - t.ownSize(k)); err != nil {
		return nil, err
	}
	t.stage(k, v, nil)
	return k, nil
}

// nextNum is the highest number among the visible keys of the generated form, plus one; the
// run then depends on the committed highest (a next_key predicate read).
func (t *stageTable) nextNum() (int64, error) {
	// The table's version first: a commit between it and the keys makes the read look older
	// than it is, which at worst makes the apply check it again.
	var ver int64
	if err := t.sg.st.pool.QueryRow(t.sg.bg(), "SELECT ver FROM "+ident(t.t.schema, verTable)+" WHERE name = $1", t.s.Name).Scan(&ver); err != nil {
		return 0, t.sg.fail(err)
	}
	t.sg.sawVer(ver)
	committed, best, err := t.t.maxNum(t.sg.bg(), t.sg.st.pool, func(k any) bool {
		w := t.writes[k]
		return w != nil && w.row == nil
	})
	if err != nil {
		return 0, t.sg.fail(err)
	}
	t.preds.Note(store.PredRead{Kind: store.PredNextKey, Ver: ver, N: committed})
	for k, w := range t.writes {
		if n, ok := t.s.KeyNum(k); ok && w.row != nil && n > best {
			best = n
		}
	}
	if best < 0 {
		return 1, nil
	}
	return best + 1, nil
}

func (t *stageTable) ownSize(k any) int64 {
	if w := t.writes[k]; w != nil && w.row != nil {
		return store.RowSize(w.row)
	}
	return 0
}

// stage records row (nil: removal) as the run's state of key; cur is the committed row it
// replaces when the run has not written the key yet (nil: none).
func (t *stageTable) stage(k any, row table.Row, cur *rec) {
	w := t.writes[k]
	if w == nil {
		w = &write{key: k}
		if cur != nil {
			w.base, w.before = cur.ver, cur.row
		}
		t.writes[k] = w
	}
	w.row = row
}

// Update merges fields into every visible row that matches q (at most q.Limit).
func (t *stageTable) Update(fields table.Row, q table.Query) (int, error) {
	for name, v := range fields {
		f := t.s.FieldsByName[name]
		if f == nil {
			return 0, t.s.UnknownField(nil, name, v)
		}
		if _, err := t.s.CheckField(f, nil, v); err != nil {
			return 0, err
		}
	}
	if err := t.sg.call(); err != nil {
		return 0, err
	}
	cs, err := t.query(q, q.Limit)
	if err != nil {
		return 0, err
	}
	if err := t.sg.room(t, t.fresh(cs)); err != nil {
		return 0, err
	}
	type change struct {
		c   cand
		row table.Row
	}
	changes := make([]change, 0, len(cs))
	for _, c := range cs {
		merged := maps.Clone(c.row)
		maps.Copy(merged, fields)
		v, err := t.s.ValidateRow(merged)
		if err != nil {
			return 0, err
		}
		for name := range fields {
			f := t.s.FieldsByName[name]
			if (name == t.s.Key || f.ReadOnly) && !store.EqualValue(v[name], c.row[name]) {
				rule := "is read-only and cannot be changed by update"
				if name == t.s.Key {
					rule = "is the key and cannot be changed by update (insert a new row and remove the old one)"
				}
				return 0, &table.FieldError{Table: t.s.Name, Key: c.key, Field: name, Value: fields[name], Rule: rule}
			}
		}
		changes = append(changes, change{c, v})
	}
	var grow int64
	for _, ch := range changes {
		if !store.EqualRows(ch.row, ch.c.row) {
			grow += store.RowSize(ch.row) - t.ownSize(ch.c.key)
		}
	}
	if err := t.sg.meter.Charge(grow); err != nil {
		return 0, err
	}
	for _, ch := range changes {
		if store.EqualRows(ch.row, ch.c.row) {
			if !ch.c.own {
				t.noteRead(ch.c.key, ch.c.ver)
			}
			continue
		}
		t.stage(ch.c.key, ch.row, ch.c.committed())
	}
	return len(changes), nil
}

// committed is the committed row a candidate is (nil for the run's own row).
func (c cand) committed() *rec {
	if c.own {
		return nil
	}
	return &rec{key: c.key, row: c.row, ver: c.ver}
}

// Remove stages the removal of every visible row that matches q (at most q.Limit).
func (t *stageTable) Remove(q table.Query) (int, error) {
	if err := t.sg.call(); err != nil {
		return 0, err
	}
	cs, err := t.query(q, q.Limit)
	if err != nil {
		return 0, err
	}
	if err := t.sg.room(t, t.fresh(cs)); err != nil {
		return 0, err
	}
	for _, c := range cs {
		_ = t.sg.meter.Charge(-t.ownSize(c.key))
		t.stage(c.key, nil, c.committed())
	}
	return len(cs), nil
}

// ChangeSet returns what the run would change, per table.
func (sg *Stage) ChangeSet() table.ChangeSet {
	cs := table.ChangeSet{}
	for name, t := range sg.tables {
		if len(t.writes) == 0 {
			continue
		}
		tc := &table.TableChanges{Key: t.s.Key, Inserted: []table.Row{}, Updated: []table.Update{}, Deleted: []table.Row{}}
		for _, w := range sortedWrites(t.writes) {
			switch {
			case w.before == nil && w.row != nil:
				tc.Inserted = append(tc.Inserted, w.row)
			case w.before != nil && w.row == nil:
				tc.Deleted = append(tc.Deleted, w.before)
			case w.before != nil && w.row != nil:
				if f := store.ChangedFields(w.before, w.row); len(f) > 0 {
					tc.Updated = append(tc.Updated, table.NewUpdate(w.key, w.before, w.row, f))
				}
			}
		}
		if len(tc.Inserted)+len(tc.Updated)+len(tc.Deleted) > 0 {
			cs[name] = tc
		}
	}
	return cs
}

func sortedWrites(ws map[any]*write) []*write {
	out := make([]*write, 0, len(ws))
	for _, w := range ws {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *write) int { return table.CompareKeys(a.key, b.key) })
	return out
}

// LastRow returns the committed row of tbl with the highest key. It records no read, but a
// table committed to since the stage started makes the stage moved.
func (sg *Stage) LastRow(tbl string) (table.Row, bool, error) {
	t, ok := sg.st.tables[tbl]
	if !ok {
		return nil, false, fmt.Errorf("no table %s", tbl)
	}
	ver, recs, err := t.fetch(sg.bg(), sg.st.pool, sqlRead{reverse: true, limit: 1, exact: true})
	if err != nil {
		return nil, false, sg.fail(err)
	}
	sg.sawVer(ver)
	if len(recs) == 0 {
		return nil, false, nil
	}
	return recs[0].row, true, nil
}
