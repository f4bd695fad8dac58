package bolt

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/starplan/starplan/store"
)

// committedTable is the committed state of one table as the stage, the predicate re-checks and
// apply read it: its version, row count and highest generated key always, and its rows either
// held in memory (resident) or read from the file on demand (disk; see disk.go). Readers hold the
// Store's read lock, applies its write lock; a read of the rows into memory is begun under
// either and runs on its own, guarded by loadMu (see loadJob).
type committedTable struct {
	s   *store.Schema
	ver int64 // the commit sequence number that last changed the table
	n   int64 // committed rows

	// maxNum is the highest number n among keys of the form KeyPrefix+digits (-1: none); it
	// makes key generation O(1). It is found again only when that row is deleted.
	maxNum int64

	disk *diskTable // nil: the file keeps no key index for the table, and res is always set
	res  atomic.Pointer[resident]
	// residency is the store's (disk.go): when the rows are read into memory, when let go.
	residency residency
	// walked counts the rows walks have read from the file; past residency.promote the next walk
	// reads the table into memory first.
	walked atomic.Int64
	// needed: a walk read the table into memory (after long walks, or a whole one), so a large
	// commit does not let it go (the next walk would read it whole again).
	needed atomic.Bool
	loadMu sync.Mutex
	// begin starts reading every row into memory (see Store.beginLoad): called under the
	// Store's lock, it fixes what read reads, which may then run after that lock is let go, until
	// stop is closed.
	begin   func() (tableRead, error)
	loading *loadJob // the read into memory under way, nil when none
	loadErr error    // why a read failed: a damaged table is read whole once
}

// loadJob is a read of a table into memory. It runs in a goroutine of its own, not in the walk
// that started it: a walk whose run's time is up stops waiting for it and ends with the run,
// while the read goes on and is kept for the walks after it (the table's rows are read whole
// once, whatever the deadline of the run that asked first). The commits published while it reads
// are replayed on what it read, which is the committed state of the moment it began.
type loadJob struct {
	done    chan struct{} // closed when it has ended
	stop    chan struct{} // closed when it is stale: the read stops at its next chunk
	err     error         // why it failed, once done
	kept    bool          // its rows became the table's, once done
	pending []pendingCommit
	stale   bool // bulkPut rows or more were committed meanwhile: its rows would not be kept
}

// tableRead reads a table's rows into memory until stop is closed (see Store.beginLoad).
type tableRead = func(stop <-chan struct{}) (*resident, error)

// pendingCommit is a commit published during a loadJob, to replay on the rows it read.
type pendingCommit struct {
	entries []putEntry
	ver     int64
}

// resident returns the rows held in memory for a walk, nil when they are read from the file. A
// table whose walks have read promoteRows rows from the file is read into memory first, once; so
// is a table of promoteRows rows or more that the walk will read whole (whole: a filter no index
// answers, without a limit), since reading it into memory costs a fraction of walking it in the
// file (a lookup of each document by its id). The caller holds the Store's lock (read or write);
// ctx is its run's (nil: none): when it ends first, the walk stops waiting with its cause, and
// the read goes on without it (see loadJob).
func (t *committedTable) resident(ctx context.Context, whole bool) (*resident, error) {
	if r := t.res.Load(); r != nil || t.walked.Load() < t.residency.promote && !(whole && t.n >= t.residency.promote) {
		return r, nil
	}
	var stop <-chan struct{}
	if ctx != nil {
		stop = ctx.Done()
	}
	// Twice at most: a job another walk began may have been made stale by commits before this
	// walk took the Store's lock; none can be while it holds it, so the job it begins is kept.
	for {
		t.loadMu.Lock()
		if r := t.res.Load(); r != nil || t.loadErr != nil {
			t.loadMu.Unlock()
			return r, t.loadErr
		}
		j := t.loading
		if j == nil {
			read, err := t.begin()
			if err != nil {
				t.loadMu.Unlock()
				return nil, err
			}
			j = &loadJob{done: make(chan struct{}), stop: make(chan struct{})}
			t.loading = j
			go t.finish(j, read)
		}
		t.loadMu.Unlock()
		select {
		case <-j.done:
		case <-stop:
			return nil, fmt.Errorf("the run was stopped while table %s was read into memory (the read goes on for later runs): %w", t.s.Name, context.Cause(ctx))
		}
		if j.kept {
			return t.res.Load(), nil
		}
		if j.err != nil && !j.stale {
			return nil, j.err
		}
	}
}

// finish runs read for j and, unless commits made it stale, makes what it read the table's rows,
// with the commits published since it began replayed on them. It runs in a goroutine of its
// own, so a panic there (read is guarded) is j's error, not the process's end.
func (t *committedTable) finish(j *loadJob, read tableRead) {
	r, err := read(j.stop) // records what it keeps as shared memory as it reads (loadTable)
	t.loadMu.Lock()
	defer t.loadMu.Unlock()
	defer close(j.done)
	defer func() { // a panic can come only from the replay, before the rows are the table's
		if p := recover(); p != nil {
			j.err = fmt.Errorf("reading table %s into memory: %v", t.s.Name, p)
		}
	}()
	if t.loading == j {
		t.loading = nil
	}
	j.err = err
	switch {
	case j.stale:
	case err != nil:
		if errors.Is(err, store.ErrDamaged) {
			t.loadErr = err // not a read stopped by Close
		}
	default:
		for _, c := range j.pending {
			for _, e := range c.entries {
				r.put(e.key, e.row, c.ver, e.id)
			}
		}
		t.res.Store(r)
		t.needed.Store(true)
		j.kept = true
	}
	j.pending = nil
}

