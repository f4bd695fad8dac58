package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/starplan/starplan/store"

	d "github.com/ostafen/clover/v2/document"
	"github.com/starplan/starplan/table"
	"go.etcd.io/bbolt"
)

// Rows on disk.
//
// A table's rows stay in the file until a plan needs them. Beside clover's documents, the file
// keeps two kinds of bbolt buckets, both written in the same transaction as the documents by the
// bbolt adapter's write hook (boltTx.track → Store.trackRow), so no write path can miss them:
//
//   - keysBucket/<table>: store.AppendKey(key) → the row's version, the hash of its stored document
//     (docHash, as the digests use), the clover document id and the key itself (keyEntry). Keys
//     encode so that bytes sort in table.CompareKeys order, so a cursor walks the table in key
//     order either way, from any key, and the last key is one step away. A row read through an
//     entry must be the document the entry names, hash and key included, or the read fails
//     with a *DamagedError: a changed document or a moved entry is found where it is read. (A
//     lost entry cannot be seen by a lookup of its key; db check compares every entry with the
//     documents, and a walk into memory checks the table's digest.)
//   - indexBucket/<table>/<field>: appendIndexValue(indexKey(value)) + store.AppendKey(key) → nothing,
//     one bucket per field the table declares in its indexes. An equality or $ieq is a prefix
//     walk, its candidates in key order.
//
// Open reads the store's record and, per table, its row count (the record's digest count) and
// its highest generated key (one step of a cursor): O(tables), not O(rows). A table of at most
// openResident rows is read into memory at Open as before (verified against its digest); a larger
// one is answered from these buckets (diskTable) until its walks have examined promoteRows rows,
// when it is read into memory once, verified against its digest, and kept: a plan that reports
// over the whole table again and again then runs at memory speed, and a plan that looks up a few
// rows never pays for the table.
//
// A store written before the buckets existed has none (its record's Keys is 0): it is read into
// memory at Open as before, and its first write-open builds the buckets in one transaction.

// The bbolt buckets beside clover's root bucket.
const (
	keysBucket  = "starplan:keys"
	indexBucket = "starplan:index"
	keysLayout  = 1 // metaRecord.Keys when the buckets are kept
)

// openResident is the most rows a table may hold for Open to read it into memory; promoteRows is
// how many rows walks of a larger table may examine from the file before the table is read into
// memory. Every store takes them (its residency) unless the package's tests set its own.
const (
	openResident = 4096
	promoteRows  = 1 << 16
)

// residency is when a store holds a table's rows in memory: open is the most rows a table may
// hold for Open to read it into memory (-1: none, not even an empty one), promote how many rows
// walks of a larger table may examine from the file before it is read into memory
// (math.MaxInt64: never). Each store has its own (Store.residency), copied to its tables at Open:
// openResident and promoteRows, or the tests' Options.residency, so that tests of different
// residencies run in parallel.
type residency struct{ open, promote int64 }

// defaultResidency is the residency of a store whose Options set none. Only the package's tests
// change it, in init, before any store is opened: their run of the package on disk (see
// disk_test.go).
var defaultResidency = residency{open: openResident, promote: promoteRows}

// keyEntry is the value of a keys bucket entry.
type keyEntry struct {
	ver  int64
	hash uint64 // docHash of the document's bbolt key and bytes
	id   string // the clover document id
	key  []byte // the row's key as stored text (a string key) or 8 big-endian bytes (an int)
}

// keyValue encodes a keys bucket entry: version and hash (8 bytes each), the id's length (one
// byte) and the id, then the key.
func keyValue(ver int64, hash uint64, id string, key any) []byte {
	return appendKeyValue(make([]byte, 0, 17+len(id)+16), ver, hash, id, key)
}

// appendKeyValue appends keyValue(ver, hash, id, key) to v.
func appendKeyValue[ID string | []byte](v []byte, ver int64, hash uint64, id ID, key any) []byte {
	v = binary.BigEndian.AppendUint64(v, uint64(ver))
	v = binary.BigEndian.AppendUint64(v, hash)
	v = append(v, byte(len(id)))
	v = append(v, id...)
	switch k := key.(type) {
	case string:
		return append(v, k...)
	case int64:
		return binary.BigEndian.AppendUint64(v, uint64(k))
	}
	return v
}

