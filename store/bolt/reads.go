package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
)

// Predicate reads.
//
// A run depends on more than the rows it was handed: "the last row of the ledger", "no item is
// called Aviator", "there are 6 transactions" are facts about rows that were absent, and a commit
// that inserts one makes them false without touching any row the run saw. So every read that
// walks a filter (Find, Count, Len, the rows an Update or Remove matched, and the next generated
// key) is recorded as a predicate read: the where-filter, the key range the walk covered (a walk
// that stopped at its limit covered the keys up to the row it stopped at), and what it found among
// the committed rows: their number and a digest of their keys and versions. At apply, a read whose
// table has not been committed to since is valid at once (O(1)); otherwise the filter is
// evaluated again over the committed rows of that range, through the same hash indexes and
// columns, and any difference in what matches is a conflict. The cost is O(the rows the plan's
// reads walked), never more, and nothing when the table did not move.
//
// A read that matched more than bigRead committed rows, or whose filter is too large to keep,
// is recorded as a read of the whole table (any commit to the table is then a conflict), as is
// every read past maxPredReads per table: the record of a run stays bounded.

// maxPredReads is the most predicate reads one run records per table; further reads of the
// table make the run depend on the whole table.
const maxPredReads = 64

// maxWhereJSON is the largest where-filter, in bytes of JSON, a predicate read keeps.
const maxWhereJSON = 8 << 10

// The kinds of predicate read (PendingRead.Pred).
const (
	predRows    = "rows"     // the committed rows matching Where in [From, To]: digest and count
	predCount   = "count"    // how many committed rows match Where
	predNextKey = "next_key" // the highest number among generated-form keys (N; -1: none)
)

