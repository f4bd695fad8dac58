package bolt

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/starplan/starplan/store"

	"github.com/ostafen/clover/v2"
	d "github.com/ostafen/clover/v2/document"
	"github.com/starplan/starplan/table"
	"go.etcd.io/bbolt"
)

// Check verifies the store in dir without changing it: the file (its size and meta pages, as
// Open does), every page (checkPages, then bbolt's own consistency check), the store's own
// record, that every row decodes, fits its table's schema and has a unique key, that no row or
// table is newer than the last commit, that every collection holds the documents its recorded
// count and digest say, that every system document decodes (with opts.Records), and then
// opts.Invariants over the committed rows. What it finds is in the report; the error is for
// what stops a check from running: a *NoStoreError when dir holds no data.db (Check never
// creates a store), an *InUseError, or a failure of starplan itself. Check never panics on a
// damaged file.
func Check(dir string, opts store.CheckOptions) (*store.CheckReport, error) {
	if opts.Domain != nil {
		if _, err := opts.Domain.Schemas(); err != nil {
			return nil, err
		}
	}
	rep := &store.CheckReport{File: filepath.Join(dir, dbFileName), Tables: []store.TableCount{}, Problems: []store.Problem{}}
	if fi, err := os.Stat(rep.File); err == nil {
		rep.Size = fi.Size()
	}
	bs, err := openBolt(dir, lockTimeout(opts.LockTimeout), false)
	var de *store.DamagedError
	if errors.As(err, &de) {
		rep.Add(store.CheckFile, "", "%s", de.Problem)
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	defer bs.Close()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if err := bs.checkFile(rep); err != nil {
		return nil, err
	}
	if !rep.OK() {
		return rep, nil // following damaged pages would report their garbage
	}

	var m metaRecord
	err = guard(bs.path, func() error {
		db, err := clover.OpenWithStore(bs)
		if err != nil {
			return err
		}
		s := &Store{dir: dir, bolt: bs, db: db}
		found, err := s.getSysLocked(metaCollection, metaID, &m)
		if err == nil && !found {
			// The file exists: a missing record is damage (or another program's file), never a
			// missing store.
			err = &store.DamagedError{Path: bs.path, Problem: "it holds no starplan record: it is damaged, or not a starplan store"}
		}
		return err
	})
	if errors.As(err, &de) {
		rep.Add(store.CheckRecord, "", "%s", de.Problem)
		return rep, nil
	}
	if err != nil {
		rep.Add(store.CheckRecord, "", "the store's record does not read back: %v", err)
		return rep, nil
	}
	rep.Seq = m.Seq
	if m.Format != formatVersion {
		rep.Add(store.CheckRecord, "", "unknown store format %d (this starplan reads format %d)", m.Format, formatVersion)
	}
	definitionSound := true
	if msg := store.DefinitionMismatch(m.Definition, m.DefinitionSums); msg != "" {
		rep.Add(store.CheckRecord, "", "%s; its rules were not checked against the rows", msg)
		definitionSound = false
	}
	dom := opts.Domain
	if dom == nil {
		if dom, err = m.domain(); err != nil {
			rep.Add(store.CheckRecord, "", "%v", err)
			return rep, nil
		}
	}
	if m.Domain != dom.Name {
		rep.Add(store.CheckRecord, "", "the store holds the %s domain, not %s", m.Domain, dom.Name)
		return rep, nil
	}
	schemas, err := dom.Schemas()
	if err != nil {
		return nil, err
	}

	names := dom.TableNames()
	rows := table.ChangeSet{}
	err = guard(bs.path, func() error {
		return bs.db.View(func(tx *bbolt.Tx) error {
			for _, name := range names {
				rows[name] = checkTable(rep, tx, schemas[name], m)
			}
			found := scanDigests(tx)
			var unverified []string
			if m.Digests == nil {
				unverified = append(unverified, "the store was written before row counts and digests were kept; its next write records them")
			} else {
				for _, msg := range digestMismatches(m.Digests, found, names) {
					rep.Add(store.CheckCounts, "", "%s", msg)
				}
			}
			if m.DefinitionSums == nil && m.Definition != nil {
				unverified = append(unverified, "the store was written before its domain definition's hashes were kept; its next write records them")
			}
			rep.Unverified = strings.Join(unverified, "; ")
			// The kept seed (definition.go) must still be rows of the domain.
			records := maps.Clone(opts.Records)
			if records == nil {
				records = map[string]func([]byte) error{}
			}
			checkSystem(rep, tx, found, records, opts.RecordIDs)
			checkKeptSeed(rep, tx, dom)
			checkSysIndexes(rep, tx, &m, found)
			checkCollections(rep, tx)
			return nil
		})
	})
	if errors.As(err, &de) {
		rep.Add(store.CheckRows, "", "%s", de.Problem)
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	if opts.Invariants != nil && definitionSound {
		msgs, err := opts.Invariants(dom, rows)
		if err != nil {
			// The recorded rules do not load: that is the store's damage, reported with the rest.
			rep.Add(store.CheckRecord, "", "the domain definition it records does not load, so its rules were not checked against the rows: %v", err)
			return rep, nil
		}
		for _, msg := range msgs {
			rep.Add(store.CheckPolicy, "", "%s", msg)
		}
	}
	return rep, nil
}

// checkFile reports the older meta page's damage, which Open accepts, and checks every page:
// first itself (checkPages, and a walk of every key under guard), then, when that found nothing,
// with bbolt's own consistency check. tx.Check runs on a goroutine of its own, where a damaged
// page's panic or fault cannot be recovered and would end the process, so it runs only on pages
// already read safely. The caller holds b.mu.
func (b *boltStore) checkFile(rep *store.CheckReport) error {
	f, err := os.Open(b.path)
	if err != nil {
		return err
	}
	st, err := inspectFile(f)
	var pageProblems []string
	if err == nil {
		pageProblems = checkPages(f, st)
	}
	f.Close()
	if err != nil { // Open's checks passed a moment ago, under the same lock
		return err
	}
	if st.olderDamaged {
		rep.Add(store.CheckFile, "", "the older of its two meta pages is damaged; nothing is lost, and the next commit rewrites it")
	}
	for _, p := range pageProblems {
		rep.Add(store.CheckPages, "", "%s", p)
	}
	if len(pageProblems) > 0 {
		rep.Add(store.CheckPages, "", "bbolt's own page check was not run: it cannot survive the damage above")
		return nil
	}
	err = guard(b.path, func() error {
		return b.db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(_ []byte, bk *bbolt.Bucket) error {
				return bk.ForEach(func(_, _ []byte) error { return nil })
			})
		})
	})
	if err == nil {
		err = b.db.View(func(tx *bbolt.Tx) error {
			for err := range tx.Check() {
				rep.Add(store.CheckPages, "", "%v", err)
			}
			return nil
		})
	}
	var de *store.DamagedError
	if errors.As(err, &de) {
		rep.Add(store.CheckPages, "", "%s", de.Problem)
		return nil
	}
	return err
}

