package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"encoding/json"

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
//   - keysBucket/<table>: appendKey(key) → version (8 bytes) and the clover document id. Keys
//     encode so that bytes sort in table.CompareKeys order, so a cursor walks the table in key
//     order either way, from any key, and the last key is one step away.
//   - indexBucket/<table>/<field>: appendIndexValue(indexKey(value)) + appendKey(key) → nothing,
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
// memory. Variables, so that the tests can run the package on disk (see disk_test.go).
var (
	openResident = int64(4096)
	promoteRows  = int64(1 << 16)
)

// keyValue is the value of a keys bucket entry: the row's version, then its document id.
func keyValue(ver int64, id string) []byte {
	v := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(v, uint64(ver))
	return append(v, id...)
}

func parseKeyValue(v []byte) (ver int64, id string, ok bool) {
	if len(v) < 8 {
		return 0, "", false
	}
	return int64(binary.BigEndian.Uint64(v)), string(v[8:]), true
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
func indexEntry(v any, encKey []byte) ([]byte, bool) {
	ik, ok := indexKey(v)
	if !ok {
		return nil, false
	}
	return append(appendIndexValue(nil, ik), encKey...), true
}

// trackRow keeps the keys and index buckets of a domain table in step with one document write,
// inside the write's transaction: old is the document it replaces or deletes (nil: none), new
// the document written (nil: a delete). Tables without buckets (a store not yet migrated) and
// system collections are left alone.
func (s *Store) trackRow(tx *bbolt.Tx, coll string, id []byte, old, new []byte) error {
	sc := s.schemas[coll]
	if sc == nil {
		return nil
	}
	keys := tableKeys(tx, coll)
	if keys == nil {
		return nil
	}
	idx := tableIndexes(tx, coll)
	if old != nil {
		row, _, err := decodeRow(sc, old)
		if err != nil {
			return &DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("%s document %s does not read back: %v", coll, id, err), Err: err}
		}
		ek := appendKey(nil, row[sc.Key])
		if err := keys.Delete(ek); err != nil {
			return err
		}
		if err := eachIndex(idx, func(field string, b *bbolt.Bucket) error {
			if e, ok := indexEntry(row[field], ek); ok {
				return b.Delete(e)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if new == nil {
		return nil
	}
	row, ver, err := decodeRow(sc, new)
	if err != nil {
		return fmt.Errorf("%s document %s: %w", coll, id, err)
	}
	return putRowKeys(keys, idx, sc, row, ver, string(id))
}

// putRowKeys adds one row's entries to a table's keys and index buckets.
func putRowKeys(keys, idx *bbolt.Bucket, sc *schema, row table.Row, ver int64, id string) error {
	ek := appendKey(nil, row[sc.Key])
	if err := keys.Put(ek, keyValue(ver, id)); err != nil {
		return err
	}
	return eachIndex(idx, func(field string, b *bbolt.Bucket) error {
		if e, ok := indexEntry(row[field], ek); ok {
			return b.Put(e, nil)
		}
		return nil
	})
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
	for _, name := range s.names {
		if err := createTableKeys(kroot, iroot, s.schemas[name]); err != nil {
			return err
		}
		keys, idx := tableKeys(tx, name), tableIndexes(tx, name)
		sc := s.schemas[name]
		err := loadDocs(tx, sc, func(row table.Row, id string, ver int64) error {
			return putRowKeys(keys, idx, sc, row, ver, id)
		})
		if err != nil {
			return &DamagedError{Path: s.bolt.path, Problem: "a row does not read back: " + err.Error(), Err: err}
		}
	}
	return nil
}

// createTableKeys makes a table's (empty) keys bucket and one index bucket per declared index.
func createTableKeys(kroot, iroot *bbolt.Bucket, sc *schema) error {
	if _, err := kroot.CreateBucketIfNotExists([]byte(sc.Name)); err != nil {
		return err
	}
	idx, err := iroot.CreateBucketIfNotExists([]byte(sc.Name))
	if err != nil {
		return err
	}
	for _, f := range sc.Indexes {
		if _, err := idx.CreateBucketIfNotExists([]byte(f)); err != nil {
			return err
		}
	}
	return nil
}

// keysMatchDomain reports whether the file keeps, for every table, a keys bucket and exactly one
// index bucket per declared index: Open builds them again otherwise.
func keysMatchDomain(tx *bbolt.Tx, s *Store) bool {
	for _, name := range s.names {
		if tableKeys(tx, name) == nil {
			return false
		}
		have := map[string]bool{}
		_ = eachIndex(tableIndexes(tx, name), func(f string, _ *bbolt.Bucket) error { have[f] = true; return nil })
		if len(have) != len(s.schemas[name].Indexes) {
			return false
		}
		for _, f := range s.schemas[name].Indexes {
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
	s *schema
}

// view runs fn in a read transaction, a damaged page or a fault being a *DamagedError.
func (d *diskTable) view(fn func(tx *bbolt.Tx) error) error {
	return guard(d.b.path, func() error { return d.b.db.View(fn) })
}

func (d *diskTable) damaged(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &DamagedError{Path: d.b.path, Problem: msg, Err: errors.New(msg)}
}

// buckets returns the table's keys bucket and clover's root bucket in tx.
func (d *diskTable) buckets(tx *bbolt.Tx) (keys, root *bbolt.Bucket, err error) {
	keys, root = tableKeys(tx, d.s.Name), tx.Bucket([]byte(rootBucket))
	if keys == nil || root == nil {
		return nil, nil, d.damaged("the key index of table %s is missing", d.s.Name)
	}
	return keys, root, nil
}

// load reads the row a keys bucket entry names.
func (d *diskTable) load(root *bbolt.Bucket, key any, v []byte) (*rec, error) {
	ver, id, ok := parseKeyValue(v)
	if !ok {
		return nil, d.damaged("the key index of table %s holds a damaged entry for %s", d.s.Name, table.FormatValue(key))
	}
	doc := root.Get(append(docPrefix(d.s.Name), id...))
	if doc == nil {
		return nil, d.damaged("table %s: the row %s the key index names (document %s) is missing", d.s.Name, table.FormatValue(key), id)
	}
	row, dver, err := decodeRow(d.s, doc)
	if err != nil {
		return nil, d.damaged("table %s: document %s does not read back: %v", d.s.Name, id, err)
	}
	if dver != ver || (key != nil && table.CompareKeys(row[d.s.Key], key) != 0) {
		return nil, d.damaged("table %s: document %s (row %s at version %d) is not what the key index names for it (version %d)", d.s.Name, id, table.FormatValue(row[d.s.Key]), dver, ver)
	}
	return &rec{key: row[d.s.Key], row: row, ver: ver, id: id}, nil
}

// get returns the committed row with key k, nil when there is none.
func (d *diskTable) get(k any) (r *rec, err error) {
	err = d.view(func(tx *bbolt.Tx) error {
		keys, root, err := d.buckets(tx)
		if err != nil {
			return err
		}
		if v := keys.Get(appendKey(nil, k)); v != nil {
			r, err = d.load(root, k, v)
		}
		return err
	})
	return r, err
}

// version returns the committed version of key k, 0 when there is no such row.
func (d *diskTable) version(k any) (ver int64, err error) {
	err = d.view(func(tx *bbolt.Tx) error {
		keys, _, err := d.buckets(tx)
		if err != nil {
			return err
		}
		if v := keys.Get(appendKey(nil, k)); v != nil {
			var ok bool
			if ver, _, ok = parseKeyValue(v); !ok {
				return d.damaged("the key index of table %s holds a damaged entry for %s", d.s.Name, table.FormatValue(k))
			}
		}
		return nil
	})
	return ver, err
}

// lookup returns the committed rows whose field f may equal v (text: ignoring case), in key
// order, from the field's index bucket; ok is false when v cannot be indexed or f has none.
func (d *diskTable) lookup(f string, v any) (recs []*rec, ok bool, err error) {
	ik, can := indexKey(v)
	if !can {
		return nil, false, nil
	}
	prefix := appendIndexValue(nil, ik)
	err = d.view(func(tx *bbolt.Tx) error {
		keys, root, err := d.buckets(tx)
		if err != nil {
			return err
		}
		idx := tableIndexes(tx, d.s.Name)
		var fb *bbolt.Bucket
		if idx != nil {
			fb = idx.Bucket([]byte(f))
		}
		if fb == nil {
			return nil
		}
		ok = true
		c := fb.Cursor()
		for e, _ := c.Seek(prefix); e != nil && bytes.HasPrefix(e, prefix); e, _ = c.Next() {
			ek := e[len(prefix):]
			kv := keys.Get(ek)
			if kv == nil {
				return d.damaged("the %s index of table %s names a row the key index does not hold", f, d.s.Name)
			}
			r, err := d.load(root, nil, kv)
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		return nil
	})
	return recs, ok, err
}

// rows walks the committed rows with keys in [from, to] (nil bounds are open) in key order,
// reversed when asked, reading each from the file; *errp receives a read error, which ends the
// walk. The read transaction stays open while the caller's loop runs.
func (d *diskTable) rows(from, to any, reverse bool, errp *error) iter.Seq[*rec] {
	return func(yield func(*rec) bool) {
		var lo, hi []byte
		if from != nil {
			lo = appendKey(nil, from)
		}
		if to != nil {
			hi = appendKey(nil, to)
		}
		err := d.view(func(tx *bbolt.Tx) error {
			keys, root, err := d.buckets(tx)
			if err != nil {
				return err
			}
			c := keys.Cursor()
			var k, v []byte
			switch {
			case !reverse && lo != nil:
				k, v = c.Seek(lo)
			case !reverse:
				k, v = c.First()
			case hi != nil:
				if k, v = c.Seek(hi); k == nil {
					k, v = c.Last()
				} else if !bytes.Equal(k, hi) {
					k, v = c.Prev()
				}
			default:
				k, v = c.Last()
			}
			for ; k != nil; k, v = step(c, reverse) {
				if (!reverse && hi != nil && bytes.Compare(k, hi) > 0) || (reverse && lo != nil && bytes.Compare(k, lo) < 0) {
					return nil
				}
				r, err := d.load(root, nil, v)
				if err != nil {
					return err
				}
				if !yield(r) {
					return nil
				}
			}
			return nil
		})
		if err != nil && *errp == nil {
			*errp = err
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
// keys do not form one range of the encoding, a walk of every key.
func (d *diskTable) maxNum() (best int64, err error) {
	best = -1
	if d.s.KeyPrefix == "" || d.s.key.Type != table.TypeString {
		return best, nil
	}
	lo, hi, ranged := keyPrefixEnd(d.s.KeyPrefix)
	err = d.view(func(tx *bbolt.Tx) error {
		keys, root, err := d.buckets(tx)
		if err != nil {
			return err
		}
		c := keys.Cursor()
		var k, v []byte
		if ranged {
			if k, v = c.Seek(hi); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		} else {
			k, v = c.Last()
		}
		for ; k != nil; k, v = c.Prev() {
			if ranged && bytes.Compare(k, lo) < 0 {
				return nil
			}
			r, err := d.load(root, nil, v)
			if err != nil {
				return err
			}
			if n, ok := d.s.keyNum(r.key); ok && n > best {
				best = n
				if ranged {
					return nil // the last such key in natural order has the highest number
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
