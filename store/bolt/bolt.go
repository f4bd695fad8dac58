package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/starplan/starplan/store"

	cloverstore "github.com/ostafen/clover/v2/store"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The file and bucket names are the ones clover's own bbolt engine uses, so a store written by
// starplan is also a plain clover database that clover.Open can read.
const (
	dbFileName = "data.db"
	rootBucket = "root"
)

// boltStore implements clover's store.Store over a bbolt database that it opens itself (clover's
// bbolt engine waits forever for the file lock), and adds groups: while group runs, every
// transaction clover begins is one shared read-write bbolt transaction whose Commit and Rollback
// are no-ops, so a sequence of clover calls commits or rolls back as one.
//
// mu serialises every use of the store: clover's calls during a group come from the goroutine
// that holds it, so the shared transaction is never used concurrently.
type boltStore struct {
	db   *bbolt.DB
	path string   // the data.db file
	file *os.File // bbolt's own handle of it (reserveFile grows the file through it)

	mu    sync.Mutex
	group *bbolt.Tx // the shared transaction while a group runs
	// delta is what the running group changed in each collection's count and digest (see
	// digest.go): every document it writes or deletes is tracked as it goes.
	delta map[string]*collDigest
	// beforeCommit, when set, runs at the end of every group that did not fail, in its
	// transaction, with the group's delta (possibly empty); the Store records the delta in its
	// meta record there.
	beforeCommit func(tx *bbolt.Tx, delta map[string]*collDigest) error
	// afterCommit, when set, runs after every group that committed, with its delta, still under
	// mu (the Store moves what it verified with it: verifySysLocked).
	afterCommit func(delta map[string]*collDigest)
	// onDoc, when set, sees every document write of a group, in its transaction, before it is
	// made: old is the document replaced or deleted (nil: none), new the one written (nil: a
	// delete). The Store keeps its key and index buckets with it (disk.go).
	onDoc func(tx *bbolt.Tx, coll string, key, old, new []byte, hash uint64) error
	// keyOps are the group's changes to the key and index buckets, made at its end in key
	// order (see keyOps.apply).
	keyOps keyOps
}

// openBolt opens the bbolt file in dir, failing with an *InUseError when another process holds
// it for longer than timeout. A missing file is created when create is set (else the error is a
// *NoStoreError); an existing one is never initialised: an empty, truncated or otherwise damaged
// file is a *DamagedError, and so is a panic or fault of bbolt while it opens the file.
func openBolt(dir string, timeout time.Duration, create bool) (*boltStore, error) {
	path := filepath.Join(dir, dbFileName)
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !create {
			return nil, &store.NoStoreError{Dir: dir}
		}
		if err := createBolt(dir, path); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	default:
		// Before bbolt maps the file: it would make a new database of an empty file and fault on
		// a truncated one. Without the lock, a damaged-looking newer meta page may be one being
		// written; that is checked again below, under the lock.
		_, err := inspectFile(f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	var file *os.File // bbolt's, so that a panic inside bbolt.Open does not leak it (and its lock)
	var db *bbolt.DB
	err = guard(path, func() error {
		open := func(mapSize int) (err error) {
			db, err = bbolt.Open(path, 0o644, &bbolt.Options{Timeout: timeout, InitialMmapSize: mapSize,
				OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
					f, err := os.OpenFile(name, flag&^os.O_CREATE, perm)
					file = f
					return f, err
				}})
			return err
		}
		ahead := mapAhead(path)
		err := open(ahead)
		if err != nil && ahead > 0 && mapAheadRefused(err) {
			// No address space for the map ahead (RLIMIT_AS): bbolt closed the file; map it
			// as bbolt would, as large as the file.
			err = open(0)
		}
		return err
	})
	if err != nil {
		if db == nil && file != nil { // bbolt panicked: its file (and lock) are ours to release
			unlockFile(file)
			file.Close()
		}
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, &store.InUseError{Dir: dir}
		}
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum) {
			return nil, &store.DamagedError{Path: path, Problem: err.Error(), Err: err}
		}
		if errors.Is(err, store.ErrDamaged) {
			return nil, err
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err) // such as no permission
	}
	st, err := inspectFile(file) // now under bbolt's lock
	if err == nil && st.rollback != nil {
		err = st.rollback
	}
	if err == nil {
		err = guard(path, func() error {
			return db.View(func(tx *bbolt.Tx) error {
				if tx.Bucket([]byte(rootBucket)) == nil {
					return fmt.Errorf("open store %s: %s is a bbolt file but not a starplan store (it has no %q bucket)", dir, path, rootBucket)
				}
				return nil
			})
		})
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &boltStore{db: db, path: path, file: file}, nil
}

// createBolt makes a new bbolt file with the root bucket at path, atomically: it is built under
// a temporary name and linked into place, so data.db never exists half made (an empty data.db is
// never starplan's own). When another process created it first, that one is kept.
func createBolt(dir, path string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create store directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, dbFileName+".new-*")
	if err != nil {
		return fmt.Errorf("create store %s: %w", dir, err)
	}
	name := tmp.Name()
	tmp.Close()
	defer os.Remove(name)
	db, err := bbolt.Open(name, 0o644, nil)
	if err != nil {
		return fmt.Errorf("create store %s: %w", dir, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucket([]byte(rootBucket))
		return err
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = os.Link(name, path); errors.Is(err, fs.ErrExist) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("create store %s: %w", dir, err)
	}
	if d, err := os.Open(dir); err == nil { // make the new name durable
		d.Sync()
		d.Close()
	}
	return nil
}

// emptyLocked reports whether the root bucket holds no key at all, as a store whose creation was
// interrupted between making the file and writing its first commit leaves it. The caller holds
// s.mu.
func (s *boltStore) emptyLocked() (bool, error) {
	empty := false
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(rootBucket))
		k, _ := b.Cursor().First()
		empty = k == nil
		return nil
	})
	return empty, err
}

