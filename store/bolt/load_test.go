package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/table"
)

// bigInventory makes a store whose inventory holds n rows more than the demo's 6, closed: a copy
// of the one made the first time a test asked for n (in benchRoot; TestMain removes it).
func bigInventory(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(bigInventorySource(t, n))))
	return dir
}

var bigInventories = map[int]string{} // n → the store's directory, under benchMu

func bigInventorySource(t *testing.T, n int) string {
	t.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if dir := bigInventories[n]; dir != "" {
		return dir
	}
	if benchRoot == "" {
		var err error
		benchRoot, err = os.MkdirTemp("", "starplan-bench-")
		require.NoError(t, err)
	}
	dir := filepath.Join(benchRoot, fmt.Sprint("inventory-", n))
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	var rows []string
	for i := range n {
		rows = append(rows, fmt.Sprintf(`{"item_id": "SG%06d", "name": "N%d", "quantity_in_stock": %d, "price": %d}`, 100+i, i%5, i, i%40))
	}
	_, err = s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	bigInventories[n] = dir
	return dir
}

// docKeys returns the bbolt keys of inventory's documents, in file (id) order.
func docKeys(t *testing.T, dir string) [][]byte {
	var out [][]byte
	require.NoError(t, boltView(t, dir, func(tx *bbolt.Tx) error {
		p := docPrefix("inventory")
		c := tx.Bucket([]byte(rootBucket)).Cursor()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			out = append(out, append([]byte(nil), k...))
		}
		return nil
	}))
	return out
}

// A table a whole walk read into memory is kept through large commits to it, as one read after
// long walks is: letting it go would make the next whole walk read it again.
func TestATableAWholeWalkReadIsKeptThroughLargeCommits(t *testing.T) {
	t.Parallel()
	onDisk(t, 50)
	dir := bigInventory(t, 300)
	s := openAt(t, dir)
	mt := s.tables["inventory"]
	loads := 0
	begin := mt.begin
	mt.begin = func() (tableRead, error) { loads++; return begin() }
	for round := range 3 {
		findRows(t, s.Stage(), "inventory", table.Query{Where: where("price", map[string]any{"$gt": 38})})
		require.NotNil(t, mt.res.Load())
		sg := s.Stage()
		inv := tbl(t, sg, "inventory")
		for i := range bulkPut {
			_, err := inv.Insert(table.Row{"item_id": fmt.Sprintf("R%d-%05d", round, i), "name": "w", "quantity_in_stock": 1, "price": 1})
			require.NoError(t, err)
		}
		require.NoError(t, sg.Apply(bg))
		assert.NotNil(t, mt.res.Load(), "round %d: a table a whole walk needed in memory is let go by a commit of %d rows", round, bulkPut)
	}
	assert.Equal(t, 1, loads, "times the table was read whole")
}

// A find without a limit in a run that may read fewer rows than the table holds stops one row
// past rows_read: it must not read the whole table into memory first.
func TestAFindPastTheReadLimitDoesNotReadTheTableFirst(t *testing.T) {
	onDisk(t, 200)
	dir := bigInventory(t, 300)
	s := openAt(t, dir)
	mt := s.tables["inventory"]
	shared := table.Shared()
	sg := s.StageFor(bg, store.RunLimits{RowsRead: 10})
	_, err := tbl(t, sg, "inventory").Find(table.Query{})
	var le *store.LimitError
	require.ErrorAs(t, err, &le)
	assert.Zero(t, table.Shared()-shared, "nothing read into memory")
	assert.True(t, mt.res.Load() == nil, "a find that stops at rows_read+1 rows read the whole table into memory")
}

// Decoders run chunks in parallel; the error is the first bad document in id order, whichever
// decoder finds which first (documents damaged in chunk 0 and chunk 2).
func TestTheFirstBadDocumentIsTheError(t *testing.T) {
	t.Parallel()
	onDisk(t, 1)
	dir := bigInventory(t, 3*loadChunk)
	ks := docKeys(t, dir)
	require.Greater(t, len(ks), 2*loadChunk+10)
	first, later := ks[loadChunk-1], ks[2*loadChunk+5]
	rawUpdate(t, dir, func(bk *bbolt.Bucket) error {
		if err := bk.Put(later, []byte{0xc1}); err != nil {
			return err
		}
		return bk.Put(first, []byte{0x81, 0xa1}) // truncated
	})
	s := openAt(t, dir)
	for range 3 { // the same document every time, though the decoders race
		mt := s.tables["inventory"]
		mt.loadErr = nil
		_, err := mt.resident(context.Background(), true)
		require.ErrorIs(t, err, store.ErrDamaged)
		assert.ErrorContains(t, err, "inventory: document "+string(first[len(docPrefix("inventory")):])+": truncated msgpack value")
	}
}

