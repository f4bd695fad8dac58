package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/table"
)

// A store keeps what it was made from: its domain's definition files, in its record, each with
// its SHA-256 (definition_sums), and the domain's seed rows, in a system document of their own
// written once when the store is created. The record is rewritten by every commit, so the seed
// (up to MaxSeed) is kept out of it; the seed's document is covered by its collection's count
// and digest like every other document.
const (
	SeedCollection = "seed" // the system collection (as "_seed") of the kept seed
	SeedID         = "seed" // the kept seed's document id
)

// ErrNoSeed is matched (errors.Is) by the error of Seed on a store that keeps no seed: one made
// before stores kept the seed they were made from, of a domain that is not built in.
var ErrNoSeed = errors.New("the store does not keep the seed it was made from")

// DefinitionSums returns the SHA-256 of each definition file, hex, by name.
func DefinitionSums(def map[string]string) map[string]string {
	if def == nil {
		return nil
	}
	sums := make(map[string]string, len(def))
	for name, text := range def {
		sums[name] = fileSum(text)
	}
	return sums
}

func fileSum(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// DefinitionMismatch says how the recorded definition differs from the sums recorded with it,
// naming each file, or returns "" when they agree (or when there are no sums to check: a store
// written before they were kept).
func DefinitionMismatch(def, sums map[string]string) string {
	if sums == nil {
		return ""
	}
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(def)) {
		want, ok := sums[name]
		switch {
		case !ok:
			bad = append(bad, name+" was added")
		case fileSum(def[name]) != want:
			bad = append(bad, name+" was changed")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sums)) {
		if _, ok := def[name]; !ok {
			bad = append(bad, name+" was removed")
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "the domain definition it records does not match the hashes recorded with it (" +
		strings.Join(bad, ", ") + "): it was edited outside starplan, or damaged"
}

// EncodeSeed is the document a store keeps of its domain's seed: {"<table>": [rows]}, as a
// domain's seed.json holds it (decodeTables reads it back, validating every row again).
func EncodeSeed(seed map[string][]table.Row) (json.RawMessage, error) {
	b, err := json.Marshal(seed)
	if err != nil {
		return nil, fmt.Errorf("keeping the domain's seed: %w", err)
	}
	return b, nil
}

// SeedWords names a domain's seed of n rows for a person: "the inventory demo data (7 rows)"
// for the built-in shop, "the library domain's seed (16 rows)" for any other domain.
func SeedWords(domain string, n int) string {
	what := "the " + domain + " domain's seed"
	if domain == domains.Inventory {
		what = "the inventory demo data"
	}
	rows := "rows"
	if n == 1 {
		rows = "row"
	}
	return fmt.Sprintf("%s (%d %s)", what, n, rows)
}