func parseKeyValue(v []byte) (keyEntry, bool) {
	if len(v) < 17 || len(v) < 17+int(v[16]) {
		return keyEntry{}, false
	}
	n := 17 + int(v[16])
	return keyEntry{ver: int64(binary.BigEndian.Uint64(v)), hash: binary.BigEndian.Uint64(v[8:]), id: string(v[17:n]), key: v[n:]}, true
}

// rawKey is the key an entry holds, as the schema's kind (for messages); nil when it is not one.
func rawKey(s *store.Schema, b []byte) any {
	if s.KeyField.Type == table.TypeString {
		return string(b)
	}
	if len(b) != 8 {
		return nil
	}
	return int64(binary.BigEndian.Uint64(b))
}

// tableKeys returns the keys bucket of table name, nil when the store keeps none for it.
func tableKeys(tx *bbolt.Tx, name string) *bbolt.Bucket {
	if b := tx.Bucket([]byte(keysBucket)); b != nil {
		return b.Bucket([]byte(name))
	}
	return nil
}

// tableIndexes returns the index bucket of table name (one bucket per field inside), nil when
// the store keeps none for it.
func tableIndexes(tx *bbolt.Tx, name string) *bbolt.Bucket {
	if b := tx.Bucket([]byte(indexBucket)); b != nil {
		return b.Bucket([]byte(name))
	}
	return nil
}

// indexEntry is the index bucket key of a row with key k whose field holds v, and false when v
// is not indexed (a list, a dict, NaN).
func indexEntry(v any, encKey []byte) ([]byte, bool) { return appendIndexEntry(nil, v, encKey) }

// appendIndexEntry appends indexEntry(v, encKey) to dst. ASCII text is folded as it is
// encoded (the folded string, made and boxed for each row, was most of an import's work here).
func appendIndexEntry(dst []byte, v any, encKey []byte) ([]byte, bool) {
	if s, ok := v.(string); ok && isASCII(s) {
		return append(appendIndexText(dst, s, true), encKey...), true
	}
	ik, ok := indexKey(v)
	if !ok {
		return dst, false
	}
	return append(appendIndexValue(dst, ik), encKey...), true
}

// isASCII reports whether s is all ASCII, where table.FoldKey only makes a to z upper case.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// trackRow keeps the keys and index buckets of a domain table in step with one document write:
// old is the document it replaces or deletes (nil: none), new the document written (nil: a
// delete). The changes are queued and made at the end of the write group, in key order
// (keyOps.apply). Tables without buckets (a store not yet migrated) and system collections are
// left alone. A new document whose row the writer handed over (keyOps.written) is not decoded
// again; the document it replaces always is, since its entries are what the file holds. key is
// the document's bbolt key, hash the new document's docHash.
func (s *Store) trackRow(tx *bbolt.Tx, coll string, key []byte, old, new []byte, hash uint64) error {
	sc := s.schemas[coll]
	if sc == nil {
		return nil
	}
	id := key[docPrefixLen(coll):]
	k := &s.bolt.keyOps
	fields, ok := k.indexed(tx, coll)
	if !ok {
		return nil
	}
	if old != nil {
		row, _, err := decodeRow(sc, old)
		if err != nil {
			return &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("%s document %s does not read back: %v", coll, id, err), Err: err}
		}
		k.addRow(sc, fields, row, nil)
	}
	if new == nil {
		return nil
	}
	row, ver := k.written.row, k.written.ver
	if row == nil || k.written.id != string(id) {
		var err error
		if row, ver, err = decodeRow(sc, new); err != nil {
			return fmt.Errorf("%s document %s: %w", coll, id, err)
		}
	}
	k.scratch = appendKeyValue(k.scratch[:0], ver, hash, id, row[sc.Key])
	k.addRow(sc, fields, row, k.save(k.scratch))
	return nil
}

// keyOp is one change to a key or index bucket: a put, or a delete when value is nil.
type keyOp struct {
	key, value []byte
	seq        int // the order it was made in, for one key
}

// keyBucket names a key bucket (field "") or an index bucket of a table.
type keyBucket struct{ table, field string }

// keyOps are a write group's changes to the key and index buckets, by bucket. Their bytes are
// cut from large shared blocks (save): an import queues three entries a row.
type keyOps struct {
	n       int
	hint    map[string]int // rows the group writes by table: its buckets' changes start so large
	by      map[keyBucket]*[]keyOp
	fields  map[string][]string // a table's index buckets (nil: none; absent: not looked up yet)
	block   []byte              // where save cuts bytes from
	scratch []byte              // bytes being built
	// written is the row of the document being written, so that trackRow need not decode what
	// was just encoded.
	written writtenRow
}

