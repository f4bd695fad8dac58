package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

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
				var meta struct{ Indexes json.RawMessage }
				if json.Unmarshal(v, &meta) == nil && len(meta.Indexes) > 0 && string(meta.Indexes) != "null" {
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

// afterStage, when set, is called after each staging commit (the kill test's child reports them).
var afterStage func()

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
			return k.applyIn(stg.Bucket([]byte("keys")), stg.Bucket([]byte("index")))
		})
	})
	if err == nil && afterStage != nil {
		afterStage()
	}
	return err
}

// finish makes the staged rows the table's in one commit, and publishes them.
func (st *staged) finish() error {
	s, name := st.s, st.sc.Name
	s.bolt.mu.Lock()
	err := s.bolt.runGroup(func(tx *bbolt.Tx) error {
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
		metaKey := []byte(cloverCollectionKey + name)
		var meta struct {
			Size    int
			Indexes json.RawMessage
		}
		if v := b.Get(metaKey); v == nil {
			return fmt.Errorf("store: no collection %s in %s", name, s.bolt.path)
		} else if err := json.Unmarshal(v, &meta); err != nil {
			return &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("collection %s's record does not read: %v", name, err), Err: err}
		}
		meta.Size += st.n
		v, err := json.Marshal(meta)
		if err != nil {
			return err
		}
		if err := b.Put(metaKey, v); err != nil {
			return err
		}
		d := s.bolt.delta[name]
		if d == nil {
			d = &collDigest{}
			s.bolt.delta[name] = d
		}
		d.Rows += st.dg.Rows
		d.Sum += st.dg.Sum
		var m metaRecord
		if _, err := s.getSysLocked(metaCollection, metaID, &m); err != nil {
			return err
		}
		next := s.metaAt(st.ver, map[string]bool{name: true})
		next.Digests = m.Digests
		return s.putSysLocked(metaCollection, metaID, next)
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

// errNotStaged is returned by applyIn for a bucket it cannot find.
var errNotStaged = errors.New("store: the import's staging buckets are incomplete")

// applyIn makes the changes as apply does, in the keys bucket and index buckets of staging roots
// kroot and iroot instead of the live ones.
func (k *keyOps) applyIn(kroot, iroot *bbolt.Bucket) error {
	if kroot == nil || iroot == nil {
		return errNotStaged
	}
	return k.applyWith(func(kb keyBucket) *bbolt.Bucket {
		if kb.field == "" {
			return kroot.Bucket([]byte(kb.table))
		}
		if idx := iroot.Bucket([]byte(kb.table)); idx != nil {
			return idx.Bucket([]byte(kb.field))
		}
		return nil
	})
}