// Every document, in id order, for tables of 0, 1 and about loadChunk documents.
func TestLoadDocsAtChunkBoundaries(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	// One table grows through the sizes (each import adds the rows up to the next size), so the
	// test imports 2×loadChunk rows in all, not their sum.
	dir := t.TempDir()
	s := openAt(t, dir)
	_, err := s.Import(bg, "inventory", strings.NewReader("[]"), JSON, Replace)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	had := 0
	for _, n := range []int{0, 1, loadChunk - 1, loadChunk, loadChunk + 1, 2 * loadChunk} {
		s = openAt(t, dir)
		if n > had {
			var rows []string
			for i := had; i < n; i++ {
				rows = append(rows, fmt.Sprintf(`{"item_id": "SG%06d", "name": "N", "quantity_in_stock": 1, "price": 1}`, 100+i))
			}
			_, err = s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
			require.NoError(t, err)
			had = n
		}
		require.NoError(t, s.Close())
		want := docKeys(t, dir)
		require.Len(t, want, n)
		s = openAt(t, dir)
		var recs []*rec
		require.NoError(t, s.bolt.db.View(func(tx *bbolt.Tx) (err error) {
			recs, err = loadDocs(tx, s.bolt.path, s.schemas["inventory"])
			return err
		}))
		require.Len(t, recs, n)
		for i, r := range recs {
			require.Equal(t, string(want[i][len(docPrefix("inventory")):]), r.id, "n=%d i=%d", n, i)
		}
		res, err := s.tables["inventory"].resident(context.Background(), true)
		require.NoError(t, err)
		if int64(n) >= s.tables["inventory"].residency.promote {
			require.Len(t, res.order, n)
		}
		require.NoError(t, s.Close())
	}
}

// A fault in a decoder (a broken schema stands in for a fault in the memory map) is one
// *DamagedError that names the damage once.
func TestAFaultInADecoderIsReportedOnce(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	dir := bigInventory(t, 2*loadChunk)
	s := openAt(t, dir)
	sc := *s.schemas["inventory"]
	sc.FieldsByName = map[string]*store.Field{}
	for k, v := range s.schemas["inventory"].FieldsByName {
		sc.FieldsByName[k] = v
	}
	sc.FieldsByName["price"] = &store.Field{} // nil *table.Field: f.Type panics
	read, err := s.beginLoad(&sc)
	require.NoError(t, err)
	_, err = read(nil)
	require.ErrorIs(t, err, store.ErrDamaged)
	assert.Equal(t, 1, strings.Count(err.Error(), "is damaged"), "the damage is named once: %v", err)
}

// A load that fails on its first document does not decode the rest of the table (nor record it
// as shared memory).
func TestAFailedLoadStopsDecoding(t *testing.T) {
	onDisk(t, 1)
	chunks := min(runtime.GOMAXPROCS(0), 4) + 1 // the most the decoders can hold at once
	// Twice as many chunks: a load that decoded them all would pass the bound.
	dir := bigInventory(t, 2*chunks*loadChunk)
	ks := docKeys(t, dir)
	rawUpdate(t, dir, func(bk *bbolt.Bucket) error { return bk.Put(ks[0], []byte{0xc1}) })
	s := openAt(t, dir)
	before := table.Shared()
	_, err := s.tables["inventory"].resident(context.Background(), true)
	require.ErrorIs(t, err, store.ErrDamaged)
	grew := table.Shared() - before
	inFlight := int64(chunks) * loadChunk * 600 // rows of 470 B or so
	assert.Less(t, grew, inFlight, "at most the chunks the decoders had when the first failed")
}

