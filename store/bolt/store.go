package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/starplan/starplan/store"

	"github.com/ostafen/clover/v2"
	"github.com/ostafen/clover/v2/query"
	"github.com/starplan/starplan/table"
	"go.etcd.io/bbolt"
)

// DefaultLockTimeout is how long Open waits for another process to release the store before it
// returns an *InUseError.
const DefaultLockTimeout = time.Second

// Options configure Open. The zero value opens the inventory domain, creating a missing store
// seeded with its demo data, and prints nothing. (Creating is the zero value because every
// caller that makes a fresh store, tests and evals included, relies on it; commands that only
// read set MustExist.)
type Options struct {
	// MustExist makes Open fail with a *NoStoreError (errors.Is(err, ErrNoStore)) instead of
	// creating a store when dir holds none. Reads set it: a read never creates state.
	MustExist bool
	// Domain declares the tables and seed rows. nil opens an existing store with the domain it
	// recorded when it was created, and creates a new one with Inventory().
	Domain *store.Domain
	// Stderr receives the one-time note "seeded new store at DIR with the inventory demo data (7
	// rows)" (SeedWords; or "created new store at DIR with empty inventory tables") when Open
	// creates a store; nil discards it.
	Stderr io.Writer
	// NoSeed creates a new store with empty tables instead of the domain's seed rows.
	NoSeed bool
	// LockTimeout overrides DefaultLockTimeout when positive.
	LockTimeout time.Duration
	// residency overrides defaultResidency when set (the package's tests; disk.go).
	residency *residency
}

// Store is an open starplan store: the committed tables of one domain, held in memory and
// persisted by clover on bbolt. A Store is safe for concurrent use; each run works through its
// own Stage. Only one process can have a store open at a time.
type Store struct {
	dir     string
	domain  *store.Domain
	schemas map[string]*store.Schema
	names   []string // domain table names, sorted
	// digestMemo keeps the last decoded digests of the store's record (verifySysLocked).
	digestMemo digestMemo
	// verified holds, for each system collection whose documents verifySysLocked found equal to
	// the store's record since Open, the count and digest they then had, moved with every commit
	// since (afterCommitLocked); guarded by bolt.mu. hashed counts the documents verifySysLocked
	// hashed, for tests.
	verified map[string]collDigest
	// verifiedMu guards verified too, for GetSys's reads without bolt.mu (getSysUnlocked):
	// writers hold both.
	verifiedMu sync.Mutex
	hashed     int64
	created    bool

	bolt *boltStore
	db   *clover.DB

	// mu guards the committed state below: stages read under RLock, applies write under Lock.
	mu     sync.RWMutex
	tables map[string]*committedTable
	seq    int64 // the last commit sequence number
	// keys is the record's Keys: keysLayout when the file keeps every table's key and index
	// buckets (disk.go), 0 for a store read entirely into memory.
	keys int
	// residency says which tables are held in memory (disk.go), copied to each table at Open.
	residency residency
	closed    bool
	// quit is closed by Close, which a read of a table into memory running on its own (see
	// loadJob) stops at; quitOnce closes it.
	quit     chan struct{}
	quitOnce sync.Once
	// rec is the store's record in memory (record.go), guarded by bolt.mu.
	rec recordCache
	// sysIdx is what the running write group knows of the system collections' indexes
	// (sysindex.go); sysIdxCurrent names the collections whose index was found current.
	sysIdx        sysIndexState
	sysIdxCurrent map[string]bool
}

// metaCollection holds the store's own record; system collections are "_" + name; domain
// tables cannot start with "_", so none of these is ever visible to a plan.
const (
	metaCollection = "_starplan"
	metaID         = "meta"
	formatVersion  = 1
)

type metaRecord struct {
	Format int              `json:"format"`
	Domain string           `json:"domain"`
	Seq    int64            `json:"seq"`    // the last commit sequence number
	Tables map[string]int64 `json:"tables"` // the sequence number that last changed each table
	// Digests holds the count and digest of the documents of every collection but this record's
	// own, domain tables and system collections alike (see digest.go); a collection it does not
	// name holds none. It is nil in a store written before digests existed, until its first write.
	// (Not omitted when empty: a store whose collections are all empty keeps digests too.)
	Digests map[string]collDigest `json:"digests"`
	// Definition is the domain's definition files (Domain.Definition), recorded when the store
	// was created. A store created before it was kept holds the inventory domain.
	Definition map[string]string `json:"definition,omitempty"`
	// DefinitionSums holds the SHA-256 of each file of Definition (definition.go), verified by
	// Open and Check. It is nil in a store written before they were kept, until its next commit.
	DefinitionSums map[string]string `json:"definition_sums,omitempty"`
	// Keys is keysLayout when the file keeps every table's key and index buckets (disk.go). A
	// starplan that did not know them drops the field when it rewrites the record, and the
	// buckets, which it did not keep, are built again.
	Keys int `json:"keys,omitempty"`
}

// domain is the domain a store holds by its record, for a caller that named none.
func (m *metaRecord) domain() (*store.Domain, error) {
	if m.Definition == nil {
		if m.Domain != store.Inventory().Name {
			return nil, fmt.Errorf("the store holds the %s domain but not its definition", m.Domain)
		}
		return store.Inventory(), nil
	}
	d, err := store.DomainFromDefinition(m.Definition)
	if err != nil {
		return nil, fmt.Errorf("the store's recorded domain: %w", err)
	}
	return d, nil
}

// DefaultDir is where the store lives when the command line does not say: $STARPLAN_DB, else
// $XDG_DATA_HOME/starplan, else $HOME/.local/share/starplan. getenv reads the environment
// (os.Getenv when nil), so a caller that keeps its own environment (the CLI, tests) passes it.
func DefaultDir(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if dir := getenv("STARPLAN_DB"); dir != "" {
		return dir, nil
	}
	if dir := getenv("XDG_DATA_HOME"); dir != "" {
		return filepath.Join(dir, "starplan"), nil
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "share", "starplan"), nil
	}
	return "", errors.New("cannot tell where the store lives: HOME is not set")
}

