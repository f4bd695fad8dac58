package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/hangdog"
	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// The store under every kind of concurrent use at once, while its file outgrows bbolt's map of
// it again and again (each remap waits for every open read transaction and holds up new ones):
// walks of a table read from the file (a bbolt read transaction each, for the whole walk),
// reads of it into memory in the background (abandoned by runs whose time is up), index
// lookups, conflict checks and applies with system documents (the tables' write lock, bolt.mu),
// batches of system documents (the audit log's: the tables' read lock while they commit), large
// imports (which stop reads into memory), GetSys in read transactions of its own, listings
// under bolt.mu, prunes, and Close while a read into memory and a batch are under way. A hang
// of any operation for hangdog.DefaultHang fails the test with every goroutine's stack (watchdog).
// After each round: acknowledged documents are found, sales are serially equivalent, db check
// is clean.
//
// Each round is of a store of its own, smaller than mapAheadMin when it opens: a larger one is
// mapped a GiB ahead (mapAhead), and its map would not grow in a round. The normal tier runs
// two rounds (one of each kind) of a few batches past the map's growth; the long tier twelve,
// of larger tables and more of everything.
func TestRvlockStoreUnderGrowingCommitsAndLongReads(t *testing.T) {
	t.Parallel()
	onDisk(t, -1) // the test's own residencies, per round
	dog := hangdog.New(t, 0)
	rows := testtier.Size(3000, 12_000) // a file below mapAheadMin (an import of 20,000 rows reserves 16 MiB)
	rounds := testtier.Size(2, 12)
	salesPer, importsPer, batchesPast := testtier.Size(4, 8), testtier.Size(1, 2), testtier.Size(2, 4)
	ctx := context.Background()
	var remaps, loads, walks, applied, conflicts, imported, inWalk, besideWalk atomic.Int64
	items := []string{"SG001", "SG002", "SG003"}

	for round := range rounds {
		dir := bigInventory(t, rows)
		var ack acked
		ack.m = map[string]int{}
		sold := map[string]int64{}
		var soldMu sync.Mutex
		// Odd rounds walk the file only (long read transactions); even ones read the table into
		// memory after a few walks (loads in the background).
		promote := int64(-1)
		if round%2 == 0 {
			promote = 200
		}
		r := newResidency(-1, promote)
		s, err := Open(dir, Options{residency: &r})
		require.NoError(t, err)
		mt := s.tables["inventory"]
		begin := mt.begin
		mt.begin = func() (tableRead, error) { loads.Add(1); return begin() }
		{
			require.Zero(t, mapAhead(filepath.Join(dir, dbFileName)), "a store that is not mapped ahead")
			v := s.Stage()
			for _, it := range items {
				_, err := tbl(t, v, "inventory").Update(table.Row{"quantity_in_stock": int64(1_000_000)}, table.Query{Where: where("item_id", it)})
				require.NoError(t, err)
			}
			require.NoError(t, v.Apply(ctx))
			// The collection the listings read has its index from the start (a store without
			// one answers ErrNoSysIndex, and the engine builds it).
			require.NoError(t, s.PutSysDocs(ctx, store.SysDoc{Collection: "runs", ID: "first", Value: map[string]any{"v": 1}, Index: &store.SysIndex{Order: "0", Group: "done"}}))
		}
		mapStart := mapped(t, s)
		stop := make(chan struct{})
		var wg, writers sync.WaitGroup
		worker := func(name string, ws *sync.WaitGroup, fn func(name string) bool) {
			ws.Add(1)
			go func() {
				defer ws.Done()
				for i := 0; ; i++ {
					if ws == &wg {
						select {
						case <-stop:
							return
						default:
						}
					}
					if !fn(fmt.Sprintf("%s#%d", name, i)) {
						return
					}
				}
			}()
		}
		// Batch writers, until the map has grown (and a few batches more); how often a batch
		// grew it while a walk of the file was under way is counted.
		var grown atomic.Bool
		for w := range 2 {
			n, after := 0, 0
			worker(fmt.Sprintf("batch%d", w), &writers, func(op string) bool {
				if n++; n > 256 || after > batchesPast {
					return false
				}
				defer dog.Busy(op, "PutSysDocs")()
				id := fmt.Sprintf("r%d-w%d-%d", round, w, n)
				docs := append(bigDocs(id, 1<<20), store.SysDoc{Collection: "decisions", ID: id, Value: map[string]any{"v": 1}})
				before, walking := mapped(t, s), inWalk.Load() > 0
				if !assert.NoError(t, s.PutSysDocs(ctx, docs...)) {
					return false
				}
				ack.set("decisions/"+id, 1)
				if m := mapped(t, s); m > before {
					grown.Store(true)
					if walking && inWalk.Load() > 0 {
						besideWalk.Add(1)
					}
				}
				if grown.Load() {
					after++
				}
				return true
			})
		}
		// Appliers: a sale each, with a document in its commit; a conflict is tried again.
		for a := range 2 {
			n := 0
			worker(fmt.Sprintf("apply%d", a), &writers, func(op string) bool {
				if n++; n > salesPer {
					return false
				}
				item := items[(a+n)%len(items)]
				for {
					done := dog.Busy(op, "sale")
					sg := s.Stage()
					p, err := trySell(sg, item)
					if err != nil && sg.Moved() {
						done()
						continue
					}
					if !assert.NoError(t, err) {
						done()
						return false
					}
					checked := s.Conflicts(ctx, p)
					id := fmt.Sprintf("r%d-a%d-%d", round, a, n)
					err = s.ApplyPending(ctx, p, nil, store.SysDoc{Collection: "runs", ID: id, Value: map[string]any{"v": 3}, Index: &store.SysIndex{Order: "z" + id, Group: "applied"}})
					done()
					if errors.Is(checked, store.ErrConflict) {
						assert.ErrorIs(t, err, store.ErrConflict, "the check said conflict, the apply committed")
					}
					if errors.Is(err, store.ErrConflict) {
						conflicts.Add(1)
						continue
					}
					if !assert.NoError(t, err) {
						return false
					}
					applied.Add(1)
					ack.set("runs/"+id, 3)
					soldMu.Lock()
					sold[item]++
					soldMu.Unlock()
					return true
				}
			})
		}
		// A large import now and then: it stops a read into memory of the table, grows the file
		// under the tables' write lock.
		{
			n := 0
			worker("import", &writers, func(op string) bool {
				if n++; n > importsPer {
					return false
				}
				var rows []string
				for i := range bulkPut {
					rows = append(rows, fmt.Sprintf(`{"item_id": "IMP%d-%d-%05d", "name": "N%d", "quantity_in_stock": 1, "price": 2}`, round, n, i, i%5))
				}
				defer dog.Busy(op, "Import")()
				_, err := s.Import(ctx, "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), JSON, Upsert)
				if !assert.NoError(t, err) {
					return false
				}
				imported.Add(bulkPut)
				return true
			})
		}
		// Walkers: whole walks, indexed lookups (the last of a value), gets and counts, in runs
		// with a time limit; some limits end the run while its walk waits for a read into memory.
		for w := range 2 {
			worker(fmt.Sprintf("walk%d", w), &wg, func(op string) bool {
				defer dog.Busy(op, "walk")()
				inWalk.Add(1)
				defer inWalk.Add(-1)
				limit := 20 * time.Second
				if w == 1 {
					limit = time.Duration(1+len(op)%7) * time.Millisecond
				}
				rctx, cancel := context.WithTimeout(ctx, limit)
				defer cancel()
				inv := tbl(t, s.StageFor(rctx, store.RunLimits{}), "inventory")
				for _, q := range []table.Query{wholeWalk, {Where: where("name", "N1"), Reverse: true, Limit: 1}} {
					rows, err := inv.Find(q)
					if err != nil {
						if !assert.ErrorIs(t, err, context.DeadlineExceeded, op) {
							return false
						}
						continue
					}
					assert.NotEmpty(t, rows, op)
				}
				if _, _, err := inv.Get("SG001"); err != nil && !assert.ErrorIs(t, err, context.DeadlineExceeded, op) {
					return false
				}
				if _, err := inv.Count(table.Query{Where: where("price", map[string]any{"$lt": 3})}); err != nil && !assert.ErrorIs(t, err, context.DeadlineExceeded, op) {
					return false
				}
				walks.Add(1)
				return true
			})
		}
		// Lookers: what was acknowledged before a look began is found; a miss is no error.
		for g := range 2 {
			worker(fmt.Sprintf("getsys%d", g), &wg, func(op string) bool {
				looked := 0
				for key, min := range ack.snapshot() { // in no particular order
					if looked++; looked > 16 {
						break
					}
					coll, id, _ := cut(key)
					var v map[string]any
					done := dog.Busy(op, "GetSys "+key)
					ok, err := s.GetSys(coll, id, &v)
					done()
					if !assert.NoError(t, err, key) || !assert.True(t, ok, "%s was acknowledged before this read began", key) {
						return false
					}
					assert.GreaterOrEqual(t, int(v["v"].(float64)), min, key)
				}
				var v map[string]any
				defer dog.Busy(op, "GetSys miss")()
				ok, err := s.GetSys("runs", "never-written", &v)
				return assert.NoError(t, err) && assert.False(t, ok)
			})
		}
		// Listings under bolt.mu, and prunes of another collection.
		worker("list", &wg, func(op string) bool {
			defer dog.Busy(op, "listing")()
			if _, err := s.SysStats("runs"); !assert.NoError(t, err) {
				return false
			}
			taken := 0
			_, err := s.ScanSys("runs", store.SysScan{Reverse: true, Next: func(store.SysEntry) (bool, bool) { taken++; return true, taken < 20 }})
			if !assert.NoError(t, err) {
				return false
			}
			_, err = s.PruneSys(ctx, "scratch", func(store.SysRecord) (bool, error) { return true, nil })
			if !assert.NoError(t, err) {
				return false
			}
			return assert.NoError(t, s.PutSys(ctx, "scratch", "x", map[string]any{"v": 1}))
		})

		writers.Wait()
		close(stop)
		wg.Wait()
		grew := mapped(t, s) > mapStart
		if grew {
			remaps.Add(1)
		}
		assert.True(t, grew, "round %d: the map did not grow (%d bytes mapped)", round, mapStart)

		// Close while a run's walk has begun a read into memory and a batch commits.
		cctx, cancel := context.WithCancel(ctx)
		started := make(chan struct{})
		go func() {
			close(started)
			tbl(t, s.StageFor(cctx, store.RunLimits{}), "inventory").Find(wholeWalk) // its error is Close's or the cancel's
		}()
		batchErr := make(chan error, 1)
		go func() { batchErr <- s.PutSysDocs(ctx, bigDocs(fmt.Sprintf("r%d-close", round), 1<<20)...) }()
		<-started
		cancel()
		func() {
			defer dog.Busy("close", "Close")()
			require.NoError(t, s.Close())
		}()
		if err := <-batchErr; err != nil {
			assert.ErrorContains(t, err, "store is closed")
		}
		var v map[string]any
		_, err = s.GetSys("runs", "never-written", &v)
		assert.Error(t, err, "a look after Close")

		s = openAt(t, dir)
		for _, it := range items {
			r, ok := committed(t, s, "inventory", it)
			require.True(t, ok)
			assert.Equal(t, 1_000_000-sold[it], r["quantity_in_stock"].(int64), "round %d, %s: one unit per sale that committed", round, it)
		}
		for key, min := range ack.snapshot() {
			coll, id, _ := cut(key)
			var v map[string]any
			ok, err := s.GetSys(coll, id, &v)
			require.NoError(t, err)
			require.True(t, ok, key)
			assert.GreaterOrEqual(t, int(v["v"].(float64)), min, key)
		}
		checkStore(t, s, dir)
		require.NoError(t, s.Close())
	}
	t.Logf("%d rounds, maps grown in %d (%d times by a batch that began and ended during walks), %d operations: %d walks, %d reads into memory begun, %d sales (%d conflicts), %d rows imported",
		rounds, remaps.Load(), besideWalk.Load(), dog.Ops(), walks.Load(), loads.Load(), applied.Load(), conflicts.Load(), imported.Load())
}
