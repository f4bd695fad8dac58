package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

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
	return s.pruneSys(ctx, coll, "", drop, with)
}

// PruneSysBefore is PruneSys offering drop only the documents whose index Order is before
// before (they sort first), when coll has a current index: a prune of the oldest documents
// reads them and not the rest. Without a current index it is PruneSys.
func (s *Store) PruneSysBefore(ctx context.Context, coll, before string, drop func(store.SysRecord) (bool, error), with ...string) (store.SysPruned, error) {
	if before == "" {
		return store.SysPruned{}, nil // nothing sorts before it
	}
	return s.pruneSys(ctx, coll, before, drop, with)
}

// oldestSysLocked returns the documents of coll whose index Order is before before, in order,
// and ok false when coll has no current index. It runs inside a group.
func (s *Store) oldestSysLocked(coll, before string) (docs []*cloverDoc, ok bool, err error) {
	tx := s.bolt.group
	if ready, err := s.sysIndexReadyLocked(tx, coll, false); err != nil || !ready {
		return nil, false, err
	}
	var ids []string
	c := sysIndexOf(tx, coll).Bucket(sysIdxOrder).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		i := bytes.IndexByte(k, 0)
		if i < 0 || string(k[:i]) >= before {
			break
		}
		ids = append(ids, string(k[i+1:]))
	}
	for _, id := range ids {
		d, err := s.findSysLocked(coll, id)
		if err != nil {
			return nil, false, err
		}
		if d == nil {
			return nil, false, &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("the index of %s names document %s, which is missing; starplan db check reports the damage", coll[1:], id)}
		}
		docs = append(docs, d)
	}
	return docs, true, nil
}

func (s *Store) pruneSys(ctx context.Context, coll, before string, drop func(store.SysRecord) (bool, error), with []string) (store.SysPruned, error) {
	var out store.SysPruned
	c, err := sysCollection(coll)
	if err != nil {
		return out, err
	}
	companions := make([]string, len(with))
	for i, w := range with {
		if companions[i], err = sysCollection(w); err != nil {
			return out, err
		}
	}
	err = s.write(ctx, func() error {
		out = store.SysPruned{}
		if ok, err := s.db.HasCollection(c); err != nil || !ok {
			return err
		}
		var docs []*cloverDoc
		indexed := false
		if before != "" {
			if docs, indexed, err = s.oldestSysLocked(c, before); err != nil {
				return err
			}
		}
		if !indexed {
			if docs, err = s.db.FindAll(query.NewQuery(c)); err != nil {
				return err
			}
		}
		for _, d := range docs {
			id, _ := d.Get("id").(string)
			raw, _ := d.Get("json").(string)
			ok, err := drop(store.SysRecord{ID: id, JSON: json.RawMessage(raw)})
			if err != nil {
				return err
			}
			if !ok {
				continue
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
		}
		return nil
	})
	if err != nil {
		return store.SysPruned{}, err
	}
	slices.Sort(out.IDs)
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
