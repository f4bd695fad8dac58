package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/starplan/starplan/store"

	d "github.com/ostafen/clover/v2/document"
	"github.com/ostafen/clover/v2/query"
	"go.etcd.io/bbolt"
)

// Ordered indexes of system collections.
//
// System documents are clover documents keyed by a hash of their id (sysDocID), or, since
// 2026-11-29, by the order they were written in (sysDocKeys, sequencedDocID): neither is an
// order a reader could walk a part of, and listing the newest runs meant reading every record. A collection whose writers give each document a SysIndex (the audit log) gets
// an index that the store keeps in bbolt buckets of its own, in the same transaction as the
// documents, so the two cannot drift:
//
//	sysIndexBucket/<collection>/
//	  "digest" → the collection's count and digest (digest.go) the index was last kept with
//	  stats/   group → how many documents, and the bytes of their JSON (two big-endian uint64)
//	  ids/     id → the document's entry: order, group, bytes and, for a document stored in
//	           sequence, its clover id (sysEntry.Key; the bucket's sequence numbers them)
//	  order/   order \x00 id → group
//	  groups/<group>/  order \x00 id → nothing
//
// Once a collection has an index, every write of it must carry one (an error otherwise), and
// every delete (PruneSys) removes the document's entries. The index is current when its
// "digest" equals the collection's digest in the store's record: a starplan that does not know
// indexes writes documents without entries and moves the record's digest, so its writes make the
// index stale, never wrong. A stale or missing index is not used (SysIndexReady is false) and is
// built again by RebuildSysIndex; writes leave a stale index alone. The first indexed write of
// an empty collection makes its index.
const (
	sysIndexBucket = "starplan:sysindex"
	// CheckSysIndex is the check whose problems are a system collection's index that does not
	// match its documents.
	CheckSysIndex = "sysindex"
)

var (
	sysIdxDigestKey = []byte("digest")
	sysIdxStats     = []byte("stats")
	sysIdxIDs       = []byte("ids")
	sysIdxOrder     = []byte("order")
	sysIdxGroups    = []byte("groups")
	// sysIdxLayoutKey marks an index this version made or kept that knows where documents stored
	// in sequence are (entries with keys). An earlier starplan's rebuild makes the index afresh
	// without it (and without keys), while the mark of the collection in the root bucket
	// (sequencedMark), which it does not touch, says such documents exist: that index is not
	// current (sysIndexCurrent), and this version rebuilds it at open.
	sysIdxLayoutKey = []byte("layout")
	sysIdxLayout    = []byte("sequenced")
)

// sequencedMark is the root index bucket's key saying that coll holds documents stored in
// sequence (written with their first one).
func sequencedMark(coll string) []byte { return []byte("sequenced:" + coll) }

// sysEntry is an indexed document's entry in the ids bucket.
type sysEntry struct {
	Order string `json:"o"`
	Group string `json:"g"`
	Bytes int64  `json:"b"`
	// Key is the clover id the document is stored under when it was stored in sequence
	// (sequencedDocID); empty: where sysDocKeys says, as every document was before.
	Key string `json:"k,omitempty"`
}

func (e sysEntry) key(id string) []byte { return []byte(e.Order + "\x00" + id) }

// marshal is json.Marshal(e), without its reflection where no string needs escaping (every
// write of an indexed document writes its entry; issue 32). TestSysEntryMarshalIsEncodingJSON
// holds it to json.Marshal.
func (e sysEntry) marshal() []byte {
	if !plainJSONString(e.Order) || !plainJSONString(e.Group) || !plainJSONString(e.Key) {
		raw, _ := json.Marshal(e) // strings and a number: it always encodes
		return raw
	}
	b := make([]byte, 0, 24+len(e.Order)+len(e.Group)+len(e.Key)+20)
	b = append(append(append(b, `{"o":"`...), e.Order...), `","g":"`...)
	b = append(append(b, e.Group...), `","b":`...)
	b = strconv.AppendInt(b, e.Bytes, 10)
	if e.Key != "" {
		b = append(append(append(b, `,"k":"`...), e.Key...), '"')
	}
	return append(b, '}')
}

