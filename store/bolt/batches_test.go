package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// itemsJSON is a JSON array of n inventory records SG001..; bad, when set, replaces record i's
// line (1-based) with its own.
func itemsJSON(n int, bad map[int]string) string {
	var b strings.Builder
	b.WriteString("[\n")
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(",\n")
		}
		if line, ok := bad[i]; ok {
			b.WriteString(line)
			continue
		}
		fmt.Fprintf(&b, `{"item_id": "SG%03d", "name": "Item %d", "quantity_in_stock": %d, "price": %d.5}`, i, i, i, i)
	}
	b.WriteString("\n]")
	return b.String()
}

func openEmpty(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSeed: true, residency: residencyOf(t)})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// checkStore closes s and checks its file: counts, digests, keys and indexes.
func checkStore(t *testing.T, s *Store, dir string) {
	t.Helper()
	require.NoError(t, s.Close())
	rep, err := Check(dir, store.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

func TestImportBatchesCommitsEachBatch(t *testing.T) {
	whole, _ := openEmpty(t)
	_, err := whole.Import(bg, "inventory", strings.NewReader(itemsJSON(10, nil)), JSON, Upsert)
	require.NoError(t, err)

	s, dir := openEmpty(t)
	seq := s.seq
	res, err := s.ImportBatches(bg, "inventory", strings.NewReader(itemsJSON(10, nil)), JSON, 3)
	require.NoError(t, err)
	assert.Equal(t, ImportResult{Inserted: 10, Commits: 4}, res)
	assert.Equal(t, seq+4, s.seq, "3 + 3 + 3 + 1 records, a commit each")
	assert.Equal(t, dumpString(t, whole), dumpString(t, s), "the same rows as one import")

	res, err = s.ImportBatches(bg, "inventory", strings.NewReader(itemsJSON(10, nil)), JSON, 4)
	require.NoError(t, err)
	assert.Equal(t, ImportResult{Unchanged: 10}, res, "a second run finds every row written")
	checkStore(t, s, dir)

	_, err = whole.ImportBatches(bg, "inventory", strings.NewReader("[]"), JSON, 0)
	assert.ErrorContains(t, err, "want at least 1")
}

// A bad record stops the writing before its batch: the batches before it stay, the error says so,
// and the same import run again on the mended file finishes the job.
func TestImportBatchesStopAtABadRecordAndResume(t *testing.T) {
	for _, tc := range []struct {
		name, file, fixed string
		format            Format
		rule              string
	}{
		{name: "json", format: JSON,
			file:  itemsJSON(10, map[int]string{8: `{"item_id": "SG008", "name": "Item 8", "quantity_in_stock": 8, "price": "x"}`}),
			fixed: itemsJSON(10, nil), rule: `record 8, line 9: field "price"`},
		{name: "csv", format: CSV,
			file:  "item_id,name,quantity_in_stock,price\nSG001,A,1,1\nSG002,B,2,2\nSG003,C,3,3\nSG004,D,4,4\nSG005,E,5\nSG006,F,6,6\n",
			fixed: "item_id,name,quantity_in_stock,price\nSG001,A,1,1\nSG002,B,2,2\nSG003,C,3,3\nSG004,D,4,4\nSG005,E,5,5\nSG006,F,6,6\n",
			rule:  "record 5, line 6: 3 cells, but the header names 4 fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := openEmpty(t)
			res, err := s.ImportBatches(bg, "inventory", strings.NewReader(tc.file), tc.format, 3)
			var bad *ImportErrors
			require.ErrorAs(t, err, &bad)
			assert.Equal(t, 3*((bad.Errs[0].Record-1)/3), bad.Imported(), "the batches before the bad record's")
			assert.ErrorContains(t, err, tc.rule)
			assert.ErrorContains(t, err, fmt.Sprintf("the first %d records were imported (in %s), none after them", bad.Imported(), commitsOf(bad.Imported()/3)))
			assert.Equal(t, ImportResult{Inserted: bad.Imported(), Commits: bad.Imported() / 3}, res)
			assert.Equal(t, bad.Imported(), tbl(t, s.Stage(), "inventory").Len())

			res, err = s.ImportBatches(bg, "inventory", strings.NewReader(tc.fixed), tc.format, 3)
			require.NoError(t, err)
			n := tbl(t, s.Stage(), "inventory").Len()
			assert.Equal(t, ImportResult{Inserted: n - bad.Imported(), Unchanged: bad.Imported(), Commits: (n - bad.Imported() + 2) / 3}, res)
			checkStore(t, s, dir)
		})
	}
}

// Only what every record says is imported: a key generated on one run would be generated again,
// for a second row, when the import runs again, so a batched import wants every key.
func TestImportBatchesWantEveryKey(t *testing.T) {
	s, _ := openEmpty(t)
	file := itemsJSON(5, map[int]string{4: `{"name": "Nameless", "quantity_in_stock": 1, "price": 1.0}`})
	_, err := s.ImportBatches(bg, "inventory", strings.NewReader(file), JSON, 2)
	assert.ErrorContains(t, err, `record 4, line 5: field "item_id" is empty: it is required in a batched import`)
	assert.Equal(t, 2, tbl(t, s.Stage(), "inventory").Len(), "the batch with the record was not written")

	res, err := s.Import(bg, "inventory", strings.NewReader(file), JSON, Upsert)
	require.NoError(t, err, "one import generates the key")
	assert.Equal(t, ImportResult{Inserted: 3, Unchanged: 2, Commits: 1}, res)
}

// A key that comes twice is refused as by Import, even when the first is in a batch already
// written (it is not an update of that row).
func TestImportBatchesRefuseAKeyTwice(t *testing.T) {
	s, _ := openEmpty(t)
	file := itemsJSON(9, map[int]string{8: `{"item_id": "SG002", "name": "Again", "quantity_in_stock": 1, "price": 1.0}`})
	_, err := s.ImportBatches(bg, "inventory", strings.NewReader(file), JSON, 3)
	assert.ErrorContains(t, err, "record 8, line 9: inventory row SG002")
	assert.ErrorContains(t, err, "duplicate key: record 2 has the same item_id")
	row, ok := committed(t, s, "inventory", "SG002")
	require.True(t, ok)
	assert.Equal(t, "Item 2", row["name"])
}

// onRead calls fn once, when the reader has passed offset at bytes (the batches before it are
// written: reading happens outside the store's lock).
type onRead struct {
	r      io.Reader
	n, at  int
	fn     func()
	called bool
}

func (o *onRead) Read(p []byte) (int, error) {
	if !o.called && o.n >= o.at {
		o.called = true
		o.fn()
	}
	n, err := o.r.Read(p)
	o.n += n
	return n, err
}

// A row another writer commits between two batches, with a key the import has later, is updated,
// not written a second time: the import stops trusting that the table holds only its own rows.
func TestImportBatchesSeeOtherWriters(t *testing.T) {
	s, dir := openEmpty(t)
	file := itemsJSON(9, nil)
	r := &onRead{r: iotest.OneByteReader(strings.NewReader(file)), at: strings.Index(file, `"SG005"`), fn: func() {
		v := s.Stage()
		_, err := tbl(t, v, "inventory").Insert(table.Row{"item_id": "SG008", "name": "Theirs", "quantity_in_stock": 1, "price": 1.0})
		require.NoError(t, err)
		require.NoError(t, v.Apply(bg))
	}}
	res, err := s.ImportBatches(bg, "inventory", r, JSON, 3)
	require.NoError(t, err)
	require.True(t, r.called)
	assert.Equal(t, ImportResult{Inserted: 8, Updated: 1, Commits: 3}, res)
	assert.Equal(t, 9, tbl(t, s.Stage(), "inventory").Len())
	row, _ := committed(t, s, "inventory", "SG008")
	assert.Equal(t, "Item 8", row["name"])
	checkStore(t, s, dir)
}

// A cancelled import keeps the batches it wrote; running it again finishes it.
func TestImportBatchesCancelled(t *testing.T) {
	s, dir := openEmpty(t)
	file := itemsJSON(10, nil)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	r := &onRead{r: iotest.OneByteReader(strings.NewReader(file)), at: strings.Index(file, `"SG005"`), fn: func() {
		// The first batch is handed to the writer by now; cancel once it is written.
		require.Eventually(t, func() bool { inv, ok := s.Stage().Table("inventory"); return ok && inv.Len() == 3 }, time.Minute, time.Millisecond)
		cancel()
	}}
	res, err := s.ImportBatches(ctx, "inventory", r, JSON, 3)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Equal(t, ImportResult{Inserted: 3, Commits: 1}, res)

	res, err = s.ImportBatches(bg, "inventory", strings.NewReader(file), JSON, 3)
	require.NoError(t, err)
	assert.Equal(t, ImportResult{Inserted: 7, Unchanged: 3, Commits: 3}, res)
	checkStore(t, s, dir)
}

// A file that cannot be read on (malformed, cut off) after batches were written says what they
// imported, and names the bad records read before it too.
func TestImportBatchesOfAFileThatBreaksOff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		format   Format
		file     string
		imported int
		want     []string
	}{
		{"json", JSON, strings.TrimSuffix(itemsJSON(5, map[int]string{5: `{"item_id": "SG005", "name": "E", "quantity_in_stock": "x", "price": 1.0}`}), "\n]") + ",\n{\"item_id\": \"SG006\", oops}\n]",
			4, []string{`record 5, line 6: field "quantity_in_stock"`, "record 6, line 7: malformed JSON"}},
		{"cut", JSON, strings.TrimSuffix(itemsJSON(5, nil), "\n]"), 4, []string{"malformed JSON: EOF"}},
		{"csv", CSV, "item_id,name,quantity_in_stock,price\nSG001,A,1,1\nSG002,B,2,2\nSG003,C,3,3\nSG004,\"D,4,4\n",
			2, []string{"record 4, line 5: malformed CSV"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openEmpty(t)
			res, err := s.ImportBatches(bg, "inventory", strings.NewReader(tc.file), tc.format, 2)
			require.Error(t, err)
			assert.Equal(t, tc.imported/2, res.Commits)
			var bad *ImportErrors
			require.ErrorAs(t, err, &bad)
			assert.Equal(t, tc.imported, bad.Imported())
			assert.ErrorContains(t, err, fmt.Sprintf("the first %d records were imported (in %s), none after them", tc.imported, commitsOf(tc.imported/2)))
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// Batches smaller than a large commit still let a large table's rows go to the file: memory
// holds a batch, not the table.
func TestImportBatchesKeepNoTableInMemory(t *testing.T) {
	t.Parallel()
	setResidency(t, 100, promoteRows)
	s, dir := openEmpty(t)
	_, err := s.ImportBatches(bg, "inventory", strings.NewReader(itemsJSON(400, nil)), JSON, 50)
	require.NoError(t, err)
	assert.True(t, s.tables["inventory"].res.Load() == nil, "the rows are read from the file")
	assert.Equal(t, 400, tbl(t, s.Stage(), "inventory").Len())
	row, ok := committed(t, s, "inventory", "SG399")
	require.True(t, ok)
	assert.Equal(t, "Item 399", row["name"])
	checkStore(t, s, dir)
}

// Run again up to a bad record, an import says those records were imported already.
func TestImportBatchesRunAgainBeforeTheFix(t *testing.T) {
	s, _ := openEmpty(t)
	file := itemsJSON(5, map[int]string{5: `{"item_id": "SG005", "name": "E", "quantity_in_stock": "x", "price": 1.0}`})
	_, err := s.ImportBatches(bg, "inventory", strings.NewReader(file), JSON, 2)
	assert.ErrorContains(t, err, "the first 4 records were imported (in 2 commits)")
	res, err := s.ImportBatches(bg, "inventory", strings.NewReader(file), JSON, 2)
	assert.ErrorContains(t, err, "the first 4 records were imported already, none after them")
	assert.Equal(t, ImportResult{Unchanged: 4}, res)
}

// importGoroutines are the stacks of the goroutines ImportBatches runs that mention want.
func importGoroutines(want string) []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "bolt.(*Store).ImportBatches.func") && strings.Contains(g, want) {
			out = append(out, g)
		}
	}
	return out
}

