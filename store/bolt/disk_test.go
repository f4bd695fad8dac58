package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"unicode"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/table"
)

// residentEnv sets the residency of every store a run of this package's tests opens
// ("OPEN,PROMOTE"; -1 for PROMOTE: never): TestPackageOnDisk runs the package again with every
// table read from the file, since the tests' small stores are otherwise read into memory at Open.
const residentEnv = "STARPLAN_TEST_RESIDENT"

func init() {
	a, b, ok := strings.Cut(os.Getenv(residentEnv), ",")
	if !ok {
		return
	}
	open, _ := strconv.ParseInt(a, 10, 64)
	promote, _ := strconv.ParseInt(b, 10, 64)
	defaultResidency = newResidency(open, promote)
}

// newResidency is a residency of open and promote rows (-1 for promote: never).
func newResidency(open, promote int64) residency {
	if promote < 0 {
		promote = math.MaxInt64
	}
	return residency{open: open, promote: promote}
}

// onDiskSkips are the tests that do not hold of tables read from the file, each for one reason:
// they damage a row and expect Open to find it, and Open reads no row of such a table. A read of
// the row, a walk over it and db check find it instead (TestDamageOnDiskIsFoundWhenRead,
// TestAChangedRowOnDiskIsFoundWhenRead, TestAMovedKeyEntryIsFoundByWalksAndCheck).
//
// Others are left out for time alone (the run is under -race in CI, twice the package), each
// testing what does not depend on where a table's rows are read from: the numeric columns'
// randomised test (columns exist only in memory; TestDiskAnswersAsMemory compares walks on disk
// with memory), the kill test (a file's atomicity, which the buckets share with the documents:
// one bbolt transaction), the in-memory table's bulk merge (putAll), and an endless record's
// bound (the reader's, before any row is written). So are tests of what reads no table's rows:
// the file-level damage sweep (Open reads fewer pages on disk than in memory, so the first run
// covers more), the codecs and parsers (JSON scan, msgpack documents, key encodings, import's
// line numbers), the file lock, and the file's layout under a large import (the file grown ahead
// of the commit, appended pages filled, the documents clover reads back), the same whichever way
// rows are read. Tests that set their own residency skip themselves here (see setResidency): they
// run the same in both. The run is -short.
var onDiskSkips = []string{
	"TestAStoreWithoutDigestsGetsThemOnItsFirstWriteOpen",
	"TestOpenRefusesARowWhoseKeyLostABit",
	"TestOpenRefusesARowWhoseIDLostABit",
	"TestOpenRefusesARowWhoseValueChanged",
	"TestOpenRefusesARowDroppedBehindItsBack",
	"TestColumnPrefilterAgreesWithMatch",
	"TestKillDuringApply",
	"TestPutAllIsPutOneByOne",
	"TestImportOfAnEndlessRecordStops",
	"TestDamagedFilesNeverPanic",
	"TestJSONScanEdgesAsEncodingJSON",
	"TestAppendDocIsWhatCloverWrites",
	"TestSeenKeysIsAMapOfEveryKey",
	"TestImportJSONLineNumbersAfterManyRows",
	"TestOpenInUseByAnotherProcess",
	"TestImportLargeCommit",
	"TestAppendedPagesAreFull",
	"TestNewRowsAreCloverDocuments",
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
	// A name left in the list after its test was renamed would skip nothing, silently.
	list, err := exec.Command(os.Args[0], "-test.list", ".").Output()
	require.NoError(t, err)
	for _, name := range onDiskSkips {
		require.Contains(t, strings.Fields(string(list)), name, "onDiskSkips names a test the package does not have")
	}
	args := []string{"-test.skip", "^(" + strings.Join(onDiskSkips, "|") + ")$", "-test.count", "1", "-test.short"}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), residentEnv+"=-1,-1", "GORACE=atexit_sleep_ms=0") // no second asleep at exit under -race
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	// The child, another process, runs alongside the package's sequential tests (none of which
	// it can disturb: they measure their own process); the test waits for it after them.
	t.Parallel()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the package's tests on disk failed: %v\n%s", err, tail(out.Bytes(), 8000))
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// onDisk makes the tables of stores the test opens (openAt, residencyOf) stay on disk, promoted
// into memory after promote rows read (-1: never).
func onDisk(t testing.TB, promote int64) { setResidency(t, -1, promote) }