// staleLocked makes j stale: its read stops at its next chunk, its rows are not kept, and the
// next walk that needs the table begins another. t.loadMu is held.
func (t *committedTable) staleLocked(j *loadJob) {
	if j.stale {
		return
	}
	j.stale, j.pending = true, nil
	close(j.stop)
	if t.loading == j {
		t.loading = nil
	}
}

// stopLoad makes the read into memory under way, if any, stale and waits for it to end, which
// it does at its next chunk. A commit of bulkPut rows or more calls it before it writes: it would
// make the read stale anyway, and the read's bbolt transaction would make the commit, if the
// file must grow, wait for the whole read while holding the Store's write lock. The caller holds
// that lock.
func (t *committedTable) stopLoad() {
	t.loadMu.Lock()
	j := t.loading
	if j != nil {
		t.staleLocked(j)
	}
	t.loadMu.Unlock()
	if j != nil {
		<-j.done
	}
}

// releaseUnneeded lets the rows held in memory go when mayRelease allows it, in one step with
// respect to a read into memory ending (which would make them needed).
func (t *committedTable) releaseUnneeded() {
	t.loadMu.Lock()
	defer t.loadMu.Unlock()
	if t.mayRelease() {
		t.release()
	}
}

// committedTo returns the rows in memory that a commit of entries at ver must be published to,
// nil when the rows are on disk: then a read into memory under way is handed the commit, to
// replay on what it read (see loadJob). Both in one step, so that the read cannot end between.
func (t *committedTable) committedTo(entries []putEntry, ver int64) *resident {
	t.loadMu.Lock()
	defer t.loadMu.Unlock()
	if r := t.res.Load(); r != nil {
		return r
	}
	j := t.loading
	if j == nil {
		return nil
	}
	n := len(entries)
	for _, c := range j.pending {
		n += len(c.entries)
	}
	if n >= bulkPut { // as an import: not held twice; read from the file again when a walk needs it
		t.staleLocked(j)
		return nil
	}
	j.pending = append(j.pending, pendingCommit{entries: entries, ver: ver})
	return nil
}

// release lets the rows held in memory go (a large commit to a table on disk).
func (t *committedTable) release() { t.res.Store(nil) }

// mayRelease reports whether the table's rows in memory may be let go after a commit: the file
// keeps its buckets, it is too large to read at Open, and no walk has needed it in memory.
func (t *committedTable) mayRelease() bool {
	return t.disk != nil && t.n > t.residency.open && !t.needed.Load()
}

// count is the number of committed rows.
func (t *committedTable) count() int64 { return t.n }

// get returns the committed row with key k, nil when there is none.
func (t *committedTable) get(k any) (*rec, error) {
	if r := t.res.Load(); r != nil {
		return r.rows[k], nil
	}
	return t.disk.get(k)
}

// version returns the committed version of key k, 0 when there is no such row.
func (t *committedTable) version(k any) (int64, error) {
	if r := t.res.Load(); r != nil {
		if x := r.rows[k]; x != nil {
			return x.ver, nil
		}
		return 0, nil
	}
	return t.disk.version(k)
}

// candidates are the committed rows an index lookup found, in key order: held in memory (recs,
// shared: do not modify) or read from the file as they are taken (lazy, in the order asked).
type candidates struct {
	recs []*rec
	lazy iter.Seq[*rec]
}

// all returns the candidates, in reverse key order when asked (lazy ones come in the order their
// lookup was asked for).
func (c candidates) all(reverse bool) iter.Seq[*rec] {
	if c.lazy != nil {
		return c.lazy
	}
	return sliceSeq(c.recs, reverse)
}

// lookup returns the committed rows whose field f may equal v (text: ignoring case), in key order
// (reversed when asked): a superset that the caller checks, and n, how many there are; ok is
// false when v cannot be indexed. On disk n is counted from the index's keys, up to limit+1 when
// limit >= 0, and the rows are read only as the caller takes them (*errp receives a read error);
// they count toward reading the table into memory.
func (t *committedTable) lookup(f string, v any, limit int, reverse bool, errp *error) (c candidates, n int, ok bool, err error) {
	if r := t.res.Load(); r != nil {
		recs, ok := r.lookup(f, v)
		return candidates{recs: recs}, len(recs), ok, nil
	}
	if n, ok, err = t.disk.indexSize(f, v, limit); err != nil || !ok {
		return candidates{}, n, ok, err
	}
	return candidates{lazy: t.counted(t.disk.lookup(f, v, reverse, errp))}, n, true, nil
}