// writtenRow is the row of the document with id that is being written at version ver (row nil:
// none is handed over).
type writtenRow struct {
	id  string
	row table.Row
	ver int64
}

// indexed reports whether table name keeps a keys bucket in tx and, if so, its index fields,
// looked up once per group.
func (k *keyOps) indexed(tx *bbolt.Tx, name string) ([]string, bool) {
	if f, ok := k.fields[name]; ok {
		return f, f != nil
	}
	var fields []string
	if tableKeys(tx, name) != nil {
		fields = []string{}
		_ = eachIndex(tableIndexes(tx, name), func(f string, _ *bbolt.Bucket) error { fields = append(fields, f); return nil })
	}
	if k.fields == nil {
		k.fields = map[string][]string{}
	}
	k.fields[name] = fields
	return fields, fields != nil
}

// keyBlock is the size of the largest blocks save cuts bytes from; a group's first is 4 KiB and
// each next one twice its last (a commit of two rows needs a few hundred bytes).
const keyBlock = 1 << 20

// save returns a copy of b that lives until the group ends (bbolt keeps the slices it is given
// until its transaction commits).
func (k *keyOps) save(b []byte) []byte {
	if len(b) > keyBlock/8 {
		return bytes.Clone(b)
	}
	if cap(k.block)-len(k.block) < len(b) {
		k.block = make([]byte, 0, min(max(2*cap(k.block), 4<<10), keyBlock))
	}
	n := len(k.block)
	k.block = append(k.block, b...)
	return k.block[n:len(k.block):len(k.block)]
}

func (k *keyOps) add(b keyBucket, key, value []byte) {
	if k.by == nil {
		k.by = map[keyBucket]*[]keyOp{}
	}
	ops := k.by[b] // one lookup a change, where an append to a map's slice takes two
	if ops == nil {
		ops = new([]keyOp)
		*ops = make([]keyOp, 0, max(k.hint[b.table], 1)) // not grown by doubling: an import's is large
		k.by[b] = ops
	}
	*ops = append(*ops, keyOp{key: key, value: value, seq: k.n})
	k.n++
}

// addRow adds a row's entries in its table's keys bucket and the index buckets of fields: puts
// with value (the row's keys bucket value), or deletes when value is nil.
func (k *keyOps) addRow(sc *store.Schema, fields []string, row table.Row, value []byte) {
	k.scratch = store.AppendKey(k.scratch[:0], row[sc.Key])
	ek := k.save(k.scratch)
	k.add(keyBucket{sc.Name, ""}, ek, value)
	var mark []byte // an index entry's value: empty for a put, nil for a delete
	if value != nil {
		mark = []byte{}
	}
	for _, f := range fields {
		var ok bool
		if k.scratch, ok = appendIndexEntry(k.scratch[:0], row[f], ek); ok {
			k.add(keyBucket{sc.Name, f}, k.save(k.scratch), mark)
		}
	}
}

// apply makes the changes, each bucket's sorted by key (the changes to one key in the order they
// were made). bbolt splits a transaction's nodes only when it commits, so puts in no particular
// order (an index of names, a shuffled import) each moved every entry after them in one ever
// larger node: quadratic. In key order they append.
func (k *keyOps) apply(tx *bbolt.Tx) error {
	return k.applyWith(func(kb keyBucket) *bbolt.Bucket {
		if kb.field == "" {
			return tableKeys(tx, kb.table)
		}
		if idx := tableIndexes(tx, kb.table); idx != nil {
			return idx.Bucket([]byte(kb.field))
		}
		return nil
	})
}

