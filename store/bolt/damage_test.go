package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// damagedStore makes a store in a new directory, closes it, lets damage change data.db's bytes,
// and returns the directory and the damaged bytes.
func damagedStore(t *testing.T, rows int, damage func(b []byte) []byte) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	s := openAt(t, dir)
	if rows > 0 {
		v := s.Stage()
		inv := tbl(t, v, "inventory")
		for i := range rows {
			_, err := inv.Insert(table.Row{"item_id": fmt.Sprintf("X%05d", i), "name": fmt.Sprintf("Item %d", i),
				"description": "a row to fill pages", "quantity_in_stock": 1, "price": 2.5})
			require.NoError(t, err)
		}
		require.NoError(t, s.commitStage(v))
	}
	require.NoError(t, s.Close())
	path := filepath.Join(dir, dbFileName)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b = damage(b)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return dir, b
}

// commitStage applies a stage without the run limits a plan has.
func (s *Store) commitStage(v *Stage) error {
	return s.ApplyPending(bg, v.Pending(), nil)
}

// assertDamaged opens dir and expects a *DamagedError, mentioning want, and data.db untouched.
func assertDamaged(t *testing.T, dir string, before []byte, want string) {
	t.Helper()
	for _, opts := range []Options{{}, {MustExist: true}} {
		s, err := Open(dir, opts)
		if s != nil {
			s.Close()
		}
		require.Error(t, err)
		var de *store.DamagedError
		require.True(t, errors.As(err, &de), "%T: %v", err, err)
		assert.True(t, errors.Is(err, store.ErrDamaged))
		assert.Equal(t, filepath.Join(dir, dbFileName), de.Path)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, de.Hint(), "backup")
		after, rerr := os.ReadFile(filepath.Join(dir, dbFileName))
		require.NoError(t, rerr)
		assert.Equal(t, before, after, "a damaged file is never written to")
	}
}

func TestOpenRefusesAnEmptyFile(t *testing.T) {
	dir, b := damagedStore(t, 0, func([]byte) []byte { return []byte{} })
	assertDamaged(t, dir, b, "empty (0 bytes)")
}

func TestOpenRefusesATruncatedFile(t *testing.T) {
	dir, b := damagedStore(t, 2000, func(b []byte) []byte { return b[:len(b)/2] })
	assertDamaged(t, dir, b, "truncated")
}

func TestOpenRefusesAFileThatIsNotBbolt(t *testing.T) {
	dir, b := damagedStore(t, 0, func([]byte) []byte { return []byte("not a bbolt file") })
	assertDamaged(t, dir, b, "meta pages")
}

func TestOpenRefusesPagesOverwrittenInTheMiddle(t *testing.T) {
	dir, b := damagedStore(t, 2000, func(b []byte) []byte {
		for i := len(b) / 4; i < len(b)*3/4; i++ {
			b[i] = 0xAB
		}
		return b
	})
	assertDamaged(t, dir, b, "")
}

// metaTxid reads the transaction id of meta page n of a bbolt file with 4096-byte pages.
func metaTxid(b []byte, n int) uint64 {
	return binary.LittleEndian.Uint64(b[n*4096+metaOffset+48:])
}

// newerMeta is the meta page (0 or 1) with the higher transaction id.
func newerMeta(t *testing.T, b []byte) int {
	require.Equal(t, os.Getpagesize(), 4096, "the test writes meta pages at 4096-byte offsets")
	if metaTxid(b, 1) > metaTxid(b, 0) {
		return 1
	}
	return 0
}

// A damaged newer meta page makes bbolt fall back to the older one without a word: the last
// commit would vanish. Open refuses instead.
func TestOpenRefusesADamagedNewerMetaPage(t *testing.T) {
	dir, b := damagedStore(t, 3, func(b []byte) []byte {
		n := newerMeta(t, b)
		b[n*4096+metaOffset+56] ^= 0xFF // the checksum: the page no longer validates
		return b
	})
	assertDamaged(t, dir, b, "newer meta page")

	// The whole page overwritten: its transaction id is garbage, so it cannot be told older.
	dir, b = damagedStore(t, 3, func(b []byte) []byte {
		n := newerMeta(t, b)
		for i := n * 4096; i < n*4096+200; i++ {
			b[i] = 0xFF
		}
		return b
	})
	assertDamaged(t, dir, b, "newer meta page")
}

// A damaged older meta page loses nothing: the store opens with its last commit.
func TestOpenAcceptsADamagedOlderMetaPage(t *testing.T) {
	dir, _ := damagedStore(t, 3, func(b []byte) []byte {
		n := 1 - newerMeta(t, b)
		b[n*4096+metaOffset+56] ^= 0xFF
		return b
	})
	s, err := Open(dir, Options{MustExist: true})
	require.NoError(t, err)
	defer s.Close()
	_, ok := committed(t, s, "inventory", "X00002")
	assert.True(t, ok, "the last commit is there")
}