// Tables read into memory by whole walks answer as the file does: whole walks with the run's own
// writes, Count, a Go predicate, Update and Remove without a limit, reverse.
func TestAWholeWalkInMemoryAnswersAsTheFile(t *testing.T) {
	t.Parallel()
	dir := bigInventory(t, 300)
	run := func(promote int64) []string {
		onDisk(t, promote)
		d := t.TempDir()
		require.NoError(t, os.CopyFS(d, os.DirFS(dir)))
		s := openAt(t, d)
		sg := s.Stage()
		inv := tbl(t, sg, "inventory")
		var out []string
		note := func(x ...any) { out = append(out, fmt.Sprint(x...)) }
		_, err := inv.Insert(table.Row{"item_id": "SG000150x", "name": "own", "quantity_in_stock": 1, "price": 39})
		require.NoError(t, err)
		got, err := inv.Find(table.Query{Where: where("price", map[string]any{"$gt": 37}), Reverse: true})
		note(keys(t, got, "item_id"), err)
		n, err := inv.Count(table.Query{Where: where("price", map[string]any{"$lt": 3})})
		note(n, err)
		got, err = inv.Find(table.Query{Match: func(r table.Row) (bool, error) { return r["quantity_in_stock"].(int64)%17 == 0, nil }})
		note(keys(t, got, "item_id"), err)
		n, err = inv.Update(table.Row{"price": 1.5}, table.Query{Where: where("price", map[string]any{"$gte": 39})})
		note(n, err)
		n, err = inv.Remove(table.Query{Where: where("price", map[string]any{"$lte": 0})})
		note(n, err)
		note(s.tables["inventory"].res.Load() != nil)
		note(sg.Apply(bg))
		return out
	}
	a, b := run(-1), run(50)
	require.Equal(t, a[:len(a)-2], b[:len(b)-2])
	assert.Equal(t, []string{"false", "<nil>"}, a[len(a)-2:])
	assert.Equal(t, []string{"true", "<nil>"}, b[len(b)-2:])
}

// A whole walk that read the table into memory first is still a predicate read: a matching row
// another run commits makes the reader's apply conflict.
func TestAWholeWalkInMemoryIsStillAPredicateRead(t *testing.T) {
	t.Parallel()
	dir := bigInventory(t, 300)
	for _, promote := range []int64{-1, 50} {
		onDisk(t, promote)
		d := t.TempDir()
		require.NoError(t, os.CopyFS(d, os.DirFS(dir)))
		s := openAt(t, d)
		a, b := s.Stage(), s.Stage()
		findRows(t, a, "inventory", table.Query{Where: where("price", map[string]any{"$gt": 38})})
		n, err := tbl(t, b, "inventory").Count(table.Query{Where: where("price", map[string]any{"$gt": 38})})
		require.NoError(t, err)
		_, err = tbl(t, b, "inventory").Insert(table.Row{"item_id": "SG000150x", "name": "w", "quantity_in_stock": 1, "price": 39})
		require.NoError(t, err)
		require.NoError(t, b.Apply(bg))
		_, err = tbl(t, a, "inventory").Insert(table.Row{"item_id": "ZZ", "name": "w", "quantity_in_stock": 1, "price": 1})
		require.NoError(t, err)
		assert.ErrorIs(t, a.Apply(bg), store.ErrConflict, "promote %d (count %d, resident %v)", promote, n, s.tables["inventory"].res.Load() != nil)
	}
}

// heldRead makes mt's first read into memory end its read, then wait for release (or for the job
// to be stopped) before it ends, and counts the reads; began receives each job once its read is
// done. (The read here ends its bbolt transaction before it waits:
// TestALargeCommitStopsAnAbandonedRead holds one open.)
func heldRead(t *testing.T, mt *committedTable, release <-chan struct{}) (loads *int, began <-chan *loadJob) {
	t.Helper()
	n, ch := 0, make(chan *loadJob, 4)
	var first *loadJob
	begin := mt.begin
	mt.begin = func() (tableRead, error) {
		n++
		read, err := begin()
		return func(stop <-chan struct{}) (*resident, error) {
			res, err := read(stop)
			mt.loadMu.Lock()
			j := mt.loading
			if first == nil {
				first = j
			}
			mt.loadMu.Unlock()
			ch <- j
			if j == first {
				select {
				case <-release:
				case <-stop:
				}
			}
			return res, err
		}, err
	}
	return &n, ch
}

// wholeWalk is a find that reads the table whole (no index answers it, no limit).
var wholeWalk = table.Query{Where: where("price", map[string]any{"$gte": 0})}

// abandonWalk starts a whole walk of inventory in a run, waits (wait) until its read into memory
// has begun, ends the run, and checks that the walk ended with it.
func abandonWalk(t *testing.T, s *Store, wait func()) {
	t.Helper()
	ctx, stop := context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() {
		_, err := tbl(t, s.StageFor(ctx, store.RunLimits{}), "inventory").Find(wholeWalk)
		errc <- err
	}()
	wait()
	stop()
	require.ErrorIs(t, <-errc, context.Canceled)
}

