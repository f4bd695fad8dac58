package store

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/table"
)

// residentEnv sets openResident and promoteRows for a run of this package's tests
// ("OPEN,PROMOTE"; -1 for PROMOTE: never): TestPackageOnDisk runs the package again with every
// table read from the file, since the tests' small stores are otherwise read into memory at Open.
const residentEnv = "STARPLAN_TEST_RESIDENT"

func init() {
	a, b, ok := strings.Cut(os.Getenv(residentEnv), ",")
	if !ok {
		return
	}
	openResident, _ = strconv.ParseInt(a, 10, 64)
	if promoteRows, _ = strconv.ParseInt(b, 10, 64); promoteRows < 0 {
		promoteRows = math.MaxInt64
	}
}

// onDiskSkips are the tests that do not hold of tables read from the file, each for a reason:
// they damage a row and expect Open to find it, and Open reads no row of such a table (a read of
// the row, a walk into memory and db check find it: TestDamageOnDiskIsFoundWhenRead).
var onDiskSkips = []string{
	"TestAStoreWithoutDigestsGetsThemOnItsFirstWriteOpen",
	"TestOpenRefusesARowWhoseKeyLostABit",
	"TestOpenRefusesARowWhoseIDLostABit",
	"TestOpenRefusesARowWhoseValueChanged",
	"TestOpenRefusesARowDroppedBehindItsBack",
	"TestPackageOnDisk", // itself
}

// Every test of the package, run again with every table, even an empty one, read from the file
// and never into memory: the stage, predicate reads, apply, import and export through the key and
// index buckets.
func TestPackageOnDisk(t *testing.T) {
	if os.Getenv(residentEnv) != "" {
		t.Skip("already on disk")
	}
	if testing.Short() {
		t.Skip("runs the package's tests again")
	}
	args := []string{"-test.skip", "^(" + strings.Join(onDiskSkips, "|") + ")$", "-test.count", "1"}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), residentEnv+"=-1,-1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the package's tests on disk failed: %v\n%s", err, tail(out, 8000))
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// onDisk makes the tables of stores opened during the test stay on disk, promoted into memory
// after promote rows read (-1: never).
func onDisk(t *testing.T, promote int64) {
	oldOpen, oldPromote := openResident, promoteRows
	openResident, promoteRows = -1, promote
	if promote < 0 {
		promoteRows = math.MaxInt64
	}
	t.Cleanup(func() { openResident, promoteRows = oldOpen, oldPromote })
}

// A large table is read from the file: Open reads none of its rows, a lookup by key or declared
// index reads one, a walk streams; after promoteRows rows walked, the next walk reads it into
// memory once, and every read answers the same before and after.
func TestATableOnDiskIsReadIntoMemoryAfterLongWalks(t *testing.T) {
	onDisk(t, 20)
	dir := t.TempDir()
	s := openAt(t, dir)
	var rows []string
	for i := 1; i <= 30; i++ {
		rows = append(rows, fmt.Sprintf(`{"item_id": "SG%03d", "name": "Style %d", "quantity_in_stock": %d, "price": %d}`, 100+i, i%7, i, i))
	}
	_, err := s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openAt(t, dir)
	mt := s.tables["inventory"]
	require.Nil(t, mt.res.Load(), "Open reads no row of a table on disk")
	assert.Equal(t, int64(36), mt.count())
	assert.Equal(t, int64(130), mt.maxNum)

	reads := func() (byName, byKey, last, walked []any) {
		sg := s.Stage()
		for _, r := range findRows(t, sg, "inventory", table.Query{Where: where("name", map[string]any{"$ieq": "style 3"})}) {
			byName = append(byName, r["item_id"])
		}
		row, ok, err := tbl(t, sg, "inventory").Get("SG117")
		require.NoError(t, err)
		require.True(t, ok)
		byKey = append(byKey, row["name"])
		r, ok, err := sg.LastRow("inventory")
		require.NoError(t, err)
		require.True(t, ok)
		last = append(last, r["item_id"])
		for _, r := range findRows(t, sg, "inventory", table.Query{Where: where("price", map[string]any{"$gt": 25, "$lt": 31}), Reverse: true}) {
			walked = append(walked, r["item_id"])
		}
		return
	}
	n1, k1, l1, w1 := reads()
	assert.Equal(t, []any{"SG103", "SG110", "SG117", "SG124"}, n1)
	assert.Equal(t, []any{"Style 3"}, k1)
	assert.Equal(t, []any{"SG130"}, l1)
	assert.Equal(t, []any{"SG130", "SG129", "SG128", "SG127", "SG126"}, w1)
	require.Nil(t, mt.res.Load(), "one walk of 36 rows (and a last row) has not read 20 more")
	reads()
	require.NotNil(t, mt.res.Load(), "walks past promoteRows read the table into memory")
	n2, k2, l2, w2 := reads()
	assert.Equal(t, [][]any{n1, k1, l1, w1}, [][]any{n2, k2, l2, w2})
}