// A fault in the writer is the caller's panic, where a server recovers it, not the process's.
func TestImportBatchesWriterPanicReachesTheCaller(t *testing.T) {
	s, _ := openEmpty(t)
	s.mu.Lock()
	s.tables["inventory"].res.Store(&resident{s: s.schemas["inventory"]}) // no rows map: publish panics
	s.mu.Unlock()
	defer func() {
		v := recover()
		require.NotNil(t, v)
		assert.Contains(t, fmt.Sprint(v), "assignment to entry in nil map")
		assert.Contains(t, fmt.Sprint(v), "in ImportBatches' writer")
	}()
	s.ImportBatches(bg, "inventory", strings.NewReader(itemsJSON(3, nil)), JSON, 3)
}

// A fault while reading leaves no writer behind.
func TestImportBatchesReaderPanicLeavesNoWriter(t *testing.T) {
	s, _ := openEmpty(t)
	file := itemsJSON(10, nil)
	r := &onRead{r: iotest.OneByteReader(strings.NewReader(file)), at: strings.Index(file, `"SG005"`), fn: func() { panic("fault in the reader") }}
	func() {
		defer func() { require.Equal(t, "fault in the reader", recover()) }()
		s.ImportBatches(bg, "inventory", r, JSON, 3)
	}()
	// The writer has finished by now; it may take a moment to be gone (a leaked one never is).
	assert.Eventually(t, func() bool { return len(importGoroutines("")) == 0 }, time.Minute, time.Millisecond, "the writer outlived the import")
}

