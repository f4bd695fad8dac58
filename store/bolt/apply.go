package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
	"go.etcd.io/bbolt"
)

// Pending returns the run's writes and reads in serializable form, tables by name and rows in
// key order (store.Pending's AddTable).
func (sg *Stage) Pending() *store.Pending {
	p := store.NewPending(sg.st.domain.Name)
	for _, name := range sg.st.names {
		t := sg.tables[name]
		preds, all, allVer := t.preds.Pending(name)
		p.AddTable(name, t.pendingWrites(), preds, all, allVer, t.reads)
	}
	return p
}

// pendingWrites is the run's final state of each row it wrote.
func (t *stageTable) pendingWrites() []store.PendingWrite {
	out := make([]store.PendingWrite, 0, len(t.writes))
	for _, w := range t.writes {
		out = append(out, store.PendingWrite{Table: t.s.Name, Key: w.key, Base: w.base, Before: w.before, Row: w.row})
	}
	return out
}

// op is one normalised write.
type op struct {
	s    *store.Schema
	key  any
	row  table.Row // nil: delete
	base int64
	cur  *rec // the committed row it replaces (nil: none), read under the write lock
}

// currentLocked reads the committed row each op replaces. The caller holds s.mu.
func (s *Store) currentLocked(ops []op) error {
	for i := range ops {
		var err error
		if ops[i].cur, err = s.tables[ops[i].s.Name].get(ops[i].key); err != nil {
			return err
		}
	}
	return nil
}

// curVer is the committed version of the row o replaces, 0 when there is none.
func (o *op) curVer() int64 {
	if o.cur == nil {
		return 0
	}
	return o.cur.ver
}

type readCheck struct {
	s    *store.Schema
	key  any
	all  bool
	ver  int64
	pred *store.PredCheck // a predicate read
}

// normalize checks p against the schemas (store.CheckPending).
func (s *Store) normalize(p *store.Pending) ([]op, []readCheck, error) {
	ws, rs, err := store.CheckPending(p, s.domain.Name, s.schemas, store.CheckPred)
	if err != nil {
		return nil, nil, err
	}
	ops := make([]op, len(ws))
	for i, w := range ws {
		ops[i] = op{s: w.Schema, key: w.Key, row: w.Row, base: w.Base}
	}
	reads := make([]readCheck, len(rs))
	for i, r := range rs {
		reads[i] = readCheck{s: r.Schema, key: r.Key, all: r.All, ver: r.Version, pred: r.Pred}
	}
	return ops, reads, nil
}

