package bolt

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Staged import.
//
// bbolt holds every page a transaction writes in memory until it commits, so a one-commit import
// of a million rows held gigabytes. A large Import into an empty table is instead written over
// several commits and made live by one small one:
//
//   - Each staging commit (stageRows, one per stageBatch rows) appends the rows' documents to the
//     collection under ids of the version the import will commit at (rowDocID(ver, n), past every
//     document of the file), and their keys and index entries to buckets of their own under
//     stagingBucket, with a marker naming the table and the version. Nothing reads them: a table
//     of more than openResident rows is read through its keys bucket, the import holds the
//     Store's lock until it ends (no commit, read or load of the table runs meanwhile), and
//     the record's digests and sequence are not changed.
//   - The final commit (finishStaged) moves the staged keys and index buckets in place of the
//     table's empty ones (bbolt's MoveBucket: a few pages), adds the documents to the collection's
//     count and the record's digests and writes the record at the import's version: the rows are
//     all there, in one commit, or none is.
//   - A failed import (a bad record, a cancelled context, a failed write) deletes what it staged
//     (discardStaged); a killed one leaves it, and the next Open deletes it (clearStaged) before
//     it reads anything. So the store is as before the import, or holds all of it.

// stagingBucket is the bbolt bucket of an import's staged keys and index entries, and its marker.
const stagingBucket = "starplan:import"

// stageBatch is how many rows a staging commit writes; stagedMin is the fewest rows an Import
// stages (a smaller one is written in one commit). Variables, so that the tests can stage small
// imports.
var (
	stageBatch = 16384
	stagedMin  = 65536
)

// staged is an import being staged into an empty table.
type staged struct {
	s   *Store
	sc  *store.Schema
	ver int64 // the version the import commits at
	n   int   // rows staged
	dg  collDigest
	max int64 // the highest key number staged
	// runs holds the batches of key and index entries that landed between entries staged
	// before, merged into their buckets by finish (nil: none yet).
	runs *keyRuns
	put  map[keyBucket]int // the entries put into each staged bucket (not into runs)
}

// beginStaged starts staging rows into table sc at the next version, or returns nil when the
// table cannot be staged into (it holds rows, the file keeps no key buckets, clover indexes it).
// The caller holds s.mu, and keeps holding it until the import ends.
func (s *Store) beginStaged(sc *store.Schema) (*staged, error) {
	mt := s.tables[sc.Name]
	if mt.count() != 0 || mt.disk == nil || s.keys != keysLayout {
		return nil, nil
	}
	st := &staged{s: s, sc: sc, ver: s.seq + 1, max: -1}
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	err := guard(s.bolt.path, func() error {
		return s.bolt.db.Update(func(tx *bbolt.Tx) error {
			if v := tx.Bucket([]byte(rootBucket)).Get([]byte(cloverCollectionKey + sc.Name)); v != nil {
				var meta collMeta
				if json.Unmarshal(v, &meta) == nil && meta.byClover() {
					st = nil // made by clover, which keeps indexes of its own
					return nil
				}
			}
			if tx.Bucket([]byte(stagingBucket)) != nil {
				if err := tx.DeleteBucket([]byte(stagingBucket)); err != nil {
					return err
				}
			}
			b, err := tx.CreateBucket([]byte(stagingBucket))
			if err != nil {
				return err
			}
			kroot, err := b.CreateBucket([]byte("keys"))
			if err != nil {
				return err
			}
			iroot, err := b.CreateBucket([]byte("index"))
			if err != nil {
				return err
			}
			if err := createTableKeys(kroot, iroot, sc); err != nil {
				return err
			}
			if err := b.Put([]byte("table"), []byte(sc.Name)); err != nil {
				return err
			}
			return b.Put([]byte("version"), binary.BigEndian.AppendUint64(nil, uint64(st.ver)))
		})
	})
	return st, err
}

// afterStage, when set, is called after each staging commit with its kind: "stage" (a batch of
// rows), "merge" (into a new bucket) or "put" (runs put into their bucket; see merge). The kill
// test's child reports them.
var afterStage func(kind string)