// plainJSONString reports whether encoding/json writes s as it is between quotes: printable
// ASCII without a quote, a backslash or a character it escapes for HTML.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// sysIndexOf returns the index bucket of the system collection coll (its "_" name) in tx, or nil.
func sysIndexOf(tx *bbolt.Tx, coll string) *bbolt.Bucket {
	root := tx.Bucket([]byte(sysIndexBucket))
	if root == nil {
		return nil
	}
	return root.Bucket([]byte(coll))
}

// sysIndexCurrent reports whether b is the current index of coll, by the digests of the
// store's record m.
func sysIndexCurrent(tx *bbolt.Tx, b *bbolt.Bucket, digests map[string]collDigest, coll string) bool {
	if b == nil {
		return false
	}
	var kept collDigest
	if err := json.Unmarshal(b.Get(sysIdxDigestKey), &kept); err != nil {
		return false
	}
	if kept != digests[coll] {
		return false
	}
	if b.Get(sysIdxLayoutKey) == nil { // made by an earlier starplan: current unless it lost keys
		if root := tx.Bucket([]byte(sysIndexBucket)); root != nil && root.Get(sequencedMark(coll)) != nil {
			return false
		}
	}
	return true
}

// sysIndexState is what a write group knows of an indexed collection: whether its index is
// current (and so kept by the group's writes).
type sysIndexState struct {
	tx    *bbolt.Tx
	ready map[string]bool
}

// sysIndexReadyLocked reports whether the writes of the running group keep coll's index: it is
// current, or coll is empty and its index is made now. It runs inside a group.
func (s *Store) sysIndexReadyLocked(tx *bbolt.Tx, coll string, create bool) (bool, error) {
	if s.sysIdx.tx != tx {
		s.sysIdx = sysIndexState{tx: tx, ready: map[string]bool{}}
	}
	if ready, ok := s.sysIdx.ready[coll]; ok {
		return ready, nil
	}
	b := sysIndexOf(tx, coll)
	if !create && b == nil {
		return false, nil // a collection without an index (most): no need to read the record
	}
	if b != nil && s.sysIdxCurrent[coll] {
		// Found current by an earlier group or read of this process, which alone writes the
		// file: every write since kept it (or forgot this), and a group rolled back changed
		// nothing. No read and decode of the record, definition and all, per write.
		s.sysIdx.ready[coll] = true
		return true, nil
	}
	m, _, err := s.recordLocked(tx)
	if err != nil {
		return false, err
	}
	if m == nil {
		m = &liveRecord{}
	}
	ready := sysIndexCurrent(tx, b, m.Digests, coll)
	if ready {
		if s.sysIdxCurrent == nil {
			s.sysIdxCurrent = map[string]bool{}
		}
		s.sysIdxCurrent[coll] = true
	}
	if !ready && b == nil {
		if !create || m.Digests[coll] != (collDigest{}) || collectionHasDocs(tx, coll) {
			return false, nil // decided again by a later write that gives an entry
		}
		if err := newSysIndex(tx, coll, m.Digests[coll]); err != nil {
			return false, err
		}
		ready = true
	}
	s.sysIdx.ready[coll] = ready
	return ready, nil
}

func collectionHasDocs(tx *bbolt.Tx, coll string) bool {
	b := tx.Bucket([]byte(rootBucket))
	if b == nil {
		return false
	}
	prefix := docPrefix(coll)
	k, _ := b.Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}

// newSysIndex makes coll's index buckets afresh, empty, kept with digest.
func newSysIndex(tx *bbolt.Tx, coll string, digest collDigest) error {
	root, err := tx.CreateBucketIfNotExists([]byte(sysIndexBucket))
	if err != nil {
		return err
	}
	if root.Bucket([]byte(coll)) != nil {
		if err := root.DeleteBucket([]byte(coll)); err != nil {
			return err
		}
	}
	b, err := root.CreateBucket([]byte(coll))
	if err != nil {
		return err
	}
	for _, name := range [][]byte{sysIdxIDs, sysIdxOrder, sysIdxGroups, sysIdxStats} {
		if _, err := b.CreateBucket(name); err != nil {
			return err
		}
	}
	if err := b.Put(sysIdxLayoutKey, sysIdxLayout); err != nil {
		return err
	}
	dg, _ := json.Marshal(digest)
	return b.Put(sysIdxDigestKey, dg)
}