// ApplyPending writes p's changes and the extra system documents in one atomic transaction,
// after checking that every row p changed or read is still at the version it saw and that every
// predicate p read still finds what it found. If anything moved it returns a *ConflictError
// (errors.Is(err, ErrConflict)) naming the tables and keys, and writes nothing. Then verify, when
// not nil, sees the change set as it will be committed and the committed state it joins; an
// error from it aborts the apply. A kill at any instant leaves the store at the state before or
// after the whole apply. The extra documents let the engine mark its audit record as applied in
// the same step.
//
// verify runs outside the write lock, so that reads and dry runs go on while a domain's rules
// take their time (seconds, at worst): under a read lock the changes are checked and their
// change set made, then verify runs on it with a Committed that notes the version of every table
// it reads, and under the write lock everything is checked again. The changes' rows at the
// versions verify saw make the same change set (a version is the commit that wrote the row), and
// a table verify read at the same version reads the same; if one of those tables moved
// meanwhile, verify runs again under the write lock, as it would have with nothing between,
// whether it passed or refused (its reads may have straddled a commit).
func (s *Store) ApplyPending(ctx context.Context, p *store.Pending, verify store.Verify, extra ...store.SysDoc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The steps, timed when the caller asks (store.ApplySteps): the check (this one from the
	// start, the pending change's own check included), verify, the check again under the write
	// lock (its wait included), verify again if what it read moved, the commit.
	steps := store.ApplyStepsOf(ctx)
	began := steps.Begin()
	ops, reads, err := s.normalize(p)
	if err != nil {
		steps.Done(store.StepCheck, began, err)
		return err
	}
	var seen *versionedReader
	var verr error // verify's answer outside the lock, which stands unless what it read moved
	if verify != nil {
		if seen, verr = s.verifyUnlocked(ops, reads, verify, steps, began); seen == nil {
			return verr // the changes themselves conflict
		}
		began = steps.Begin()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.validateLocked(ops, reads); err != nil {
		steps.Done(store.StepCheck, began, err)
		return err
	}
	steps.Done(store.StepCheck, began, nil)
	if verify != nil && seen.moved() {
		// A refusal too: reads of two tables that straddled a commit saw a state the store
		// never held.
		v := steps.Begin()
		verr = verify(s.changeSetLocked(ops), lockedReader{s})
		steps.Done(store.StepVerify, v, verr)
	}
	if verr != nil {
		return verr
	}
	c := steps.Begin()
	err = s.commitLocked(ops, extra)
	steps.Done(store.StepCommit, c, err)
	return err
}

// Conflicts implements store.ConflictChecker: the conflict check of ApplyPending, under the read
// lock only, so that it waits for no commit under way (a commit of the audit log's records holds
// the write lock of the files, not this one's).
func (s *Store) Conflicts(ctx context.Context, p *store.Pending) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	steps := store.ApplyStepsOf(ctx)
	began := steps.Begin()
	ops, reads, err := s.normalize(p)
	if err == nil {
		s.mu.RLock()
		err = s.validateLocked(ops, reads)
		s.mu.RUnlock()
	}
	steps.Done(store.StepCheck, began, err)
	return err
}

// verifyUnlocked checks the changes and makes their change set under the read lock, then runs
// verify on it with no lock held. It returns the reader, which knows which tables verify read
// at which versions, with verify's error; no reader when the changes conflict. steps times the
// check (begun at began) and verify.
func (s *Store) verifyUnlocked(ops []op, reads []readCheck, verify store.Verify, steps *store.ApplySteps, began time.Time) (*versionedReader, error) {
	s.mu.RLock()
	if err := s.validateLocked(ops, reads); err != nil {
		s.mu.RUnlock()
		steps.Done(store.StepCheck, began, err)
		return nil, err
	}
	cs := s.changeSetLocked(ops)
	s.mu.RUnlock()
	steps.Done(store.StepCheck, began, nil)
	r := &versionedReader{s: s, vers: map[string]int64{}}
	v := steps.Begin()
	err := verify(cs, r)
	steps.Done(store.StepVerify, v, err)
	return r, err
}

// validateLocked reads the committed rows ops replace and checks that nothing p changed or read
// has moved (see ApplyPending). The caller holds s.mu, for reading at least.
func (s *Store) validateLocked(ops []op, reads []readCheck) error {
	if s.closed {
		return errors.New("store is closed")
	}
	if err := s.currentLocked(ops); err != nil {
		return err
	}
	var conflicts []store.Conflict
	for _, o := range ops {
		if now := o.curVer(); now != o.base {
			conflicts = append(conflicts, store.Conflict{Table: o.s.Name, Key: o.key, Seen: o.base, Now: now})
		}
	}
	var predConflicts []store.Conflict
	for _, r := range reads {
		mt := s.tables[r.s.Name]
		switch {
		case r.pred != nil:
			ok, err := holds(r.pred, mt)
			if err != nil {
				return err
			}
			if !ok {
				predConflicts = append(predConflicts, store.Conflict{Table: r.s.Name, Seen: r.ver, Now: mt.ver, Read: r.pred.Describe()})
			}
		case r.all:
			if mt.ver != r.ver {
				conflicts = append(conflicts, store.Conflict{Table: r.s.Name, Seen: r.ver, Now: mt.ver})
			}
		default:
			now, err := mt.version(r.key)
			if err != nil {
				return err
			}
			if now != r.ver {
				conflicts = append(conflicts, store.Conflict{Table: r.s.Name, Key: r.key, Seen: r.ver, Now: now})
			}
		}
	}
	conflicts = store.AddPredConflicts(conflicts, predConflicts)
	if len(conflicts) > 0 {
		return &store.ConflictError{Conflicts: conflicts}
	}
	return nil
}

// versionedReader is the Committed of a verify run outside the write lock: each read takes the
// read lock and notes the version of the table it read, so that the apply can tell, under the
// write lock, whether verify would read the same now.
type versionedReader struct {
	s    *Store
	mu   sync.Mutex
	vers map[string]int64 // table → its version when verify first read it
	// changed: a table verify read moved between two of its reads
	changed bool
}

func (r *versionedReader) LastRow(tbl string) (table.Row, bool, error) {
	r.s.mu.RLock()
	defer r.s.mu.RUnlock()
	if r.s.closed {
		return nil, false, errors.New("store is closed")
	}
	mt := r.s.tables[tbl]
	if mt == nil {
		return nil, false, fmt.Errorf("no table %s", tbl)
	}
	r.note(tbl, mt.ver)
	return lastRow(mt)
}

func (r *versionedReader) note(tbl string, ver int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.vers[tbl]; ok && v != ver {
		r.changed = true
	}
	if _, ok := r.vers[tbl]; !ok {
		r.vers[tbl] = ver
	}
}

// moved reports whether a table verify read has been committed to since. The caller holds the
// Store's write lock.
func (r *versionedReader) moved() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed {
		return true
	}
	for tbl, ver := range r.vers {
		if mt := r.s.tables[tbl]; mt == nil || mt.ver != ver {
			return true
		}
	}
	return false
}