func findRows(t *testing.T, sg *Stage, name string, q table.Query) []table.Row {
	t.Helper()
	rows, err := tbl(t, sg, name).Find(q)
	require.NoError(t, err)
	return rows
}

// A row damaged on disk is found when it is read, by a walk that reads the table into memory (its
// digest) and by db check (the key index against the rows), never returned as a shorter table.
func TestDamageOnDiskIsFoundWhenRead(t *testing.T) {
	onDisk(t, 1)
	dir := t.TempDir()
	require.NoError(t, openAt(t, dir).Close())
	// SG002's document goes: its key entry now names a missing document.
	rawUpdate(t, dir, func(bk *bbolt.Bucket) error { return bk.Delete([]byte("c:inventory;d:" + rowDocID(1, 2))) })

	s := openAt(t, dir)
	_, _, err := tbl(t, s.Stage(), "inventory").Get("SG002")
	assert.ErrorIs(t, err, ErrDamaged)
	assert.ErrorContains(t, err, `the row "SG002" the key index names`)
	_, err = tbl(t, s.Stage(), "inventory").Find(table.Query{Where: where("price", map[string]any{"$gt": 0})})
	assert.ErrorIs(t, err, ErrDamaged, "a walk meets the entry too")
	require.NoError(t, s.Close())

	assertCheckFinds(t, dir, CheckKeys, "the key index of table inventory does not match its rows")
}

// A store written before the key buckets existed is read into memory as before; its first
// write-open builds them, and its tables are read from the file from the next Open on.
func TestAStoreWithoutKeyBucketsGetsThemOnItsFirstWriteOpen(t *testing.T) {
	onDisk(t, -1)
	dir := t.TempDir()
	s := openAt(t, dir)
	s.bolt.mu.Lock()
	require.NoError(t, s.bolt.runGroup(func(tx *bbolt.Tx) error { // as an older starplan wrote it
		require.NoError(t, tx.DeleteBucket([]byte(keysBucket)))
		require.NoError(t, tx.DeleteBucket([]byte(indexBucket)))
		var m metaRecord
		_, err := s.getSysLocked(metaCollection, metaID, &m)
		require.NoError(t, err)
		m.Keys = 0
		return s.putSysLocked(metaCollection, metaID, m)
	}))
	s.bolt.mu.Unlock()
	require.NoError(t, s.Close())

	r, err := Open(dir, Options{MustExist: true})
	require.NoError(t, err)
	assert.NotNil(t, r.tables["inventory"].res.Load(), "without buckets, rows are read into memory")
	row, ok := committed(t, r, "inventory", "SG001")
	require.True(t, ok)
	require.NoError(t, r.Close())
	require.NoError(t, boltView(t, dir, func(tx *bbolt.Tx) error {
		assert.Nil(t, tx.Bucket([]byte(keysBucket)), "a read-open writes nothing")
		return nil
	}))

	require.NoError(t, openAt(t, dir).Close()) // builds them
	s = openAt(t, dir)
	assert.Nil(t, s.tables["inventory"].res.Load(), "read from the file now")
	again, ok := committed(t, s, "inventory", "SG001")
	require.True(t, ok)
	assert.Equal(t, row, again)
	require.NoError(t, s.Close())
	rep := checkOf(t, dir, CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

func boltView(t *testing.T, dir string, fn func(tx *bbolt.Tx) error) error {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(dir, dbFileName), 0o644, &bbolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	return db.View(fn)
}
