package bolt

import (
	"math"
	"slices"
	"sync"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
)

// rec is one committed row. A rec is never modified once published: an apply that changes a row
// publishes a new rec, so rows handed to readers stay valid and unchanged.
type rec struct {
	key any
	row table.Row
	ver int64  // the commit sequence number that wrote the row
	id  string // the clover document id
}

// resident is a table's committed rows held in memory: rows by key, rows in key order, and hash
// indexes on its declared index fields and numeric columns, built on first use. Readers hold the
// Store's read lock; applies hold its write lock.
type resident struct {
	s     *store.Schema
	rows  map[any]*rec
	order []*rec // sorted by table.CompareKeys

	idxMu   sync.Mutex // guards indexes and cols: readers build them lazily under the read lock
	indexes map[string]map[any][]*rec
	cols    map[string][]float64 // numeric columns aligned with order (see columns.go)
}

func newResident(s *store.Schema, recs []*rec) *resident {
	t := &resident{s: s, rows: make(map[any]*rec, len(recs)), order: recs}
	for _, r := range recs {
		t.rows[r.key] = r
	}
	cmp := func(a, b *rec) int { return table.CompareKeys(a.key, b.key) }
	if !slices.IsSortedFunc(t.order, cmp) { // documents load in insertion order, often key order
		slices.SortFunc(t.order, cmp)
	}
	return t
}

func (t *resident) scanMaxNum() int64 {
	best := int64(-1)
	if t.s.KeyPrefix == "" {
		return best
	}
	for _, r := range t.order {
		if n, ok := t.s.KeyNum(r.key); ok && n > best {
			best = n
		}
	}
	return best
}

// search returns the position of key in order, and whether it is there.
func (t *resident) search(key any) (int, bool) {
	// A key past the last one (every row of an import in key order, generated keys) is
	// placed with one comparison.
	if n := len(t.order); n > 0 && table.CompareKeys(t.order[n-1].key, key) < 0 {
		return n, false
	}
	return slices.BinarySearchFunc(t.order, key, func(r *rec, k any) int { return table.CompareKeys(r.key, k) })
}

// put publishes row (nil: deletes) for key at version ver, stored as document id. Callers hold
// the Store's write lock.
func (t *resident) put(key any, row table.Row, ver int64, id string) {
	old := t.rows[key]
	var nr *rec
	if row != nil {
		nr = &rec{key: key, row: row, ver: ver, id: id}
	}
	i, found := t.search(key)
	switch {
	case nr != nil && found:
		t.order[i] = nr
	case nr != nil:
		t.order = slices.Insert(t.order, i, nr)
	case found:
		t.order = slices.Delete(t.order, i, i+1)
	}
	if nr != nil {
		t.rows[key] = nr
	} else {
		delete(t.rows, key)
	}
	t.idxMu.Lock()
	t.putColumns(i, found, nr)
	for f, idx := range t.indexes {
		if old != nil {
			if k, ok := indexKey(old.row[f]); ok {
				idx[k] = removeRec(idx[k], old)
				if len(idx[k]) == 0 {
					delete(idx, k)
				}
			}
		}
		if nr != nil {
			if k, ok := indexKey(nr.row[f]); ok {
				idx[k] = insertRec(idx[k], nr)
			}
		}
	}
	t.idxMu.Unlock()
}

// bulkPut is the number of rows of one commit to one table from which putAll publishes them:
// one put moves the rows after its key, so a commit of many keys in no particular order (an
// import in any order, a replacement) would cost rows × changes.
const bulkPut = 1024

// putEntry is one row a commit publishes: row nil deletes the key.
type putEntry struct {
	key any
	row table.Row
	id  string
}