// checkTable reads one table's documents, reporting every one that does not decode, does not
// fit the schema, repeats a key or is newer than the store's record, and returns the rows that
// read back, in key order, as inserted rows.
func checkTable(rep *store.CheckReport, tx *bbolt.Tx, s *store.Schema, m metaRecord) *table.TableChanges {
	tc := &table.TableChanges{Key: s.Key, Inserted: []table.Row{}, Updated: []table.Update{}, Deleted: []table.Row{}}
	tver, ok := m.Tables[s.Name]
	if !ok {
		rep.Add(store.CheckRecord, s.Name, "the store's record has no version for table %s", s.Name)
	}
	if tver > m.Seq {
		rep.Add(store.CheckRecord, s.Name, "table %s is at version %d, after the last commit %d", s.Name, tver, m.Seq)
	}
	seen := map[any]string{}
	var want keyEntries
	if b := tx.Bucket([]byte(rootBucket)); b != nil {
		prefix := docPrefix(s.Name)
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			id := string(k[len(prefix):])
			row, ver, err := decodeRow(s, v)
			if err != nil {
				rep.Add(store.CheckRows, s.Name, "%s document %s does not decode: %v", s.Name, id, err)
				continue
			}
			key := row[s.Key]
			if _, err := s.ValidateRow(row); err != nil {
				rep.Add(store.CheckRows, s.Name, "%s row %s does not fit the schema: %v", s.Name, table.FormatValue(key), err)
			}
			if other, dup := seen[key]; dup {
				rep.Add(store.CheckRows, s.Name, "%s key %s is held by two documents, %s and %s", s.Name, table.FormatValue(key), other, id)
				continue
			}
			seen[key] = id
			if m.Keys == keysLayout {
				want.add(s, row, ver, docHash(k, v), id)
			}
			if ver < 1 || ver > tver {
				rep.Add(store.CheckRecord, s.Name, "%s row %s is at version %d, but its table is at version %d", s.Name, table.FormatValue(key), ver, tver)
			}
			tc.Inserted = append(tc.Inserted, row)
		}
	}
	slices.SortFunc(tc.Inserted, func(a, b table.Row) int { return table.CompareKeys(a[s.Key], b[s.Key]) })
	rep.Tables = append(rep.Tables, store.TableCount{Table: s.Name, Rows: len(tc.Inserted)})
	if m.Keys == keysLayout {
		checkKeys(rep, tx, s, &want)
	}
	return tc
}

