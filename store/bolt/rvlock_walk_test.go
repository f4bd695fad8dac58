package bolt

import (
	"bytes"
	"fmt"
	"iter"
	"math"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// remapWaiting reports whether a goroutine waits in bbolt's remap for its mmap lock (a commit
// that must grow the map, waiting for the open read transactions to end).
func remapWaiting() bool {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	for _, g := range bytes.Split(b.Bytes(), []byte("\n\n")) {
		if bytes.Contains(g, []byte("sync.(*RWMutex).Lock")) && bytes.Contains(g, []byte("bbolt.(*DB).mmap(")) {
			return true
		}
	}
	return false
}

// A walk of a table read from the file holds a bbolt read transaction while its caller's loop
// runs: for a run's whole walk, up to its time limit (a filter no index answers over a large
// table, a slow $regex that looks at the run's context on every row). A commit that must grow
// bbolt's map meanwhile (an audit batch, which commits under the tables' read lock beside walks)
// waits for the whole walk, and while it waits no read transaction begins: every look at a run,
// every other walk, and behind the batch's locks every apply and listing. The walk's table
// cannot change while its caller holds the tables' lock (only system documents commit under the
// read lock), so the walk ends its transaction every walkChunk rows and goes on from its
// last key in a new one: the commit then waits for a chunk, not for the walk.
func TestRvlockAWalkOfTheFileLetsAGrowingCommitGoBetweenChunks(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	const n = 3000
	s := openAt(t, bigInventory(t, n))
	mt := s.tables["inventory"]
	// A little more than the map has room for: one remap (bbolt doubles the map) holds it.
	docs := bigDocs("grow", int(mapped(t, s)-used(t, s))+(256<<10))

	committed := make(chan error, 1)
	var walked, released int
	var err error
	s.mu.RLock() // as a stage's walk holds it
	for range mt.walk(bg, nil, nil, false, &err) {
		walked++
		switch {
		case walked == 10:
			go func() { committed <- s.PutSysDocs(bg, docs...) }()
			for !remapWaiting() { // the batch waits for the walk's transaction now
				time.Sleep(time.Millisecond)
			}
		case walked > 10 && walked%128 == 0 && released == 0 && !remapWaiting():
			released = walked
		}
	}
	s.mu.RUnlock()
	require.NoError(t, err)
	require.Equal(t, n+6, walked)
	require.NoError(t, <-committed)
	assert.NotZero(t, released, "the batch's remap waited for the whole walk of %d rows", walked)
	t.Logf("the batch's remap went ahead before row %d of the walk", released)
}

// A walk of the file that goes on in a new read transaction every walkChunk entries reads every
// row once, in order, across the chunks' seams: whole, over ranges, backwards, and through an
// index whose value holds more than a chunk of rows. The rows are compared with a walk of the
// same table in memory.
func TestRvlockAWalkInChunksReadsEveryRowOnce(t *testing.T) {
	t.Parallel()
	const n = 6 * walkChunk // "name" N(i%5): each value holds more than a chunk of rows
	onDisk(t, -1)
	s := openAt(t, bigInventory(t, n))
	mt := s.tables["inventory"]
	require.Nil(t, mt.res.Load(), "the table is read from the file")
	mem, err := Open(bigInventory(t, n), Options{residency: &residency{open: 1 << 40, promote: math.MaxInt64}})
	require.NoError(t, err)
	defer mem.Close()
	res := mem.tables["inventory"].res.Load()
	require.NotNil(t, res, "the table is read into memory")

	same := func(what string, want []*rec, seq iter.Seq[*rec], errp *error) {
		t.Helper()
		var got []any
		for r := range seq {
			got = append(got, r.key)
		}
		require.NoError(t, *errp, what)
		require.Greater(t, len(want), walkChunk, "%s: the walk crosses a seam", what)
		for i, r := range want {
			if i >= len(got) || table.CompareKeys(got[i], r.key) != 0 {
				t.Errorf("%s: row %d of %d is %v, not %v (%d read)", what, i, len(want), got[min(i, len(got)-1)], r.key, len(got))
				return
			}
		}
		assert.Len(t, got, len(want), what)
	}
	memWalk := func(from, to any, reverse bool, keep func(r *rec) bool) []*rec {
		var out []*rec
		for _, r := range res.walk(from, to, reverse, 0) {
			if keep == nil || keep(r) {
				out = append(out, r)
			}
		}
		return out
	}
	lo, hi := fmt.Sprintf("SG%06d", 100+walkChunk/2), fmt.Sprintf("SG%06d", 100+4*walkChunk+walkChunk/2)
	s.mu.RLock() // as every walk's caller holds it
	defer s.mu.RUnlock()
	for _, reverse := range []bool{false, true} {
		var err error
		for _, r := range []struct{ from, to any }{{nil, nil}, {lo, hi}, {lo, nil}, {nil, hi}} {
			same(fmt.Sprintf("reverse=%v [%v, %v]", reverse, r.from, r.to), memWalk(r.from, r.to, reverse, nil), mt.disk.rows(r.from, r.to, reverse, &err), &err)
		}
		for v := range 5 {
			name := fmt.Sprint("N", v)
			same(fmt.Sprintf("reverse=%v %s through its index", reverse, name), memWalk(nil, nil, reverse, func(r *rec) bool { return r.row["name"] == name }),
				mt.disk.lookup("name", name, reverse, &err), &err)
		}
	}
}

// An entry a walk stood at when it ended its transaction, gone when it comes back in a new one,
// is damage the walk reports: the table cannot change under a walk (its caller holds the
// Store's lock), and a walk that went on from the next entry would have left a row out.
func TestRvlockAWalkReportsAnEntryGoneBetweenChunks(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	s := openAt(t, bigInventory(t, 2*walkChunk))
	mt := s.tables["inventory"]
	var err error
	walked := 0
	for r := range mt.disk.rows(nil, nil, false, &err) {
		if walked++; walked == walkChunk { // against the rules: what no commit under the lock does
			require.NoError(t, s.bolt.db.Update(func(tx *bbolt.Tx) error {
				return tableKeys(tx, "inventory").Delete(store.AppendKey(nil, r.key))
			}))
		}
	}
	var de *store.DamagedError
	require.ErrorAs(t, err, &de)
	assert.Contains(t, de.Problem, "an entry a walk stood at is gone")
	assert.Equal(t, walkChunk, walked, "the walk ended where the entry went")
}