// Open opens the store in dir. When dir holds no data.db, Open creates the directory and the
// store, with the domain's seed rows unless opts.NoSeed (saying so once on opts.Stderr), or,
// with opts.MustExist, fails with a *NoStoreError. Open reads the store's record, not its rows:
// small tables are read into memory, larger ones from the file as plans need them (disk.go).
// When another process has the store open, Open fails within the lock timeout with an error
// that matches ErrInUse. An existing file is never created over: when it is empty, truncated,
// not bbolt, holds no starplan record, has a page or row that does not read back, a table read
// into memory whose rows differ from the count and digest the store recorded (see digest.go), or
// its newer meta page is damaged, Open fails with a *DamagedError (errors.Is(err, ErrDamaged))
// and writes nothing. A store created for one domain cannot be opened as another.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Domain != nil {
		if _, err := opts.Domain.Schemas(); err != nil {
			return nil, err
		}
	}
	bs, err := openBolt(dir, lockTimeout(opts.LockTimeout), !opts.MustExist)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, bolt: bs, tables: map[string]*committedTable{}, quit: make(chan struct{}), residency: defaultResidency}
	if opts.residency != nil {
		s.residency = *opts.residency
	}
	err = guard(bs.path, func() error {
		var err error
		if s.db, err = clover.OpenWithStore(bs); err != nil {
			return err
		}
		return s.init(opts)
	})
	if err != nil {
		if s.db != nil {
			s.db.Close()
		} else {
			bs.Close()
		}
		if errors.Is(err, store.ErrDamaged) || errors.Is(err, store.ErrNoStore) {
			return nil, err
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if dom := s.domain; s.created && opts.Stderr != nil {
		n := 0
		for _, rows := range dom.Seed {
			n += len(rows)
		}
		if opts.NoSeed || n == 0 {
			fmt.Fprintf(opts.Stderr, "created new store at %s with empty %s tables\n", dir, dom.Name)
		} else {
			fmt.Fprintf(opts.Stderr, "seeded new store at %s with %s\n", dir, store.SeedWords(dom.Name, n))
		}
	}
	return s, nil
}

// lockTimeout is the lock timeout to wait for: DefaultLockTimeout when 0.
func lockTimeout(t time.Duration) time.Duration {
	if t <= 0 {
		return DefaultLockTimeout
	}
	return t
}

// use makes dom the store's domain.
func (s *Store) use(dom *store.Domain) error {
	schemas, err := dom.Schemas()
	if err != nil {
		return err
	}
	s.domain, s.schemas, s.names = dom, schemas, dom.TableNames()
	sort.Strings(s.names)
	return nil
}

// init creates or checks the store's collections and loads every table into memory, verifying
// each table's rows against the count and digest the store recorded. Nothing is written before
// that verification passes.
func (s *Store) init(opts Options) error {
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	s.bolt.beforeCommit = s.recordDigestsLocked
	s.bolt.afterCommit = s.afterCommitLocked
	s.bolt.onDoc = s.trackRow
	live, found, err := s.readRecordLocked()
	if err != nil {
		return &store.DamagedError{Path: s.bolt.path, Problem: "the store's own record does not read back: " + err.Error(), Err: err}
	}
	if !found {
		// An existing data.db without the record is never a missing store: it is damaged or not
		// starplan's. Only a root bucket holding nothing at all, which an interrupted create
		// leaves, may be made a store, and only by a command that creates stores.
		empty, err := s.bolt.emptyLocked()
		if err != nil {
			return err
		}
		if !empty {
			return &store.DamagedError{Path: s.bolt.path, Problem: "it holds data but no starplan record: it is damaged, or not a starplan store"}
		}
		if opts.MustExist {
			return &store.DamagedError{Path: s.bolt.path, Problem: "it holds no starplan record and no data: a store whose creation was interrupted (starplan db init makes one in it), or not a starplan store"}
		}
		dom := opts.Domain
		if dom == nil {
			dom = store.Inventory()
		}
		if err := s.use(dom); err != nil {
			return err
		}
		if err := s.create(opts.NoSeed); err != nil {
			return err
		}
		s.created = true
		if live, _, err = s.readRecordLocked(); err != nil {
			return err
		}
	}
	def, sums, err := live.definitionMaps()
	if err != nil {
		return &store.DamagedError{Path: s.bolt.path, Problem: "the store's own record does not read back: " + err.Error(), Err: err}
	}
	m := metaRecord{Format: live.Format, Domain: live.Domain, Seq: live.Seq, Tables: live.Tables, Digests: live.Digests,
		Definition: def, DefinitionSums: sums, Keys: live.Keys}
	if m.Format != formatVersion {
		return fmt.Errorf("unknown store format %d (this starplan reads format %d)", m.Format, formatVersion)
	}
	s.rec.committed = live
	if err := s.clearStagedAtOpen(); err != nil { // an import killed before its last commit
		return err
	}
	if msg := store.DefinitionMismatch(m.Definition, m.DefinitionSums); msg != "" {
		return &store.DamagedError{Path: s.bolt.path, Problem: msg}
	}
	if s.domain == nil {
		dom := opts.Domain
		if dom == nil {
			if dom, err = m.domain(); err != nil {
				return &store.DamagedError{Path: s.bolt.path, Problem: err.Error(), Err: err}
			}
		}
		if err := s.use(dom); err != nil {
			return err
		}
	}
	if m.Domain != s.domain.Name {
		return &store.DomainError{Dir: s.dir, Holds: m.Domain, Wanted: s.domain.Name}
	}
	s.seq = m.Seq
	keyed := false
	err = s.bolt.db.View(func(tx *bbolt.Tx) error {
		keyed = m.Keys == keysLayout && m.Digests != nil && keysMatchDomain(tx, s)
		for _, name := range s.names {
			sc := s.schemas[name]
			t := &committedTable{s: sc, ver: m.Tables[name], maxNum: -1, residency: s.residency}
			t.begin = func() (tableRead, error) { return s.beginLoad(sc) }
			s.tables[name] = t
			if keyed {
				t.disk = &diskTable{b: s.bolt, s: sc}
				if dg := m.Digests[name]; dg.Rows > s.residency.open {
					t.n = dg.Rows
					continue // read from the file; verified when read whole (and by db check)
				}
			}
			res, dg, err := loadTable(tx, s.bolt.path, sc)
			if err != nil {
				return &store.DamagedError{Path: s.bolt.path, Problem: "a row does not read back: " + err.Error(), Err: err}
			}
			if m.Digests != nil {
				if msg := digestMismatch(name, m.Digests[name], dg); msg != "" {
					return &store.DamagedError{Path: s.bolt.path, Problem: msg}
				}
			}
			t.res.Store(res)
			t.n, t.maxNum = int64(len(res.order)), res.scanMaxNum()
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, t := range s.tables {
		if t.res.Load() == nil {
			if t.maxNum, err = t.disk.maxNum(); err != nil {
				return err
			}
		}
	}
	if keyed {
		s.keys = keysLayout
	}
	// A domain may gain tables after its stores were created: add them, empty. A store written
	// before digests existed gets them on its first write-open (recordDigestsLocked computes
	// them when the record has none).
	var missing []string
	for _, name := range s.names {
		ok, err := s.db.HasCollection(name)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, name)
		}
	}
	if opts.MustExist || (len(missing) == 0 && m.Digests != nil && keyed) {
		return nil
	}
	// Also gives a store written before digests existed its digests (recordDigestsLocked), and
	// one written before key buckets existed, or whose domain declares other indexes now, its
	// buckets: its tables stay in memory until it is opened again.
	return s.bolt.runGroup(func(tx *bbolt.Tx) error {
		for _, name := range missing {
			if err := s.db.CreateCollection(name); err != nil {
				return err
			}
		}
		if keyed {
			return nil
		}
		if err := s.buildKeysLocked(tx); err != nil {
			return err
		}
		r, _, err := s.recordLocked(tx)
		if err != nil {
			return err
		}
		r.Keys = keysLayout
		s.setRecordLocked(tx, r)
		s.keys = keysLayout
		for _, t := range s.tables {
			t.disk = &diskTable{b: s.bolt, s: t.s}
		}
		return nil
	})
}

// recordDigestsLocked is the last step of every write group (boltStore.beforeCommit): it adds
// the group's changes to the counts and digests in the store's record, or, when the record has
// none yet (a store written before digests existed), computes them from every document in the
// file, and writes the record, with what the group changed in it (setRecordLocked). It writes
// nothing when there is no record (yet) or nothing changed.
func (s *Store) recordDigestsLocked(tx *bbolt.Tx, delta map[string]*collDigest) error {
	m, found, err := s.recordLocked(tx)
	if err != nil || !found {
		return err
	}
	switch {
	case m.Digests == nil:
		m.Digests = scanDigests(tx)
	case len(delta) == 0 && (m.DefinitionSums != nil || m.Definition == nil) && !s.rec.dirty:
		return s.syncSysIndexesLocked(tx, m.Digests)
	default:
		for coll, d := range delta {
			cur := m.Digests[coll]
			cur.Rows += d.Rows
			cur.Sum += d.Sum
			if cur == (collDigest{}) {
				delete(m.Digests, coll)
			} else {
				m.Digests[coll] = cur
			}
		}
	}
	if m.DefinitionSums == nil && m.Definition != nil { // written before they were kept
		if m.DefinitionSums, err = sumsJSON(m.Definition); err != nil {
			return fmt.Errorf("system document %s/%s: definition: %w", metaCollection, metaID, err)
		}
	}
	if err := s.syncSysIndexesLocked(tx, m.Digests); err != nil {
		return err
	}
	return s.putRecordLocked(tx, m)
}

// digestMemo is the digests of the store's record as last decoded, with the record's JSON they
// came from: a miss of GetSys (a run without a decision, asked on every look at a run) verifies
// its collection against the record, and decoding the record, the domain's definition files
// and all, cost more than the rest of the look (issue 32). The record is still read from the
// file each time; only an unchanged one is not decoded again.
type digestMemo struct {
	mu      sync.Mutex
	raw     string
	digests map[string]collDigest
}

// recordDigests reads the digests of the store's record; it runs inside guard.
func (s *Store) recordDigests() (m struct{ Digests map[string]collDigest }, found bool, err error) {
	if ok, err := s.db.HasCollection(metaCollection); err != nil || !ok {
		return m, false, err
	}
	doc, err := s.db.FindById(metaCollection, sysDocID(metaCollection, metaID))
	if err != nil || doc == nil {
		return m, false, err
	}
	raw, _ := doc.Get("json").(string)
	return s.digestsOf(raw)
}

// digestsOf is the digests of the store's record whose JSON is raw, decoded once per version of
// the record (digestMemo).
func (s *Store) digestsOf(raw string) (m struct{ Digests map[string]collDigest }, found bool, err error) {
	s.digestMemo.mu.Lock()
	defer s.digestMemo.mu.Unlock()
	if s.digestMemo.raw != raw || s.digestMemo.digests == nil {
		var r struct {
			Digests map[string]collDigest `json:"digests"`
		}
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return m, true, fmt.Errorf("system document %s/%s: %w", metaCollection, metaID, err)
		}
		if r.Digests == nil {
			return m, true, nil // written before digests existed
		}
		s.digestMemo.raw, s.digestMemo.digests = raw, r.Digests
	}
	m.Digests = s.digestMemo.digests // read only
	return m, true, nil
}

// verifySysLocked checks the system collection coll's documents against the count and digest
// the store recorded, returning a *DamagedError when they differ. The caller holds s.bolt.mu.
//
// A collection is hashed whole once per open: every miss of GetSys verifies (a look at a run
// without a decision is one), and hashing the decisions or the audit log on each grew with the
// log (issue 32). Once its documents matched the record, what the store's own commits change
// in them is tracked to the byte (bolt.go's delta, read from the file in the commit's
// transaction), so verified moves with each commit's delta (afterCommitLocked) and stays equal
// to what the file holds. While the recorded digest equals it, the collection is not hashed
// again; a record that moved any other way is hashed again. Damage made while the store is open
// is not seen until the next open (no other process can write the file while it is open: the
// lock); a read that faults is still a *DamagedError (guard), and Check hashes everything.
func (s *Store) verifySysLocked(coll string) error {
	m, found, err := s.recordDigests()
	if err != nil {
		return &store.DamagedError{Path: s.bolt.path, Problem: "the store's own record does not read back: " + err.Error(), Err: err}
	}
	if !found {
		return &store.DamagedError{Path: s.bolt.path, Problem: "it holds no starplan record: it is damaged, or not a starplan store"}
	}
	if m.Digests == nil {
		return nil // written before digests existed: nothing to verify against
	}
	want := m.Digests[coll]
	if v, ok := s.verified[coll]; ok && v == want {
		return nil
	}
	var got collDigest
	if err := s.bolt.db.View(func(tx *bbolt.Tx) error { got = collDigestOf(tx, coll); return nil }); err != nil {
		return err
	}
	s.hashed += got.Rows
	s.verifiedMu.Lock()
	defer s.verifiedMu.Unlock()
	if msg := digestMismatch(coll, want, got); msg != "" {
		delete(s.verified, coll)
		return &store.DamagedError{Path: s.bolt.path, Problem: msg}
	}
	if s.verified == nil {
		s.verified = map[string]collDigest{}
	}
	s.verified[coll] = want
	return nil
}

// afterCommitLocked moves what verifySysLocked verified with a commit's delta (boltStore.
// afterCommit): the documents the commit changed, hashed as they were and as they are.
func (s *Store) afterCommitLocked(delta map[string]*collDigest) {
	s.recordCommittedLocked()
	s.verifiedMu.Lock()
	defer s.verifiedMu.Unlock()
	for coll, d := range delta {
		if v, ok := s.verified[coll]; ok {
			v.Rows += d.Rows
			v.Sum += d.Sum
			s.verified[coll] = v
		}
	}
}

// create makes a new store: one collection per table, the seed rows at version 1 (none with
// noSeed), the domain's seed kept for a later reseed (with noSeed too), the meta record, all in
// one transaction.
func (s *Store) create(noSeed bool) error {
	for _, name := range s.names {
		if ok, err := s.db.HasCollection(name); err != nil || ok {
			if err == nil {
				err = fmt.Errorf("it holds a collection %q but no starplan record: not a starplan store", name)
			}
			return err
		}
	}
	m := metaRecord{Format: formatVersion, Domain: s.domain.Name, Seq: 1, Tables: map[string]int64{},
		Definition: s.domain.Definition, DefinitionSums: store.DefinitionSums(s.domain.Definition), Keys: keysLayout}
	var seed json.RawMessage
	if len(s.domain.Seed) > 0 {
		var err error
		if seed, err = store.EncodeSeed(s.domain.Seed); err != nil {
			return err
		}
	}
	return s.bolt.runGroup(func(tx *bbolt.Tx) error {
		if err := s.buildKeysLocked(tx); err != nil { // empty: the seed's documents fill them
			return err
		}
		for _, name := range s.names {
			if err := s.db.CreateCollection(name); err != nil {
				return err
			}
			m.Tables[name] = 1
			if noSeed {
				continue
			}
			if err := s.insertDocs(name, s.domain.Seed[name], 1); err != nil {
				return err
			}
		}
		if seed != nil {
			c, _ := sysCollection(store.SeedCollection)
			if err := s.putKeptSeedLocked(c, seed); err != nil {
				return err
			}
		}
		return s.putSysLocked(metaCollection, metaID, m)
	})
}

// insertDocs stores rows as new documents of collection at version ver (inside a group): the
// seed's, the i-th with id rowDocID(ver, i+1).
func (s *Store) insertDocs(collection string, rows []table.Row, ver int64) error {
	docs := make([]newDoc, len(rows))
	for i, r := range rows {
		docs[i] = newDoc{id: rowDocID(ver, i+1), row: r}
	}
	return s.insertNew(collection, ver, docs)
}

// newDoc is a row to be stored as a new document with id.
type newDoc struct {
	id  string
	row table.Row
}

// insertNew writes docs as new documents of coll at version ver, inside a group, as clover's
// Insert would but without its work per document that a large import paid for (a third of
// its writing): clover's reflection (appendDoc encodes), and two lookups of each document's
// key, one by Insert for a duplicate and one by the digests for the document replaced. Their
// ids must be rowDocID's of version ver, ascending, as a commit's new rows are, with no document
// of that version in the file from the first on: that is checked once, by one cursor step, so no
// document replaces another. Each goes through the group's digests and key buckets like any
// write (boltStore.tracked), its row handed over instead of decoded again, and clover's count of
// the collection's documents is kept as Insert keeps it.
func (s *Store) insertNew(coll string, ver int64, docs []newDoc) error {
	if len(docs) == 0 {
		return nil
	}
	tx := s.bolt.group
	if tx == nil {
		return fmt.Errorf("store: documents of %s written outside a write group", coll)
	}
	b := tx.Bucket([]byte(rootBucket))
	meta, err := s.collMeta(b, coll)
	if err != nil {
		return err
	}
	if meta.byClover() {
		cdocs := make([]*cloverDoc, len(docs))
		for i, d := range docs {
			cdocs[i] = encodeDoc(d.id, d.row, ver)
		}
		return s.db.Insert(coll, cdocs...)
	}
	prefix := docPrefix(coll)
	// The documents are appended to their collection's: bbolt, which splits a page half full by
	// default, is told to fill it (for this transaction), as its documentation advises for
	// appends. Half the pages to write, and to hold in memory until the commit.
	b.FillPercent = 1.0
	// Every id of the chunk starts with its version's part (rowDocID), so an id between the first
	// and the last would too: one look from the first shows that none is in the file. Other ids
	// may sort anywhere (a store written before ids followed insertion holds random ones).
	first := docs[0].id
	if k, _ := b.Cursor().Seek(append(prefix, first...)); bytes.HasPrefix(k, append(prefix, first[:rowDocIDVersionLen]...)) {
		return &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("%s holds document %s, of the version %d its new row %s is written at: the store's sequence is behind its documents", coll, k[len(prefix):], ver, first)}
	}
	k := &s.bolt.keyOps
	defer func() { k.written = writtenRow{} }()
	var buf []byte // a key or document being built; k.save copies it for bbolt, until it commits
	for i, d := range docs {
		if i > 0 && d.id <= docs[i-1].id {
			return fmt.Errorf("store: new documents of %s out of id order: %s after %s", coll, d.id, docs[i-1].id)
		}
		key := k.save(append(append(buf[:0], prefix...), d.id...))
		var ok bool
		if buf, ok = appendDoc(buf[:0], d.id, d.row, ver); !ok {
			return fmt.Errorf("store: new %s document %s: a value of a kind no validated row holds", coll, d.id)
		}
		doc := k.save(buf)
		k.written = writtenRow{id: d.id, row: d.row, ver: ver}
		if err := s.bolt.tracked(tx, coll, key, nil, doc); err != nil {
			return err
		}
		if err := b.Put(key, doc); err != nil {
			return err
		}
	}
	meta.Size += len(docs)
	return s.putCollMeta(b, coll, meta)
}

