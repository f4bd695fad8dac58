package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// rawUpdate changes data.db with bbolt alone, as another program (or a bad disk that keeps
// bbolt's structure) would: the file stays a valid bbolt file and starplan's record is untouched.
func rawUpdate(t *testing.T, dir string, fn func(b *bbolt.Bucket) error) []byte {
	t.Helper()
	path := filepath.Join(dir, dbFileName)
	db, err := bbolt.Open(path, 0o644, &bbolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error { return fn(tx.Bucket([]byte(rootBucket))) }))
	require.NoError(t, db.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// recordedDigests reads the counts and digests in the store's record, and those the file holds.
func recordedDigests(t *testing.T, s *Store) (recorded, found map[string]collDigest) {
	t.Helper()
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	var m metaRecord
	ok, err := s.getSysLocked(metaCollection, metaID, &m)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.bolt.db.View(func(tx *bbolt.Tx) error { found = scanDigests(tx); return nil }))
	return m.Digests, found
}

// assertCheckFinds runs Check on dir and expects a problem of the kind check mentioning want.
func assertCheckFinds(t *testing.T, dir, check, want string) {
	t.Helper()
	rep := checkOf(t, dir, store.CheckOptions{})
	assert.False(t, rep.OK())
	assert.Contains(t, strings.Join(problemsOf(rep, check), "\n"), want, "%v", rep.Problems)
}

// The document key of the inventory row damagedStore(t, 1, ...) inserts (X00000, at commit 2).
var x0Key = "c:inventory;d:" + rowDocID(2, 1)

// flipAll flips mask in byte off of every copy of key in b (branch pages hold copies too).
func flipAll(t *testing.T, b []byte, key string, off int, mask byte) []byte {
	t.Helper()
	n := 0
	for i := bytes.Index(b, []byte(key)); i >= 0; i = bytes.Index(b, []byte(key)) {
		b[i+off] ^= mask
		n++
	}
	require.NotZero(t, n)
	return b
}

// One flipped bit in a row's bbolt key made the row a document of no table: it vanished from
// exports and from db check, and the next commit could reissue its key. (The flip keeps the keys
// in order, so bbolt's own page check finds nothing.)
func TestOpenRefusesARowWhoseKeyLostABit(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	v := s.Stage()
	_, err := tbl(t, v, "transactions").Insert(table.Row{"customer_name": "Ann", "transaction_summary": "x",
		"transaction_amount": 1.0, "balance_after_transaction": 1.0, "timestamp": "2026-01-01T00:00:00"})
	require.NoError(t, err)
	require.NoError(t, s.commitStage(v))
	require.NoError(t, s.Close())
	path := filepath.Join(dir, dbFileName)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b = flipAll(t, b, "c:transactions;d:"+rowDocID(2, 1), 2, 1) // 't' -> 'u'
	require.NoError(t, os.WriteFile(path, b, 0o644))

	assertDamaged(t, dir, b, "table transactions holds 1 row but the store recorded 2")
	assertCheckFinds(t, dir, store.CheckCounts, "table transactions holds 1 row but the store recorded 2")
	assertCheckFinds(t, dir, store.CheckCounts, "collection uransactions (no table of this store) holds 1 row but the store recorded 0")
}

// A flip in a row's document id keeps the row in its table, under another id.
func TestOpenRefusesARowWhoseIDLostABit(t *testing.T) {
	dir, b := damagedStore(t, 1, func(b []byte) []byte { return flipAll(t, b, x0Key, len(x0Key)-1, 2) })
	assertDamaged(t, dir, b, "do not match the store's digest")
	assertCheckFinds(t, dir, store.CheckCounts, "table inventory holds the 7 rows the store recorded, but they do not match")
}

// A changed byte in a row's value that still decodes is a different row, silently.
func TestOpenRefusesARowWhoseValueChanged(t *testing.T) {
	dir, b := damagedStore(t, 1, func(b []byte) []byte {
		i := bytes.Index(b, []byte("Item 0"))
		require.GreaterOrEqual(t, i, 0)
		b[i+5] = '9'
		return b
	})
	assertDamaged(t, dir, b, "do not match the store's digest")
	assertCheckFinds(t, dir, store.CheckCounts, "table inventory holds the 7 rows the store recorded, but they do not match")
}

func TestOpenRefusesARowDroppedBehindItsBack(t *testing.T) {
	dir, _ := damagedStore(t, 1, func(b []byte) []byte { return b })
	b := rawUpdate(t, dir, func(bk *bbolt.Bucket) error { return bk.Delete([]byte(x0Key)) })
	assertDamaged(t, dir, b, "table inventory holds 6 rows but the store recorded 7")
	assertCheckFinds(t, dir, store.CheckCounts, "table inventory holds 6 rows but the store recorded 7")
}

