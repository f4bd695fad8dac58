//go:build unix

package bolt

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/store"
)

// mapped is the size bbolt maps of the file (its unexported datasz), read inside a read
// transaction: a remap holds bbolt's mmap lock for writing, so no remap runs while this reads it.
func mapped(t testing.TB, s *Store) int64 {
	t.Helper()
	var n int64
	require.NoError(t, s.bolt.db.View(func(*bbolt.Tx) error {
		n = reflect.ValueOf(s.bolt.db).Elem().FieldByName("datasz").Int()
		return nil
	}))
	return n
}

// used is how much of the file bbolt's pages take (its high-water mark).
func used(t testing.TB, s *Store) int64 {
	t.Helper()
	var n int64
	require.NoError(t, s.bolt.db.View(func(tx *bbolt.Tx) error { n = tx.Size(); return nil }))
	return n
}

// bigDocs are system documents of about size bytes in all, in an indexed collection as the audit
// log's records are: a batch of them makes a small store's file outgrow bbolt's map of it.
func bigDocs(prefix string, size int) []store.SysDoc {
	const each = 64 << 10
	var docs []store.SysDoc
	for i := range max(size/each, 1) {
		id := fmt.Sprintf("%s-%04d", prefix, i)
		docs = append(docs, store.SysDoc{Collection: "runs", ID: id, Value: map[string]any{"v": 1, "pad": strings.Repeat("x", each)},
			Index: &store.SysIndex{Order: id, Group: "done"}})
	}
	return docs
}

// A commit that must grow bbolt's map of the file waits for every open read transaction (bbolt
// remaps under its mmap lock, which each read transaction holds for reading), and while it waits
// no read transaction begins. A read of a table into memory holds one for the whole read (seconds
// at 1M rows), after the run that began it has gone. Large commits stop such a read first
// (TestALargeCommitStopsAnAbandonedRead), small ones do not: a batch of the audit log, or an
// apply with its records, that happens to grow the map waits for the whole read, holding the
// tables' lock and bolt.mu, and meanwhile every look at a run (GetSys), every walk from the file
// and every apply waits too. Not a deadlock (the read ends by itself), a stall of the whole
// store for as long as the read takes, each time the map grows (it doubles up to 1 GiB from
// the file's size at Open, then grows by 1 GiB). So a file of mapAheadMin or more is mapped a
// GiB past its end at Open (mapAhead): its commits do not grow the map until a GiB is written.
func TestRvlockAGrowingCommitDoesNotWaitForAReadIntoMemory(t *testing.T) {
	t.Parallel()
	onDisk(t, 50)
	dir := bigInventory(t, 300)
	s := openAt(t, dir)
	require.NoError(t, s.PutSysDocs(bg, bigDocs("pad", 17<<20)...)) // a file past bbolt's AllocSize
	require.NoError(t, s.Close())
	s = openAt(t, dir)
	// The map filled to within 2 MiB of its end, unless it has room far ahead.
	for i := 0; ; i++ {
		room := mapped(t, s) - used(t, s)
		if room <= 2<<20 || room > 256<<20 {
			break
		}
		require.NoError(t, s.PutSysDocs(bg, bigDocs(fmt.Sprint("fill", i), 1<<20)...))
	}
	mt := s.tables["inventory"]
	release := make(chan struct{})
	var once bool
	free := func() {
		if !once {
			once = true
			close(release)
		}
	}
	defer free()
	began := make(chan struct{})
	begin, reads := mt.begin, 0
	mt.begin = func() (tableRead, error) {
		read, err := begin()
		if reads++; reads > 1 {
			return read, err
		}
		return func(stop <-chan struct{}) (*resident, error) {
			close(began)
			select { // the transaction is open: a slow read (a table of a million rows)
			case <-release:
			case <-stop:
			}
			return read(stop)
		}, err
	}
	abandonWalk(t, s, func() { <-began })

	before := mapped(t, s)
	docs := bigDocs("batch", 4<<20) // an audit batch is up to 256 records of a few KiB each
	t.Logf("%d KiB mapped, %d KiB used, a batch of %d KiB", before>>10, used(t, s)>>10, len(docs)*64)
	done := make(chan error, 1)
	go func() { done <- s.PutSysDocs(bg, docs...) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		free() // so that the store closes
		require.NoError(t, <-done)
		t.Fatalf("a batch of %d system documents (%d KiB; %d KiB mapped) waited for a read into memory that no run waits for", len(docs), len(docs)*64, before>>10)
	}
	var v map[string]any
	ok, err := s.GetSys("runs", docs[0].ID, &v)
	require.NoError(t, err)
	assert.True(t, ok)
	free()
}

// Mapping a store far ahead (mapAhead) costs address space, not disk: the file of a 20 MiB
// store keeps its size through Open, a commit and Close, and a small store is not mapped
// ahead at all, since bbolt would then grow its file in 16 MiB steps.
func TestRvlockMappingAheadDoesNotGrowTheFile(t *testing.T) {
	t.Parallel()
	size := func(dir string) int64 {
		st, err := os.Stat(filepath.Join(dir, dbFileName))
		require.NoError(t, err)
		return st.Size()
	}
	t.Run("large", func(t *testing.T) {
		t.Parallel()
		dir := bigInventory(t, 300)
		s := openAt(t, dir)
		require.NoError(t, s.PutSysDocs(bg, bigDocs("pad", 20<<20)...))
		require.NoError(t, s.Close())
		before := size(dir)
		require.GreaterOrEqual(t, before, int64(mapAheadMin))

		s = openAt(t, dir)
		if mapAhead(filepath.Join(dir, dbFileName)) > 0 { // a 64-bit unix system
			assert.GreaterOrEqual(t, mapped(t, s), before+mapAheadRoom, "the file is mapped ahead")
		}
		assert.Equal(t, before, size(dir), "Open grew the file")
		used0 := used(t, s)
		require.NoError(t, s.PutSysDocs(bg, bigDocs("small", 64<<10)...))
		// A commit past the file's end grows it as bbolt does without the map ahead: by what
		// it needs and AllocSize more.
		assert.LessOrEqual(t, size(dir), max(before, used(t, s)+mapAheadMin), "a commit of %d KiB (used %d → %d KiB)", 64, used0>>10, used(t, s)>>10)
		require.NoError(t, s.Close())
		assert.LessOrEqual(t, size(dir), max(before, used0+(1<<20)+mapAheadMin))
	})
	t.Run("small", func(t *testing.T) {
		t.Parallel()
		dir := bigInventory(t, 300)
		s := openAt(t, dir)
		before := size(dir)
		require.Less(t, before, int64(mapAheadMin))
		assert.Less(t, mapped(t, s), int64(mapAheadMin), "a small file is not mapped ahead")
		require.NoError(t, s.PutSysDocs(bg, bigDocs("small", 256<<10)...))
		require.NoError(t, s.Close())
		assert.Less(t, size(dir), int64(mapAheadMin), "a small store grew by bbolt's AllocSize (%d KiB before a commit of 256 KiB)", before>>10)
	})
}