// collMeta is clover's record of a collection: its count of documents and the indexes clover
// keeps (none in a collection starplan made).
type collMeta struct {
	Size    int
	Indexes json.RawMessage
}

// byClover reports whether clover made the collection, with indexes of its own: its documents
// are written through clover, which keeps them.
func (m collMeta) byClover() bool { return len(m.Indexes) > 0 && string(m.Indexes) != "null" }

// collMeta reads clover's record of collection coll in the root bucket b.
func (s *Store) collMeta(b *bbolt.Bucket, coll string) (collMeta, error) {
	var m collMeta
	if v := b.Get([]byte(cloverCollectionKey + coll)); v == nil {
		return m, fmt.Errorf("store: no collection %s in %s", coll, s.bolt.path)
	} else if err := json.Unmarshal(v, &m); err != nil {
		return m, &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("collection %s's record does not read: %v", coll, err), Err: err}
	}
	return m, nil
}

// putCollMeta writes clover's record of collection coll in the root bucket b.
func (s *Store) putCollMeta(b *bbolt.Bucket, coll string, m collMeta) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return b.Put([]byte(cloverCollectionKey+coll), v)
}

// appendSysDoc appends a system document as clover writes it: the msgpack map of its clover id,
// its id and its JSON.
func appendSysDoc(dst []byte, uuid, id string, raw []byte) []byte {
	return append(appendSysDocHeader(dst, uuid, id, len(raw)), raw...)
}