// residencies holds the residency each test set (setResidency), by the test's name.
var residencies sync.Map

// setResidency gives the stores the test and its subtests open from now on (through openAt, or
// Open with residencyOf(t)) the residency of open and promote rows (-1 for promote: never).
// Each store has its own, so such tests run in parallel with t.Parallel(), unless they lower a
// package bound an import reads (stagedMin, lowerRecordLimit) or measure the process's memory.
func setResidency(t testing.TB, open, promote int64) {
	if os.Getenv(residentEnv) != "" {
		t.Skip("sets its own residency, so the package's first run is this run")
	}
	r := newResidency(open, promote)
	residencies.Store(t.Name(), &r)
	t.Cleanup(func() { residencies.Delete(t.Name()) })
}

// residencyOf is the residency the test, or the test it is a subtest of, set; nil (the
// package's default) when none did.
func residencyOf(t testing.TB) *residency {
	for name := t.Name(); ; {
		if r, ok := residencies.Load(name); ok {
			return r.(*residency)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}

// A large table is read from the file: Open reads none of its rows, a lookup by key or declared
// index reads one, a walk streams; after promoteRows rows walked, the next walk reads it into
// memory once, and every read answers the same before and after.
func TestATableOnDiskIsReadIntoMemoryAfterLongWalks(t *testing.T) {
	t.Parallel()
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
		// A limit: a walk that may stop early reads from the file until it has read 20 rows.
		for _, r := range findRows(t, sg, "inventory", table.Query{Where: where("price", map[string]any{"$gt": 25, "$lt": 31}), Reverse: true, Limit: 100}) {
			walked = append(walked, r["item_id"])
		}
		return
	}
	n1, k1, l1, w1 := reads()
	assert.Equal(t, []any{"SG103", "SG110", "SG117", "SG124"}, n1)
	assert.Equal(t, []any{"Style 3"}, k1)
	assert.Equal(t, []any{"SG130"}, l1)
	assert.Equal(t, []any{"SG130", "SG129", "SG128", "SG127", "SG126"}, w1)
	require.NotNil(t, mt.res.Load(), "the walk of 36 rows read the table into memory after 20, and went on from there")
	n2, k2, l2, w2 := reads()
	assert.Equal(t, [][]any{n1, k1, l1, w1}, [][]any{n2, k2, l2, w2})

	// Forwards too, from a walk's middle, with the run's own row merged in.
	for _, promote := range []int64{100, 3} {
		onDisk(t, promote)
		s := openAt(t, t.TempDir())
		sg := s.Stage()
		inv := tbl(t, sg, "inventory")
		_, err := inv.Insert(table.Row{"item_id": "SG0035", "name": "n", "quantity_in_stock": 1, "price": 1.0})
		require.NoError(t, err)
		require.Nil(t, s.tables["inventory"].res.Load())
		rows := findRows(t, sg, "inventory", table.Query{Limit: 100})
		assert.Equal(t, []any{"SG001", "SG002", "SG003", "SG004", "SG005", "SG006", "SG0035"}, keys(t, rows, "item_id"), "promoted after %d", promote)
		assert.Equal(t, promote == 3, s.tables["inventory"].res.Load() != nil)
	}
}

// A walk that will read a large table whole (no index answers it, no limit) reads it into memory
// first instead of walking the file; a walk that may stop early, or a smaller table, does not.
func TestAWholeWalkOfALargeTableReadsItIntoMemoryFirst(t *testing.T) {
	t.Parallel()
	onDisk(t, 6)
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.Close())
	for _, tc := range []struct {
		q      table.Query
		loaded bool
	}{
		{table.Query{Where: where("price", map[string]any{"$gt": 70})}, true},
		{table.Query{}, true},
		{table.Query{Where: where("price", map[string]any{"$gt": 70}), Limit: 2}, false},
		{table.Query{Where: where("name", "Aviator")}, false}, // an index answers it
	} {
		s := openAt(t, dir)
		mt := s.tables["inventory"]
		require.Nil(t, mt.res.Load())
		rows := findRows(t, s.Stage(), "inventory", tc.q)
		assert.NotEmpty(t, rows)
		assert.Equal(t, tc.loaded, mt.res.Load() != nil, "%+v", tc.q)
		if tc.loaded {
			assert.Zero(t, mt.walked.Load(), "no row was read from the file first")
		}
		n, err := tbl(t, s.Stage(), "transactions").Count(table.Query{Where: where("customer_name", map[string]any{"$ne": "x"})})
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Nil(t, s.tables["transactions"].res.Load(), "a table of fewer rows than promoteRows is walked in the file")
		require.NoError(t, s.Close())
	}
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
	t.Parallel()
	onDisk(t, 1)
	dir := t.TempDir()
	require.NoError(t, openAt(t, dir).Close())
	// SG002's document goes: its key entry now names a missing document.
	rawUpdate(t, dir, func(bk *bbolt.Bucket) error { return bk.Delete([]byte("c:inventory;d:" + rowDocID(1, 2))) })

	s := openAt(t, dir)
	_, _, err := tbl(t, s.Stage(), "inventory").Get("SG002")
	assert.ErrorIs(t, err, store.ErrDamaged)
	assert.ErrorContains(t, err, `the row "SG002" the key index names`)
	_, err = tbl(t, s.Stage(), "inventory").Find(table.Query{Where: where("price", map[string]any{"$gt": 0})})
	assert.ErrorIs(t, err, store.ErrDamaged, "a walk meets the entry too")
	// That walk tried to read the table into memory (promoteRows is 1), and its digest failed:
	// the table is not read whole again for every walk.
	mt := s.tables["inventory"]
	require.ErrorIs(t, mt.loadErr, store.ErrDamaged)
	mt.begin = func() (tableRead, error) {
		t.Fatal("a damaged table was read whole again")
		return nil, nil
	}
	_, err = tbl(t, s.Stage(), "inventory").Find(table.Query{})
	assert.ErrorIs(t, err, store.ErrDamaged)
	require.NoError(t, s.Close())

	assertCheckFinds(t, dir, store.CheckKeys, "the key index of table inventory does not match its rows")
}

