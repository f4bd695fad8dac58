package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	cloverstore "github.com/ostafen/clover/v2/store"
	"go.etcd.io/bbolt"
)

// The file and bucket names are the ones clover's own bbolt engine uses, so a store written by
// starplan is also a plain clover database that clover.Open can read.
const (
	dbFileName = "data.db"
	rootBucket = "root"
)

// lockTimeout is how long Open waits for another process to release the store's file lock
// before it reports ErrInUse.
const lockTimeout = time.Second

// boltStore implements clover's store.Store over a bbolt database that it opens itself (clover's
// bbolt engine waits forever for the file lock), and adds groups: while group runs, every
// transaction clover begins is one shared read-write bbolt transaction whose Commit and Rollback
// are no-ops, so a sequence of clover calls commits or rolls back as one.
//
// mu serialises every use of the store: clover's calls during a group come from the goroutine
// that holds it, so the shared transaction is never used concurrently.
type boltStore struct {
	db *bbolt.DB

	mu    sync.Mutex
	group *bbolt.Tx // the shared transaction while a group runs
}

// openBolt opens (creating if needed) the bbolt file in dir, failing with an *InUseError when
// another process holds it for longer than timeout.
func openBolt(dir string, timeout time.Duration) (*boltStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create store directory: %w", err)
	}
	db, err := bbolt.Open(filepath.Join(dir, dbFileName), 0o644, &bbolt.Options{Timeout: timeout})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, &InUseError{Dir: dir}
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	exists := false
	err = db.View(func(tx *bbolt.Tx) error {
		exists = tx.Bucket([]byte(rootBucket)) != nil
		return nil
	})
	if err == nil && !exists { // only a new file is written to: a commit costs two fsyncs
		err = db.Update(func(tx *bbolt.Tx) error {
			_, err := tx.CreateBucketIfNotExists([]byte(rootBucket))
			return err
		})
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return &boltStore{db: db}, nil
}

// Begin implements clover's store.Store. Callers must hold s.mu (the Store's methods do).
func (s *boltStore) Begin(update bool) (cloverstore.Tx, error) {
	if s.group != nil {
		return &boltTx{tx: s.group, shared: true}, nil
	}
	tx, err := s.db.Begin(update)
	if err != nil {
		return nil, err
	}
	return &boltTx{tx: tx}, nil
}

// Close implements clover's store.Store.
func (s *boltStore) Close() error { return s.db.Close() }

// runGroup runs fn with every clover transaction joined into one read-write bbolt transaction,
// committed (with fsync) when fn returns nil and rolled back otherwise. A kill at any instant
// leaves the file at the state before or after the whole group: bbolt switches meta pages only
// after the data pages are synced. The caller must hold s.mu.
func (s *boltStore) runGroup(fn func(tx *bbolt.Tx) error) error {
	if s.group != nil {
		return errors.New("store: nested write group")
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	s.group = tx
	defer func() { s.group = nil }()
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

type boltTx struct {
	tx     *bbolt.Tx
	shared bool // part of a group: Commit and Rollback belong to the group
}

func (t *boltTx) bucket() *bbolt.Bucket { return t.tx.Bucket([]byte(rootBucket)) }

func (t *boltTx) Set(key, value []byte) error { return t.bucket().Put(key, value) }

func (t *boltTx) Get(key []byte) ([]byte, error) { return t.bucket().Get(key), nil }

func (t *boltTx) Delete(key []byte) error { return t.bucket().Delete(key) }

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
	if errors.Is(err, bbolt.ErrTxClosed) { // clover defers Rollback after a successful Commit
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