// appendSysDocHeader appends what appendSysDoc writes before the JSON, of n bytes.
func appendSysDocHeader(dst []byte, uuid, id string, n int) []byte {
	dst = appendMPLen(dst, 0x80, 0xde, 0xdf, 3)
	dst = appendMPStr(appendMPStr(dst, idField), uuid)
	dst = appendMPStr(appendMPStr(dst, "id"), id)
	return appendMPStrHeader(appendMPStr(dst, "json"), n)
}

// sysDocIn is appendSysDoc's document: written into buf, where raw is buf's tail and the room
// before it holds the header (store.RoomEncoded), else a new one.
func sysDocIn(buf []byte, uuid, id string, raw []byte) []byte {
	var hdr [store.SysDocRoom]byte
	h := appendSysDocHeader(hdr[:0], uuid, id, len(raw))
	room := len(buf) - len(raw)
	if buf == nil || len(h) > room {
		return appendSysDoc(make([]byte, 0, len(h)+len(raw)), uuid, id, raw)
	}
	doc := buf[room-len(h):]
	copy(doc, h)
	return doc
}

// cloverCollectionKey prefixes the bbolt key of clover's record of a collection (db.go,
// getCollectionKey): its count of documents and its indexes, as JSON.
const cloverCollectionKey = "coll:"