// Begin implements clover's store.Store. Callers must hold s.mu (the Store's methods do).
func (s *boltStore) Begin(update bool) (cloverstore.Tx, error) {
	if s.group != nil {
		return &boltTx{tx: s.group, shared: true, st: s}, nil
	}
	tx, err := s.db.Begin(update)
	if err != nil {
		return nil, err
	}
	return &boltTx{tx: tx, st: s}, nil
}

// Close implements clover's store.Store.
func (s *boltStore) Close() error { return s.db.Close() }

// runGroup runs fn with every clover transaction joined into one read-write bbolt transaction,
// committed (with fsync) when fn returns nil and rolled back otherwise. A kill at any instant
// leaves the file at the state before or after the whole group: bbolt switches meta pages only
// after the data pages are synced. A damaged page that bbolt panics or faults on rolls the group
// back and is returned as a *DamagedError; a commit the file did not take (a full disk) is a
// *WriteError. The caller must hold s.mu.
func (s *boltStore) runGroup(fn func(tx *bbolt.Tx) error) error {
	if s.group != nil {
		return errors.New("store: nested write group")
	}
	return guard(s.path, func() error {
		tx, err := s.db.Begin(true)
		if err != nil {
			return err
		}
		s.group = tx
		s.delta = map[string]*collDigest{}
		done := false
		defer func() {
			s.group, s.delta, s.keyOps = nil, nil, keyOps{}
			if !done { // fn or Commit panicked: release bbolt's writer lock
				tx.Rollback()
			}
		}()
		err = fn(tx)
		if err == nil {
			err = s.keyOps.apply(tx)
			s.keyOps = keyOps{}
		}
		if err == nil && s.beforeCommit != nil {
			err = s.beforeCommit(tx, s.delta)
		}
		if err != nil {
			done = true
			tx.Rollback()
			return err
		}
		err = tx.Commit()
		done = true
		if err != nil {
			return &store.WriteError{Path: s.path, Err: err}
		}
		if s.afterCommit != nil {
			s.afterCommit(s.delta)
		}
		return nil
	})
}

type boltTx struct {
	tx     *bbolt.Tx
	shared bool // part of a group: Commit and Rollback belong to the group
	st     *boltStore
}

func (t *boltTx) bucket() *bbolt.Bucket { return t.tx.Bucket([]byte(rootBucket)) }

func (t *boltTx) Set(key, value []byte) error {
	if err := t.track(key, value, true); err != nil {
		return err
	}
	return t.bucket().Put(key, value)
}

func (t *boltTx) Get(key []byte) ([]byte, error) { return t.bucket().Get(key), nil }

func (t *boltTx) Delete(key []byte) error {
	if err := t.track(key, nil, false); err != nil {
		return err
	}
	return t.bucket().Delete(key)
}

// track adds a document write (set) or delete to the group's digest delta: the document it
// replaces, read in the same transaction, goes out, the new one comes in. Documents are written
// only inside groups, so that no write escapes the digests.
func (t *boltTx) track(key, value []byte, set bool) error {
	coll, ok := docCollection(key)
	if !ok {
		return nil
	}
	if !t.shared {
		return fmt.Errorf("store: document %q written outside a write group", key)
	}
	if !set {
		value = nil
	}
	return t.st.tracked(t.tx, coll, key, t.bucket().Get(key), value)
}

// tracked adds one document write of the running group to its digest delta and hooks: old is
// the document it replaces or deletes (nil: none), value the one written (nil: a delete).
func (s *boltStore) tracked(tx *bbolt.Tx, coll string, key, old, value []byte) error {
	d := s.delta[coll]
	if d == nil {
		d = &collDigest{}
		s.delta[coll] = d
	}
	if old != nil {
		d.remove(key, old)
	}
	var hash uint64
	if value != nil {
		hash = docHash(key, value) // the hook takes it too
		d.addHash(hash)
	}
	if s.onDoc == nil {
		return nil
	}
	return s.onDoc(tx, coll, key, old, value, hash)
}

func (t *boltTx) Cursor(forward bool) (cloverstore.Cursor, error) {
	return &boltCursor{c: t.bucket().Cursor(), forward: forward}, nil
}

func (t *boltTx) Commit() error {
	if t.shared {
		return nil
	}
	return t.tx.Commit()
}

func (t *boltTx) Rollback() error {
	if t.shared {
		return nil
	}
	err := t.tx.Rollback()
	if errors.Is(err, berrors.ErrTxClosed) { // clover defers Rollback after a successful Commit
		return nil
	}
	return err
}

// boltCursor follows clover's own bbolt cursor: Seek positions at the first key >= seek (or, going
// backwards, the last key <= seek), Next moves in the cursor's direction.
type boltCursor struct {
	c       *bbolt.Cursor
	forward bool
	key     []byte
	value   []byte
}

func (c *boltCursor) Seek(seek []byte) error {
	c.key, c.value = c.c.Seek(seek)
	if !c.forward && !bytes.Equal(c.key, seek) {
		if c.key == nil {
			c.key, c.value = c.c.Last()
		} else {
			c.key, c.value = c.c.Prev()
		}
	}
	return nil
}

func (c *boltCursor) Next() {
	if c.forward {
		c.key, c.value = c.c.Next()
	} else {
		c.key, c.value = c.c.Prev()
	}
}

func (c *boltCursor) Valid() bool { return c.key != nil && c.value != nil }

func (c *boltCursor) Item() (cloverstore.Item, error) {
	return cloverstore.Item{Key: c.key, Value: c.value}, nil
}

func (c *boltCursor) Close() error { return nil }