// addSysGroup adds count documents of bytes in all to group's stats in b (the stats bucket).
func addSysGroup(b *bbolt.Bucket, group string, count int, bytes int64) error {
	g := readSysGroup(b.Get([]byte(group)))
	g.Count += count
	g.Bytes += bytes
	if g == (store.SysGroup{}) {
		return b.Delete([]byte(group))
	}
	var v [16]byte
	binary.BigEndian.PutUint64(v[:8], uint64(g.Count))
	binary.BigEndian.PutUint64(v[8:], uint64(g.Bytes))
	return b.Put([]byte(group), v[:])
}

func readSysGroup(v []byte) store.SysGroup {
	if len(v) != 16 {
		return store.SysGroup{}
	}
	return store.SysGroup{Count: int(binary.BigEndian.Uint64(v[:8])), Bytes: int64(binary.BigEndian.Uint64(v[8:]))}
}

// readSysStats reads the stats bucket b.
func readSysStats(b *bbolt.Bucket) (map[string]store.SysGroup, error) {
	out := map[string]store.SysGroup{}
	err := b.ForEach(func(k, v []byte) error {
		if len(v) != 16 {
			return fmt.Errorf("the count of group %q does not read back", k)
		}
		out[string(k)] = readSysGroup(v)
		return nil
	})
	return out, err
}

// indexSysLocked puts the document id of coll, of size bytes, in coll's index at x (nil: takes
// it out), replacing its entries. It runs inside a group, before the document is written (the
// first entry of an empty collection makes its index); it does nothing to an index that is not
// current, and refuses a write without entry to a collection that keeps one.
//
// It returns where the document is stored when its index says (sysEntry.Key): for a document
// the index had, its place; for a new one, a place in sequence (sequencedDocID), fresh. An empty
// key: where sysDocKeys says (a document stored before sequences, or a collection whose index
// is not current).
func (s *Store) indexSysLocked(coll, id string, x *store.SysIndex, size int64, deleted bool) (key string, fresh bool, err error) {
	tx := s.bolt.group
	if tx == nil {
		return "", false, errors.New("store: index written outside a write group")
	}
	ready, err := s.sysIndexReadyLocked(tx, coll, x != nil)
	if err != nil || !ready {
		return "", false, err
	}
	if x == nil && !deleted {
		return "", false, fmt.Errorf("system collection %s keeps an index: its document %s must be written with its entry (SysDoc.Index)", coll[1:], id)
	}
	if x != nil {
		if err := x.Valid(); err != nil {
			return "", false, fmt.Errorf("system document %s/%s: %w", coll[1:], id, err)
		}
	}
	b := sysIndexOf(tx, coll)
	ids, order, groups, stats := b.Bucket(sysIdxIDs), b.Bucket(sysIdxOrder), b.Bucket(sysIdxGroups), b.Bucket(sysIdxStats)
	// New entries are appended (ids and orders follow time): bbolt, which splits a page half full
	// by default, is told to fill it, as the documents' bucket is (insertSys).
	ids.FillPercent, order.FillPercent = 1.0, 1.0
	fresh = true
	if raw := ids.Get([]byte(id)); raw != nil {
		var old sysEntry
		if err := json.Unmarshal(raw, &old); err != nil {
			return "", false, fmt.Errorf("the index of %s: the entry of %s does not read back: %w", coll[1:], id, err)
		}
		key, fresh = old.Key, false
		if err := order.Delete(old.key(id)); err != nil {
			return "", false, err
		}
		if g := groups.Bucket([]byte(old.Group)); g != nil {
			if err := g.Delete(old.key(id)); err != nil {
				return "", false, err
			}
		}
		if err := addSysGroup(stats, old.Group, -1, -old.Bytes); err != nil {
			return "", false, err
		}
		if err := ids.Delete([]byte(id)); err != nil {
			return "", false, err
		}
	}
	if x == nil {
		return "", false, nil
	}
	if fresh {
		n, err := b.NextSequence()
		if err != nil {
			return "", false, err
		}
		if n >= 1<<48 {
			return "", false, fmt.Errorf("the index of %s: its sequence is spent (%d documents)", coll[1:], n)
		}
		key = sequencedDocID(n)
		if tx.Bucket([]byte(sysIndexBucket)).Get(sequencedMark(coll)) == nil { // the first in coll
			if err := markSequenced(tx, b, coll); err != nil {
				return "", false, err
			}
		}
	}
	e := sysEntry{Order: x.Order, Group: x.Group, Bytes: size, Key: key}
	raw := e.marshal()
	if err := ids.Put([]byte(id), raw); err != nil {
		return "", false, err
	}
	ek := e.key(id) // bbolt copies the keys it keeps
	if err := order.Put(ek, []byte(e.Group)); err != nil {
		return "", false, err
	}
	g := groups.Bucket([]byte(e.Group)) // the transaction keeps it: no seek after the first
	if g == nil {
		if g, err = groups.CreateBucket([]byte(e.Group)); err != nil {
			return "", false, err
		}
	}
	g.FillPercent = 1.0
	if err := g.Put(ek, nil); err != nil {
		return "", false, err
	}
	return key, fresh, addSysGroup(stats, e.Group, 1, size)
}