// loadTable reads one table's documents into memory, and returns the count and digest of the
// documents it read (a second walk of the same pages, which costs a fraction of the decoding).
// What it keeps is recorded as shared memory (table.AddShared) as it reads (see loadDocs), so
// that a run whose walk read the table into memory is not charged for it. Any of stops closed
// ends the read with errStopped.
func loadTable(tx *bbolt.Tx, path string, s *store.Schema, stops ...<-chan struct{}) (*resident, collDigest, error) {
	recs, err := loadDocs(tx, path, s, stops...)
	if err != nil {
		return nil, collDigest{}, err
	}
	return newResident(s, recs), collDigestOf(tx, s.Name), nil
}

// beginLoad begins reading a table that was read from the file into memory: it opens a read
// transaction now, under the caller's s.mu (read or write), so that read, which may run after
// that lock is let go, reads the committed state of this moment. read verifies the rows against
// the count and digest the store's record held then, and ends the transaction. Close, or stop
// closed, ends it between chunks with errStopped (so Close does not wait for a whole read).
func (s *Store) beginLoad(sc *store.Schema) (read tableRead, err error) {
	var tx *bbolt.Tx
	if err := guard(s.bolt.path, func() (err error) { tx, err = s.bolt.db.Begin(false); return err }); err != nil {
		return nil, fmt.Errorf("reading table %s into memory: %w", sc.Name, err)
	}
	return func(stop <-chan struct{}) (res *resident, err error) {
		defer tx.Rollback()
		err = guard(s.bolt.path, func() error {
			m, err := readRecord(tx)
			if err != nil {
				return &store.DamagedError{Path: s.bolt.path, Problem: "the store's own record does not read back: " + err.Error(), Err: err}
			}
			var dg collDigest
			if res, dg, err = loadTable(tx, s.bolt.path, sc, s.quit, stop); err != nil {
				if errors.Is(err, errStopped) {
					return err
				}
				return &store.DamagedError{Path: s.bolt.path, Problem: "a row does not read back: " + err.Error(), Err: err}
			}
			if msg := digestMismatch(sc.Name, m.Digests[sc.Name], dg); msg != "" {
				return &store.DamagedError{Path: s.bolt.path, Problem: msg}
			}
			return nil
		})
		return res, err
	}, nil
}

// errStopped is a read into memory stopped by Close or by a commit that made it stale.
var errStopped = errors.New("the read into memory was stopped (the store was closed, or a large commit changed the table)")

