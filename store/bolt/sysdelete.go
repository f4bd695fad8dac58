package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/starplan/starplan/store"

	"github.com/ostafen/clover/v2/query"
)

// PruneSys removes, in one atomic transaction, every document of the system collection coll for
// which drop returns true, and with it the documents of the same id in the companion
// collections with (a run's decision goes with its record). drop sees each document's id and
// JSON under the file's write lock (no other write commits meanwhile), so nothing changes between its verdict and the removal; it
// must not call the store. An error from drop, or from the store, removes nothing.
//
// bbolt never shrinks its file: the pages freed here are reused by later writes, so the store
// stops growing rather than getting smaller.
func (s *Store) PruneSys(ctx context.Context, coll string, drop func(store.SysRecord) (bool, error), with ...string) (store.SysPruned, error) {
	return s.pruneSys(ctx, store.SysPrune{Coll: coll, Drop: drop, With: with}, false)
}

// PruneSysOldest is PruneSys offering drop only the documents whose index Order is before
// p.Before (they sort first), after p.After, up to p.Max removals, and writing p.Then's documents
// in the same transaction: a prune of the oldest documents reads them and not the rest, and its
// transaction's dirty pages (which bbolt holds in memory until the commit) are bounded by Max.
// Without a current index it is PruneSys with p.Then.
func (s *Store) PruneSysOldest(ctx context.Context, p store.SysPrune) (store.SysPruned, error) {
	if p.Before == "" {
		return store.SysPruned{}, nil // nothing sorts before it
	}
	return s.pruneSys(ctx, p, true)
}

// pruneChunk is how many index entries pruneSys reads at a time: it holds their ids, not every
// one before the cut.
const pruneChunk = 1024

// oldestSysLocked calls each with the index entries (order \x00 id) of the documents of coll
// whose Order is before before and whose entry is after after, in order, a chunk at a time,
// until each says to stop. ok is false when coll has no current
// index. It runs inside a group; each may remove the documents it is given.
func (s *Store) oldestSysLocked(coll, before, after string, each func(keys []string) (bool, error)) (ok bool, err error) {
	tx := s.bolt.group
	if ready, err := s.sysIndexReadyLocked(tx, coll, false); err != nil || !ready {
		return false, err
	}
	keys := make([]string, 0, pruneChunk)
	for {
		keys = keys[:0]
		c := sysIndexOf(tx, coll).Bucket(sysIdxOrder).Cursor()
		k, _ := c.Seek([]byte(after))
		if k != nil && after != "" && string(k) == after {
			k, _ = c.Next()
		}
		for ; k != nil && len(keys) < pruneChunk; k, _ = c.Next() {
			i := bytes.IndexByte(k, 0)
			if i < 0 || string(k[:i]) >= before {
				break
			}
			keys = append(keys, string(k))
		}
		if len(keys) == 0 {
			return true, nil
		}
		more, err := each(keys)
		if err != nil || !more {
			return true, err
		}
		after = keys[len(keys)-1]
	}
}

func (s *Store) pruneSys(ctx context.Context, p store.SysPrune, oldest bool) (store.SysPruned, error) {
	var out store.SysPruned
	c, err := sysCollection(p.Coll)
	if err != nil {
		return out, err
	}
	companions := make([]string, len(p.With))
	for i, w := range p.With {
		if companions[i], err = sysCollection(w); err != nil {
			return out, err
		}
	}
	err = s.write(ctx, func() error {
		out = store.SysPruned{}
		if ok, err := s.db.HasCollection(c); err != nil || !ok {
			return err
		}
		offer := func(id string, d *cloverDoc) error { // d goes when Drop says so
			raw, _ := d.Get("json").(string)
			ok, err := p.Drop(store.SysRecord{ID: id, JSON: json.RawMessage(raw)})
			if err != nil || !ok {
				return err
			}
			if err := s.db.DeleteById(c, d.ObjectId()); err != nil {
				return err
			}
			if _, _, err := s.indexSysLocked(c, id, nil, 0, true); err != nil {
				return err
			}
			out.IDs = append(out.IDs, id)
			out.Bytes += int64(len(raw))
			for _, wc := range companions {
				n, err := s.deleteSysLocked(wc, id)
				if err != nil {
					return err
				}
				out.Bytes += n
			}
			return nil
		}
		indexed := false
		if oldest {
			indexed, err = s.oldestSysLocked(c, p.Before, p.After, func(keys []string) (bool, error) {
				for _, key := range keys {
					id := key[strings.IndexByte(key, 0)+1:]
					d, err := s.findSysLocked(c, id)
					if err != nil {
						return false, err
					}
					if d == nil {
						return false, &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("the index of %s names document %s, which is missing; starplan db check reports the damage", p.Coll, id)}
					}
					if err := offer(id, d); err != nil {
						return false, err
					}
					out.Cursor = key
					if p.Max > 0 && len(out.IDs) >= p.Max {
						out.More = true
						return false, nil
					}
				}
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		if !indexed {
			docs, err := s.db.FindAll(query.NewQuery(c))
			if err != nil {
				return err
			}
			for _, d := range docs {
				id, _ := d.Get("id").(string)
				if err := offer(id, d); err != nil {
					return err
				}
			}
		}
		slices.Sort(out.IDs)
		if p.Then == nil || len(out.IDs) == 0 {
			return nil
		}
		after, err := p.Then(slices.Clone(out.IDs))
		if err != nil {
			return err
		}
		for _, k := range after.Remove {
			kc, err := sysCollection(k.Collection)
			if err != nil {
				return err
			}
			if _, err := s.deleteSysLocked(kc, k.ID); err != nil {
				return err
			}
		}
		var b sysBatch
		for _, d := range after.Put {
			if err := s.putSysDocIn(d, &b); err != nil {
				return err
			}
		}
		return b.write(s)
	})
	if err != nil {
		return store.SysPruned{}, err
	}
	return out, nil
}

// deleteSysLocked removes the document id of the system collection coll, if there is one, and
// returns the size of its JSON. It runs inside a write group.
func (s *Store) deleteSysLocked(coll, id string) (int64, error) {
	if ok, err := s.db.HasCollection(coll); err != nil || !ok {
		return 0, err
	}
	doc, err := s.findSysLocked(coll, id)
	if err != nil || doc == nil {
		return 0, err
	}
	raw, _ := doc.Get("json").(string)
	if err := s.db.DeleteById(coll, doc.ObjectId()); err != nil {
		return 0, err
	}
	_, _, err = s.indexSysLocked(coll, id, nil, 0, true)
	return int64(len(raw)), err
}