// stageRows writes rows (validated, keys distinct from every row staged before) in one staging
// commit.
func (st *staged) stageRows(rows []table.Row) error {
	if len(rows) == 0 {
		return nil
	}
	s, sc := st.s, st.sc
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	fields := diskIndexes(sc)
	prefix := docPrefix(sc.Name)
	err := guard(s.bolt.path, func() error {
		return s.bolt.db.Update(func(tx *bbolt.Tx) error {
			reserveFile(s.bolt.file, tx, int64(len(rows))*512)
			b := tx.Bucket([]byte(rootBucket))
			b.FillPercent = 1.0 // appended, in id order
			stg := tx.Bucket([]byte(stagingBucket))
			if stg == nil {
				return fmt.Errorf("store: the staging bucket of the import into %s is gone", sc.Name)
			}
			k := &keyOps{}
			var buf []byte
			for _, row := range rows {
				st.n++
				id := rowDocID(st.ver, st.n)
				key := k.save(append(append(buf[:0], prefix...), id...))
				var ok bool
				if buf, ok = appendDoc(buf[:0], id, row, st.ver); !ok {
					return fmt.Errorf("store: new %s document %s: a value of a kind no validated row holds", sc.Name, id)
				}
				doc := k.save(buf)
				if err := b.Put(key, doc); err != nil {
					return err
				}
				h := docHash(key, doc)
				st.dg.addHash(h)
				if n, ok := sc.KeyNum(row[sc.Key]); ok && n > st.max {
					st.max = n
				}
				k.addRow(sc, fields, row, keyValue(st.ver, h, id, row[sc.Key]))
			}
			return st.putKeys(k, stg)
		})
	})
	if err == nil && afterStage != nil {
		afterStage("stage")
	}
	return err
}

