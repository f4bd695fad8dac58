package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"go.etcd.io/bbolt"
)

// Row counts and digests.
//
// bbolt checks its pages' structure, not their contents: a flipped bit in a document's key makes
// it a document of no collection, a damaged value still decodes as some row, and a lost leaf page
// loses its rows without a trace. So the store's own record keeps, for every collection but its
// own ("_starplan"), the number of documents and an order-independent digest of them: the sum,
// mod 2^64, of docHash over each document's bbolt key and stored bytes. Every write group keeps
// them current in the same bbolt transaction (boltStore tracks each document a group writes or
// deletes, subtracting the old document's hash, read inside the transaction, and adding the new
// one; Store.recordDigestsLocked adds the sums to the record before the commit), so they cost
// O(documents written) per commit. Open verifies the domain tables it reads into memory (a table
// read from the file is verified when it is read whole; see disk.go),
// ListSys and a failed GetSys a system collection's (hashed once per open, then followed by
// the commits' deltas: Store.verifySysLocked), and Check all of them; a mismatch is a
// *DamagedError.
//
// The digest detects damage, not tampering: whoever can rewrite data.db can rewrite the record.
//
// A store written before digests existed has none: nothing is verified until its first write,
// which computes them from what the file holds (a write-open, such as exec or db init, does it as
// it opens; run db check first if the file is suspect).

// collDigest is the count and digest of one collection's documents.
type collDigest struct {
	Rows int64  `json:"rows"`
	Sum  uint64 `json:"sum"`
}

func (d *collDigest) add(key, value []byte) { d.addHash(docHash(key, value)) }

// addHash adds a document whose docHash is h.
func (d *collDigest) addHash(h uint64) {
	d.Rows++
	d.Sum += h
}

func (d *collDigest) remove(key, value []byte) {
	d.Rows--
	d.Sum -= docHash(key, value)
}

// docHash is a 64-bit hash of one document's key and value: xxHash64's round over 8-byte words
// (one lane: documents are small) and splitmix64's finaliser, so that the sum of hashes mixes
// every bit. It is fixed: the digests it makes are stored, so changing it is a format change.
func docHash(key, value []byte) uint64 {
	h := hashWords(prime5^uint64(len(key))*prime1, key)
	h = hashWords(h^uint64(len(value))*prime2, value)
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// The primes of xxHash64.
const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
	prime5 uint64 = 2870177450012600261
)

func hashWords(h uint64, b []byte) uint64 {
	round := func(h, w uint64) uint64 { return bits.RotateLeft64(h+w*prime2, 31) * prime1 }
	for ; len(b) >= 8; b = b[8:] {
		h = round(h, binary.LittleEndian.Uint64(b))
	}
	if len(b) > 0 {
		var tail [8]byte
		copy(tail[:], b)
		h = round(h, binary.LittleEndian.Uint64(tail[:]))
	}
	return h
}

// docKeyPrefix starts every clover document key: "c:" + collection + ";d:" + id.
var docKeyPrefix = []byte("c:")

// docCollection returns the collection of a clover document key, and false for other keys (clover's
// collection metadata, "coll:NAME") and for the store's own record, which holds the digests.
func docCollection(key []byte) (string, bool) {
	if !bytes.HasPrefix(key, docKeyPrefix) {
		return "", false
	}
	rest := key[len(docKeyPrefix):]
	i := bytes.Index(rest, []byte(";d:"))
	if i < 0 {
		return "", false
	}
	coll := string(rest[:i])
	return coll, coll != metaCollection
}

// scanDigests computes the count and digest of every collection in the file (the store's record
// excepted) by a walk of every document.
func scanDigests(tx *bbolt.Tx) map[string]collDigest {
	out := map[string]collDigest{}
	b := tx.Bucket([]byte(rootBucket))
	if b == nil {
		return out
	}
	c := b.Cursor()
	for k, v := c.Seek(docKeyPrefix); k != nil && bytes.HasPrefix(k, docKeyPrefix); k, v = c.Next() {
		if coll, ok := docCollection(k); ok {
			d := out[coll]
			d.add(k, v)
			out[coll] = d
		}
	}
	return out
}

// collDigestOf computes the count and digest of one collection's documents.
func collDigestOf(tx *bbolt.Tx, coll string) collDigest {
	var d collDigest
	b := tx.Bucket([]byte(rootBucket))
	if b == nil {
		return d
	}
	prefix := docPrefix(coll)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		d.add(k, v)
	}
	return d
}

// digestMismatch describes how what a collection holds differs from what the store recorded, or
// returns "" when it does not.
func digestMismatch(coll string, recorded, found collDigest) string {
	return digestMismatchOf(coll, "table "+coll, recorded, found)
}

// digestMismatchOf is digestMismatch with the collection named as what (for a table).
func digestMismatchOf(coll, what string, recorded, found collDigest) string {
	one, many := "row", "rows"
	if strings.HasPrefix(coll, "_") {
		what, one, many = "system collection "+coll, "record", "records"
	}
	switch {
	case found == recorded:
		return ""
	case found.Rows != recorded.Rows:
		return fmt.Sprintf("%s holds %d %s but the store recorded %d: %s were lost, or added or renamed outside starplan",
			what, found.Rows, plural(found.Rows, one, many), recorded.Rows, many)
	default:
		return fmt.Sprintf("%s holds the %d %s the store recorded, but they do not match the store's digest of them: one was changed outside starplan",
			what, found.Rows, plural(found.Rows, one, many))
	}
}

// digestMismatches compares every collection recorded or found, in name order; tables are the
// domain's tables (any other name is a collection of no table: a damaged key, or not starplan's).
func digestMismatches(recorded, found map[string]collDigest, tables []string) []string {
	names := map[string]bool{}
	for n := range recorded {
		names[n] = true
	}
	for n := range found {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var out []string
	for _, n := range sorted {
		what := "table " + n
		if !slices.Contains(tables, n) {
			what = "collection " + n + " (no table of this store)"
		}
		if msg := digestMismatchOf(n, what, recorded[n], found[n]); msg != "" {
			out = append(out, msg)
		}
	}
	return out
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