// Close releases the store. Stages of a closed store must not be used.
func (s *Store) Close() error {
	s.quitOnce.Do(func() { close(s.quit) }) // first: a read into memory under way stops
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	return s.db.Close()
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Created reports whether Open created (and seeded) the store.
func (s *Store) Created() bool { return s.created }

// Domain is the domain the store was opened with.
func (s *Store) Domain() *store.Domain { return s.domain }

// Schema returns the named table's schema.
func (s *Store) Schema(name string) (*table.Schema, bool) {
	c := s.schemas[name]
	if c == nil {
		return nil, false
	}
	return c.Schema, true
}

// Names lists the domain's tables, sorted.
func (s *Store) Names() []string { return slices.Clone(s.names) }

func sysCollection(name string) (string, error) {
	if !store.ValidName(name) || name == metaCollection[1:] {
		return "", fmt.Errorf("system collection name %q: must be a letter followed by letters, digits or _", name)
	}
	return "_" + name, nil
}

// PutSys stores v (as JSON) under id in the system collection coll, replacing any document
// with that id. System collections are never visible to plans.
func (s *Store) PutSys(ctx context.Context, coll, id string, v any) error {
	return s.write(ctx, func() error { return s.putSysDoc(store.SysDoc{Collection: coll, ID: id, Value: v}) })
}

// PutSysDocs stores several system documents in one atomic transaction (one disk sync for the
// lot): the audit log writes its records in batches.
func (s *Store) PutSysDocs(ctx context.Context, docs ...store.SysDoc) error {
	if len(docs) == 0 {
		return nil
	}
	return s.write(ctx, func() error {
		var b sysBatch
		for _, d := range docs {
			if err := s.putSysDocIn(d, &b); err != nil {
				return err
			}
		}
		return b.write(s)
	})
}

// sysBatch is the documents of one PutSysDocs, encoded in their order (a document may hash the
// one before it: the audit log's chain) and inserted together, each collection's new documents
// by one clover Insert: one read and write of the collection's metadata for the batch, not one
// per document (issue 32: the audit log writes a record and a chain entry per run).
type sysBatch struct {
	colls []string                 // in first-seen order
	docs  map[string][]sysBatchDoc // by collection
	at    map[sysBatchAt]int       // index in docs: a later version replaces it
	// name and coll are the last collection named and its "_" name (sysCollection), which the
	// documents of a batch mostly share.
	name, coll string
}

// sysBatchAt is a document of a batch: its collection and id.
type sysBatchAt struct{ coll, id string }

type sysBatchDoc struct {
	id  string
	raw []byte
	// buf, when set, is room free for the stored document's header, then raw
	// (store.RoomEncoded): the header is written there, raw is not copied.
	buf []byte
	// key is where the document goes when its collection's index says (indexSysLocked); fresh:
	// the collection holds no document of its id (a new one).
	key   string
	fresh bool
}

// add adds a document to the batch; a later version of one it holds replaces that one's JSON
// and keeps its place.
func (b *sysBatch) add(coll, id string, raw, buf []byte, key string, fresh bool) {
	if b.docs == nil {
		b.docs, b.at = map[string][]sysBatchDoc{}, map[sysBatchAt]int{}
	}
	at := sysBatchAt{coll, id}
	if i, ok := b.at[at]; ok {
		b.docs[coll][i].raw, b.docs[coll][i].buf = raw, buf
		return
	}
	if _, ok := b.docs[coll]; !ok {
		b.colls = append(b.colls, coll)
	}
	b.at[at] = len(b.docs[coll])
	b.docs[coll] = append(b.docs[coll], sysBatchDoc{id: id, raw: raw, buf: buf, key: key, fresh: fresh})
}

func (b *sysBatch) has(coll, id string) bool {
	_, ok := b.at[sysBatchAt{coll, id}]
	return ok
}

// write inserts the batch's new documents and replaces those the store holds; it runs inside
// the group.
func (b *sysBatch) write(s *Store) error {
	root := s.bolt.group.Bucket([]byte(rootBucket))
	for _, coll := range b.colls {
		ok, err := s.db.HasCollection(coll)
		if err != nil {
			return err
		}
		if !ok {
			if err := s.db.CreateCollection(coll); err != nil {
				return err
			}
			root = s.bolt.group.Bucket([]byte(rootBucket))
		}
		var fresh []sysBatchDoc
		for _, d := range b.docs[coll] {
			if d.fresh {
				fresh = append(fresh, d)
				continue
			}
			if uuid, _ := sysDocAt(root, coll, d.id); uuid != "" {
				if err := s.putSysRawLocked(coll, d.id, d.raw); err != nil {
					return err
				}
				continue
			}
			fresh = append(fresh, d)
		}
		if err := s.insertSys(coll, fresh); err != nil {
			return err
		}
	}
	return nil
}

// insertSys writes docs as new documents of the system collection coll, none of which it holds,
// inside a group: as clover's Insert would, but without its reflection and its lookup of each
// key (the audit log writes a record and a chain entry per run; issue 32). The document is the
// msgpack map clover writes for a system document ("_id", "id", "json"), through the group's
// digests (boltStore.tracked), and clover's count of the collection is kept as Insert keeps it.
// A collection that clover itself indexes goes through Insert.
func (s *Store) insertSys(coll string, docs []sysBatchDoc) error {
	if len(docs) == 0 {
		return nil
	}
	tx := s.bolt.group
	b := tx.Bucket([]byte(rootBucket))
	meta, err := s.collMeta(b, coll)
	if err != nil {
		return err
	}
	if meta.byClover() {
		cdocs := make([]*cloverDoc, len(docs))
		for i, d := range docs {
			cdocs[i] = newCloverDoc()
			key := d.key
			if key == "" {
				key, _ = sysDocKeys(coll, d.id)
			}
			cdocs[i].Set(idField, key)
			cdocs[i].Set("id", d.id)
			cdocs[i].Set("json", string(d.raw))
		}
		return s.db.Insert(coll, cdocs...)
	}
	prefix := docPrefix(coll)
	// Numbered documents (the audit chain's entries) and those of an indexed collection (the
	// audit log's records) are appended in order (sysDocKeys, sequencedDocID): bbolt, which
	// splits a page half full by default, is told to fill it, as in insertNew.
	b.FillPercent = 1.0
	look := placesTaken(b, prefix, docs)
	for _, d := range docs {
		uuid := d.key
		if uuid == "" {
			uuid, _ = sysDocKeys(coll, d.id)
		}
		key := append(append(make([]byte, 0, len(prefix)+len(uuid)), prefix...), uuid...)
		if d.key != "" && look && b.Get(key) != nil {
			return &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("%s holds a document at %s, the place its index's sequence gives new document %s: the index is behind its documents; starplan db check reports it", coll[1:], uuid, d.id)}
		}
		doc := sysDocIn(d.buf, uuid, d.id, d.raw)
		if err := s.bolt.tracked(tx, coll, key, nil, doc); err != nil {
			return err
		}
		if err := b.Put(key, doc); err != nil {
			return err
		}
	}
	meta.Size += len(docs)
	return s.putCollMeta(b, coll, meta)
}