// A store written before the key buckets existed is read into memory as before; its first
// write-open builds them, and its tables are read from the file from the next Open on.
func TestAStoreWithoutKeyBucketsGetsThemOnItsFirstWriteOpen(t *testing.T) {
	t.Parallel()
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

	r, err := Open(dir, Options{MustExist: true, residency: residencyOf(t)})
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
	rep := checkOf(t, dir, store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

func boltView(t *testing.T, dir string, fn func(tx *bbolt.Tx) error) error {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(dir, dbFileName), 0o644, &bbolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	return db.View(fn)
}

// A changed byte in a row that still decodes: Open reads no row of a table on disk, so the read
// of the row must find it (the entry holds the document's hash), where Open used to.
func TestAChangedRowOnDiskIsFoundWhenRead(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	dir, _ := damagedStore(t, 1, func(b []byte) []byte {
		i := bytes.Index(b, []byte("Item 0"))
		require.GreaterOrEqual(t, i, 0)
		b[i+5] = '9'
		return b
	})
	s, err := Open(dir, Options{MustExist: true, residency: residencyOf(t)})
	require.NoError(t, err)
	defer s.Close()
	_, _, err = tbl(t, s.Stage(), "inventory").Get("X00000")
	assert.ErrorIs(t, err, store.ErrDamaged)
	assert.ErrorContains(t, err, "it changed after it was written")
	_, err = tbl(t, s.Stage(), "inventory").Find(table.Query{})
	assert.ErrorIs(t, err, store.ErrDamaged)
}

// Damage to the key bucket (an entry under the wrong key bytes, as a bit flip that keeps the page
// ordered makes it): a walk meets the entry and fails; a Get of the lost key cannot see it (the
// entry is not where it looks), which db check reports.
func TestAMovedKeyEntryIsFoundByWalksAndCheck(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	dir, _ := damagedStore(t, 1, func(b []byte) []byte { return b })
	path := dir + "/" + dbFileName
	db, err := bbolt.Open(path, 0o644, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		kb := tx.Bucket([]byte(keysBucket)).Bucket([]byte("inventory"))
		old := store.AppendKey(nil, "X00000")
		v := bytes.Clone(kb.Get(old))
		require.NotNil(t, v)
		require.NoError(t, kb.Delete(old))
		return kb.Put(store.AppendKey(nil, "X00000~"), v) // sorts last
	}))
	require.NoError(t, db.Close())

	s := openAt(t, dir)
	sg := s.Stage()
	_, err = tbl(t, sg, "inventory").Find(table.Query{})
	assert.ErrorIs(t, err, store.ErrDamaged, "the entry under X00000~ names the row X00000")
	_, _, err = sg.LastRow("inventory")
	assert.ErrorIs(t, err, store.ErrDamaged)
	require.NoError(t, s.Close())
	assertCheckFinds(t, dir, store.CheckKeys, "the key index of table inventory does not match its rows")
}