// An audit record lost or damaged is reported, not listed as a shorter log or "no such run".
func TestDamagedAuditRecordsAreReported(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.PutSysDocs(bg,
		store.SysDoc{Collection: "runs", ID: "r1", Value: map[string]string{"request": "one"}},
		store.SysDoc{Collection: "runs", ID: "r2", Value: map[string]string{"request": "two"}}))
	require.NoError(t, s.Close())

	for _, tc := range []struct {
		name, check, want string
		damage            func(bk *bbolt.Bucket) error
	}{
		{"dropped", store.CheckCounts, "system collection _runs holds 1 record but the store recorded 2", func(bk *bbolt.Bucket) error {
			return bk.Delete([]byte("c:_runs;d:" + sysDocID("_runs", "r2")))
		}},
		{"changed", store.CheckSystem, "audit record r2 of _runs is unreadable", func(bk *bbolt.Bucket) error {
			k := []byte("c:_runs;d:" + sysDocID("_runs", "r2"))
			v := bytes.Replace(bk.Get(k), []byte(`{"request":"two"}`), []byte(`{"request":"two"!`), 1)
			return bk.Put(k, v)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "copy")
			require.NoError(t, os.MkdirAll(d, 0o755))
			orig, err := os.ReadFile(filepath.Join(dir, dbFileName))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(d, dbFileName), orig, 0o644))
			rawUpdate(t, d, tc.damage)

			s := openAt(t, d) // the domain tables are sound
			_, err = s.ListSys("runs")
			assert.True(t, errors.Is(err, store.ErrDamaged), "%v", err)
			var v map[string]string
			_, err = s.GetSys("runs", "r2", &v)
			assert.True(t, errors.Is(err, store.ErrDamaged), "%v", err)
			ok, err := s.GetSys("runs", "r1", &v) // a sound record still reads
			require.NoError(t, err)
			assert.True(t, ok)
			require.NoError(t, s.Close())

			assertCheckFinds(t, d, tc.check, tc.want)
		})
	}
}

// Every kind of write keeps the recorded counts and digests equal to what the file holds.
func TestDigestsFollowEveryWrite(t *testing.T) {
	s := openTemp(t)
	same := func(what string) {
		t.Helper()
		recorded, found := recordedDigests(t, s)
		assert.Equal(t, found, recorded, what)
	}
	same("create")
	v := s.Stage()
	inv := tbl(t, v, "inventory")
	_, err := inv.Insert(table.Row{"item_id": "N1", "name": "New", "description": "d", "quantity_in_stock": 1, "price": 1.0})
	require.NoError(t, err)
	_, err = inv.Update(table.Row{"quantity_in_stock": int64(9)}, table.Query{Where: where("item_id", "SG001")})
	require.NoError(t, err)
	require.NoError(t, s.commitStage(v))
	same("insert and update")
	v = s.Stage()
	_, err = tbl(t, v, "inventory").Remove(table.Query{Where: where("item_id", "N1")})
	require.NoError(t, err)
	require.NoError(t, s.commitStage(v))
	same("delete")
	for i := range 3 {
		require.NoError(t, s.PutSys(bg, "runs", fmt.Sprintf("r%d", i), map[string]int{"n": i}))
	}
	require.NoError(t, s.PutSys(bg, "runs", "r1", map[string]int{"n": 10})) // a replace
	same("system documents")
	_, err = s.PruneSys(bg, "runs", func(r store.SysRecord) (bool, error) { return r.ID != "r1", nil })
	require.NoError(t, err)
	same("prune")
	require.NoError(t, s.Seed(bg, true))
	same("seed")

	recorded, _ := recordedDigests(t, s)
	assert.Equal(t, int64(6), recorded["inventory"].Rows)
	assert.Equal(t, int64(1), recorded["_runs"].Rows)
}

// A store written before digests existed is never refused for lacking them; its first
// write-open records them, and from then on they are verified.
func TestAStoreWithoutDigestsGetsThemOnItsFirstWriteOpen(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	s.bolt.mu.Lock()
	s.bolt.beforeCommit = nil // write the record as an older starplan did
	require.NoError(t, s.bolt.runGroup(func(*bbolt.Tx) error {
		var m metaRecord
		_, err := s.getSysLocked(metaCollection, metaID, &m)
		require.NoError(t, err)
		m.Digests = nil
		return s.putSysLocked(metaCollection, metaID, m)
	}))
	s.bolt.mu.Unlock()
	require.NoError(t, s.Close())

	rep := checkOf(t, dir, store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Contains(t, rep.Unverified, "written before row counts and digests were kept")
	r, err := Open(dir, Options{MustExist: true})
	require.NoError(t, err, "a read-open of an old store neither fails nor writes")
	recorded, _ := recordedDigests(t, r)
	assert.Nil(t, recorded)
	require.NoError(t, r.Close())

	s = openAt(t, dir) // a write-open records them
	recorded, found := recordedDigests(t, s)
	assert.Equal(t, found, recorded)
	require.NoError(t, s.Close())
	rep = checkOf(t, dir, store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Empty(t, rep.Unverified)

	b := rawUpdate(t, dir, func(bk *bbolt.Bucket) error { return bk.Delete([]byte("c:inventory;d:" + rowDocID(1, 1))) })
	assertDamaged(t, dir, b, "table inventory holds 5 rows but the store recorded 6")
}