// placesTaken reports whether root, clover's bucket, may hold a document at a place the index
// gave one of docs (sysBatchDoc.key; prefix is their collection's): whether it holds any key
// from the least of them to the greatest. A batch's places are the next numbers of its
// collection's sequence, past every document stored in sequence, so one seek answers for the
// batch rather than a lookup per document; only when it finds a key in the range (a sequence
// behind its documents, or a document stored under a hashed id that falls there) does
// insertSys look at each.
func placesTaken(root *bbolt.Bucket, prefix []byte, docs []sysBatchDoc) bool {
	var lo, hi string
	for _, d := range docs {
		if d.key == "" {
			continue
		}
		if lo == "" || d.key < lo {
			lo = d.key
		}
		if d.key > hi {
			hi = d.key
		}
	}
	if lo == "" {
		return false
	}
	k, _ := root.Cursor().Seek(append(slices.Clip(prefix), lo...))
	return k != nil && bytes.HasPrefix(k, prefix) && string(k[len(prefix):]) <= hi
}

// GetSys decodes the document id of the system collection coll into v, reporting whether it
// exists. When it does not, or does not decode, the collection is checked against its recorded
// count and digest first: a lost or damaged document is a *DamagedError, not a missing one.
func (s *Store) GetSys(coll, id string, v any) (bool, error) {
	c, err := sysCollection(coll)
	if err != nil {
		return false, err
	}
	if raw, found, ok := s.getSysUnlocked(c, id); ok {
		if !found {
			return false, nil
		}
		if json.Unmarshal([]byte(raw), v) == nil {
			return true, nil
		}
		// It does not decode: the locked read says so, having verified its collection.
	}
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	var found bool
	err = guard(s.bolt.path, func() (err error) {
		found, err = s.getSysLocked(c, id, v)
		if err != nil || !found {
			// A document that is missing or does not decode may have been lost or damaged.
			if verr := s.verifySysLocked(c); verr != nil {
				return verr
			}
		}
		return err
	})
	return found, err
}

// getSysUnlocked is GetSys's read of document id of the system collection coll (its "_" name)
// in a read transaction of its own, without bolt.mu: bbolt's readers do not wait for its
// writer, so a look at a run does not wait for a commit under way, its disk sync included (the
// commits of the audit log's batches, applies and rejections held every read of a busy server;
// issue 32). It reads the last committed state. ok is false when it cannot answer alone, and
// GetSys then reads under bolt.mu, as before: the store's own record (its reads are counted
// under bolt.mu), a document that does not decode, an index entry that names another
// document (damage), and a miss in a collection not verified against the record as that
// transaction holds it. A miss is answered only when the digests the transaction's record
// holds for coll equal what verifySysLocked verified and the commits since moved
// (s.verified): equal digests are the same documents, so the miss needs no hashing, as under
// the lock. A commit racing this read makes them differ (the record and verified move at
// different instants), and the read falls back to the lock.
func (s *Store) getSysUnlocked(coll, id string) (raw string, found, ok bool) {
	if coll == metaCollection {
		return "", false, false
	}
	err := guard(s.bolt.path, func() error {
		return s.bolt.db.View(func(tx *bbolt.Tx) error {
			root := tx.Bucket([]byte(rootBucket))
			if root == nil {
				return nil
			}
			if uuid, doc := sysDocAt(root, coll, id); uuid != "" {
				js, err := decodeSysDoc(doc)
				if err == nil {
					raw, found, ok = js, true, true
				}
				return nil
			}
			if k := sequencedKey(tx, coll, id); k != "" && root.Get(append(docPrefix(coll), k...)) != nil {
				return nil // an entry naming another's place: findSysLocked reports it
			}
			doc := root.Get(append(docPrefix(metaCollection), sysDocID(metaCollection, metaID)...))
			if doc == nil {
				return nil
			}
			js, err := decodeSysDoc(doc)
			if err != nil {
				return nil
			}
			m, found, err := s.digestsOf(js)
			if err != nil || !found || m.Digests == nil {
				return nil
			}
			s.verifiedMu.Lock()
			v, verified := s.verified[coll]
			s.verifiedMu.Unlock()
			ok = verified && v == m.Digests[coll]
			return nil
		})
	})
	if err != nil {
		return "", false, false
	}
	return raw, found, ok
}