// markSequenced records that coll holds documents stored in sequence: in its index (b), which
// an earlier starplan's rebuild drops, and in the root bucket, which it keeps.
func markSequenced(tx *bbolt.Tx, b *bbolt.Bucket, coll string) error {
	if err := b.Put(sysIdxLayoutKey, sysIdxLayout); err != nil {
		return err
	}
	return tx.Bucket([]byte(sysIndexBucket)).Put(sequencedMark(coll), []byte{1})
}

// syncSysIndexesLocked records, at the end of a write group, the collections' digests
// (digests, as the store's record now holds them) in the indexes the group kept current.
func (s *Store) syncSysIndexesLocked(tx *bbolt.Tx, digests map[string]collDigest) error {
	if s.sysIdx.tx != tx {
		return nil
	}
	ready := s.sysIdx.ready
	s.sysIdx = sysIndexState{} // the group ends here
	for _, coll := range slices.Sorted(maps.Keys(ready)) {
		if !ready[coll] {
			continue
		}
		dg, _ := json.Marshal(digests[coll])
		if err := sysIndexOf(tx, coll).Put(sysIdxDigestKey, dg); err != nil {
			return err
		}
	}
	return nil
}

// RebuildSysIndex builds the index of the system collection coll afresh, in one transaction:
// index gives each document's entry, seeing its id and JSON under the file's write lock (no other write commits meanwhile; it
// must not call the store). It returns how many documents it indexed. An error from index, or
// from the store, changes nothing.
func (s *Store) RebuildSysIndex(ctx context.Context, coll string, index func(store.SysRecord) (store.SysIndex, error)) (int, error) {
	c, err := sysCollection(coll)
	if err != nil {
		return 0, err
	}
	n := 0
	err = s.write(ctx, func() error {
		n = 0
		tx := s.bolt.group
		m, _, err := s.recordLocked(tx)
		if err != nil {
			return err
		}
		if m == nil {
			m = &liveRecord{}
		}
		if err := newSysIndex(tx, c, m.Digests[c]); err != nil {
			return err
		}
		s.sysIdx = sysIndexState{tx: tx, ready: map[string]bool{c: true}}
		ok, err := s.db.HasCollection(c)
		if err != nil || !ok {
			return err
		}
		docs, err := s.db.FindAll(query.NewQuery(c))
		if err != nil {
			return err
		}
		type entry struct {
			id string
			e  sysEntry
		}
		entries := make([]entry, 0, len(docs))
		var last uint64 // the greatest sequence number a document is stored under
		for _, doc := range docs {
			id, _ := doc.Get("id").(string)
			raw, _ := doc.Get("json").(string)
			x, err := index(store.SysRecord{ID: id, JSON: json.RawMessage(raw)})
			if err != nil {
				return err
			}
			if err := x.Valid(); err != nil {
				return fmt.Errorf("system document %s/%s: %w", coll, id, err)
			}
			e := sysEntry{Order: x.Order, Group: x.Group, Bytes: int64(len(raw))}
			if seq, ok := sequencedNumber(doc.ObjectId()); ok { // stored in sequence: found through its entry
				e.Key = doc.ObjectId()
				last = max(last, seq)
			}
			entries = append(entries, entry{id, e})
			n++
		}
		// The index is new and empty: each bucket is filled in its own key order, so that bbolt
		// appends to its nodes. Put in the documents' order (a hash of their ids), a log of
		// 100,000 runs took 76 s, nearly all of it bbolt moving keys within its nodes.
		b := sysIndexOf(tx, c)
		if err := b.SetSequence(last); err != nil { // the next new document is stored after them
			return err
		}
		if last > 0 {
			if err := markSequenced(tx, b, c); err != nil {
				return err
			}
		}
		ids, order, groups, stats := b.Bucket(sysIdxIDs), b.Bucket(sysIdxOrder), b.Bucket(sysIdxGroups), b.Bucket(sysIdxStats)
		ids.FillPercent, order.FillPercent = 1.0, 1.0 // appended: full pages, as indexSysLocked's
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.id, b.id) })
		for _, en := range entries {
			raw, _ := json.Marshal(en.e)
			if err := ids.Put([]byte(en.id), raw); err != nil {
				return err
			}
		}
		slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.e.key(a.id), b.e.key(b.id)) })
		type total struct {
			count int
			bytes int64
		}
		totals := map[string]*total{}
		for _, en := range entries {
			key := en.e.key(en.id)
			if err := order.Put(key, []byte(en.e.Group)); err != nil {
				return err
			}
			g, err := groups.CreateBucketIfNotExists([]byte(en.e.Group))
			if err != nil {
				return err
			}
			g.FillPercent = 1.0
			if err := g.Put(key, nil); err != nil {
				return err
			}
			t := totals[en.e.Group]
			if t == nil {
				t = &total{}
				totals[en.e.Group] = t
			}
			t.count++
			t.bytes += en.e.Bytes
		}
		for _, g := range slices.Sorted(maps.Keys(totals)) {
			if err := addSysGroup(stats, g, totals[g].count, totals[g].bytes); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// SysIndexReady reports whether the system collection coll has a current index (see
// RebuildSysIndex).
func (s *Store) SysIndexReady(coll string) (bool, error) {
	c, err := sysCollection(coll)
	if err != nil {
		return false, err
	}
	err = s.viewSysIndex(c, func(*bbolt.Tx, *bbolt.Bucket) error { return nil })
	if errors.Is(err, store.ErrNoSysIndex) {
		return false, nil
	}
	return err == nil, err
}

// viewSysIndex runs fn in a read transaction with the current index of coll (its "_" name), or
// returns ErrNoSysIndex. That an index is current is read from the store's record once: the
// store's file lock keeps other processes out while it is open, and this one's writes keep a
// current index current (a write without entry is refused), so it stays so; putSysLocked,
// which writes documents without entries, forgets it.
func (s *Store) viewSysIndex(coll string, fn func(tx *bbolt.Tx, b *bbolt.Bucket) error) error {
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	return guard(s.bolt.path, func() error {
		return s.bolt.db.View(func(tx *bbolt.Tx) error {
			b := sysIndexOf(tx, coll)
			if b == nil {
				return store.ErrNoSysIndex
			}
			if !s.sysIdxCurrent[coll] {
				m, found, err := s.committedRecordLocked()
				if err != nil {
					return &store.DamagedError{Path: s.bolt.path, Problem: "the store's own record does not read back: " + err.Error(), Err: err}
				}
				if !found || !sysIndexCurrent(tx, b, m.Digests, coll) {
					return store.ErrNoSysIndex
				}
				if s.sysIdxCurrent == nil {
					s.sysIdxCurrent = map[string]bool{}
				}
				s.sysIdxCurrent[coll] = true
			}
			return fn(tx, b)
		})
	})
}

// SysStats returns the count and bytes of each group of the indexed system collection coll, as
// its index keeps them (no document is read), or ErrNoSysIndex.
func (s *Store) SysStats(coll string) (map[string]store.SysGroup, error) {
	c, err := sysCollection(coll)
	if err != nil {
		return nil, err
	}
	var out map[string]store.SysGroup
	err = s.viewSysIndex(c, func(_ *bbolt.Tx, b *bbolt.Bucket) (err error) {
		out, err = readSysStats(b.Bucket(sysIdxStats))
		return err
	})
	return out, err
}

// ScanSys walks the index of the system collection coll in order (opts), reading the
// documents Next takes, in one read transaction: a scan that takes n documents reads n index
// entries and n documents (and the entries Next passes over). A collection without a current
// index is ErrNoSysIndex; an entry whose document is missing or unreadable is a *DamagedError.
func (s *Store) ScanSys(coll string, opts store.SysScan) ([]store.SysEntry, error) {
	c, err := sysCollection(coll)
	if err != nil {
		return nil, err
	}
	var out []store.SysEntry
	err = s.viewSysIndex(c, func(tx *bbolt.Tx, b *bbolt.Bucket) error {
		walk := b.Bucket(sysIdxOrder)
		if opts.Group != "" {
			if walk = b.Bucket(sysIdxGroups).Bucket([]byte(opts.Group)); walk == nil {
				return nil
			}
		}
		root := tx.Bucket([]byte(rootBucket))
		cur := walk.Cursor()
		var k, v []byte
		switch {
		case opts.After == "" && opts.Reverse:
			k, v = cur.Last()
		case opts.After == "":
			k, v = cur.First()
		default:
			k, v = cur.Seek([]byte(opts.After))
			if opts.Reverse {
				if k == nil {
					k, v = cur.Last()
				}
				if k != nil && bytes.Compare(k, []byte(opts.After)) >= 0 {
					k, v = cur.Prev()
				}
			} else if k != nil && bytes.Equal(k, []byte(opts.After)) {
				k, v = cur.Next()
			}
		}
		for ; k != nil; k, v = scanStep(cur, opts.Reverse) {
			i := bytes.IndexByte(k, 0)
			if i < 0 {
				return &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("the index of %s holds a malformed entry %q; starplan db check reports it", coll, k)}
			}
			e := store.SysEntry{Order: string(k[:i]), ID: string(k[i+1:]), Group: opts.Group, Cursor: string(k)}
			if e.Group == "" {
				e.Group = string(v)
			}
			take, more := opts.Next(e)
			if take {
				_, raw := sysDocAt(root, c, e.ID)
				doc, err := decodeSysDoc(raw)
				if err != nil {
					return &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("the index of %s names document %s, which %v; starplan db check reports the damage", coll, e.ID, err)}
				}
				e.JSON = json.RawMessage(doc)
				out = append(out, e)
			}
			if !more {
				break
			}
		}
		return nil
	})
	return out, err
}