// changeSetLocked renders checked ops as the change set they make to the committed rows. The
// caller holds s.mu.
func (s *Store) changeSetLocked(ops []op) table.ChangeSet {
	cs := table.ChangeSet{}
	for _, o := range ops {
		var before table.Row
		if o.cur != nil {
			before = o.cur.row
		}
		store.AddChange(cs, o.s, o.key, before, o.row)
	}
	return cs
}

// lockedReader reads committed rows while the caller holds s.mu.
type lockedReader struct{ s *Store }

func (l lockedReader) LastRow(tbl string) (table.Row, bool, error) {
	mt := l.s.tables[tbl]
	if mt == nil {
		return nil, false, fmt.Errorf("no table %s", tbl)
	}
	return lastRow(mt)
}

// stopStaleLoads stops the reads into memory under way of the tables ops write bulkPut rows or
// more of, before the commit writes (see committedTable.stopLoad). The caller holds s.mu.
func (s *Store) stopStaleLoads(ops []op) {
	if len(ops) < bulkPut {
		return
	}
	n := map[*store.Schema]int{}
	for _, o := range ops {
		n[o.s]++
	}
	for sc, k := range n {
		if t := s.tables[sc.Name]; t != nil && k >= bulkPut {
			t.stopLoad()
		}
	}
}

// commitLocked writes ops (already checked, each with the committed row it replaces: see
// currentLocked) and extra in one bbolt transaction at the next sequence number, then publishes
// them. The caller holds s.mu.
func (s *Store) commitLocked(ops []op, extra []store.SysDoc) error {
	if len(ops) == 0 && len(extra) == 0 {
		return nil
	}
	seq := s.seq
	if len(ops) > 0 {
		seq++
	}
	touched := map[string]bool{}
	s.stopStaleLoads(ops)
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	ids := make([]string, len(ops)) // the document id of each op's row
	err := s.bolt.runGroup(func(tx *bbolt.Tx) error {
		reserveFile(s.bolt.file, tx, opsSize(ops))
		hint := map[string]int{}
		for _, o := range ops {
			hint[o.s.Name]++
		}
		s.bolt.keyOps.hint = hint
		// New rows are written in chunks, each collection's in id order (so bbolt appends),
		// encoded only when their chunk is written: a large commit never holds every new
		// document at once, and all of them still commit in this one transaction.
		inserts := map[string][]newDoc{}
		flush := func(coll string) error {
			docs := inserts[coll]
			err := s.insertNew(coll, seq, docs)
			clear(docs)
			inserts[coll] = docs[:0]
			return err
		}
		n := 0
		for i, o := range ops {
			coll := o.s.Name
			touched[coll] = true
			cur := o.cur
			switch {
			case o.row == nil:
				if err := s.db.DeleteById(coll, cur.id); err != nil {
					return err
				}
			case cur == nil:
				n++
				ids[i] = rowDocID(seq, n)
				if inserts[coll] = append(inserts[coll], newDoc{id: ids[i], row: o.row}); len(inserts[coll]) == insertChunk {
					if err := flush(coll); err != nil {
						return err
					}
				}
			default:
				ids[i] = cur.id
				written := &s.bolt.keyOps.written
				*written = writtenRow{id: cur.id, row: o.row, ver: seq}
				err := s.db.ReplaceById(coll, cur.id, encodeDoc(cur.id, o.row, seq))
				*written = writtenRow{}
				if err != nil {
					return err
				}
			}
		}
		for _, coll := range s.names { // in a fixed order, ids ascending: bbolt appends
			if err := flush(coll); err != nil {
				return err
			}
		}
		var sys sysBatch
		for _, d := range extra {
			if err := s.putSysDocIn(d, &sys); err != nil {
				return err
			}
		}
		if err := sys.write(s); err != nil {
			return err
		}
		if len(ops) == 0 {
			return nil
		}
		// The record's digests are kept: the group's end adds this commit's changes to them.
		m, found, err := s.recordLocked(tx)
		if err != nil {
			return err
		}
		if !found {
			return errors.New("store: the store's own record is missing")
		}
		s.advanceRecord(m, seq, touched)
		s.setRecordLocked(tx, m) // written by the group's end, with its digests
		return nil
	})
	var we *store.WriteError
	if errors.As(err, &we) || errors.Is(err, store.ErrDamaged) {
		return err // they name the file and say that nothing was written
	}
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	entries := map[string][]putEntry{}
	grew := map[string]int64{}
	for i, o := range ops {
		entries[o.s.Name] = append(entries[o.s.Name], putEntry{key: o.key, row: o.row, id: ids[i]})
		switch {
		case o.cur == nil && o.row != nil:
			grew[o.s.Name]++
		case o.cur != nil && o.row == nil:
			grew[o.s.Name]--
		}
	}
	s.seq = seq
	for name := range touched {
		s.tables[name].publish(entries[name], seq, grew[name])
	}
	return nil
}