// A run whose time is up while its walk waits for the table's read into memory ends then, with
// its cause; the read goes on and is kept for the walks after it, with the commits published
// meanwhile replayed on it.
func TestARunWhoseTimeIsUpDoesNotWaitForATableRead(t *testing.T) {
	t.Parallel()
	onDisk(t, 50)
	dir := bigInventory(t, 300)
	s := openAt(t, dir)
	mt := s.tables["inventory"]
	release := make(chan struct{})
	loads, began := heldRead(t, mt, release)

	ctx, stop := context.WithCancelCause(bg)
	errc := make(chan error, 1)
	go func() {
		_, err := tbl(t, s.StageFor(ctx, store.RunLimits{}), "inventory").Find(wholeWalk)
		errc <- err
	}()
	j := <-began
	stop(errors.New("the run's time is up"))
	select {
	case err := <-errc:
		require.Error(t, err)
		assert.ErrorContains(t, err, "the run's time is up")
		assert.ErrorContains(t, err, "table inventory was read into memory")
	case <-time.After(time.Minute):
		close(release) // so that the store closes
		t.Fatal("the walk waited for the read into memory after its run had ended")
	}

	// Commits while the read is held: it began before them, so they are replayed on it.
	sg := s.Stage()
	inv := tbl(t, sg, "inventory")
	_, err := inv.Update(table.Row{"price": 77}, table.Query{Where: where("item_id", "SG000100")})
	require.NoError(t, err)
	_, err = inv.Remove(table.Query{Where: where("item_id", "SG000101")})
	require.NoError(t, err)
	_, err = inv.Insert(table.Row{"item_id": "ZZ1", "name": "late", "quantity_in_stock": 1, "price": 1})
	require.NoError(t, err)
	require.NoError(t, sg.Apply(bg))

	close(release)
	<-j.done
	require.True(t, j.kept, "the read was kept")
	rows := findRows(t, s.Stage(), "inventory", wholeWalk)
	require.NotNil(t, mt.res.Load())
	assert.Equal(t, 1, *loads, "reads of the table into memory")
	byID := map[string]table.Row{}
	for _, r := range rows {
		byID[r["item_id"].(string)] = r
	}
	assert.Len(t, rows, 306)
	assert.EqualValues(t, 77, byID["SG000100"]["price"])
	assert.NotContains(t, byID, "SG000101")
	assert.Contains(t, byID, "ZZ1")
	// What is in memory answers as the file does.
	require.NoError(t, s.Close())
	s = openAt(t, dir)
	assert.ElementsMatch(t, findRows(t, s.Stage(), "inventory", wholeWalk), rows)
}

// A commit of bulkPut rows or more while a read into memory is under way makes it stale (the
// import's rows are not replayed one by one, nor held twice): the next walk reads the table again.
func TestALargeCommitDuringATableReadMakesItStale(t *testing.T) {
	t.Parallel()
	onDisk(t, 50)
	dir := bigInventory(t, 300)
	s := openAt(t, dir)
	mt := s.tables["inventory"]
	release := make(chan struct{})
	loads, began := heldRead(t, mt, release)

	var j *loadJob
	abandonWalk(t, s, func() { j = <-began })

	var rows []string
	for i := range bulkPut {
		rows = append(rows, fmt.Sprintf(`{"item_id": "NEW%05d", "name": "n", "quantity_in_stock": 1, "price": 2}`, i))
	}
	_, err := s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
	require.NoError(t, err)

	close(release)
	<-j.done
	assert.False(t, j.kept, "a read that began before an import of %d rows was kept", bulkPut)
	assert.True(t, mt.res.Load() == nil, "a stale read became the table's rows")
	got := findRows(t, s.Stage(), "inventory", wholeWalk)
	assert.Len(t, got, 306+bulkPut)
	assert.Equal(t, 2, *loads, "reads of the table into memory")
	assert.NotNil(t, mt.res.Load())
}

// Close stops a read into memory that runs on its own, and waits for it; the stop is not
// remembered as damage.
func TestCloseStopsAReadIntoMemory(t *testing.T) {
	t.Parallel()
	onDisk(t, 50)
	dir := bigInventory(t, 3*loadChunk)
	s := openAt(t, dir)
	mt := s.tables["inventory"]
	stopped := make(chan error, 1)
	begin := mt.begin
	began := make(chan struct{})
	mt.begin = func() (tableRead, error) {
		read, err := begin()
		return func(stop <-chan struct{}) (*resident, error) {
			close(began)
			<-s.quit // until Close has begun
			res, err := read(stop)
			stopped <- err
			return res, err
		}, err
	}
	abandonWalk(t, s, func() { <-began })
	mt.loadMu.Lock()
	j := mt.loading
	mt.loadMu.Unlock()
	require.NotNil(t, j)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, <-stopped, errStopped)
	<-j.done
	assert.NoError(t, mt.loadErr)
	assert.True(t, mt.res.Load() == nil, "a stopped read became the table's rows")
}