// applyWith is apply into the buckets bucket returns (nil: none).
func (k *keyOps) applyWith(bucket func(keyBucket) *bbolt.Bucket) error {
	for kb, p := range k.by {
		ops := *p
		b := bucket(kb)
		if b == nil {
			return fmt.Errorf("store: table %s has no key bucket %q", kb.table, kb.field)
		}
		byKey := func(x, y keyOp) int {
			if c := bytes.Compare(x.key, y.key); c != 0 {
				return c
			}
			return x.seq - y.seq
		}
		if !slices.IsSortedFunc(ops, byKey) { // an import in key order is
			slices.SortFunc(ops, byKey)
		}
		if last, _ := b.Cursor().Last(); last == nil || bytes.Compare(ops[0].key, last) > 0 {
			b.FillPercent = 1.0 // appends (an import in key order): full pages, as in insertNew
		}
		for _, op := range ops {
			var err error
			if op.value == nil {
				err = b.Delete(op.key)
			} else {
				err = b.Put(op.key, op.value)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// eachIndex calls fn with every field bucket of a table's index bucket (which may be nil).
func eachIndex(idx *bbolt.Bucket, fn func(field string, b *bbolt.Bucket) error) error {
	if idx == nil {
		return nil
	}
	c := idx.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			continue // not a bucket
		}
		if err := fn(string(k), idx.Bucket(k)); err != nil {
			return err
		}
	}
	return nil
}

// buildKeysLocked (re)builds every table's keys and index buckets from its documents, inside a
// write group: a store written before they existed gets them on its first write-open, and a
// table whose declared indexes changed gets the buckets its domain declares now.
func (s *Store) buildKeysLocked(tx *bbolt.Tx) error {
	for _, name := range []string{keysBucket, indexBucket} {
		if tx.Bucket([]byte(name)) != nil {
			if err := tx.DeleteBucket([]byte(name)); err != nil {
				return err
			}
		}
	}
	kroot, err := tx.CreateBucket([]byte(keysBucket))
	if err != nil {
		return err
	}
	iroot, err := tx.CreateBucket([]byte(indexBucket))
	if err != nil {
		return err
	}
	if err := iroot.Put([]byte(foldVersionKey), []byte(unicode.Version)); err != nil {
		return err
	}
	for _, name := range s.names {
		if err := createTableKeys(kroot, iroot, s.schemas[name]); err != nil {
			return err
		}
		sc := s.schemas[name]
		fields := diskIndexes(sc)
		prefix := docPrefix(name)
		c := tx.Bucket([]byte(rootBucket)).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			row, ver, err := decodeRow(sc, v)
			if err != nil {
				err = fmt.Errorf("%s: document %s: %w", name, k[len(prefix):], err)
				return &store.DamagedError{Path: s.bolt.path, Problem: "a row does not read back: " + err.Error(), Err: err}
			}
			s.bolt.keyOps.addRow(sc, fields, row, keyValue(ver, docHash(k, v), string(k[len(prefix):]), row[sc.Key]))
		}
	}
	return nil
}

// diskIndexes are the fields the file keeps an index bucket of: the declared indexes, and a text
// key (an equality on the key is a lookup of the keys bucket, but $ieq needs the key's case fold).
func diskIndexes(s *store.Schema) []string {
	if s.KeyField.Type != table.TypeString {
		return s.Indexes
	}
	return append(slices.Clone(s.Indexes), s.Key)
}

// createTableKeys makes a table's (empty) keys bucket and one index bucket per disk index.
func createTableKeys(kroot, iroot *bbolt.Bucket, sc *store.Schema) error {
	if _, err := kroot.CreateBucketIfNotExists([]byte(sc.Name)); err != nil {
		return err
	}
	idx, err := iroot.CreateBucketIfNotExists([]byte(sc.Name))
	if err != nil {
		return err
	}
	for _, f := range diskIndexes(sc) {
		if _, err := idx.CreateBucketIfNotExists([]byte(f)); err != nil {
			return err
		}
	}
	return nil
}

// foldVersionKey names, in the index bucket, the Unicode version whose case folds the index
// entries hold (table.FoldKey follows the unicode package): entries made under other tables of
// case pairs would miss rows, so a change of version builds the indexes again.
const foldVersionKey = ":unicode" // no table is named so

// keysMatchDomain reports whether the file keeps, for every table, a keys bucket and exactly one
// index bucket per disk index, folded by this Unicode version: Open builds them again otherwise.
func keysMatchDomain(tx *bbolt.Tx, s *Store) bool {
	if b := tx.Bucket([]byte(indexBucket)); b == nil || string(b.Get([]byte(foldVersionKey))) != unicode.Version {
		return false
	}
	for _, name := range s.names {
		if tableKeys(tx, name) == nil {
			return false
		}
		have := map[string]bool{}
		_ = eachIndex(tableIndexes(tx, name), func(f string, _ *bbolt.Bucket) error { have[f] = true; return nil })
		want := diskIndexes(s.schemas[name])
		if len(have) != len(want) {
			return false
		}
		for _, f := range want {
			if !have[f] {
				return false
			}
		}
	}
	return true
}

// diskTable reads one table's committed rows from the file.
type diskTable struct {
	b *boltStore
	s *store.Schema
}

// view runs fn in a read transaction, a damaged page or a fault being a *DamagedError.
func (d *diskTable) view(fn func(tx *bbolt.Tx) error) error {
	return guard(d.b.path, func() error { return d.b.db.View(fn) })
}

func (d *diskTable) damaged(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &store.DamagedError{Path: d.b.path, Problem: msg, Err: errors.New(msg)}
}

// buckets returns the table's keys bucket and clover's root bucket in tx.
func (d *diskTable) buckets(tx *bbolt.Tx) (keys, root *bbolt.Bucket, err error) {
	keys, root = tableKeys(tx, d.s.Name), tx.Bucket([]byte(rootBucket))
	if keys == nil || root == nil {
		return nil, nil, d.damaged("the key index of table %s is missing", d.s.Name)
	}
	return keys, root, nil
}

// load reads the row the keys bucket entry (ek, v) names, and checks that it is that row: the
// document the entry names, with the hash, version and key the entry holds.
func (d *diskTable) load(root *bbolt.Bucket, ek, v []byte) (*rec, error) {
	e, ok := parseKeyValue(v)
	if !ok {
		return nil, d.damaged("the key index of table %s holds a damaged entry", d.s.Name)
	}
	key := rawKey(d.s, e.key)
	dk := append(docPrefix(d.s.Name), e.id...)
	doc := root.Get(dk)
	if doc == nil {
		return nil, d.damaged("table %s: the row %s the key index names (document %s) is missing", d.s.Name, table.FormatValue(key), e.id)
	}
	if docHash(dk, doc) != e.hash {
		return nil, d.damaged("table %s: document %s (row %s) is not the document its key index entry names: it changed after it was written", d.s.Name, e.id, table.FormatValue(key))
	}
	row, dver, err := decodeRow(d.s, doc)
	if err != nil {
		return nil, d.damaged("table %s: document %s does not read back: %v", d.s.Name, e.id, err)
	}
	if dver != e.ver || !bytes.Equal(store.AppendKey(nil, row[d.s.Key]), ek) {
		return nil, d.damaged("table %s: document %s (row %s at version %d) is not what its key index entry says (row %s at version %d)", d.s.Name, e.id, table.FormatValue(row[d.s.Key]), dver, table.FormatValue(key), e.ver)
	}
	return &rec{key: row[d.s.Key], row: row, ver: e.ver, id: e.id}, nil
}

// read runs fn in a read transaction with the table's keys bucket and clover's root bucket,
// turning bbolt's panics and faults on a damaged file into a *DamagedError.
func (d *diskTable) read(fn func(keys, root *bbolt.Bucket, tx *bbolt.Tx) error) error {
	return d.view(func(tx *bbolt.Tx) error {
		keys, root, err := d.buckets(tx)
		if err != nil {
			return err
		}
		return fn(keys, root, tx)
	})
}

// get returns the committed row with key k, nil when there is none.
func (d *diskTable) get(k any) (r *rec, err error) {
	err = d.read(func(keys, root *bbolt.Bucket, _ *bbolt.Tx) error {
		ek := store.AppendKey(nil, k)
		if v := keys.Get(ek); v != nil {
			r, err = d.load(root, ek, v)
		}
		return err
	})
	return r, err
}

// version returns the committed version of key k, 0 when there is no such row.
func (d *diskTable) version(k any) (ver int64, err error) {
	err = d.read(func(keys, _ *bbolt.Bucket, _ *bbolt.Tx) error {
		if v := keys.Get(store.AppendKey(nil, k)); v != nil {
			e, ok := parseKeyValue(v)
			if !ok {
				return d.damaged("the key index of table %s holds a damaged entry for %s", d.s.Name, table.FormatValue(k))
			}
			ver = e.ver
		}
		return nil
	})
	return ver, err
}

// fieldIndex returns the index bucket of field f, nil when the table keeps none.
func (d *diskTable) fieldIndex(tx *bbolt.Tx, f string) *bbolt.Bucket {
	if idx := tableIndexes(tx, d.s.Name); idx != nil {
		return idx.Bucket([]byte(f))
	}
	return nil
}

// indexSize counts the index entries of field f for value v, stopping past limit (when limit
// >= 0): the entries are keys only, so a count reads no document. ok is false when v cannot be
// indexed or f has no index.
func (d *diskTable) indexSize(f string, v any, limit int) (n int, ok bool, err error) {
	ik, can := indexKey(v)
	if !can {
		return 0, false, nil
	}
	prefix := appendIndexValue(nil, ik)
	err = d.view(func(tx *bbolt.Tx) error {
		fb := d.fieldIndex(tx, f)
		if fb == nil {
			return nil
		}
		ok = true
		c := fb.Cursor()
		for e, _ := c.Seek(prefix); e != nil && bytes.HasPrefix(e, prefix); e, _ = c.Next() {
			if n++; limit >= 0 && n > limit {
				return nil
			}
		}
		return nil
	})
	return n, ok, err
}

// lookup returns the committed rows whose field f may equal v (text: ignoring case), in key
// order (reversed when asked), read one by one from the field's index bucket; *errp receives a
// read error, which ends the walk. v must be indexable (see indexSize).
func (d *diskTable) lookup(f string, v any, reverse bool, errp *error) iter.Seq[*rec] {
	ik, _ := indexKey(v)
	prefix := appendIndexValue(nil, ik)
	return d.walkBucket(func(tx *bbolt.Tx) *bbolt.Bucket { return d.fieldIndex(tx, f) }, prefix, nil, nil, reverse, true, errp)
}

// rows walks the committed rows with keys in [from, to] (nil bounds are open) in key order,
// reversed when asked, reading each from the file; *errp receives a read error, which ends the
// walk. The read transaction stays open while the caller's loop runs.
func (d *diskTable) rows(from, to any, reverse bool, errp *error) iter.Seq[*rec] {
	var lo, hi []byte
	if from != nil {
		lo = store.AppendKey(nil, from)
	}
	if to != nil {
		hi = store.AppendKey(nil, to)
	}
	return d.walkBucket(func(tx *bbolt.Tx) *bbolt.Bucket { return tableKeys(tx, d.s.Name) }, nil, lo, hi, reverse, false, errp)
}

// walkChunk is how many entries a walk of the file reads in one bbolt read transaction before
// it ends it and goes on in a new one (see walkBucket).
const walkChunk = 1024

// walkBucket walks a bucket of the table (its keys, or an index whose entries end with the
// encoded key: viaIndex) over the entries that start with prefix and lie in [lo, hi] (nil:
// open), forwards or backwards, loading each entry's row. Only the bucket's own steps and the
// loads run under guard: a panic of the caller's loop body stays the caller's.
//
// The walk ends its read transaction every walkChunk entries and goes on in a new one from the
// entry it stood at: a commit that must grow bbolt's map (which waits for every open read
// transaction, while no new one begins) then waits for a chunk, not for the whole walk, which
// may last a run's whole time limit. The walk is still of one state of the table: every caller
// holds the Store's lock (s.mu) for as long as it walks, and what commits under that lock held
// for reading (Store.write: system documents, their index buckets) writes no document, key or
// index entry of a table, while every commit that does holds it for writing (commitLocked, the
// staged import, an upgrade). An entry gone when the walk comes back to it is damage.
func (d *diskTable) walkBucket(bucket func(*bbolt.Tx) *bbolt.Bucket, prefix, lo, hi []byte, reverse, viaIndex bool, errp *error) iter.Seq[*rec] {
	return func(yield func(*rec) bool) {
		fail := func(err error) {
			if *errp == nil {
				*errp = err
			}
		}
		var tx *bbolt.Tx
		if err := guard(d.b.path, func() (err error) { tx, err = d.b.db.Begin(false); return err }); err != nil {
			fail(err)
			return
		}
		defer func() {
			if tx != nil {
				tx.Rollback()
			}
		}()
		var c *bbolt.Cursor
		var keys, root *bbolt.Bucket
		var k, v []byte
		err := guard(d.b.path, func() (err error) {
			if keys, root, err = d.buckets(tx); err != nil {
				return err
			}
			b := bucket(tx)
			if b == nil {
				return nil
			}
			c = b.Cursor()
			switch {
			case !reverse && lo != nil:
				k, v = c.Seek(lo)
			case !reverse && prefix != nil:
				k, v = c.Seek(prefix)
			case !reverse:
				k, v = c.First()
			case hi != nil:
				if k, v = c.Seek(hi); k == nil {
					k, v = c.Last()
				} else if !bytes.Equal(k, hi) {
					k, v = c.Prev()
				}
			case prefix != nil:
				if end := store.BytesAfterPrefix(prefix); end == nil {
					k, v = c.Last()
				} else if k, v = c.Seek(end); k == nil {
					k, v = c.Last()
				} else {
					k, v = c.Prev()
				}
			default:
				k, v = c.Last()
			}
			return nil
		})
		if err != nil || c == nil {
			fail(err)
			return
		}
		// again ends the transaction and begins a new one, with the cursor back at the entry k
		// (copied first: it lies in the map, which a commit may move meanwhile).
		again := func() error {
			at := bytes.Clone(k)
			tx.Rollback()
			tx = nil
			return guard(d.b.path, func() (err error) {
				if tx, err = d.b.db.Begin(false); err != nil {
					return err
				}
				if keys, root, err = d.buckets(tx); err != nil {
					return err
				}
				b := bucket(tx)
				if b == nil {
					return d.damaged("table %s: a bucket a walk read is gone", d.s.Name)
				}
				c = b.Cursor()
				if k, v = c.Seek(at); !bytes.Equal(k, at) {
					return d.damaged("table %s: an entry a walk stood at is gone", d.s.Name)
				}
				return nil
			})
		}
		for n := 1; k != nil; n++ {
			if (prefix != nil && !bytes.HasPrefix(k, prefix)) ||
				(!reverse && hi != nil && bytes.Compare(k, hi) > 0) || (reverse && lo != nil && bytes.Compare(k, lo) < 0) {
				return
			}
			var r *rec
			err := guard(d.b.path, func() (err error) {
				ek, kv := k, v
				if viaIndex {
					ek = k[len(prefix):]
					if kv = keys.Get(ek); kv == nil {
						return d.damaged("an index of table %s names a row its key index does not hold", d.s.Name)
					}
				}
				r, err = d.load(root, ek, kv)
				return err
			})
			if err != nil {
				fail(err)
				return
			}
			if !yield(r) {
				return
			}
			if n%walkChunk == 0 {
				if err := again(); err != nil {
					fail(err)
					return
				}
			}
			if err := guard(d.b.path, func() error { k, v = step(c, reverse); return nil }); err != nil {
				fail(err)
				return
			}
		}
	}
}

func step(c *bbolt.Cursor, reverse bool) ([]byte, []byte) {
	if reverse {
		return c.Prev()
	}
	return c.Next()
}

// maxNum returns the highest n among keys of the form KeyPrefix+digits, -1 when there is none:
// from the end of the prefix's key range backwards to the first such key, or, when the prefix's
// keys do not form one range of the encoding, over every key. It reads keys, not documents.
func (d *diskTable) maxNum() (best int64, err error) {
	best = -1
	if d.s.KeyPrefix == "" || d.s.KeyField.Type != table.TypeString {
		return best, nil
	}
	lo, hi, ranged := store.KeyPrefixEnd(d.s.KeyPrefix)
	err = d.read(func(keys, _ *bbolt.Bucket, _ *bbolt.Tx) error {
		c := keys.Cursor()
		var k, v []byte
		switch {
		case !ranged || hi == nil:
			k, v = c.Last()
		default:
			if k, _ = c.Seek(hi); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		for ; k != nil; k, v = c.Prev() {
			if ranged && bytes.Compare(k, lo) < 0 {
				return nil
			}
			e, ok := parseKeyValue(v)
			if !ok {
				return d.damaged("the key index of table %s holds a damaged entry", d.s.Name)
			}
			if n, ok := d.s.KeyNum(string(e.key)); ok && n > best {
				best = n
				if ranged {
					return nil // among keys of the form, the last in key order has the highest number
				}
			}
		}
		return nil
	})
	return best, err
}

// readRecord reads the store's record straight from the file, in a read transaction of the
// caller's (clover's calls need the adapter's lock, which a reader need not take).
func readRecord(tx *bbolt.Tx) (metaRecord, error) {
	var m metaRecord
	b := tx.Bucket([]byte(rootBucket))
	if b == nil {
		return m, errors.New("no root bucket")
	}
	v := b.Get(append(docPrefix(metaCollection), sysDocID(metaCollection, metaID)...))
	if v == nil {
		return m, errors.New("it is missing")
	}
	doc, err := d.Decode(v)
	if err != nil {
		return m, err
	}
	raw, _ := doc.Get("json").(string)
	return m, json.Unmarshal([]byte(raw), &m)
}