// reserveMin is the smallest estimated commit for which reserveFile grows the file ahead.
const reserveMin = 4 << 20

// reserveFile makes bbolt's file f large enough, before tx commits, for about need more bytes
// of documents, so that bbolt maps it once during the commit. bbolt allocates a commit's pages
// only as it writes them, and each time they pass the end of its memory map it maps the file
// again at about twice the size, first copying every key and value the transaction has changed
// out of the old map; its map covers at least the whole file. So without this a commit of n new
// rows into a small file remapped about log2(n) times, each copying all n rows (the superlinear
// time and most of the memory of a large import). The space past bbolt's pages is zeros that
// bbolt ignores and fills later (bbolt itself grows the file ahead, by Options.AllocSize), so a
// crash leaves the same store, in a longer file. f is bbolt's own handle, not a second one:
// closing any handle of a file drops its fcntl locks where bbolt uses those, and a path may name
// another file by now. Stored documents repeat their field names, id and bucket key, and pages
// are written about half full, hence three times need. It is best effort: an error (or Windows,
// which cannot grow a mapped file) leaves bbolt to grow the file itself.
func reserveFile(f *os.File, tx *bbolt.Tx, need int64) {
	if need < reserveMin || f == nil {
		return
	}
	page := int64(tx.DB().Info().PageSize)
	target := tx.Size() + 3*need
	target = (target + page - 1) / page * page
	if fi, err := f.Stat(); err != nil || fi.Size() >= target {
		return
	}
	if f.Truncate(target) == nil {
		f.Sync() // as bbolt does when it grows the file: the size must survive a crash too
	}
}

// insertChunk is how many new documents commitLocked hands clover in one Insert call.
const insertChunk = 4096

// opsSize estimates the bytes ops' rows take as stored documents and their keys.
func opsSize(ops []op) int64 {
	var n int64
	for _, o := range ops {
		if o.row != nil {
			n += store.RowSize(o.row) + 64 // + the key, _id, _v and bbolt's element header
		}
	}
	return n
}

// advanceRecord makes m the record after a commit at seq that changed the touched tables; its
// digests are kept (the group's end adds the commit's changes), and its definition.
func (s *Store) advanceRecord(m *liveRecord, seq int64, touched map[string]bool) {
	m.Format, m.Domain, m.Seq, m.Keys = formatVersion, s.domain.Name, seq, s.keys
	m.Tables = make(map[string]int64, len(s.tables))
	for name, t := range s.tables {
		m.Tables[name] = t.ver
		if touched[name] {
			m.Tables[name] = seq
		}
	}
}

var _ store.ConflictChecker = (*Store)(nil)
