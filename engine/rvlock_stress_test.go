package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// rvlock: an attacker's review of the store's locks and bbolt read transactions under
// concurrent use, through the engine: the audit writer's batches, decisions, listings, prunes.

// rvlockStore makes a demo store in dir whose inventory holds rows more than bolt reads into
// memory at Open (4,096), Wayfarer stock for every purchase, and reopens it: the table is read
// from the file, a bbolt read transaction per walk, until walks have read 65,536 of its rows,
// then into memory in the background.
func rvlockStore(t *testing.T, dir string, rows int) *bolt.Store {
	t.Helper()
	st := openStore(t, dir)
	var b strings.Builder
	b.WriteString("[")
	for i := range rows {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"item_id": "RV%06d", "name": "Frame %d", "description": "square acetate frame %d", "quantity_in_stock": %d, "price": %d}`, i, i%50, i, i%9, 20+i%200)
	}
	b.WriteString("]")
	_, err := st.Import(context.Background(), "inventory", strings.NewReader(b.String()), bolt.JSON, bolt.Upsert)
	require.NoError(t, err)
	sg := st.StageFor(context.Background(), store.RunLimits{})
	tb, _ := sg.Table("inventory")
	_, err = tb.Update(table.Row{"quantity_in_stock": int64(1_000_000)}, table.Query{Where: map[string]any{"item_id": "SG002"}})
	require.NoError(t, err)
	require.NoError(t, st.ApplyPending(context.Background(), sg.Pending(), nil))
	require.NoError(t, st.Close())
	return openStore(t, dir)
}

func fileSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, "data.db"))
	require.NoError(t, err)
	return fi.Size()
}

// The engine under every kind of concurrent use while the audit log's batches make the file
// outgrow bbolt's map of it (each remap waits for every open read transaction and holds up new
// ones): dry runs of purchases and of reports that walk a table read from the file (long read
// transactions, then a read into memory in the background; some runs' time ends while their
// walk waits for it), applies and rejections (the apply lock, the writer's lock, the chain's,
// the tables' write lock), the audit writer's batches (the tables' read lock while they
// commit), listings under the writer's read lock, looks at runs (GetSys in read transactions of
// their own), prunes, runs verify, then Engine.Close and Store.Close while a report's read into
// memory may be under way. Each round is a fresh store whose file ends larger than bbolt mapped
// it at Open (see the check): in the normal tier just past that, in the long tier more than
// twice as large as it began, and in three times as many rounds. A hang of any
// operation for hangdog.DefaultHang fails with every goroutine's stack. Afterwards: the data holds
// exactly the purchases applied, runs verify and db check are clean.
func TestRvlockEngineUnderGrowingBatchesAndLongReads(t *testing.T) {
	t.Parallel()
	dog := hangdog.New(t, 0)
	ctx := context.Background()
	rounds := testtier.Size(2, 6)
	purchase := example(t, "02_purchase_wayfarer.star")
	// A report over the whole table (a filter no index answers), with a long comment: a record
	// of about 12 KB, so that batches grow the file quickly.
	report := "# " + strings.Repeat("padding ", 1500) + "\n" + example(t, "01_round_under_100.star")
	for round := range rounds {
		dir := t.TempDir()
		st := rvlockStore(t, dir, 4500)
		var tick atomic.Int64
		e, err := New(st, Options{Now: func() time.Time { return fixedNow.Add(time.Duration(tick.Add(1)) * time.Millisecond) }})
		require.NoError(t, err)
		stockBefore := row(t, st, "inventory", "SG002")["quantity_in_stock"].(int64)
		txBefore := len(allRows(t, st, "transactions"))
		start := fileSize(t, dir)
		// bbolt maps a file of less than 16 MiB (a larger one is mapped a GiB ahead) to the
		// power of two at or above its size at Open, and grows the file past the map only after
		// growing the map: a file past that power of two outgrew its map.
		require.Less(t, start, int64(16<<20), "the check below holds of a file within bbolt's AllocSize")
		past := int64(32 << 10)
		for past < start {
			past *= 2
		}
		past = testtier.Size(past, 2*start)

		var made, applied runSet
		var runs, reports, conflicts, rejections, prunes, pruned, listings, looks atomic.Int64
		var grown atomic.Bool
		stop := make(chan struct{})
		var wg, wgR sync.WaitGroup
		busy := func(w, op string) func() { return dog.Busy(fmt.Sprintf("r%d-%s", round, w), op) }
		// Proposers and reporters: until the file is larger than past.
		for p := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2000 && !grown.Load(); i++ {
					req := Request{Reply: purchase, UserRequest: "buy"}
					if p >= 2 {
						req = Request{Reply: report, UserRequest: "round under 100?"}
					}
					rctx, cancel := context.WithCancel(ctx)
					if p == 3 && i%4 == 0 { // a run whose time ends while its walk may wait for a read into memory
						rctx, cancel = context.WithTimeout(ctx, time.Duration(1+i%20)*time.Millisecond)
					}
					done := busy(fmt.Sprintf("run%d", p), "Run")
					res, err := e.Run(rctx, req)
					done()
					cancel()
					if err == nil && res.Pending {
						made.add(res.RunID)
					}
					runs.Add(1)
					if p >= 2 {
						reports.Add(1)
					}
					if err != nil && !errors.Is(err, context.DeadlineExceeded) && !assert.NoError(t, err) {
						return
					}
					if fileSize(t, dir) > past {
						grown.Store(true)
					}
				}
			}()
		}
		for a := range 2 { // appliers
			wgR.Add(1)
			go func() {
				defer wgR.Done()
				r := rand.New(rand.NewPCG(uint64(a), uint64(round)))
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id, ok := made.pick(r)
					if i%2 == 0 {
						id, ok = made.newest()
					}
					if !ok {
						time.Sleep(time.Millisecond)
						continue
					}
					done := busy(fmt.Sprintf("apply%d", a), "Apply "+id)
					res, err := e.Apply(ctx, id)
					done()
					var re *RunError
					switch {
					case err == nil && res.Applied:
						applied.add(id)
					case err == nil && res.Outcome == OutcomeConflict:
						conflicts.Add(1)
					case errors.As(err, &re): // settled, or pruned
					default:
						assert.NoError(t, err, "apply %s", id)
						return
					}
				}
			}()
		}
		wgR.Add(1)
		go func() { // a rejector
			defer wgR.Done()
			r := rand.New(rand.NewPCG(7, uint64(round)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, ok := made.pick(r)
				if !ok {
					time.Sleep(time.Millisecond)
					continue
				}
				done := busy("reject", "Reject "+id)
				_, recorded, err := e.Reject(ctx, id, "no", "test")
				done()
				var re *RunError
				switch {
				case err == nil && recorded:
					rejections.Add(1)
				case err == nil || errors.As(err, &re):
				default:
					assert.NoError(t, err, "reject %s", id)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		wgR.Add(1)
		go func() { // a lister, paging by cursor, and stats
			defer wgR.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				opts := ListOptions{Limit: 7}
				for pages := 0; pages < 50; pages++ {
					done := busy("list", "ListRuns")
					page, err := e.ListRuns(opts)
					done()
					if !assert.NoError(t, err) {
						return
					}
					listings.Add(1)
					if page.NextCursor == "" {
						break
					}
					opts.Cursor = page.NextCursor
				}
				done := busy("list", "RunStats")
				_, err := e.RunStats()
				done()
				if !assert.NoError(t, err) {
					return
				}
			}
		}()
		wgR.Add(1)
		go func() { // looks at runs
			defer wgR.Done()
			r := rand.New(rand.NewPCG(9, uint64(round)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, ok := made.pick(r)
				if !ok {
					time.Sleep(time.Millisecond)
					continue
				}
				done := busy("show", "Show "+id)
				_, err := e.Show(id)
				done()
				var re *RunError
				if err != nil && !errors.As(err, &re) && !assert.NoError(t, err, "show %s", id) {
					return
				}
				looks.Add(1)
			}
		}()
		wgR.Add(1)
		go func() { // a pruner: settled runs older than 300 ticks of the clock
			defer wgR.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				done := busy("prune", "Prune")
				rep, err := e.Prune(ctx, PruneOptions{OlderThan: 300 * time.Millisecond})
				done()
				if !assert.NoError(t, err) {
					return
				}
				prunes.Add(1)
				pruned.Add(int64(rep.Removed))
			}
		}()
		wg.Wait()
		close(stop)
		wgR.Wait()
		end := fileSize(t, dir)
		assert.Greater(t, end, past, "round %d: the file did not outgrow its map (%d bytes at Open)", round, start)
		t.Logf("round %d: file %d KiB -> %d KiB; %d runs (%d reports, %d pending), %d applied, %d conflicts, %d rejections, %d listings, %d looks, %d prunes removed %d runs; %d operations",
			round, start>>10, end>>10, runs.Load(), reports.Load(), len(made.all()), len(applied.all()), conflicts.Load(), rejections.Load(), listings.Load(), looks.Load(), prunes.Load(), pruned.Load(), dog.Ops())

		n := int64(len(applied.all()))
		assert.Equal(t, stockBefore-3*n, row(t, st, "inventory", "SG002")["quantity_in_stock"].(int64), "three units per apply answered")
		assert.Len(t, allRows(t, st, "transactions"), txBefore+int(n), "a transaction per apply answered")

		// Close while a report's walk may have begun a read into memory.
		rctx, cancel := context.WithCancel(ctx)
		go func() {
			e.Run(rctx, Request{Reply: report, UserRequest: "round under 100?"}) // ends with the cancel or the close
		}()
		time.Sleep(time.Millisecond)
		cancel()
		func() {
			defer busy("close", "VerifyChain and Close")()
			rvmixedVerifyAndCheck(t, e, dir)
		}()
	}
}