// ListSys returns every document of the system collection coll, sorted by id, after checking
// them against the collection's recorded count and digest (a *DamagedError when they differ).
func (s *Store) ListSys(coll string) ([]store.SysRecord, error) {
	c, err := sysCollection(coll)
	if err != nil {
		return nil, err
	}
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	var docs []*cloverDoc
	err = guard(s.bolt.path, func() error {
		// First, and even when the collection seems not to exist (its metadata may be what was
		// damaged): a lost or damaged document is reported as such, not as a shorter list.
		if err := s.verifySysLocked(c); err != nil {
			return err
		}
		ok, err := s.db.HasCollection(c)
		if err != nil || !ok {
			return err
		}
		docs, err = s.db.FindAll(query.NewQuery(c))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.SysRecord, 0, len(docs))
	for _, d := range docs {
		id, _ := d.Get("id").(string)
		raw, _ := d.Get("json").(string)
		out = append(out, store.SysRecord{ID: id, JSON: json.RawMessage(raw)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (s *Store) getSysLocked(coll, id string, v any) (bool, error) {
	if ok, err := s.db.HasCollection(coll); err != nil || !ok {
		return false, err
	}
	doc, err := s.findSysLocked(coll, id)
	if err != nil || doc == nil {
		return false, err
	}
	raw, _ := doc.Get("json").(string)
	if coll == metaCollection {
		s.rec.decodes++
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return true, fmt.Errorf("system document %s/%s: %w", coll, id, err)
	}
	return true, nil
}

// putSysDoc writes one system document; it runs inside a group.
func (s *Store) putSysDoc(d store.SysDoc) error {
	var b sysBatch
	if err := s.putSysDocIn(d, &b); err != nil {
		return err
	}
	return b.write(s)
}

// putSysDocIn encodes and indexes one system document and adds it to b, which writes it; it
// runs inside a group.
func (s *Store) putSysDocIn(d store.SysDoc, b *sysBatch) error {
	c := b.coll
	if d.Collection != b.name || c == "" {
		var err error
		if c, err = sysCollection(d.Collection); err != nil {
			return err
		}
		b.name, b.coll = d.Collection, c
	}
	if d.Create && b.has(c, d.ID) {
		return fmt.Errorf("system document %s/%s: %w", c, d.ID, store.ErrSysExists)
	}
	if d.Create { // one look at its key: a document there is one of this id
		if root := s.bolt.group.Bucket([]byte(rootBucket)); root != nil {
			if uuid, _ := sysDocAt(root, c, d.ID); uuid != "" {
				return fmt.Errorf("system document %s/%s: %w", c, d.ID, store.ErrSysExists)
			}
		}
	}
	raw, buf, _, err := store.EncodeSysRoom(d.Value)
	if err != nil {
		return fmt.Errorf("system document %s/%s: %w", c, d.ID, err)
	}
	key, fresh, err := s.indexSysLocked(c, d.ID, d.Index, int64(len(raw)), false)
	if err != nil {
		return err
	}
	b.add(c, d.ID, raw, buf, key, fresh || d.Create) // a Create found none above
	return nil
}

func (s *Store) putSysLocked(coll, id string, v any) error {
	delete(s.sysIdxCurrent, coll) // a document without its index entry (see viewSysIndex)
	if coll == metaCollection {   // the record, the definition's maps and all
		s.rec.encodes++
		s.dropRecordLocked()
	}
	raw, err := store.EncodeSys(v)
	if err != nil {
		return fmt.Errorf("system document %s/%s: %w", coll, id, err)
	}
	return s.putSysRawLocked(coll, id, raw)
}

func (s *Store) putSysRawLocked(coll, id string, raw []byte) error {
	ok, err := s.db.HasCollection(coll)
	if err != nil {
		return err
	}
	if !ok {
		if err := s.db.CreateCollection(coll); err != nil {
			return err
		}
	}
	old, err := s.findSysLocked(coll, id)
	if err != nil {
		return err
	}
	doc := newCloverDoc()
	doc.Set("id", id)
	doc.Set("json", string(raw))
	if old == nil {
		key, _ := sysDocKeys(coll, id)
		doc.Set(idField, key)
		return s.db.Insert(coll, doc)
	}
	doc.Set(idField, old.ObjectId()) // replaced where it is (sysDocKeys)
	return s.db.ReplaceById(coll, doc.ObjectId(), doc)
}

// findSysLocked is clover's FindById of the document id of the system collection coll, wherever
// it is stored (sysDocAt): nil when there is none.
func (s *Store) findSysLocked(coll, id string) (*cloverDoc, error) {
	var uuid, other string
	find := func(tx *bbolt.Tx) error {
		if root := tx.Bucket([]byte(rootBucket)); root != nil {
			if uuid, _ = sysDocAt(root, coll, id); uuid == "" {
				// Not found, though its index entry names a place holding a document: another's.
				if k := sequencedKey(tx, coll, id); k != "" && root.Get(append(docPrefix(coll), k...)) != nil {
					other = k
				}
			}
		}
		return nil
	}
	var err error
	if tx := s.bolt.group; tx != nil {
		err = find(tx)
	} else {
		err = s.bolt.db.View(find)
	}
	if other != "" {
		return nil, &store.DamagedError{Path: s.bolt.path, Problem: fmt.Sprintf("the index of %s names for document %s the place %s, which holds another document; starplan db check reports the damage", coll[1:], id, other)}
	}
	if err != nil || uuid == "" {
		return nil, err
	}
	return s.db.FindById(coll, uuid)
}

// sysDocAt returns the clover id under which root, clover's bucket, holds the document id of the
// system collection coll, and the stored document; "" and nil when it holds none. It looks where
// the collection's index puts it (a document stored in sequence: sequencedDocID), then where
// sysDocKeys does.
func sysDocAt(root *bbolt.Bucket, coll, id string) (uuid string, doc []byte) {
	if key := sequencedKey(root.Tx(), coll, id); key != "" {
		// Only if it is the document of id: an entry naming another (damage) is not followed, so
		// a lookup does not read, nor a write replace, another run's record (sysDocCarries).
		if v := root.Get(append(docPrefix(coll), key...)); v != nil && sysDocCarries(v, key, id) {
			return key, v
		}
	}
	key, legacy := sysDocKeys(coll, id)
	if v := root.Get(append(docPrefix(coll), key...)); v != nil {
		return key, v
	}
	if legacy != "" {
		if v := root.Get(append(docPrefix(coll), legacy...)); v != nil {
			return legacy, v
		}
	}
	return "", nil
}

// sequencedKey is the clover id the index of coll in tx gives document id (sysEntry.Key): ""
// when it has no index, no entry of id, or one without a key.
func sequencedKey(tx *bbolt.Tx, coll, id string) string {
	b := sysIndexOf(tx, coll)
	if b == nil {
		return ""
	}
	ids := b.Bucket(sysIdxIDs)
	if ids == nil {
		return ""
	}
	raw := ids.Get([]byte(id))
	// The entry's JSON ends in its key when it has one, a UUID (nothing to unescape): `"k":"` can
	// only be the key's name, since a quote inside a JSON string is escaped.
	i := bytes.LastIndex(raw, []byte(`"k":"`))
	if i < 0 {
		return ""
	}
	k := raw[i+len(`"k":"`):]
	if j := bytes.IndexByte(k, '"'); j == 36 && bytes.IndexByte(k[:j], '\\') < 0 {
		return string(k[:j])
	}
	var e sysEntry // anything else: as JSON
	if json.Unmarshal(raw, &e) != nil {
		return ""
	}
	return e.Key
}

// write runs fn in one atomic bbolt transaction; fn may call clover freely. It is for writes
// that do not change tables, so it holds the committed tables' lock for reading only: runs
// start and applies check their conflicts while a batch of the audit log commits (issue 32:
// each dry run waited for the batch's disk sync). bolt.mu orders it with every other write.
func (s *Store) write(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errors.New("store is closed")
	}
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	return s.bolt.runGroup(func(*bbolt.Tx) error { return fn() })
}

// A Store is every tool the `starplan db` commands use, and lives in a directory.
var (
	_ store.Seeder   = (*Store)(nil)
	_ store.Exporter = (*Store)(nil)
	_ store.Importer = (*Store)(nil)
	_ store.Local    = (*Store)(nil)

	_ store.PartialImport = (*ImportErrors)(nil)
)

// appendMPStrHeader appends the header appendMPStr writes before a string of n bytes.
func appendMPStrHeader(dst []byte, n int) []byte {
	switch {
	case n < 32:
		return append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		return append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
}