// counted adds the rows a walk of the file yields to t.walked.
func (t *committedTable) counted(seq iter.Seq[*rec]) iter.Seq[*rec] {
	return func(yield func(*rec) bool) {
		var n int64
		defer func() { t.walked.Add(n) }()
		for r := range seq {
			n++
			if !yield(r) {
				return
			}
		}
	}
}

func sliceSeq(recs []*rec, reverse bool) iter.Seq[*rec] {
	return func(yield func(*rec) bool) {
		for i := range recs {
			r := recs[i]
			if reverse {
				r = recs[len(recs)-1-i]
			}
			if !yield(r) {
				return
			}
		}
	}
}

// walk returns the committed rows with keys in [from, to] (nil bounds are open) in key order,
// reversed when asked, each with its position in the resident order (-1 when read from the
// file: no columns). A walk that reads promoteRows rows from the file reads the table into
// memory and goes on from there, so one walk never holds more than that many rows of its own.
// A read error ends the walk and is left in *errp; so does the end of ctx while the walk waits
// for the table's read into memory (see resident).
func (t *committedTable) walk(ctx context.Context, from, to any, reverse bool, errp *error) iter.Seq2[int, *rec] {
	res, err := t.resident(ctx, false)
	if err != nil {
		*errp = err
		return func(func(int, *rec) bool) {}
	}
	if res != nil {
		return res.walk(from, to, reverse, 0)
	}
	return func(yield func(int, *rec) bool) {
		var last any
		var n int64
		more := false
		for r := range t.disk.rows(from, to, reverse, errp) {
			n++
			if !yield(-1, r) {
				break
			}
			last = r.key
			if t.walked.Load()+n >= t.residency.promote {
				more = true
				break
			}
		}
		t.walked.Add(n)
		if !more || *errp != nil {
			return
		}
		res, err := t.resident(ctx, false)
		if err != nil {
			*errp = err
			return
		}
		if reverse {
			to = last
		} else {
			from = last
		}
		for pos, r := range res.walk(from, to, reverse, 1) {
			if !yield(pos, r) {
				return
			}
		}
	}
}

// walk returns the rows with keys in [from, to] in key order, reversed when asked, with their
// positions; skip leaves out that many rows at the start (a walk that goes on after a key).
func (res *resident) walk(from, to any, reverse bool, skip int) iter.Seq2[int, *rec] {
	lo, hi := 0, len(res.order)
	if from != nil {
		lo, _ = res.search(from)
	}
	if to != nil {
		i, found := res.search(to)
		if found {
			i++
		}
		hi = i
	}
	return func(yield func(int, *rec) bool) {
		if reverse {
			for i := hi - 1 - skip; i >= lo; i-- {
				if !yield(i, res.order[i]) {
					return
				}
			}
			return
		}
		for i := lo + skip; i < hi; i++ {
			if !yield(i, res.order[i]) {
				return
			}
		}
	}
}

// last returns the committed row with the highest key, nil when the table is empty.
func (t *committedTable) last() (*rec, error) {
	if r := t.res.Load(); r != nil {
		if len(r.order) == 0 {
			return nil, nil
		}
		return r.order[len(r.order)-1], nil
	}
	var err error
	for r := range t.disk.rows(nil, nil, true, &err) {
		return r, nil
	}
	return nil, err
}

// prefilterFor returns the columns' prefilter of where (see columns.go), nil when the rows are
// read from the file or there is nothing to use.
func (t *committedTable) prefilterFor(where map[string]any) *prefilter {
	if r := t.res.Load(); r != nil {
		return r.prefilterFor(where)
	}
	return nil
}

// publish makes a commit at version ver that wrote entries (a row nil removes its key) the
// committed state; grew is how the commit changed the row count. Callers hold the Store's write
// lock, after the commit.
func (t *committedTable) publish(entries []putEntry, ver int64, grew int64) {
	t.ver, t.n = ver, t.n+grew
	recount := false
	for _, e := range entries {
		if n, ok := t.s.KeyNum(e.key); ok {
			if e.row != nil && n > t.maxNum {
				t.maxNum = n
			} else if e.row == nil && n == t.maxNum {
				recount = true
			}
		}
	}
	if r := t.committedTo(entries, ver); r != nil {
		switch {
		case len(entries) >= bulkPut && t.mayRelease():
			// A large commit (an import) to a table no walk has needed in memory: let it go, so
			// that the rows are not held twice, and read them from the file.
			t.release()
		case len(entries) >= bulkPut:
			r.putAll(entries, ver)
		default:
			for _, e := range entries {
				r.put(e.key, e.row, ver, e.id)
			}
		}
	}
	if !recount {
		return
	}
	if r := t.res.Load(); r != nil {
		t.maxNum = r.scanMaxNum()
		return
	}
	// The commit is done: a key index that does not read back is the next read's to report.
	// Until then the removed key's number stays the highest, so a generated key is still new.
	if n, err := t.disk.maxNum(); err == nil {
		t.maxNum = n
	}
}
