package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/store"
)

var _ store.DomainUpgrader = (*Store)(nil)

// UpgradeDomain implements store.DomainUpgrader. Every committed row is read (a table kept in the
// file too) and validated against dom's schema of its table; a table that holds rows may neither
// disappear nor change its key field. The commit records dom's definition with its sums, keeps
// dom's seed (or none), adds dom's new tables, empty, and drops the key and index buckets' mark
// (Keys), so that the next open that may write builds them for the new schemas.
func (s *Store) UpgradeDomain(ctx context.Context, dom *store.Domain, extra ...store.SysDoc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	schemas, err := dom.Schemas()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("store is closed")
	}
	if dom.Name != s.domain.Name {
		return &store.DomainError{Dir: s.dir, Holds: s.domain.Name, Wanted: dom.Name}
	}
	ue := &store.UpgradeError{}
	bad := func(p store.RowProblem) {
		if len(ue.Problems) < store.MaxRowProblems {
			ue.Problems = append(ue.Problems, p)
		} else {
			ue.More++
		}
	}
	for _, name := range s.names {
		t, old := s.tables[name], s.schemas[name]
		sc := schemas[name]
		n := t.count()
		switch {
		case sc == nil && n > 0:
			bad(store.RowProblem{Table: name, Problem: fmt.Sprintf("holds %d rows, and the new definition does not declare the table", n)})
			continue
		case sc == nil:
			continue
		case sc.Key != old.Key && n > 0:
			bad(store.RowProblem{Table: name, Field: sc.Key, Problem: fmt.Sprintf("the key changes from %s to %s, and the table holds %d rows; a key cannot change under rows", old.Key, sc.Key, n)})
			continue
		}
		var werr error
		for _, r := range t.walk(ctx, nil, nil, false, &werr) {
			if p, ok := store.UpgradeRowProblem(sc, r.key, r.row); !ok {
				bad(p)
			}
		}
		if werr != nil {
			return werr
		}
	}
	if len(ue.Problems) > 0 {
		return ue
	}
	var seed json.RawMessage
	if len(dom.Seed) > 0 {
		if seed, err = store.EncodeSeed(dom.Seed); err != nil {
			return err
		}
	}
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	err = guard(s.bolt.path, func() error {
		return s.bolt.runGroup(func(*bbolt.Tx) error {
			for _, t := range dom.Tables {
				ok, err := s.db.HasCollection(t.Name)
				if err != nil {
					return err
				}
				if !ok {
					if err := s.db.CreateCollection(t.Name); err != nil {
						return err
					}
				}
			}
			c, _ := sysCollection(store.SeedCollection)
			if err := s.putKeptSeedLocked(c, seed); err != nil { // or removes it, for none
				return err
			}
			for _, d := range extra {
				if err := s.putSysDoc(d); err != nil {
					return err
				}
			}
			var m metaRecord
			if _, err := s.getSysLocked(metaCollection, metaID, &m); err != nil {
				return err
			}
			m.Definition, m.DefinitionSums, m.Keys = dom.Definition, store.DefinitionSums(dom.Definition), 0
			return s.putSysLocked(metaCollection, metaID, m)
		})
	})
	if err != nil {
		return err
	}
	// The committed tables in memory are the old schemas': nothing more is served.
	s.quitOnce.Do(func() { close(s.quit) }) // a read into memory under way stops, as Close does
	s.closed = true
	return s.db.Close()
}
