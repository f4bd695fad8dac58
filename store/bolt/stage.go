package bolt

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
)

// Stage is one run's view of the store: it implements table.View. Writes go into an overlay
// over the committed tables; reads see the overlay. The stage records, for every row it changes,
// the version it replaced, and for every row Find and Get return, the version it saw, so Apply
// can check that nothing moved. A Stage is for one goroutine at a time; many stages can work
// over one Store concurrently.
type Stage struct {
	st     *Store
	tables map[string]*stageTable

	// startSeq is the commit the stage started at; moved records that a read saw a table
	// committed to after it (see Moved).
	startSeq int64
	moved    bool

	meter store.Meter // the run's context (nil: scans are not stopped) and limits (see StageFor)
	// broken is the first error reading the committed rows from the file (a *DamagedError) met
	// where it could not be returned (Len): the run's next call fails with it.
	broken error
	scans  []store.Scan // reads no index answered (see Scans)
}

// Scans returns the run's reads that walked a table although they filtered on some field, in
// the order they first happened.
func (sg *Stage) Scans() []store.Scan { return slices.Clone(sg.scans) }

// noteScan records a walk of table's rows by a read filtered on where, which looked at n rows.
func (sg *Stage) noteScan(name string, where map[string]any, n int64) {
	fields := filterFields(where, nil)
	if len(fields) == 0 {
		return // a read of every row: no index would answer it
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

// filterFields appends the field names a where-filter names, inside $and and $or too (a dotted
// path counts as its field).
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

// Stage starts a run's staged view over the committed tables.
func (s *Store) Stage() *Stage {
	s.mu.RLock()
	seq := s.seq
	s.mu.RUnlock()
	sg := &Stage{st: s, tables: make(map[string]*stageTable, len(s.names)), startSeq: seq}
	ts := make([]stageTable, len(s.names)) // one allocation for every table
	for i, name := range s.names {
		// writes and reads are made with the table's first write and read by key.
		ts[i] = stageTable{st: s, sg: sg, s: s.schemas[name]}
		sg.tables[name] = &ts[i]
	}
	return sg
}

// Names lists the tables a plan may use, sorted. System collections are never listed.
func (sg *Stage) Names() []string { return slices.Clone(sg.st.names) }

// Table returns the named table of the view.
func (sg *Stage) Table(name string) (table.Table, bool) {
	t, ok := sg.tables[name]
	if !ok {
		return nil, false
	}
	return t, true
}

// stageTable is one table of a Stage; it implements table.Table.
type stageTable struct {
	st     *Store
	sg     *Stage
	s      *store.Schema
	writes map[any]*write // the overlay, by key
	// newKeys holds, in key order, the keys written by the run that were absent from the
	// committed table when first written; a scan merges them with the committed order.
	newKeys []any
	reads   map[any]int64   // key -> version seen (0: absent), first read only
	preds   store.PredReads // what the run's reads depend on beyond their rows
	obs     store.ReadObs   // the walk being recorded (see readObs)
}

// readObs starts recording a walk. The record is the table's, reused by its next walk (its
// keys' room too): a walk is noted (PredReads.NoteWalk) before anything can call back into the
// run, which could walk again.
func (t *stageTable) readObs(countOnly bool) *store.ReadObs {
	t.obs = store.ReadObs{CountOnly: countOnly, Keys: t.obs.Keys[:0]}
	return &t.obs
}

// write is the run's state of one row.
type write struct {
	key    any
	row    table.Row // nil: removed
	base   int64     // the committed version it replaced; 0: the row did not exist
	before table.Row // the committed row it replaced; nil when base is 0
}

// cand is a visible row found by a scan.
type cand struct {
	key    any
	row    table.Row
	ver    int64 // committed version; meaningless when own
	own    bool  // the row comes from the run's overlay
	hidden bool  // a committed row the run's own write hides: seen by the read, not returned
}

// mem returns the table's committed state; the caller holds the Store's read lock. A table
// committed to since the stage started makes the stage Moved.
func (t *stageTable) mem() *committedTable {
	mt := t.st.tables[t.s.Name]
	if mt.ver > t.sg.startSeq {
		t.sg.moved = true
	}
	return mt
}

// Moved reports whether a read of the run saw a table that another run committed to after this
// stage started: the run then saw the data as of more than one moment. Its result is safe (an
// apply checks every read again) but may be wrong for no fault of the plan, so the engine runs
// such a plan again.
func (sg *Stage) Moved() bool { return sg.moved }

func (t *stageTable) Schema() *table.Schema { return t.s.Schema }

// Len counts the visible rows, recording how many committed rows there were.
func (t *stageTable) Len() int {
	t.st.mu.RLock()
	defer t.st.mu.RUnlock()
	mt := t.mem()
	n := int(mt.count())
	t.preds.Note(store.PredRead{Kind: store.PredCount, Ver: mt.ver, N: int64(n)})
	_ = t.sg.call() // counted; a crossed limit fails the run's next call
	for k, w := range t.writes {
		committed, err := t.committedLocked(mt, k)
		if err != nil && t.sg.broken == nil {
			t.sg.broken = err // Len returns no error: the run's next call fails with it
		}
		switch {
		case w.row != nil && !committed:
			n++
		case w.row == nil && committed:
			n--
		}
	}
	return n
}

func (t *stageTable) compile(where map[string]any) (*table.Matcher, error) {
	return table.Compile(t.s.Schema, where)
}

// visit calls fn for each visible row that m matches, in key order (reversed when asked), until
// fn returns false. It holds the committed state's read lock, so fn must not call back into the
// store. Top-level equalities and $ieq on the key or a declared index are answered from an index
// and only those candidates are checked.
// where is the filter m was compiled from; its numeric conditions may skip rows early. whole says
// that fn takes every row (no limit): a large table is then read into memory before the walk. o
// (may be nil) is told every committed row m matches in the walked range, also one the run's own
// write hides, and where the walk stopped. visit returns the table's version at the time of the
// visit.
func (t *stageTable) visit(m *table.Matcher, where map[string]any, reverse, whole bool, o *store.ReadObs, fn func(c cand) bool) (tableVer int64, err error) {
	t.st.mu.RLock()
	defer t.st.mu.RUnlock()
	mt := t.mem()
	var rerr error
	cands, ok, err := mt.bestIndex(m, reverse, &rerr)
	if err != nil {
		return mt.ver, err
	}
	if ok {
		err = t.visitCandidates(cands, m, reverse, o, fn)
		if rerr != nil {
			err = rerr
		}
	} else {
		var examined int64
		examined, err = t.visitAll(mt, m, where, reverse, whole, o, fn)
		t.sg.noteScan(t.s.Name, where, examined)
	}
	return mt.ver, err
}

// visitCandidates visits the committed candidates (in key order, reversed when reverse) that
// the run has not written, merged with the run's own rows; every candidate is checked with m.
// Every store.ScanCheckEvery candidates (every one for a slow filter) it looks at the run's context.
func (t *stageTable) visitCandidates(cands candidates, m *table.Matcher, reverse bool, o *store.ReadObs, fn func(c cand) bool) error {
	every := store.ScanCheckEvery
	if m.Slow() {
		every = 1 // a $regex over long text can take milliseconds a row
	}
	if len(t.writes) == 0 && cands.lazy == nil { // in memory: no iterator to allocate
		for i := range cands.recs {
			r := cands.recs[i]
			if reverse {
				r = cands.recs[len(cands.recs)-1-i]
			}
			if (i+1)%every == 0 {
				if err := t.sg.meter.Err(); err != nil {
					return err
				}
			}
			if m.Match(r.row) {
				o.Add(r.key, r.ver)
				if !fn(cand{key: r.key, row: r.row, ver: r.ver}) {
					o.StopAt(r.key)
					return nil
				}
			}
		}
		return nil
	}
	n := 0
	if len(t.writes) == 0 {
		for r := range cands.all(reverse) {
			if n++; n%every == 0 {
				if err := t.sg.meter.Err(); err != nil {
					return err
				}
			}
			if !m.Match(r.row) {
				continue
			}
			o.Add(r.key, r.ver)
			if !fn(cand{key: r.key, row: r.row, ver: r.ver}) {
				o.StopAt(r.key)
				return nil
			}
		}
		return nil
	}
	var all []cand
	for k, w := range t.writes {
		if w.row != nil && m.Match(w.row) {
			all = append(all, cand{key: k, row: w.row, own: true})
		}
	}
	for r := range cands.all(reverse) {
		if n++; n%every == 0 {
			if err := t.sg.meter.Err(); err != nil {
				return err
			}
		}
		if m.Match(r.row) {
			_, written := t.writes[r.key]
			all = append(all, cand{key: r.key, row: r.row, ver: r.ver, hidden: written})
		}
	}
	sortCands(all, reverse)
	for _, c := range all {
		if !c.own {
			o.Add(c.key, c.ver)
		}
		if c.hidden {
			continue
		}
		if !fn(c) {
			o.StopAt(c.key)
			return nil
		}
	}
	return nil
}

// visitAll walks the committed rows merged with the run's new keys, and returns how many
// committed rows it walked. Committed rows that the columns' prefilter rules out are skipped
// without looking at their maps (resident tables only).
// Every store.ScanCheckEvery rows it looks at the run's context and stops with its error: a scan runs
// in starplan, not in the plan, and must end with the run.
func (t *stageTable) visitAll(mt *committedTable, m *table.Matcher, where map[string]any, reverse, whole bool, o *store.ReadObs, fn func(c cand) bool) (examined int64, err error) {
	every := int64(store.ScanCheckEvery)
	if m.Slow() {
		every = 1 // a $regex over long text can take milliseconds a row
	}
	// A walk that reads the table whole may read it into memory first, unless the run may not
	// read that many rows (a Find stops one row past rows_read).
	res, err := mt.resident(t.sg.meter.Context(), whole && t.sg.meter.MayRead(int(mt.count())))
	if err != nil {
		return 0, err
	}
	if res != nil && len(t.writes) == 0 { // the common case: a straight walk of rows in memory
		return t.visitResident(res, m, where, reverse, every, o, fn)
	}
	var rerr error
	rows := mt.walk(t.sg.meter.Context(), nil, nil, reverse, &rerr)
	pf := mt.prefilterFor(where)
	nk, j := t.newKeys, 0
	newKey := func(x int) any {
		if reverse {
			return nk[len(nk)-1-x]
		}
		return nk[x]
	}
	var prev any // the last committed key walked
	// own visits the run's new keys that come before limit in the walk (every one left when
	// limit is nil), and reports whether to go on. A key committed since the run wrote it was
	// visited with the committed rows.
	own := func(limit any) bool {
		for ; j < len(nk); j++ {
			key := newKey(j)
			if limit != nil {
				c := table.CompareKeys(key, limit)
				if reverse {
					c = -c
				}
				if c >= 0 {
					return true
				}
			}
			if prev != nil && table.CompareKeys(key, prev) == 0 {
				continue
			}
			row := t.writes[key].row
			if row == nil || !m.Match(row) {
				continue
			}
			if !fn(cand{key: key, row: row, own: true}) {
				o.StopAt(key)
				return false
			}
		}
		return true
	}
	overlay := len(t.writes) > 0
	for pos, r := range rows {
		examined++
		if examined%every == 0 {
			if err := t.sg.meter.Err(); err != nil {
				return examined, err
			}
		}
		if overlay && !own(r.key) {
			return examined, nil
		}
		prev = r.key
		pass, sure := true, false
		if pf != nil && pos >= 0 {
			pass, sure = pf.check(pos)
		}
		matched := pass && ((sure && pf.complete) || m.Match(r.row))
		if matched {
			o.Add(r.key, r.ver) // also when the run's own write hides it
		}
		c := cand{key: r.key, row: r.row, ver: r.ver}
		if w, written := t.writes[r.key]; overlay && written {
			if w.row == nil || !m.Match(w.row) {
				continue
			}
			c = cand{key: r.key, row: w.row, own: true}
		} else if !matched {
			continue
		}
		if !fn(c) {
			o.StopAt(c.key)
			return examined, nil
		}
	}
	if rerr != nil {
		return examined, rerr
	}
	if overlay {
		own(nil)
	}
	return examined, nil
}

// visitResident is visitAll over rows in memory for a run that has written none of the table's.
func (t *stageTable) visitResident(res *resident, m *table.Matcher, where map[string]any, reverse bool, every int64, o *store.ReadObs, fn func(c cand) bool) (examined int64, err error) {
	pf := res.prefilterFor(where)
	n := len(res.order)
	for i := range n {
		pos := i
		if reverse {
			pos = n - 1 - i
		}
		r := res.order[pos]
		examined = int64(i) + 1
		if examined%every == 0 {
			if err := t.sg.meter.Err(); err != nil {
				return examined, err
			}
		}
		if pf != nil {
			pass, sure := pf.check(pos)
			if !pass {
				continue
			}
			if !(sure && pf.complete) && !m.Match(r.row) {
				continue
			}
		} else if !m.Match(r.row) {
			continue
		}
		o.Add(r.key, r.ver)
		if !fn(cand{key: r.key, row: r.row, ver: r.ver}) {
			o.StopAt(r.key)
			return examined, nil
		}
	}
	return examined, nil
}

// query returns the visible rows matching q, at most limit (0: all), recording the walk as a
// predicate read. The Go predicate q.Match, which may call back into the run, is called after
// the read lock is released; the read is of every candidate the dict filter let through.
func (t *stageTable) query(q table.Query, limit int) ([]cand, error) {
	m, err := t.compile(q.Where)
	if err != nil {
		return nil, err
	}
	o := t.readObs(false)
	var out []cand
	if q.Match == nil {
		ver, err := t.visit(m, q.Where, q.Reverse, limit <= 0, o, func(c cand) bool {
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
	ver, err := t.visit(m, q.Where, q.Reverse, true, o, func(c cand) bool { pre = append(pre, c); return true })
	if err != nil {
		return nil, err
	}
	t.preds.NoteWalk(q.Where, q.Reverse, o, ver)
	out = pre[:0]
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

// Find returns the visible rows that match q in key order, recording the read (see store.PredReads).
func (t *stageTable) Find(q table.Query) ([]table.Row, error) {
	if err := t.sg.call(); err != nil {
		return nil, err
	}
	if q.Match != nil {
		cs, err := t.query(q, q.Limit)
		if err != nil {
			return nil, err
		}
		rows := make([]table.Row, len(cs))
		for i, c := range cs {
			rows[i] = c.row
		}
		return rows, t.sg.meter.Read(len(rows))
	}
	// Without a Go predicate, stream: no candidate list.
	m, err := t.compile(q.Where)
	if err != nil {
		return nil, err
	}
	var rows []table.Row
	o := t.readObs(false)
	ver, err := t.visit(m, q.Where, q.Reverse, q.Limit <= 0, o, func(c cand) bool {
		if len(rows) == cap(rows) {
			// Doubled: append grows a large slice by a quarter, so a read of many rows would
			// allocate five times its result on the way, which a report over a large table pays
			// in collections.
			rows = slices.Grow(rows, max(len(rows), 16))
		}
		rows = append(rows, c.row)
		// One row past the run's rows_read limit is enough to fail it: a walk of a table read
		// from the file must not copy a million rows first.
		return (q.Limit <= 0 || len(rows) < q.Limit) && t.sg.meter.MayRead(len(rows))
	})
	if err != nil {
		return nil, err
	}
	t.preds.NoteWalk(q.Where, q.Reverse, o, ver)
	return rows, t.sg.meter.Read(len(rows))
}

func (t *stageTable) noteRead(key any, ver int64) {
	if _, ok := t.reads[key]; !ok {
		if t.reads == nil {
			t.reads = map[any]int64{}
		}
		t.reads[key] = ver
	}
}

// Count returns how many visible rows match q, recording how many committed rows matched.
func (t *stageTable) Count(q table.Query) (int, error) {
	if q.Where == nil && q.Match == nil {
		return t.Len(), t.sg.meter.Err()
	}
	if err := t.sg.call(); err != nil {
		return 0, err
	}
	if q.Match != nil {
		cs, err := t.query(q, 0)
		return len(cs), err
	}
	m, err := t.compile(q.Where)
	if err != nil {
		return 0, err
	}
	n := 0
	o := t.readObs(true)
	ver, err := t.visit(m, q.Where, false, true, o, func(cand) bool { n++; return true })
	if err != nil {
		return 0, err
	}
	t.preds.NoteWalk(q.Where, false, o, ver)
	return n, nil
}

// Get returns the visible row with the given key, recording the read (also of a missing key).
// A key of the wrong kind (an int for a string key field) is a *table.QueryError.
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
	t.st.mu.RLock()
	r, err := t.mem().get(k)
	t.st.mu.RUnlock()
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

// visible reports whether the run sees a row with key k.
func (t *stageTable) visible(k any) (bool, error) {
	if w := t.writes[k]; w != nil {
		return w.row != nil, nil
	}
	return t.committed(k)
}

// committed reports whether the committed table holds key k.
func (t *stageTable) committed(k any) (bool, error) {
	t.st.mu.RLock()
	defer t.st.mu.RUnlock()
	return t.committedLocked(t.mem(), k)
}

// committedLocked is committed for a caller that holds the Store's read lock.
func (t *stageTable) committedLocked(mt *committedTable, k any) (bool, error) {
	ver, err := mt.version(k)
	return ver != 0, err
}

// Insert validates row, generates a missing key when the schema has a key prefix, and stages the
// row. The caller's map is copied, never kept.
func (t *stageTable) Insert(row table.Row) (any, error) {
	if err := t.sg.call(); err != nil {
		return nil, err
	}
	r := row // ValidateRow copies it into a row of the schema's field names
	if r[t.s.Key] == nil && t.s.KeyPrefix != "" {
		n, err := t.nextNum()
		if err != nil {
			return nil, err
		}
		r = maps.Clone(row)
		if r == nil {
			r = table.Row{}
		}
		r[t.s.Key] = t.s.FormatKey(n)
	}
	v, err := t.s.ValidateRow(r)
	if err != nil {
		return nil, err
	}
	k := v[t.s.Key]
	if seen, err := t.visible(k); err != nil {
		return nil, err
	} else if seen {
		return nil, &table.FieldError{Table: t.s.Name, Key: k, Value: k,
			Rule: fmt.Sprintf("duplicate key: a row with %s %s already exists", t.s.Key, table.FormatValue(k))}
	}
	if _, written := t.writes[k]; !written {
		if err := t.sg.room(t, 1); err != nil {
			return nil, err
		}
	}
	if err := t.sg.meter.Charge(store.RowSize(v) - t.ownSize(k)); err != nil {
		return nil, err
	}
	if err := t.stage(k, v); err != nil {
		return nil, err
	}
	return k, nil
}

// nextNum is the highest number among the visible keys of the form KeyPrefix+digits, plus one.
// The run then depends on that number: a commit that inserts a higher key is a conflict.
func (t *stageTable) nextNum() (int64, error) {
	t.st.mu.RLock()
	mt := t.mem()
	best := mt.maxNum
	t.preds.Note(store.PredRead{Kind: store.PredNextKey, Ver: mt.ver, N: mt.maxNum})
	var err error
	if best >= 0 {
		// The committed maximum may be a row the run removed: then look at what is left, from
		// the highest key down (among keys of the form, the last in key order has the highest
		// number).
		for k, w := range t.writes {
			if n, ok := t.s.KeyNum(k); ok && n == best && w.row == nil {
				best = -1
				for _, r := range mt.walk(t.sg.meter.Context(), nil, nil, true, &err) {
					if w := t.writes[r.key]; w != nil && w.row == nil {
						continue
					}
					if n, ok := t.s.KeyNum(r.key); ok {
						best = n
						break
					}
				}
				break
			}
		}
	}
	t.st.mu.RUnlock()
	if err != nil {
		return 0, err
	}
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

// ownSize is the charged size of the run's own row for key k (0 when it has none).
func (t *stageTable) ownSize(k any) int64 {
	if w := t.writes[k]; w != nil && w.row != nil {
		return store.RowSize(w.row)
	}
	return 0
}

// stage records row (nil: removal) as the run's state of key.
func (t *stageTable) stage(k any, row table.Row) error {
	w := t.writes[k]
	if w == nil {
		w = &write{key: k}
		t.st.mu.RLock()
		r, err := t.mem().get(k)
		t.st.mu.RUnlock()
		if err != nil {
			return err
		}
		if r != nil {
			w.base, w.before = r.ver, r.row
		}
		if w.before == nil {
			i, _ := slices.BinarySearchFunc(t.newKeys, k, table.CompareKeys)
			t.newKeys = slices.Insert(t.newKeys, i, k)
		}
		if t.writes == nil {
			t.writes = map[any]*write{}
		}
		t.writes[k] = w
	}
	w.row = row
	return nil
}

// Update merges fields into every visible row that matches q (at most q.Limit), validating each
// result, and returns how many rows matched (a row already holding the values counts, and is
// recorded as read). Changing the key or a read-only field is an error. Either every matching
// row is staged or, on any error, none is.
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
		c    cand
		row  table.Row
		same bool // row stores what c.row does
	}
	changes := make([]change, 0, len(cs))
	for _, c := range cs {
		merged := make(table.Row, len(c.row)+len(fields))
		maps.Copy(merged, c.row)
		maps.Copy(merged, fields)
		v, err := t.s.ValidateOwned(merged) // merged is the run's own: validated in place
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
		changes = append(changes, change{c, v, store.EqualRows(v, c.row)})
	}
	var grow int64
	for _, ch := range changes {
		if !ch.same {
			grow += store.RowSize(ch.row) - t.ownSize(ch.c.key)
		}
	}
	if err := t.sg.meter.Charge(grow); err != nil {
		return 0, err
	}
	for _, ch := range changes {
		if ch.same {
			if !ch.c.own {
				t.noteRead(ch.c.key, ch.c.ver)
			}
			continue
		}
		if err := t.stage(ch.c.key, ch.row); err != nil {
			return 0, err
		}
	}
	return len(changes), nil
}

// Remove stages the removal of every visible row that matches q (at most q.Limit) and returns
// how many were removed.
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
		_ = t.sg.meter.Charge(-t.ownSize(c.key)) // a removal frees what the run had staged
		if err := t.stage(c.key, nil); err != nil {
			return 0, err
		}
	}
	return len(cs), nil
}

// ChangeSet returns what the run would change, per table. Its cost grows with the rows the run
// wrote, never with the size of a table.
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

// Apply writes the run's changes atomically after checking that nothing it read or changed has
// moved (see Store.ApplyPending). The stage should not be used afterwards.
func (sg *Stage) Apply(ctx context.Context, extra ...store.SysDoc) error {
	return sg.st.ApplyPending(ctx, sg.Pending(), nil, extra...)
}

// LastRow returns the committed row of tbl with the highest key, for checks (it has the method
// set of contracts.Committed). It records no read, but a table committed to since the stage
// started makes the stage Moved, as a read does.
func (sg *Stage) LastRow(tbl string) (table.Row, bool, error) {
	t, ok := sg.tables[tbl]
	if !ok {
		return nil, false, fmt.Errorf("no table %s", tbl)
	}
	sg.st.mu.RLock()
	defer sg.st.mu.RUnlock()
	return lastRow(t.mem())
}

// lastRow returns the committed row of mt with the highest key. The caller holds the Store's
// lock.
func lastRow(mt *committedTable) (table.Row, bool, error) {
	r, err := mt.last()
	if err != nil || r == nil {
		return nil, false, err
	}
	return r.row, true, nil
}
