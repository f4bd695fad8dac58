package bolt

import (
	"context"
	"slices"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
)

// holds reports whether predicate read pc would find what it found at dry run, over the committed rows
// now. The caller holds the Store's lock.
func holds(pc *store.PredCheck, mt *committedTable) (bool, error) {
	if mt.ver == pc.Ver {
		return true, nil // nothing was committed to the table since the read
	}
	switch pc.Kind {
	case store.PredNextKey:
		return mt.maxNum == pc.N, nil
	case store.PredCount:
		if len(pc.Where) == 0 {
			return mt.count() == pc.N, nil
		}
	}
	var keys []store.VerKey
	n := int64(0)
	err := mt.walkRange(pc.M, pc.Where, pc.From, pc.To, func(r *rec) bool {
		n++
		if pc.Kind == store.PredRows {
			keys = append(keys, store.VerKey{Key: r.key, Ver: r.ver})
		}
		return n <= pc.N // one more than it saw is already a difference
	})
	if err != nil || n != pc.N {
		return false, err
	}
	return pc.Kind != store.PredRows || store.ReadDigest(keys) == pc.Digest, nil
}

// walkRange calls fn for each committed row in [from, to] (inclusive; nil bounds are open) that
// m matches, until fn returns false. It uses the indexes and numeric columns as a run's reads
// do. An index's candidates are walked in reverse key order when only from is set (the range a
// reverse read walked before it stopped), else in key order: from the range's open end, stopping
// at its bounded one, so candidates past the range are never read (a run's "last row of this
// value" re-checks one row, not every row of the value). Other walks read the range alone, in
// key order. The set of rows fn sees does not depend on the order. The caller holds the Store's
// lock.
func (mt *committedTable) walkRange(m *table.Matcher, where map[string]any, from, to any, fn func(r *rec) bool) error {
	var err error
	reverse := from != nil && to == nil
	cands, ok, err := mt.bestIndex(m, reverse, &err)
	if err != nil {
		return err
	}
	if ok {
		for r := range cands.all(reverse) {
			if reverse && table.CompareKeys(r.key, from) < 0 || !reverse && to != nil && table.CompareKeys(r.key, to) > 0 {
				break // candidates come in key order: the rest are past the range
			}
			in := reverse || from == nil || table.CompareKeys(r.key, from) >= 0
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