func TestOpenMustExist(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	_, err := Open(dir, Options{MustExist: true})
	var ns *store.NoStoreError
	require.True(t, errors.As(err, &ns), "%v", err)
	assert.True(t, errors.Is(err, store.ErrNoStore))
	assert.Equal(t, "no store at "+dir, err.Error())
	assert.Contains(t, ns.Hint(), "starplan db init")
	_, statErr := os.Stat(dir)
	assert.True(t, os.IsNotExist(statErr), "a read creates nothing, not even the directory")

	s := openAt(t, dir)
	require.NoError(t, s.Close())
	s, err = Open(dir, Options{MustExist: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// A new store appears whole: data.db is linked into place after bbolt initialised it, and no
// temporary file is left behind.
func TestOpenCreatesTheFileWhole(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.Close())
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	assert.Equal(t, dbFileName, ents[0].Name())
}

// bbolt panics inside its Open on a damaged freelist page, after it has locked and mapped the
// file; the lock must still be released, or every later Open in the process says "in use".
func TestOpenRefusesADamagedFreelistAndReleasesTheLock(t *testing.T) {
	dir, b := damagedStore(t, 50, func(b []byte) []byte {
		n := newerMeta(t, b)
		free := binary.LittleEndian.Uint64(b[n*4096+metaOffset+32:])
		for i := int(free) * 4096; i < int(free+1)*4096; i++ {
			b[i] = 0xAB
		}
		return b
	})
	assertDamaged(t, dir, b, "freelist") // opens twice
}

// A file truncated under an open store faults when bbolt reads a page past the new end through
// its memory map; guard turns the fault into a *DamagedError instead of a crash.
func TestReadOfAFileTruncatedUnderTheStoreIsDamagedNotACrash(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	docs := make([]store.SysDoc, 500)
	for i := range docs {
		docs[i] = store.SysDoc{Collection: "runs", ID: fmt.Sprintf("r%04d", i), Value: map[string]string{"pad": fmt.Sprintf("%0500d", i)}}
	}
	require.NoError(t, s.PutSysDocs(bg, docs...))
	require.NoError(t, s.Close())
	s = openAt(t, dir)
	require.NoError(t, os.Truncate(filepath.Join(dir, dbFileName), 2*4096))
	_, err := s.ListSys("runs")
	var de *store.DamagedError
	require.True(t, errors.As(err, &de), "%v", err)
	assert.Contains(t, err.Error(), "reading it failed")
	_, err = s.GetSys("runs", "r0499", new(map[string]string))
	assert.True(t, errors.Is(err, store.ErrDamaged), "%v", err)
}

// Someone else's bbolt file is neither damaged nor ours: Open says so and writes nothing (it
// used to add its root bucket).
func TestOpenRefusesAForeignBboltFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, dbFileName)
	db, err := bbolt.Open(path, 0o644, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("theirs")); return err }))
	require.NoError(t, db.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = Open(dir, Options{})
	assert.ErrorContains(t, err, "is a bbolt file but not a starplan store")
	assert.False(t, errors.Is(err, store.ErrDamaged))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

// A data.db that exists but holds no starplan record is damaged (or another program's file),
// never a missing store: "run starplan db init" would be the wrong advice, and a create would
// write over what is there. Renaming every document key is one way to get there.
func TestAFileWithoutTheRecordIsDamagedNotMissing(t *testing.T) {
	dir, _ := damagedStore(t, 0, func(b []byte) []byte { return b })
	b := rawUpdate(t, dir, func(bk *bbolt.Bucket) error {
		var ks [][]byte
		require.NoError(t, bk.ForEach(func(k, _ []byte) error {
			if string(k[:2]) == "c:" {
				ks = append(ks, append([]byte(nil), k...))
			}
			return nil
		}))
		for _, k := range ks {
			v := append([]byte(nil), bk.Get(k)...)
			require.NoError(t, bk.Delete(k))
			require.NoError(t, bk.Put(append([]byte("x:"), k[2:]...), v))
		}
		return nil
	})
	assertDamaged(t, dir, b, "holds data but no starplan record")
	rep := checkOf(t, dir, store.CheckOptions{})
	assert.Contains(t, problemsOf(rep, store.CheckRecord), "it holds no starplan record: it is damaged, or not a starplan store")
}

// A root bucket holding nothing at all is what a create interrupted between making the file and
// its first commit leaves: a read says so (it is not "no store"), and a create finishes the job.
func TestAnEmptyStoreFileIsNotMissing(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, createBolt(dir, filepath.Join(dir, dbFileName)))
	_, err := Open(dir, Options{MustExist: true})
	assert.True(t, errors.Is(err, store.ErrDamaged), "%v", err)
	assert.False(t, errors.Is(err, store.ErrNoStore))
	assert.ErrorContains(t, err, "starplan db init makes one in it")
	s := openAt(t, dir)
	assert.True(t, s.Created())
}
