package bolt

import (
	"bytes"
	"encoding/json"
	"maps"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// keptSeedLocked returns the seed the store keeps, or nil (and no error) when it keeps none. A
// kept seed that is missing from its collection's count and digest, does not decode, or has
// rows that no longer fit the schemas is a *DamagedError. The caller holds s.bolt.mu.
func (s *Store) keptSeedLocked() (map[string][]table.Row, error) {
	c, _ := sysCollection(store.SeedCollection)
	if verr := s.verifySysLocked(c); verr != nil {
		return nil, verr
	}
	raw, err := assembleSeed(func(id string) (json.RawMessage, bool, error) {
		var raw json.RawMessage
		found, err := s.getSysLocked(c, id, &raw)
		return raw, found, err
	})
	if err != nil {
		return nil, &store.DamagedError{Path: s.bolt.path, Problem: err.Error(), Err: err}
	}
	if raw == nil {
		return nil, nil
	}
	seed, err := s.domain.DecodeTables(bytes.NewReader(raw))
	if err != nil {
		return nil, &store.DamagedError{Path: s.bolt.path, Problem: "the seed it keeps does not fit its domain: " + err.Error(), Err: err}
	}
	return seed, nil
}

// seedRows is what Seed writes: the seed the store keeps; for a store that keeps none, the seed
// of the domain it was opened with (a caller that passed Options.Domain with seed rows), or, for
// the built-in inventory domain, its demo data. Otherwise ErrNoSeed: a reseed never empties a
// store for want of rows. The caller holds s.mu.
func (s *Store) seedRows() (map[string][]table.Row, error) {
	var kept map[string][]table.Row
	err := guard(s.bolt.path, func() (err error) {
		s.bolt.mu.Lock()
		defer s.bolt.mu.Unlock()
		kept, err = s.keptSeedLocked()
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case kept != nil:
		return kept, nil
	case s.domain.Seed != nil:
		return s.domain.Seed, nil
	}
	// The built-in demo data serves a store of the inventory domain made before stores kept
	// their seed, when every row of it fits the store's own tables (their docs and indexes may
	// be an older starplan's).
	if inv := store.Inventory(); s.domain.Name == inv.Name && s.fits(inv.Seed) {
		return inv.Seed, nil
	}
	return nil, store.ErrNoSeed
}

// fits reports whether every row of seed is a valid row of the store's table of its name.
func (s *Store) fits(seed map[string][]table.Row) bool {
	for name, rows := range seed {
		sc := s.schemas[name]
		if sc == nil {
			return false
		}
		for _, r := range rows {
			if _, err := sc.ValidateRow(maps.Clone(r)); err != nil {
				return false
			}
		}
	}
	return true
}