// keyEntries are the entries a table's key and index buckets must hold, built from its documents.
type keyEntries struct {
	keys    []kv                // key bucket entries
	indexes map[string][]string // field -> index bucket keys
}

type kv struct{ k, v string }

func (e *keyEntries) add(s *store.Schema, row table.Row, ver int64, hash uint64, id string) {
	ek := store.AppendKey(nil, row[s.Key])
	e.keys = append(e.keys, kv{string(ek), string(keyValue(ver, hash, id, row[s.Key]))})
	for _, f := range diskIndexes(s) {
		if entry, ok := indexEntry(row[f], ek); ok {
			if e.indexes == nil {
				e.indexes = map[string][]string{}
			}
			e.indexes[f] = append(e.indexes[f], string(entry))
		}
	}
}

// checkKeys reports where a table's key and index buckets differ from its documents: a read
// through them would miss a row, find a removed one or read the wrong version.
func checkKeys(rep *store.CheckReport, tx *bbolt.Tx, s *store.Schema, want *keyEntries) {
	keys := tableKeys(tx, s.Name)
	if keys == nil {
		rep.Add(store.CheckKeys, s.Name, "table %s has no key index", s.Name)
		return
	}
	slices.SortFunc(want.keys, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	var got []kv
	_ = keys.ForEach(func(k, v []byte) error { got = append(got, kv{string(k), string(v)}); return nil })
	if !slices.Equal(got, want.keys) {
		rep.Add(store.CheckKeys, s.Name, "the key index of table %s does not match its rows (%d entries for %d rows, or entries naming the wrong document or version): reads through it would miss or misread rows", s.Name, len(got), len(want.keys))
	}
	idx := tableIndexes(tx, s.Name)
	for _, f := range diskIndexes(s) {
		var fb *bbolt.Bucket
		if idx != nil {
			fb = idx.Bucket([]byte(f))
		}
		if fb == nil {
			rep.Add(store.CheckKeys, s.Name, "table %s has no index of %s, which its domain declares", s.Name, f)
			continue
		}
		w := want.indexes[f]
		slices.Sort(w)
		var g []string
		_ = fb.ForEach(func(k, _ []byte) error { g = append(g, string(k)); return nil })
		if !slices.Equal(g, w) {
			rep.Add(store.CheckKeys, s.Name, "the %s index of table %s does not match its rows (%d entries for %d)", f, s.Name, len(g), len(w))
		}
	}
}

// checkCollections reads clover's record of every collection ("coll:" + name, JSON): clover
// reads it before any document of the collection, so a damaged one makes the collection
// unreadable although every document is sound.
func checkCollections(rep *store.CheckReport, tx *bbolt.Tx) {
	b := tx.Bucket([]byte(rootBucket))
	if b == nil {
		return
	}
	prefix := []byte("coll:")
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var meta struct{ Size int }
		if err := json.Unmarshal(v, &meta); err != nil {
			rep.Add(store.CheckSystem, "", "clover's record of collection %s does not read back: %v", k[len(prefix):], err)
		}
	}
}

