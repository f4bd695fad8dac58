package bolt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/ostafen/clover/v2/query"
	"github.com/starplan/starplan/store"
)

// The kept seed is stored in parts.
//
// A seed of 100,000 rows is 12 MB of JSON. Kept as one document it shared a bbolt leaf with its
// neighbour, the store's record ("_starplan" sorts right after "_seed"), which every commit
// rewrites: bbolt keeps at least two keys per leaf, so every commit wrote the whole 12 MB leaf
// again (an apply took 18 ms beside a 100k-row seed, 3.7 ms beside a small one). So no stored
// value is large: the seed's JSON is cut, at rune boundaries, into parts of at most
// seedPartBytes, each a document of the seed collection holding the part as a JSON string (at
// most twice as long, escaped), with ids "seed/1", "seed/2", ...; the document at store.SeedID is
// the manifest {"$seed": {"parts", "bytes", "sha256"}} ("$seed" cannot be a table name, so a
// manifest is never mistaken for the whole-seed document {"<table>": [rows]} that stores made
// before this keep, and which still reads). A part missing, or parts that do not add up to the
// manifest's length and hash, is damage.
const seedPartBytes = 32 << 10

type seedManifest struct {
	Parts  int    `json:"parts"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

type seedManifestDoc struct {
	Seed *seedManifest `json:"$seed"`
}

func seedPartID(i int) string { return fmt.Sprintf("%s/%d", store.SeedID, i) }

// splitSeed cuts seed into parts of at most seedPartBytes, at rune boundaries.
func splitSeed(seed []byte) []string {
	var parts []string
	for len(seed) > 0 {
		n := min(seedPartBytes, len(seed))
		for n < len(seed) && n > 0 && !utf8.RuneStart(seed[n]) {
			n--
		}
		parts = append(parts, string(seed[:n]))
		seed = seed[n:]
	}
	return parts
}

// putKeptSeedLocked writes seed as the kept seed of the seed collection c, in parts (inside a
// group). Any seed kept before is removed first.
func (s *Store) putKeptSeedLocked(c string, seed []byte) error {
	if err := s.deleteKeptSeedLocked(c); err != nil {
		return err
	}
	if seed == nil {
		return nil
	}
	parts := splitSeed(seed)
	for i, p := range parts {
		if err := s.putSysLocked(c, seedPartID(i+1), p); err != nil {
			return err
		}
	}
	sum := sha256.Sum256(seed)
	return s.putSysLocked(c, store.SeedID, seedManifestDoc{Seed: &seedManifest{Parts: len(parts), Bytes: len(seed), SHA256: hex.EncodeToString(sum[:])}})
}

// deleteKeptSeedLocked removes every document of the seed collection c (inside a group).
func (s *Store) deleteKeptSeedLocked(c string) error {
	ok, err := s.db.HasCollection(c)
	if err != nil || !ok {
		return err
	}
	docs, err := s.db.FindAll(query.NewQuery(c))
	if err != nil {
		return err
	}
	for _, d := range docs {
		id, _ := d.Get("id").(string)
		if _, err := s.deleteSysLocked(c, id); err != nil {
			return err
		}
	}
	return nil
}

// assembleSeed reads the kept seed through get (the JSON of a document of the seed collection by
// id, and whether it exists): nil when the store keeps none, the whole-seed document of an older
// store as it is, or the parts a manifest names, joined. A part that is missing, does not read,
// or parts that do not match the manifest are an error that says so (damage, to the caller).
func assembleSeed(get func(id string) (json.RawMessage, bool, error)) (json.RawMessage, error) {
	raw, found, err := get(store.SeedID)
	if err != nil {
		return nil, fmt.Errorf("the seed it keeps does not read back: %w", err)
	}
	if !found {
		return nil, nil
	}
	var m seedManifestDoc
	if err := json.Unmarshal(raw, &m); err != nil || m.Seed == nil {
		return raw, nil // a whole-seed document (or one that does not decode: the caller says so)
	}
	if m.Seed.Parts < 0 || m.Seed.Bytes < 0 {
		return nil, fmt.Errorf("the seed it keeps has a damaged manifest (%d parts, %d bytes)", m.Seed.Parts, m.Seed.Bytes)
	}
	seed := make([]byte, 0, m.Seed.Bytes)
	for i := 1; i <= m.Seed.Parts; i++ {
		praw, found, err := get(seedPartID(i))
		if err != nil {
			return nil, fmt.Errorf("the seed it keeps does not read back: part %d of %d: %w", i, m.Seed.Parts, err)
		}
		if !found {
			return nil, fmt.Errorf("the seed it keeps is missing part %d of %d (%s)", i, m.Seed.Parts, seedPartID(i))
		}
		var p string
		if err := json.Unmarshal(praw, &p); err != nil {
			return nil, fmt.Errorf("the seed it keeps has a damaged part %d of %d: %v", i, m.Seed.Parts, err)
		}
		seed = append(seed, p...)
	}
	sum := sha256.Sum256(seed)
	if len(seed) != m.Seed.Bytes || hex.EncodeToString(sum[:]) != m.Seed.SHA256 {
		return nil, fmt.Errorf("the seed it keeps is damaged: its %d parts (%d bytes) do not match the length and hash its manifest recorded (%d bytes)", m.Seed.Parts, len(seed), m.Seed.Bytes)
	}
	return seed, nil
}