// A Ctrl-C while the writer waits for the store (another commit holds it) writes nothing more.
func TestImportBatchesCtrlCWhileTheWriterWaits(t *testing.T) {
	s, _ := openEmpty(t)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	file := itemsJSON(3, nil)
	locked := make(chan struct{})
	r := &onRead{r: iotest.OneByteReader(strings.NewReader(file)), at: strings.Index(file, `"SG003"`),
		fn: func() { s.mu.Lock(); close(locked) }} // as a commit of another writer would
	done := make(chan error, 1)
	go func() { _, err := s.ImportBatches(ctx, "inventory", r, JSON, 3); done <- err }()
	<-locked
	for len(importGoroutines("sync.(*RWMutex).Lock")) == 0 { // the writer is waiting
		time.Sleep(time.Millisecond)
	}
	cancel()
	s.mu.Unlock()
	assert.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, 0, tbl(t, s.Stage(), "inventory").Len(), "nothing written after the Ctrl-C")
}

// commitsOf is "1 commit" or "n commits", as the errors count them.
func commitsOf(n int) string {
	if n == 1 {
		return "1 commit"
	}
	return fmt.Sprintf("%d commits", n)
}

// An import run again that stops at the bad record after one record imported before says so in
// the singular.
func TestImportErrorsCountOneRecord(t *testing.T) {
	e := &ImportErrors{Table: "inventory", Errs: []*ImportError{{Table: "inventory", Record: 2, Err: errors.New("bad")}}}
	e.Written = 1
	assert.Contains(t, e.Error(), "the first record was imported already, none after it")
	e.Commits = 1
	assert.Contains(t, e.Error(), "the first record was imported (in 1 commit), none after it")
}