// readObs collects, during one walk, the committed rows the filter matched in the walked range.
// A nil *readObs collects nothing.
type readObs struct {
	countOnly bool
	count     int
	keys      []verKey // up to bigRead+1 (rows mode)
	// stop is the key of the row the walk stopped at because the caller had enough (nil: the
	// walk reached the end); rows past it were not looked at.
	stop    any
	stopped bool
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

// stopAt records that the walk stopped after the row with key k.
func (o *readObs) stopAt(k any) {
	if o != nil {
		o.stop, o.stopped = k, true
	}
}

// predRead is one recorded predicate read.
type predRead struct {
	kind     string
	where    map[string]any
	from, to any // inclusive key bounds; nil: open
	ver      int64
	n        int64 // rows or count: the number of committed rows matched; next_key: the number
	digest   uint64
}

// notePred records a predicate read of t made at table version ver.
func (t *stageTable) notePred(p predRead) {
	if t.readAll {
		return // every commit to the table already conflicts
	}
	if len(t.preds) >= maxPredReads || (p.kind == predRows && p.n > bigRead) {
		t.readAll, t.allVer = true, t.minPredVer(p.ver)
		t.preds = nil
		return
	}
	for _, q := range t.preds {
		if q.kind == p.kind && q.ver == p.ver && q.n == p.n && q.digest == p.digest &&
			sameBound(q.from, p.from) && sameBound(q.to, p.to) && whereEqual(q.where, p.where) {
			return // a plan asking the same question again (get_current_balance in a loop)
		}
	}
	t.preds = append(t.preds, p)
}

// minPredVer is the oldest version any recorded read of t saw, with ver.
func (t *stageTable) minPredVer(ver int64) int64 {
	for _, q := range t.preds {
		ver = min(ver, q.ver)
	}
	return ver
}

// noteWalk records a walk of where as a predicate read: the rows it matched (rows mode) or
// their number (count mode).
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

// digestOf is an order-independent digest of (key, version) pairs: the sum of their FNV-1a
// hashes. It is stable across processes, so a run recorded by one can be applied by another.
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

// pendingPreds renders t's predicate reads for Pending. A filter too large to keep turns the
// read into a read of the whole table at the oldest version seen.
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

// predCheck is a normalised predicate read, ready to be checked at apply.
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

// normalizePred checks a pending predicate read against the schema and compiles its filter.
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

// holds reports whether the read would find what it found at dry run, over the committed rows
// now. The caller holds the Store's lock.
func (pc *predCheck) holds(mt *committedTable) (bool, error) {
	if mt.ver == pc.ver {
		return true, nil // nothing was committed to the table since the read
	}
	switch pc.kind {
	case predNextKey:
		return mt.maxNum == pc.n, nil
	case predCount:
		if len(pc.where) == 0 {
			return mt.count() == pc.n, nil
		}
	}
	var keys []verKey
	n := int64(0)
	err := mt.walkRange(pc.m, pc.where, pc.from, pc.to, func(r *rec) bool {
		n++
		if pc.kind == predRows {
			keys = append(keys, verKey{r.key, r.ver})
		}
		return n <= pc.n // one more than it saw is already a difference
	})
	if err != nil || n != pc.n {
		return false, err
	}
	return pc.kind != predRows || digestOf(keys) == pc.digest, nil
}

// describe says, for a conflict, what the read was.
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

// walkRange calls fn for each committed row in [from, to] (inclusive; nil bounds are open) that
// m matches, in key order, until fn returns false. It uses the indexes and numeric columns as a
// run's reads do. The caller holds the Store's lock.
func (mt *committedTable) walkRange(m *table.Matcher, where map[string]any, from, to any, fn func(r *rec) bool) error {
	var err error
	cands, ok, err := mt.bestIndex(m, false, &err)
	if err != nil {
		return err
	}
	if ok {
		for r := range cands.all(false) {
			in := (from == nil || table.CompareKeys(r.key, from) >= 0) && (to == nil || table.CompareKeys(r.key, to) <= 0)
			if in && m.Match(r.row) && !fn(r) {
				break
			}
		}
		return err
	}
	rows := mt.walk(context.Background(), from, to, false, &err)
	pf := mt.prefilterFor(where)
	for pos, r := range rows {
		pass, sure := true, false
		if pf != nil && pos >= 0 {
			pass, sure = pf.check(pos)
		}
		if !pass {
			continue
		}
		if ((sure && pf.complete) || m.Match(r.row)) && !fn(r) {
			break
		}
	}
	return err
}

// bestIndex returns the committed candidates of m's equality or $ieq on the key or a declared
// index with the fewest, in key order (reversed when asked); ok is false when none can be
// answered from an index. Candidates are a superset of the matches: the caller checks each with
// m. Sizes are counted from the indexes' entries (on disk, up to the best size so far), and only
// the chosen candidates are read, as the caller walks them; *errp receives an error of that
// walk. The caller holds the Store's lock.
func (mt *committedTable) bestIndex(m *table.Matcher, reverse bool, errp *error) (best candidates, ok bool, err error) {
	bestN := -1
	consider := func(f string, v any) error {
		c, n, can, err := mt.lookup(f, v, bestN, reverse, errp)
		if err == nil && can && (bestN < 0 || n < bestN) {
			best, bestN = c, n
		}
		return err
	}
	for f, v := range m.FoldEqualities() {
		if mt.s.Indexed[f] {
			if err := consider(f, v); err != nil {
				return candidates{}, false, err
			}
		}
	}
	if bestN != 0 {
		for f, v := range m.Equalities() {
			if f == mt.s.Key {
				k, err := mt.s.NormKey(v)
				if err != nil {
					return candidates{}, true, nil // no committed row has such a key; overlay rows are checked
				}
				r, err := mt.get(k)
				if err != nil {
					return candidates{}, false, err
				}
				best, bestN = candidates{}, 0
				if r != nil {
					best, bestN = candidates{recs: []*rec{r}}, 1
				}
			} else if mt.s.Indexed[f] { // undeclared: the read walks the table, and the run's figures say so
				if err := consider(f, v); err != nil {
					return candidates{}, false, err
				}
			}
			if bestN == 0 {
				break
			}
		}
	}
	return best, bestN >= 0, nil
}

// sortCands orders candidates by key (descending when reverse); of two with one key, the
// committed row hidden by the run's own write comes first, so a walk that stops at that key has
// seen it.
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