// Commits that add up to bulkPut rows while a read into memory is under way make it stale: it
// stops, and the next walk does not wait for it but reads the table again.
func TestSmallCommitsAddingUpMakeAReadStale(t *testing.T) {
	t.Parallel()
	onDisk(t, 50)
	dir := bigInventory(t, 300)
	s := openAt(t, dir)
	mt := s.tables["inventory"]
	release := make(chan struct{}) // closed only on failure: the job's stop ends the first read
	loads, began := heldRead(t, mt, release)

	var j *loadJob
	abandonWalk(t, s, func() { j = <-began })
	for c := range 2 { // 2 × 600 rows, each below bulkPut
		var rows []string
		for i := range 600 {
			rows = append(rows, fmt.Sprintf(`{"item_id": "C%d-%04d", "name": "n", "quantity_in_stock": 1, "price": 2}`, c, i))
		}
		_, err := s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
		require.NoError(t, err)
	}
	found := make(chan int, 1)
	go func() {
		found <- len(findRows(t, s.Stage(), "inventory", wholeWalk))
		<-began // the second read's job
	}()
	select {
	case n := <-found:
		assert.Equal(t, 306+1200, n)
	case <-time.After(time.Minute):
		close(release) // so that the store closes
		t.Fatal("a walk waited for a read that commits had made stale")
	}
	<-j.done
	assert.False(t, j.kept)
	assert.Equal(t, 2, *loads, "reads of the table into memory")
}

// A large commit stops a read into memory that no run waits for any more before it writes: the
// read's bbolt transaction would make the commit wait for the whole read, holding the Store's
// write lock, when the file must grow (found by review: 20,000 rows of 200-byte names).
func TestALargeCommitStopsAnAbandonedRead(t *testing.T) {
	t.Parallel()
	onDisk(t, 50)
	dir := bigInventory(t, 300)
	s := openAt(t, dir)
	mt := s.tables["inventory"]
	release := make(chan struct{})
	defer close(release)
	began := make(chan struct{})
	begin, reads := mt.begin, 0
	mt.begin = func() (tableRead, error) {
		read, err := begin()
		if reads++; reads > 1 {
			return read, err
		}
		return func(stop <-chan struct{}) (*resident, error) {
			close(began)
			select { // the transaction is open: a slow read
			case <-release:
			case <-stop:
			}
			return read(stop)
		}, err
	}
	abandonWalk(t, s, func() { <-began })

	var rows []string
	n := testtier.Size(4000, 20_000) // about 1 MB: the file must grow (and bbolt remap it)
	for i := range n {
		rows = append(rows, fmt.Sprintf(`{"item_id": "NEW%05d", "name": "%s", "quantity_in_stock": 1, "price": 2}`, i, strings.Repeat("x", 200)))
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the import waited, holding the Store's lock, for a read no run waits for")
	}
	assert.Len(t, findRows(t, s.Stage(), "inventory", wholeWalk), n+306)
}

// A panic while a read's pending commits are replayed is that read's error: the read runs in a
// goroutine of its own, where a panic would end the process.
func TestAPanicInAReadIntoMemoryIsItsError(t *testing.T) {
	t.Parallel()
	onDisk(t, 50)
	dir := bigInventory(t, 300)
	s := openAt(t, dir)
	mt := s.tables["inventory"]
	release, began := make(chan struct{}), make(chan struct{})
	mt.begin = func() (tableRead, error) {
		return func(<-chan struct{}) (*resident, error) {
			close(began)
			<-release
			return nil, nil // no rows: replaying a commit on them panics
		}, nil
	}
	abandonWalk(t, s, func() { <-began })
	sg := s.Stage()
	_, err := tbl(t, sg, "inventory").Update(table.Row{"price": 77}, table.Query{Where: where("item_id", "SG000100")})
	require.NoError(t, err)
	require.NoError(t, sg.Apply(bg))
	mt.loadMu.Lock()
	j := mt.loading
	mt.loadMu.Unlock()
	require.NotNil(t, j)
	require.Len(t, j.pending, 1)
	close(release)
	<-j.done
	assert.ErrorContains(t, j.err, "reading table inventory into memory")
	assert.False(t, j.kept)
	assert.True(t, mt.res.Load() == nil, "rows whose replay failed became the table's")
}
