package bolt

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// A walk of the file in chunks (walkBucket) reads one state of its table while everything that
// may run beside it runs: applies that move stock from a row of its last chunk to one of its
// first (the total of the table, and of the name both rows hold, never changes), batches of system
// documents that grow the file past bbolt's map again and again (a remap between two chunks),
// conflict checks of an indexed read, and other walks. Each walk (every row, forwards and
// backwards; every row of a name through its index; a first and a last row of the name, whose
// re-check reads from the other end) must see the totals of one state, and no walk may report a
// damaged file: nothing it may legitimately run beside changes a row, key or index entry.
func TestRvwalkAWalkInChunksSeesOneStateBesideEverything(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	const n = 3*walkChunk + 200 // every row's walk crosses three seams
	s := openAt(t, bigInventory(t, n))
	mt := s.tables["inventory"]
	require.Nil(t, mt.res.Load(), "the table is read from the file")

	total := func(rows []table.Row) (sum int64) {
		for _, r := range rows {
			sum += r["quantity_in_stock"].(int64)
		}
		return sum
	}
	all := find(t, tbl(t, s.Stage(), "inventory"), table.Query{})
	rowsAll := len(all) // the seed's rows and n
	require.Greater(t, rowsAll, 3*walkChunk)
	wantAll := total(all)
	var n1 []table.Row
	for _, r := range all {
		if r["name"] == "N1" {
			n1 = append(n1, r)
		}
	}
	wantN1 := total(n1)
	first, last := n1[0]["item_id"], n1[len(n1)-1]["item_id"]

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	report := func(err error) {
		if err != nil {
			select {
			case errs <- err:
			default:
			}
			stop.Store(true)
		}
	}
	var walks, moves, batches atomic.Int64
	// The mover: d from the last N1 row to the first, in one apply.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 60; i++ {
			sg := s.Stage()
			tb := tbl(t, sg, "inventory")
			a, _, err := tb.Get(first)
			if err != nil {
				report(err)
				return
			}
			b, _, err := tb.Get(last)
			if err != nil {
				report(err)
				return
			}
			d := int64(i%7 + 1)
			if _, err := tb.Update(table.Row{"quantity_in_stock": a["quantity_in_stock"].(int64) + d}, table.Query{Where: where("item_id", first)}); err != nil {
				report(err)
				return
			}
			if _, err := tb.Update(table.Row{"quantity_in_stock": b["quantity_in_stock"].(int64) - d}, table.Query{Where: where("item_id", last)}); err != nil {
				report(err)
				return
			}
			report(sg.Apply(bg))
			moves.Add(1)
		}
	}()
	// The batches: system documents that outgrow bbolt's map of the file again and again.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 40; i++ {
			report(s.PutSysDocs(bg, bigDocs(fmt.Sprint("grow", i), 1<<20)...))
			batches.Add(1)
		}
	}()
	// The walkers.
	check := func(what string, got, want int64) {
		if got != want {
			report(fmt.Errorf("%s: total %d, not %d: the walk mixed two states of the table", what, got, want))
		}
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load() && (moves.Load() < 60 || batches.Load() < 40); i++ {
				sg := s.Stage()
				tb := tbl(t, sg, "inventory")
				switch (w + i) % 4 {
				case 0, 1: // every row, forwards or backwards
					rows, err := tb.Find(table.Query{Reverse: (w+i)%4 == 1})
					if err != nil {
						report(err)
						return
					}
					if len(rows) != rowsAll {
						report(fmt.Errorf("a walk of every row read %d, not %d", len(rows), rowsAll))
						return
					}
					check("every row", total(rows), wantAll)
				case 2: // every N1 row through the index
					rows, err := tb.Find(table.Query{Where: where("name", "N1"), Reverse: i%2 == 0})
					if err != nil {
						report(err)
						return
					}
					check("N1 through its index", total(rows), wantN1)
				default: // the first or last N1 row, re-checked after a move
					if _, err := tb.Find(table.Query{Where: where("name", "N1"), Reverse: i%2 == 0, Limit: 1}); err != nil {
						report(err)
						return
					}
					err := s.Conflicts(bg, sg.Pending())
					if err != nil && !errors.Is(err, store.ErrConflict) {
						report(err)
						return
					}
				}
				walks.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var de *store.DamagedError
		assert.False(t, errors.As(err, &de), "a walk beside legitimate work reported damage: %v", err)
		t.Error(err)
	}
	t.Logf("%d walks, %d moves, %d batches", walks.Load(), moves.Load(), batches.Load())
	require.Equal(t, int64(60), moves.Load())
	require.Equal(t, int64(40), batches.Load())
	rows := find(t, tbl(t, s.Stage(), "inventory"), table.Query{})
	assert.Equal(t, wantAll, total(rows))
}

// Seams at the edges: an index value of exactly walkChunk rows (its last entry is where the walk
// begins a new transaction, and the entry after it is another value's), the value after it of
// walkChunk+1 (one row past a seam), each forwards and backwards; the whole table, whose last
// entry lies one past its second seam; and a walk its caller stops at exactly walkChunk rows
// (no new transaction is begun for nothing). Each walk yields the rows a walk in memory yields.
func TestRvwalkSeamsAtTheEdgesOfAValue(t *testing.T) {
	t.Parallel()
	onDisk(t, -1)
	dir := t.TempDir()
	s := openAt(t, dir)
	var rows []string
	for i := range 2*walkChunk + 1 {
		name := "A"
		if i >= walkChunk {
			name = "B"
		}
		rows = append(rows, fmt.Sprintf(`{"item_id": "SG%06d", "name": %q, "quantity_in_stock": %d, "price": 1}`, 100+i, name, i))
	}
	_, err := s.Import(bg, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	copyDir := t.TempDir() // the same rows, read into memory
	require.NoError(t, os.CopyFS(copyDir, os.DirFS(dir)))
	s = openAt(t, dir)
	mt := s.tables["inventory"]
	require.Nil(t, mt.res.Load(), "the table is read from the file")
	mem, err := Open(copyDir, Options{residency: &residency{open: 1 << 40, promote: math.MaxInt64}})
	require.NoError(t, err)
	defer mem.Close()
	res := mem.tables["inventory"].res.Load()
	require.NotNil(t, res)

	want := func(name string, reverse bool) []any {
		var out []any
		for _, r := range res.walk(nil, nil, reverse, 0) {
			if name == "" || r.row["name"] == name {
				out = append(out, r.key)
			}
		}
		return out
	}
	got := func(seq iter.Seq[*rec], errp *error, stopAt int) []any {
		var out []any
		for r := range seq {
			out = append(out, r.key)
			if len(out) == stopAt {
				break
			}
		}
		require.NoError(t, *errp)
		return out
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, reverse := range []bool{false, true} {
		var err error
		a := want("A", reverse)
		require.Len(t, a, walkChunk)
		assert.Equal(t, a, got(mt.disk.lookup("name", "A", reverse, &err), &err, -1), "A reverse=%v", reverse)
		assert.Equal(t, want("B", reverse), got(mt.disk.lookup("name", "B", reverse, &err), &err, -1), "B reverse=%v", reverse)
		assert.Equal(t, want("", reverse), got(mt.disk.rows(nil, nil, reverse, &err), &err, -1), "every row reverse=%v", reverse)
		assert.Equal(t, want("", reverse)[:walkChunk], got(mt.disk.rows(nil, nil, reverse, &err), &err, walkChunk), "stopped at a seam reverse=%v", reverse)
		assert.Equal(t, a, got(mt.disk.lookup("name", "a", reverse, &err), &err, -1), "A folded reverse=%v", reverse)
	}
}