// An indexed text field whose domain raises max_len: its index entry holds the text's hash past
// maxIndexValue, so it stays below bbolt's 32 KiB key limit, and a lookup still finds the row.
func TestALongIndexedValueCommitsAndIsFound(t *testing.T) {
	d, err := store.LoadDomain(fstest.MapFS{"domain.json": {Data: []byte(`{"name": "notes", "tables": [{"name": "n", "key": "id",
		"indexes": ["body"],
		"fields": [{"name": "id", "type": "string"}, {"name": "body", "type": "string", "max_len": 100000}]}]}`)}})
	require.NoError(t, err)
	s, err := Open(t.TempDir(), Options{Domain: d})
	require.NoError(t, err)
	defer s.Close()
	sg := s.Stage()
	_, err = sg.tables["n"].Insert(table.Row{"id": "a", "body": strings.Repeat("x", 40000)})
	require.NoError(t, err, "validation accepts it")
	require.NoError(t, sg.Apply(bg))
	for _, body := range []any{strings.Repeat("x", 40000), map[string]any{"$ieq": strings.Repeat("X", 40000)}} {
		sg := s.Stage()
		rows, err := sg.tables["n"].Find(table.Query{Where: where("body", body)})
		require.NoError(t, err)
		assert.Len(t, rows, 1)
		assert.Empty(t, sg.Scans(), "answered from the index")
	}
	rows, err := s.Stage().tables["n"].Find(table.Query{Where: where("body", strings.Repeat("x", 39999)+"y")})
	require.NoError(t, err)
	assert.Empty(t, rows)
}

// $ieq on the key is answered from an index in memory and on disk alike: the run's figures
// (scans) do not depend on where the rows are.
func TestIeqOnTheKeyIsAnsweredFromAnIndexOnDisk(t *testing.T) {
	t.Parallel()
	scans := func() []store.Scan {
		s := openAt(t, t.TempDir())
		sg := s.Stage()
		rows, err := tbl(t, sg, "inventory").Find(table.Query{Where: where("item_id", map[string]any{"$ieq": "sg001"})})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		return sg.Scans()
	}
	mem := scans()
	onDisk(t, -1)
	disk := scans()
	assert.Empty(t, mem)
	assert.Equal(t, mem, disk)
}