// checkSystem decodes every document of every system collection the file holds (found, from
// scanDigests): each must be a clover document whose id field names it and whose JSON parses,
// and decode with the collection's entry in withIDs (given its id too), else in records, when there is one.
func checkSystem(rep *store.CheckReport, tx *bbolt.Tx, found map[string]collDigest, records map[string]func([]byte) error, withIDs map[string]func(string, []byte) error) {
	b := tx.Bucket([]byte(rootBucket))
	if b == nil {
		return
	}
	var colls []string
	for coll := range found {
		if strings.HasPrefix(coll, "_") {
			colls = append(colls, coll)
		}
	}
	slices.Sort(colls)
	for _, coll := range colls {
		what := "system document"
		if coll == "_runs" {
			what = "audit record"
		}
		prefix := docPrefix(coll)
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			key := string(k[len(prefix):])
			doc, err := d.Decode(v)
			if err != nil {
				rep.Add(store.CheckSystem, coll, "%s %s/%s does not decode: %v", what, coll, key, err)
				continue
			}
			id, _ := doc.Get("id").(string)
			raw, _ := doc.Get("json").(string)
			want, legacy := sysDocKeys(coll, id)
			seq := sequencedKey(tx, coll, id) // where the index puts it, if stored in sequence
			switch {
			case id == "" || (key != want && key != legacy && key != seq):
				rep.Add(store.CheckSystem, coll, "%s %s/%s does not carry the id it is stored under", what, coll, key)
			case key == seq && b.Get(append(docPrefix(coll), want...)) != nil:
				// Where a starplan before sequences stored it too.
				rep.Add(store.CheckSystem, coll, "%s %s of %s is stored twice, under %s and %s", what, id, coll, key, want)
			case key == want && legacy != "" && b.Get(append(docPrefix(coll), legacy...)) != nil:
				// Where a starplan before sysDocKeys stored it too: a lookup finds this one.
				rep.Add(store.CheckSystem, coll, "%s %s of %s is stored twice, under %s and %s", what, id, coll, key, legacy)
			case !json.Valid([]byte(raw)):
				rep.Add(store.CheckSystem, coll, "%s %s of %s is unreadable: its JSON does not parse", what, id, coll)
			case withIDs[coll[1:]] != nil:
				if err := withIDs[coll[1:]](id, []byte(raw)); err != nil {
					rep.Add(store.CheckSystem, coll, "%s %s of %s is unreadable: %v", what, id, coll, err)
				}
			case records[coll[1:]] != nil:
				if err := records[coll[1:]]([]byte(raw)); err != nil {
					rep.Add(store.CheckSystem, coll, "%s %s of %s is unreadable: %v", what, id, coll, err)
				}
			}
		}
	}
}

// checkKeptSeed reports a kept seed (seedparts.go) whose parts are missing or damaged, or whose
// rows no longer fit the domain.
func checkKeptSeed(rep *store.CheckReport, tx *bbolt.Tx, dom *store.Domain) {
	c, _ := sysCollection(store.SeedCollection)
	b := tx.Bucket([]byte(rootBucket))
	if b == nil {
		return
	}
	raw, err := assembleSeed(func(id string) (json.RawMessage, bool, error) {
		_, v := sysDocAt(b, c, id)
		if v == nil {
			return nil, false, nil
		}
		doc, err := d.Decode(v)
		if err != nil {
			return nil, true, err
		}
		j, _ := doc.Get("json").(string)
		return json.RawMessage(j), true, nil
	})
	if err != nil {
		rep.Add(store.CheckSystem, c, "%v", err)
		return
	}
	if raw == nil {
		return
	}
	if _, err := dom.DecodeTables(bytes.NewReader(raw)); err != nil {
		rep.Add(store.CheckSystem, c, "the seed it keeps does not fit its domain: %v", err)
	}
}