// putAll publishes a commit's rows at version ver: a replaced row takes its place in key order
// (a binary search each), removed rows leave in one pass, and new rows, sorted, are merged in
// one pass (appended when they all sort after the table's last key, as an import's usually
// do); the indexes and columns are dropped to be built again on their next use. So a commit of
// m rows to a table of n costs O(m log n) plus O(n) only when it removes rows or inserts among
// them, never n per row. Keys must be distinct. Callers hold the Store's write lock.
func (t *resident) putAll(entries []putEntry, ver int64) {
	var fresh []*rec
	var removed []int // positions in order
	for _, e := range entries {
		pos, found := t.search(e.key)
		if e.row == nil {
			if found {
				removed = append(removed, pos)
				delete(t.rows, e.key)
			}
			continue
		}
		r := &rec{key: e.key, row: e.row, ver: ver, id: e.id}
		t.rows[e.key] = r
		if found {
			t.order[pos] = r
		} else {
			fresh = append(fresh, r)
		}
	}
	if len(removed) > 0 {
		slices.Sort(removed)
		order, next := t.order[:0], 0
		for i, r := range t.order {
			if next < len(removed) && removed[next] == i {
				next++
				continue
			}
			order = append(order, r)
		}
		clear(t.order[len(order):]) // let the removed rows go
		t.order = order
	}
	cmp := func(a, b *rec) int { return table.CompareKeys(a.key, b.key) }
	slices.SortFunc(fresh, cmp)
	switch n := len(t.order); {
	case len(fresh) == 0:
	case n == 0 || cmp(t.order[n-1], fresh[0]) < 0:
		t.order = append(t.order, fresh...)
	default:
		order := make([]*rec, 0, n+len(fresh))
		i := 0
		for _, r := range t.order {
			for i < len(fresh) && cmp(fresh[i], r) < 0 {
				order = append(order, fresh[i])
				i++
			}
			order = append(order, r)
		}
		t.order = append(order, fresh[i:]...)
	}
	t.idxMu.Lock()
	t.indexes, t.cols = nil, nil
	t.idxMu.Unlock()
}

func removeRec(list []*rec, r *rec) []*rec {
	for i, x := range list {
		if x == r {
			return slices.Delete(list, i, i+1)
		}
	}
	return list
}

func insertRec(list []*rec, r *rec) []*rec {
	i, _ := slices.BinarySearchFunc(list, r.key, func(x *rec, k any) int { return table.CompareKeys(x.key, k) })
	return slices.Insert(list, i, r)
}

// lookup returns the committed rows whose field may equal v (text: ignoring case), in key order,
// a superset that the caller checks, from the field's hash
// index (built on first use: O(rows) once, then O(1) per lookup). ok is false when v cannot be
// indexed (lists, dicts, NaN); the caller then scans. The slice is shared: do not modify it.
func (t *resident) lookup(f string, v any) (recs []*rec, ok bool) {
	k, ok := indexKey(v)
	if !ok {
		return nil, false
	}
	t.idxMu.Lock()
	defer t.idxMu.Unlock()
	idx := t.indexes[f]
	if idx == nil {
		table.AddShared(int64(len(t.order)) * indexEntryHeap)
		idx = make(map[any][]*rec)
		for _, r := range t.order {
			if rk, ok := indexKey(r.row[f]); ok {
				idx[rk] = append(idx[rk], r)
			}
		}
		if t.indexes == nil {
			t.indexes = make(map[string]map[any][]*rec)
		}
		t.indexes[f] = idx
	}
	return idx[k], true
}

// recHeap estimates the heap a row read into memory holds: its rec, its id, its map (Go's maps
// keep slots of 8 in groups, 32 bytes a slot for string keys and interface values, and a header),
// and its values (text, boxed numbers, nested values as their stored size, twice); its entries in
// rows and order besides; and a quarter more, for the size classes that round each allocation up
// (TestRowsReadIntoMemoryAreSharedMemory measures it).
func recHeap(row table.Row, id string) int64 {
	n := int64(48+len(id)) + 48 + int64((len(row)+7)/8)*(8+8*32) + 32
	for _, v := range row {
		switch x := v.(type) {
		case string:
			n += int64(len(x))
		case []any, map[string]any:
			n += 2 * store.ValueSize(x)
		default:
			n += 8
		}
	}
	return n + n/4
}

// indexEntryHeap estimates the heap one row takes in a hash index built in memory (its key and
// its place in a bucket's slice).
const indexEntryHeap = 48

// indexKey maps a field value to its hash-index key. Numbers map to float64, so 80 and 80.0
// share a bucket, and text to its table.FoldKey, so that "Aviator" and "aviator" share one and
// the index answers $ieq too; a bucket may hold more rows than equal ones (huge ints, other
// cases), never fewer, because every candidate is checked by the compiled filter afterwards.
func indexKey(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		return table.FoldKey(x), true
	case nil, bool:
		return v, true
	case float64:
		if math.IsNaN(x) {
			return nil, false
		}
		return x, true
	case float32:
		return indexKey(float64(x))
	}
	if i, ok := store.ToInt(v); ok {
		return float64(i), true
	}
	return nil, false
}