func scanStep(c *bbolt.Cursor, reverse bool) ([]byte, []byte) {
	if reverse {
		return c.Prev()
	}
	return c.Next()
}

// decodeSysDoc returns the JSON of a stored system document (a copy: raw is the memory map's).
func decodeSysDoc(raw []byte) (string, error) {
	if raw == nil {
		return "", errors.New("is missing")
	}
	doc, err := d.Decode(raw)
	if err != nil {
		return "", fmt.Errorf("does not decode: %w", err)
	}
	js, _ := doc.Get("json").(string)
	return strings.Clone(js), nil
}

// checkSysIndexes reports every current index of a system collection that does not match the
// collection's documents: an entry without its document or a document without its entry, an
// entry missing from the order or its group, counts or bytes that differ from a recount. A
// stale index (see above) is skipped: it is not used, and the next write-open builds it again.
func checkSysIndexes(rep *store.CheckReport, tx *bbolt.Tx, m *metaRecord, found map[string]collDigest) {
	root := tx.Bucket([]byte(sysIndexBucket))
	if root == nil {
		return
	}
	docs := tx.Bucket([]byte(rootBucket))
	_ = root.ForEachBucket(func(name []byte) error {
		coll := string(name)
		b := root.Bucket(name)
		if !sysIndexCurrent(tx, b, m.Digests, coll) || docs == nil {
			return nil
		}
		what := "the index of " + strings.TrimPrefix(coll, "_")
		ids, order, groups, statsb := b.Bucket(sysIdxIDs), b.Bucket(sysIdxOrder), b.Bucket(sysIdxGroups), b.Bucket(sysIdxStats)
		if ids == nil || order == nil || groups == nil || statsb == nil {
			rep.Add(CheckSysIndex, coll, "%s lacks its buckets", what)
			return nil
		}
		recount := map[string]store.SysGroup{}
		n := 0
		_ = ids.ForEach(func(id, raw []byte) error {
			n++
			var e sysEntry
			if err := json.Unmarshal(raw, &e); err != nil {
				rep.Add(CheckSysIndex, coll, "%s: the entry of %s does not read back: %v", what, id, err)
				return nil
			}
			var doc []byte
			if e.Key != "" { // stored in sequence: there, and nowhere else
				doc = docs.Get(append(docPrefix(coll), e.Key...))
			} else {
				_, doc = sysDocAt(docs, coll, string(id))
			}
			js, err := decodeSysDoc(doc)
			switch {
			case err == nil && e.Key != "" && !sysDocCarries(doc, e.Key, string(id)):
				rep.Add(CheckSysIndex, coll, "%s names %s as the place of document %s, which holds another document", what, e.Key, id)
			case err != nil:
				rep.Add(CheckSysIndex, coll, "%s names document %s, which %v", what, id, err)
			case int64(len(js)) != e.Bytes:
				rep.Add(CheckSysIndex, coll, "%s gives document %s %d bytes; it has %d", what, id, e.Bytes, len(js))
			}
			if g := order.Get(e.key(string(id))); g == nil || string(g) != e.Group {
				rep.Add(CheckSysIndex, coll, "%s: document %s is not in the order at %q (group %s)", what, id, e.Order, e.Group)
			}
			if g := groups.Bucket([]byte(e.Group)); g == nil || g.Get(e.key(string(id))) == nil {
				rep.Add(CheckSysIndex, coll, "%s: document %s is not in its group %s", what, id, e.Group)
			}
			st := recount[e.Group]
			st.Count++
			st.Bytes += e.Bytes
			recount[e.Group] = st
			return nil
		})
		if rows := found[coll].Rows; int64(n) != rows {
			rep.Add(CheckSysIndex, coll, "%s has %d entries for %d documents", what, n, rows)
		}
		if o := order.Stats().KeyN; o != n {
			rep.Add(CheckSysIndex, coll, "%s orders %d entries for %d documents", what, o, n)
		}
		inGroups := 0
		_ = groups.ForEachBucket(func(g []byte) error { inGroups += groups.Bucket(g).Stats().KeyN; return nil })
		if inGroups != n {
			rep.Add(CheckSysIndex, coll, "%s groups %d entries for %d documents", what, inGroups, n)
		}
		if stats, err := readSysStats(statsb); err != nil || !maps.Equal(stats, recount) {
			groups := slices.Sorted(maps.Keys(recount))
			rep.Add(CheckSysIndex, coll, "%s keeps counts %v; a recount of groups %v gives %v", what, stats, groups, recount)
		}
		return nil
	})
}