// An equality on an indexed field shared by many rows: on disk, candidates are read as the walk
// takes them, so a limit of 1 reads about one row, and what is read counts toward promotion.
func TestAnIndexLookupOnDiskReadsOnlyWhatItTakes(t *testing.T) {
	onDisk(t, -1)
	dir := t.TempDir()
	s := openAt(t, dir)
	var sb strings.Builder
	sb.WriteString("[")
	// 5,000 rows of 200 bytes are over 1 MiB as read, and several times that decoded: a lookup
	// that read them all (or a table read into memory for it) would allocate past the bound.
	n := testtier.Size(5000, 20000)
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"item_id": "SG%06d", "name": "Same", "description": "%s", "quantity_in_stock": 1, "price": 1}`, 1000+i, strings.Repeat("d", 200))
	}
	sb.WriteString("]")
	_, err := s.Import(bg, "inventory", strings.NewReader(sb.String()), JSON, Upsert)
	require.NoError(t, err)
	sg := s.Stage()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rows, err := tbl(t, sg, "inventory").Find(table.Query{Where: where("name", "Same"), Limit: 1})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated for one row of limit 1")
	assert.NotZero(t, s.tables["inventory"].walked.Load(), "rows read from the file count toward promotion")
}

// The same stores, one in memory and one on disk, the same runs with writes, removals, reverse
// walks, index lookups and generated keys: every read answers the same (written by a reviewer).
func TestDiskAnswersAsMemory(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	keyOf := func() string {
		switch r.IntN(4) {
		case 0:
			return fmt.Sprintf("SG%d", r.IntN(300))
		case 1:
			return fmt.Sprintf("SG%03d", r.IntN(300))
		case 2:
			return fmt.Sprintf("sg%da%d", r.IntN(30), r.IntN(30))
		}
		return fmt.Sprintf("SG%d-%02d", r.IntN(40), r.IntN(5))
	}
	var rows []string
	seen := map[string]bool{}
	for len(rows) < 400 {
		k := keyOf()
		if seen[k] {
			continue
		}
		seen[k] = true
		rows = append(rows, fmt.Sprintf(`{"item_id": %q, "name": "N%d", "quantity_in_stock": %d, "price": %d}`, k, r.IntN(5), r.IntN(50), r.IntN(50)))
	}
	load := `[` + strings.Join(rows, ",") + `]`
	mk := func() *Store {
		dir := t.TempDir()
		s := openAt(t, dir)
		_, err := s.Import(bg, "inventory", strings.NewReader(load), JSON, Upsert)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		return openAt(t, dir)
	}
	setResidency(t, 4096, -1)
	mem := mk()
	onDisk(t, -1)
	dsk := mk()
	require.NotNil(t, mem.tables["inventory"].res.Load())
	require.Nil(t, dsk.tables["inventory"].res.Load())
	for round := range testtier.Size(25, 60) {
		seed := r.Uint64()
		run := func(s *Store) []string {
			rr := rand.New(rand.NewPCG(seed, 7))
			sg := s.Stage()
			inv := tbl(t, sg, "inventory")
			var out []string
			note := func(x ...any) { out = append(out, fmt.Sprint(x...)) }
			for op := 0; op < 30; op++ {
				k := fmt.Sprintf("SG%d", rr.IntN(320))
				if rr.IntN(3) == 0 {
					k = fmt.Sprintf("SG%03d", rr.IntN(320))
				}
				switch rr.IntN(7) {
				case 0:
					_, err := inv.Insert(table.Row{"item_id": k, "name": fmt.Sprintf("N%d", rr.IntN(5)), "quantity_in_stock": rr.IntN(50), "price": rr.IntN(50)})
					note("ins", k, err != nil)
				case 1:
					n, err := inv.Remove(table.Query{Where: where("item_id", k)})
					note("rm", k, n, err)
				case 2:
					n, err := inv.Update(table.Row{"price": float64(rr.IntN(50))}, table.Query{Where: where("quantity_in_stock", map[string]any{"$lt": rr.IntN(50)}), Limit: 3, Reverse: rr.IntN(2) == 0})
					note("upd", n, err)
				case 3:
					q := table.Query{Where: where("price", map[string]any{"$gte": rr.IntN(50)}), Reverse: rr.IntN(2) == 0, Limit: rr.IntN(20)}
					got, err := inv.Find(q)
					note("find", keys(t, got, "item_id"), err)
				case 4:
					got, err := inv.Find(table.Query{Where: where("name", map[string]any{"$ieq": fmt.Sprintf("n%d", rr.IntN(5))}), Reverse: rr.IntN(2) == 0})
					note("idx", keys(t, got, "item_id"), err)
				case 5:
					note("len", inv.Len())
					last, ok, err := sg.LastRow("inventory")
					note("last", last["item_id"], ok, err)
				case 6:
					_, err := inv.Insert(table.Row{"name": "gen", "quantity_in_stock": 1, "price": 1})
					note("gen", err)
				}
			}
			if rr.IntN(2) == 0 {
				note("apply", sg.Apply(bg))
			}
			return out
		}
		a, b := run(mem), run(dsk)
		require.Equal(t, a, b, "round %d", round)
	}
}

// Concurrent readers on a disk table that is read into memory while they read, with a writer
// committing: every reader sees rows its filter matches, and nothing fails.
func TestConcurrentReadersWhileATableIsReadIntoMemory(t *testing.T) {
	t.Parallel()
	onDisk(t, 50)
	dir := t.TempDir()
	s := openAt(t, dir)
	var rows []string
	for i := 0; i < 300; i++ {
		rows = append(rows, fmt.Sprintf(`{"item_id": "SG%04d", "name": "N%d", "quantity_in_stock": %d, "price": %d}`, 100+i, i%5, i, i%40))
	}
	_, err := s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for range testtier.Size(8, 20) {
		s = openAt(t, dir)
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 10; j++ {
					sg := s.Stage()
					// A limit: the walk reads the file until the table is read into memory.
					q := table.Query{Where: where("price", map[string]any{"$gte": 10, "$lt": 12}), Limit: 1000}
					got, err := tbl(t, sg, "inventory").Find(q)
					if err != nil {
						errs <- err
						return
					}
					for _, r := range got {
						if p := r["price"].(float64); p < 10 || p >= 12 {
							errs <- fmt.Errorf("price %v", p)
						}
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				sg := s.Stage()
				_, err := tbl(t, sg, "inventory").Insert(table.Row{"name": "w", "quantity_in_stock": 1, "price": 11})
				if err == nil {
					err = sg.Apply(bg)
				}
				if err != nil && !errors.Is(err, store.ErrConflict) {
					errs <- err
				}
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		require.NoError(t, s.Close())
	}
}

// A long value already in a store, in a field its domain now indexes: the write-open that
// builds the new index succeeds, and the index finds the row.
func TestANewIndexOverLongValuesIsBuilt(t *testing.T) {
	dom := func(indexes string) *store.Domain {
		d, err := store.LoadDomain(fstest.MapFS{"domain.json": {Data: []byte(`{"name": "notes", "tables": [{"name": "n", "key": "id",
		"indexes": [` + indexes + `],
		"fields": [{"name": "id", "type": "string"}, {"name": "body", "type": "string", "max_len": 100000}]}]}`)}})
		require.NoError(t, err)
		return d
	}
	dir := t.TempDir()
	s, err := Open(dir, Options{Domain: dom("")})
	require.NoError(t, err)
	sg := s.Stage()
	_, err = sg.tables["n"].Insert(table.Row{"id": "a", "body": strings.Repeat("x", 40000)})
	require.NoError(t, err)
	require.NoError(t, sg.Apply(bg))
	require.NoError(t, s.Close())
	s, err = Open(dir, Options{Domain: dom(`"body"`)})
	require.NoError(t, err)
	defer s.Close()
	sg = s.Stage()
	rows, err := sg.tables["n"].Find(table.Query{Where: where("body", strings.Repeat("x", 40000))})
	require.NoError(t, err)
	assert.Len(t, rows, 1)
	assert.Empty(t, sg.Scans())
}

// A table in memory that a large import takes past openResident lets its rows go and is read
// from the file: count, generated keys and the last row stay right, also after a Replace.
func TestALargeImportLetsTheRowsGo(t *testing.T) {
	t.Parallel()
	setResidency(t, 1000, 1<<16) // the import's 1,100 rows are a large commit (bulkPut) too
	s := openAt(t, t.TempDir())
	var rows []string
	for i := 0; i < 1100; i++ {
		rows = append(rows, fmt.Sprintf(`{"item_id": "SG%05d", "name": "N%d", "quantity_in_stock": %d, "price": %d}`, 10+i, i%5, i, i%40))
	}
	mt := s.tables["inventory"]
	require.NotNil(t, mt.res.Load())
	_, err := s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
	require.NoError(t, err)
	require.True(t, mt.res.Load() == nil, "the rows in memory were let go")
	sg := s.Stage()
	inv := tbl(t, sg, "inventory")
	assert.Equal(t, 1106, inv.Len())
	k, err := inv.Insert(table.Row{"name": "g", "quantity_in_stock": 1, "price": 1})
	require.NoError(t, err)
	assert.Equal(t, "SG1110", k)
	last, _, err := sg.LastRow("inventory")
	require.NoError(t, err)
	assert.Equal(t, "SG01109", last["item_id"])
	require.NoError(t, sg.Apply(bg))
	// Replace: keep 10, delete the rest.
	_, err = s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows[:10], ",")+"]"), JSON, Replace)
	require.NoError(t, err)
	assert.Equal(t, 10, tbl(t, s.Stage(), "inventory").Len())
	k, err = tbl(t, s.Stage(), "inventory").Insert(table.Row{"name": "g", "quantity_in_stock": 1, "price": 1})
	require.NoError(t, err)
	assert.Equal(t, "SG020", k)
}

// A Find past the run's rows_read limit stops walking one row past it: on disk every row a walk
// hands over is a copy, so a find({}) of a large table must not read the whole table first.
func TestAFindStopsAtTheReadLimit(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	s := openAt(t, t.TempDir())
	var rows []string
	for i := range 300 {
		rows = append(rows, fmt.Sprintf(`{"item_id": "SG%04d", "name": "N", "quantity_in_stock": 1, "price": 1}`, 100+i))
	}
	_, err := s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
	require.NoError(t, err)
	mt := s.tables["inventory"]
	before := mt.walked.Load()
	sg := s.StageFor(bg, store.RunLimits{RowsRead: 10})
	_, err = tbl(t, sg, "inventory").Find(table.Query{})
	var le *store.LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, store.LimitRowsRead, le.Limit)
	assert.Equal(t, int64(11), mt.walked.Load()-before, "rows read from the file")
}

// Index entries made under another Unicode version's case folds are built again by the next
// write-open; until then the tables are read into memory, where the folds are this version's.
func TestIndexesFoldedByAnotherUnicodeVersionAreBuiltAgain(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	dir := t.TempDir()
	require.NoError(t, openAt(t, dir).Close())
	db, err := bbolt.Open(filepath.Join(dir, dbFileName), 0o644, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(indexBucket)).Put([]byte(foldVersionKey), []byte("9.0.0"))
	}))
	require.NoError(t, db.Close())

	r, err := Open(dir, Options{MustExist: true, residency: residencyOf(t)})
	require.NoError(t, err)
	assert.NotNil(t, r.tables["inventory"].res.Load(), "not trusted: read into memory")
	require.NoError(t, r.Close())
	require.NoError(t, openAt(t, dir).Close())
	require.NoError(t, boltView(t, dir, func(tx *bbolt.Tx) error {
		assert.Equal(t, unicode.Version, string(tx.Bucket([]byte(indexBucket)).Get([]byte(foldVersionKey))))
		return nil
	}))
	s := openAt(t, dir)
	assert.Nil(t, s.tables["inventory"].res.Load())
}

// Rows read into memory are recorded as memory for every run (table.AddShared) as they are read,
// by an estimate that is at least what they take: a run whose walk made the store read a table is
// not charged for it.
func TestRowsReadIntoMemoryAreSharedMemory(t *testing.T) {
	onDisk(t, -1)
	dir := t.TempDir()
	s := openAt(t, dir)
	var rows []string
	for i := range testtier.Size(5000, 20000) {
		rows = append(rows, fmt.Sprintf(`{"item_id": "SG%05d", "name": "Style %d", "description": "%s", "quantity_in_stock": %d, "price": %d.5}`, 100+i, i, strings.Repeat("d", i%90), i, i%300))
	}
	_, err := s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	rows = nil

	s = openAt(t, dir)
	mt := s.tables["inventory"]
	_, err = tbl(t, s.Stage(), "inventory").Find(table.Query{Limit: 1})
	require.NoError(t, err)
	mt.residency.promote = 1 // the next walk reads the table into memory
	runtime.GC()
	runtime.GC() // the import's garbage, finalised by the first
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	shared := table.Shared()
	res, err := mt.resident(context.Background(), false)
	require.NoError(t, err)
	require.NotNil(t, res)
	runtime.GC()
	runtime.ReadMemStats(&after)
	took := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	recorded := table.Shared() - shared
	t.Logf("%d rows took %d bytes of heap; %d recorded", len(res.order), took, recorded)
	assert.GreaterOrEqual(t, recorded, took*9/10, "the estimate is about what the rows take, or more")
	assert.LessOrEqual(t, recorded, took*2, "and not far more")
}