// finish makes the staged rows the table's in one commit, and publishes them.
func (st *staged) finish() error {
	s, name := st.s, st.sc.Name
	s.bolt.mu.Lock()
	err := st.mergeRuns()
	st.closeRuns()
	if err != nil {
		s.bolt.mu.Unlock()
		return err
	}
	err = s.bolt.runGroup(func(tx *bbolt.Tx) error {
		stg := tx.Bucket([]byte(stagingBucket))
		if stg == nil {
			return fmt.Errorf("store: the staging bucket of the import into %s is gone", name)
		}
		for _, root := range []string{keysBucket, indexBucket} {
			live := tx.Bucket([]byte(root))
			from := stg.Bucket([]byte(map[string]string{keysBucket: "keys", indexBucket: "index"}[root]))
			if live == nil || from == nil {
				return fmt.Errorf("store: no %s bucket for the import into %s", root, name)
			}
			if live.Bucket([]byte(name)) != nil {
				if err := live.DeleteBucket([]byte(name)); err != nil {
					return err
				}
			}
			if err := tx.MoveBucket([]byte(name), from, live); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket([]byte(stagingBucket)); err != nil {
			return err
		}
		b := tx.Bucket([]byte(rootBucket))
		meta, err := s.collMeta(b, name)
		if err != nil {
			return err
		}
		meta.Size += st.n
		if err := s.putCollMeta(b, name, meta); err != nil {
			return err
		}
		d := s.bolt.delta[name]
		if d == nil {
			d = &collDigest{}
			s.bolt.delta[name] = d
		}
		d.Rows += st.dg.Rows
		d.Sum += st.dg.Sum
		m, found, err := s.recordLocked(tx)
		if err != nil {
			return err
		}
		if !found {
			return errors.New("store: the store's own record is missing")
		}
		s.advanceRecord(m, st.ver, map[string]bool{name: true})
		s.setRecordLocked(tx, m) // written by the group's end, with its digests
		return nil
	})
	s.bolt.mu.Unlock()
	if err != nil {
		return err
	}
	mt := s.tables[name]
	s.seq = st.ver
	mt.ver, mt.n = st.ver, int64(st.n)
	mt.maxNum = max(mt.maxNum, st.max)
	mt.release() // read through the keys bucket, as a table of this size is at Open
	return nil
}

// discard deletes what was staged, after a failed import.
func (st *staged) discard() error {
	st.closeRuns()
	st.s.bolt.mu.Lock()
	defer st.s.bolt.mu.Unlock()
	return st.s.clearStagedLocked()
}

// clearStagedLocked deletes the documents and buckets an import staged and did not finish (see
// the staged import above), in commits of clearChunk documents: the documents first, the
// marker last, so that a clear cut off is finished by the next. The caller holds s.bolt.mu.
func (s *Store) clearStagedLocked() error {
	return guard(s.bolt.path, func() error {
		for {
			done := false
			err := s.bolt.db.Update(func(tx *bbolt.Tx) error {
				stg := tx.Bucket([]byte(stagingBucket))
				if stg == nil {
					done = true
					return nil
				}
				name, v := stg.Get([]byte("table")), stg.Get([]byte("version"))
				if len(v) != 8 {
					return &store.DamagedError{Path: s.bolt.path, Problem: "the marker of an interrupted import does not read"}
				}
				ver := int64(binary.BigEndian.Uint64(v))
				from := append(docPrefix(string(name)), rowDocID(ver, 0)[:rowDocIDVersionLen]...)
				c := tx.Bucket([]byte(rootBucket)).Cursor()
				n := 0
				for k, _ := c.Seek(from); k != nil && bytes.HasPrefix(k, from) && n < clearChunk; k, _ = c.Seek(from) {
					if err := c.Delete(); err != nil {
						return err
					}
					n++
				}
				if n < clearChunk {
					done = true
					return tx.DeleteBucket([]byte(stagingBucket))
				}
				return nil
			})
			if err != nil || done {
				return err
			}
		}
	})
}

// clearStagedAtOpen deletes what an import killed before its last commit staged (nothing of it
// was ever read). The caller holds s.bolt.mu.
func (s *Store) clearStagedAtOpen() error {
	left := false
	if err := s.bolt.db.View(func(tx *bbolt.Tx) error {
		left = tx.Bucket([]byte(stagingBucket)) != nil
		return nil
	}); err != nil || !left {
		return err
	}
	return s.clearStagedLocked()
}

// clearChunk is how many staged documents one commit of clearStagedLocked deletes.
const clearChunk = 65536

// errNotStaged is returned for a staging bucket that cannot be found.
var errNotStaged = errors.New("store: the import's staging buckets are incomplete")

// Key and index entries of a staged import.
//
// Each staging commit puts its batch's entries, sorted, into the staged keys and index buckets.
// Appended after the entries staged before (a file in key order, in its keys bucket) or landing
// in few pages among them (an index of a few values), bbolt writes them into few pages. A batch
// that lands everywhere (a file out of key order) would make every commit rewrite every page of
// the bucket, each half full after its split: staging 300,000 shuffled rows took 1.7 times as
// long as one commit of them, and 2.5 times the memory of the same rows in key order. So a
// batch that would rewrite many more entries staged before than it has (scattered) is written
// instead as a sorted run to a temporary file (keyRuns), and finish merges each bucket's runs
// and its staged entries into a new bucket in key order, appended in commits of mergeChunk
// entries, which then takes the staged one's place; or, when the runs hold few of the bucket's
// entries, puts theirs into it in key order. The runs' file is deleted from its directory as
// soon as it is made, so a killed import leaves nothing of it.

// mergeChunk is how many entries a merge commit writes; a variable, so that the tests can merge
// in several commits.
var mergeChunk = 262144

// keyRuns are the sorted runs of a staged import's entries, in a file of their own: each entry
// is its key's length (uvarint), key, value's length (uvarint) and value.
type keyRuns struct {
	f   *os.File
	w   *bufio.Writer
	off int64
	by  map[keyBucket][]runSpan
	n   map[keyBucket]int // the entries of each bucket's runs
	buf []byte
}

// runSpan is where one run is in the runs' file.
type runSpan struct{ from, to int64 }

// stagedBucket returns the staged bucket of kb under the staging roots (nil: none), with its
// parent and its name there.
func stagedBucket(kroot, iroot *bbolt.Bucket, kb keyBucket) (b, parent *bbolt.Bucket, name string) {
	if kroot == nil || iroot == nil {
		return nil, nil, ""
	}
	if kb.field == "" {
		return kroot.Bucket([]byte(kb.table)), kroot, kb.table
	}
	if idx := iroot.Bucket([]byte(kb.table)); idx != nil {
		return idx.Bucket([]byte(kb.field)), idx, kb.field
	}
	return nil, nil, ""
}

// byKey orders an import's entries (their keys are distinct: one entry per row and bucket).
func byKey(x, y keyOp) int { return bytes.Compare(x.key, y.key) }

// putKeys stages a batch's key and index entries: into their buckets, or as runs (see above).
func (st *staged) putKeys(k *keyOps, stg *bbolt.Bucket) error {
	kroot, iroot := stg.Bucket([]byte("keys")), stg.Bucket([]byte("index"))
	pageSize := stg.Tx().DB().Info().PageSize
	for kb, p := range k.by {
		ops := *p
		if len(ops) == 0 {
			continue
		}
		b, _, _ := stagedBucket(kroot, iroot, kb)
		if b == nil {
			return fmt.Errorf("%w: no bucket %q of table %s", errNotStaged, kb.field, kb.table)
		}
		if !slices.IsSortedFunc(ops, byKey) {
			slices.SortFunc(ops, byKey)
		}
		c := b.Cursor()
		if last, _ := c.Last(); last == nil || bytes.Compare(ops[0].key, last) > 0 {
			b.FillPercent = 1.0 // appended: full pages
		} else if scattered(c, ops, pageSize) {
			if err := st.toRun(kb, ops); err != nil {
				return err
			}
			continue
		}
		for _, op := range ops {
			if err := b.Put(op.key, op.value); err != nil {
				return err
			}
		}
		if st.put == nil {
			st.put = map[keyBucket]int{}
		}
		st.put[kb] += len(ops)
	}
	return nil
}

// scattered reports whether putting sorted entries ops, the first of them before the last
// entry of c's bucket, would rewrite more than twice as many of the entries already there as
// ops has (a run costs about that: the file's write and read, and a put in the merge): each
// place where some of them land rewrites the entries of the page it is in, about a page of
// them, or fewer when the last place was less than a page before.
func scattered(c *bbolt.Cursor, ops []keyOp, pageSize int) bool {
	size := 0
	for _, op := range ops {
		size += len(op.key) + len(op.value)
	}
	perPage := max(1, pageSize/(size/len(ops)+16)) // an entry's header in a page is 16 bytes
	budget := 2 * len(ops)
	k, _ := c.Seek(ops[0].key)
	for i := 0; ; {
		for i < len(ops) && k != nil && bytes.Compare(ops[i].key, k) <= 0 {
			i++ // lands before k, where ops[i-1] does
		}
		if i == len(ops) || k == nil {
			return false // the rest are appended: one more place
		}
		n := 0 // the entries between this place and the next, up to a page of them
		for k != nil && n < perPage && bytes.Compare(k, ops[i].key) < 0 {
			k, _ = c.Next()
			n++
		}
		if k != nil && bytes.Compare(k, ops[i].key) < 0 {
			k, _ = c.Seek(ops[i].key)
		}
		if budget -= n; budget < 0 {
			return true
		}
	}
}

// toRun writes sorted entries ops of bucket kb as a run.
func (st *staged) toRun(kb keyBucket, ops []keyOp) error {
	r := st.runs
	if r == nil {
		f, err := os.CreateTemp(filepath.Dir(st.s.bolt.path), ".import-runs-*")
		if err != nil {
			return fmt.Errorf("store: a file for the import's sorted runs: %w", err)
		}
		os.Remove(f.Name()) // open, it stays until closed; killed, the system deletes it
		r = &keyRuns{f: f, w: bufio.NewWriterSize(f, 256<<10), by: map[keyBucket][]runSpan{}, n: map[keyBucket]int{}}
		st.runs = r
	}
	from := r.off
	for _, op := range ops {
		r.buf = binary.AppendUvarint(r.buf[:0], uint64(len(op.key)))
		r.buf = append(r.buf, op.key...)
		r.buf = binary.AppendUvarint(r.buf, uint64(len(op.value)))
		r.buf = append(r.buf, op.value...)
		n, err := r.w.Write(r.buf)
		r.off += int64(n)
		if err != nil {
			return fmt.Errorf("store: writing the import's sorted runs: %w", err)
		}
	}
	r.by[kb] = append(r.by[kb], runSpan{from, r.off})
	r.n[kb] += len(ops)
	return nil
}

// closeRuns closes (so deletes) the runs' file.
func (st *staged) closeRuns() {
	if st.runs != nil {
		st.runs.f.Close()
		os.Remove(st.runs.f.Name()) // where an open file cannot be deleted
		st.runs = nil
	}
}

// runReader reads one run's entries in order; key and value are the entry it is at.
type runReader struct {
	r          *bufio.Reader
	key, value []byte
	done       bool
}

// next moves r to its next entry, or sets done.
func (r *runReader) next() error {
	read := func(dst []byte) ([]byte, error) {
		n, err := binary.ReadUvarint(r.r)
		if err != nil {
			return dst, err
		}
		if n > uint64(r.r.Size())<<8 {
			return dst, fmt.Errorf("an entry of %d bytes", n)
		}
		dst = slices.Grow(dst[:0], int(n))[:n]
		_, err = io.ReadFull(r.r, dst)
		return dst, err
	}
	var err error
	if r.key, err = read(r.key); err == io.EOF {
		r.done = true
		return nil
	} else if err == nil {
		r.value, err = read(r.value)
	}
	if err != nil {
		return fmt.Errorf("store: reading the import's sorted runs: %w", err)
	}
	return nil
}

// mergeRuns merges each staged bucket that has runs with them (see above). The caller holds
// s.bolt.mu.
func (st *staged) mergeRuns() error {
	if st.runs == nil {
		return nil
	}
	if err := st.runs.w.Flush(); err != nil {
		return fmt.Errorf("store: writing the import's sorted runs: %w", err)
	}
	kbs := slices.SortedFunc(maps.Keys(st.runs.by), func(a, b keyBucket) int {
		return cmp.Or(cmp.Compare(a.table, b.table), cmp.Compare(a.field, b.field))
	})
	for _, kb := range kbs {
		if err := st.merge(kb, st.runs.by[kb]); err != nil {
			return err
		}
	}
	return nil
}

// inPlaceRatio: a bucket whose runs hold at most 1/inPlaceRatio as many entries as were put
// into it directly has theirs put into it (see merge).
const inPlaceRatio = 4

// putRuns puts up to mergeChunk of the runs' entries, in key order, into b, and sets done when
// none is left.
func putRuns(b *bbolt.Bucket, runs []*runReader, done *bool) error {
	h := make(mergeHeap, 0, len(runs))
	for i, r := range runs {
		if !r.done {
			h = append(h, &mergeSource{run: r, key: r.key, value: r.value, order: i})
		}
	}
	heap.Init(&h)
	var block []byte
	for n := 0; n < mergeChunk && len(h) > 0; n++ {
		top := h[0]
		if len(block)+len(top.key)+len(top.value) > cap(block) { // bbolt keeps them until the commit
			block = make([]byte, 0, max(1<<20, len(top.key)+len(top.value)))
		}
		block = append(block, top.key...)
		key := block[len(block)-len(top.key):]
		block = append(block, top.value...)
		if err := b.Put(key, block[len(block)-len(top.value):]); err != nil {
			return err
		}
		if err := top.run.next(); err != nil {
			return err
		}
		if top.run.done {
			heap.Pop(&h)
			continue
		}
		top.key, top.value = top.run.key, top.run.value
		heap.Fix(&h, 0)
	}
	*done = len(h) == 0
	return nil
}

// mergeSource is one of the sorted sources of a merge: a run, or the staged bucket (cursor).
type mergeSource struct {
	run        *runReader
	key, value []byte
	order      int // for equal keys (none in an import), the later source's entry is put last
}

// mergeHeap is a min-heap of the sources' entries by key.
type mergeHeap []*mergeSource

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].key, h[j].key); c != 0 {
		return c < 0
	}
	return h[i].order < h[j].order
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(*mergeSource)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// merge writes the entries of kb's staged bucket and of its runs, in key order, into a new
// bucket in commits of mergeChunk entries, and puts it in the staged bucket's place. When the
// runs hold few of the entries (a few batches of a file mostly in order), it puts theirs into
// the staged bucket instead, in key order, so each commit rewrites the pages of a range of it.
func (st *staged) merge(kb keyBucket, spans []runSpan) error {
	s := st.s
	inPlace := inPlaceRatio*st.runs.n[kb] <= st.put[kb]
	runs := make([]*runReader, len(spans))
	for i, sp := range spans {
		runs[i] = &runReader{r: bufio.NewReaderSize(io.NewSectionReader(st.runs.f, sp.from, sp.to-sp.from), 32<<10)}
		if err := runs[i].next(); err != nil {
			return err
		}
	}
	var last []byte // the last key written, from which the next commit goes on
	started, filled := false, false
	for done := false; !done; {
		err := guard(s.bolt.path, func() error {
			return s.bolt.db.Update(func(tx *bbolt.Tx) error {
				stg := tx.Bucket([]byte(stagingBucket))
				if stg == nil {
					return fmt.Errorf("store: the staging bucket of the import into %s is gone", kb.table)
				}
				old, parent, name := stagedBucket(stg.Bucket([]byte("keys")), stg.Bucket([]byte("index")), kb)
				if old == nil {
					return fmt.Errorf("%w: no bucket %q of table %s", errNotStaged, kb.field, kb.table)
				}
				if inPlace {
					return putRuns(old, runs, &done)
				}
				if !started {
					if stg.Bucket([]byte("merge")) != nil {
						if err := stg.DeleteBucket([]byte("merge")); err != nil {
							return err
						}
					}
					m, err := stg.CreateBucket([]byte("merge"))
					if err != nil {
						return err
					}
					if _, err := m.CreateBucket([]byte(name)); err != nil {
						return err
					}
					started = true
				}
				holder := stg.Bucket([]byte("merge"))
				if filled { // every entry is in the new bucket, committed: it takes old's place
					done = true
					if err := parent.DeleteBucket([]byte(name)); err != nil {
						return err
					}
					if err := tx.MoveBucket([]byte(name), holder, parent); err != nil {
						return err
					}
					return stg.DeleteBucket([]byte("merge"))
				}
				dst := holder.Bucket([]byte(name))
				if dst == nil {
					return fmt.Errorf("%w: no merge bucket for %q of table %s", errNotStaged, kb.field, kb.table)
				}
				dst.FillPercent = 1.0 // appended
				reserveFile(s.bolt.file, tx, int64(mergeChunk)*64)

				// The staged bucket's entries from after the last one written.
				c := old.Cursor()
				var k, v []byte
				if last == nil {
					k, v = c.First()
				} else if k, v = c.Seek(last); k != nil && bytes.Equal(k, last) {
					k, v = c.Next()
				}
				inBucket := &mergeSource{key: k, value: v, order: -1}
				h := make(mergeHeap, 0, len(runs)+1)
				if k != nil {
					h = append(h, inBucket)
				}
				for i, r := range runs {
					if !r.done {
						h = append(h, &mergeSource{run: r, key: r.key, value: r.value, order: i})
					}
				}
				heap.Init(&h)
				var block []byte
				save := func(b []byte) []byte { // bbolt keeps what Put is given until the commit
					if cap(block)-len(block) < len(b) {
						block = make([]byte, 0, max(1<<20, len(b)))
					}
					n := len(block)
					block = append(block, b...)
					return block[n:len(block):len(block)]
				}
				for n := 0; n < mergeChunk && len(h) > 0; n++ {
					top := h[0]
					key := save(top.key)
					if err := dst.Put(key, save(top.value)); err != nil {
						return err
					}
					last = key
					if top.run == nil {
						top.key, top.value = c.Next()
					} else {
						if err := top.run.next(); err != nil {
							return err
						}
						top.key, top.value = top.run.key, top.run.value
						if top.run.done {
							top.key = nil
						}
					}
					if top.key == nil {
						heap.Pop(&h)
					} else {
						heap.Fix(&h, 0)
					}
				}
				last = bytes.Clone(last)
				// bbolt's MoveBucket moves a bucket as last committed (its changes in the
				// transaction are lost), so dst is moved by the next commit.
				filled = len(h) == 0
				return nil
			})
		})
		if err != nil {
			return err
		}
		if afterStage != nil {
			afterStage(map[bool]string{true: "put", false: "merge"}[inPlace])
		}
	}
	return nil
}
