package bolt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// rvmixed: an attacker's review of the store's concurrency changes of issue 32 (mixed4):
// system batches under the tables' read lock, GetSys in a read transaction of its own,
// ConflictChecker under the read lock.

// trySell stages the sale of one unit of item (its stock down, a transaction after the last) and
// returns the pending change, or an error (no require: it runs on the test's goroutines).
func trySell(v *Stage, item string) (*store.Pending, error) {
	inv, ok := v.Table("inventory")
	if !ok {
		return nil, errors.New("no inventory")
	}
	txs, ok := v.Table("transactions")
	if !ok {
		return nil, errors.New("no transactions")
	}
	r, found, err := inv.Get(item)
	if err != nil || !found {
		return nil, fmt.Errorf("item %s: %v %v", item, found, err)
	}
	if _, err := inv.Update(table.Row{"quantity_in_stock": r["quantity_in_stock"].(int64) - 1}, table.Query{Where: where("item_id", item)}); err != nil {
		return nil, err
	}
	last, err := txs.Find(table.Query{Reverse: true, Limit: 1})
	if err != nil || len(last) != 1 {
		return nil, fmt.Errorf("last transaction: %v", err)
	}
	if _, err := txs.Insert(table.Row{
		"customer_name": "Alice", "transaction_summary": "one " + item, "transaction_amount": r["price"],
		"balance_after_transaction": last[0]["balance_after_transaction"].(float64) + r["price"].(float64),
		"timestamp":                 "2025-01-02T10:00:00",
	}); err != nil {
		return nil, err
	}
	return v.Pending(), nil
}

// acked is what writers were told is committed: id -> the highest version acknowledged.
type acked struct {
	mu sync.Mutex
	m  map[string]int
}

func (a *acked) set(id string, v int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m[id] < v {
		a.m[id] = v
	}
}

func (a *acked) snapshot() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.m))
	for k, v := range a.m {
		out[k] = v
	}
	return out
}

// TestRvmixedSysBatchesBesideApplies: batches of system documents (under the tables' read lock
// now), applies with system documents in their commit, conflict checks and GetSys reads (hits,
// misses, in read transactions of their own) all at once. Afterwards: every read saw at least
// what was acknowledged before it began (no lost or stale committed document, no miss of one),
// a conflict check's "conflict" was the apply's answer too, the tables hold exactly the sales
// that committed (serially equivalent), and db check finds the file's counts, digests and
// indexes right, after a reopen too.
func TestRvmixedSysBatchesBesideApplies(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(fmt.Sprintf("disk=%v", disk), func(t *testing.T) {
			if disk {
				onDisk(t, -1)
			}
			rvmixedStress(t)
		})
	}
}

func rvmixedStress(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	ctx := context.Background()
	rounds := testtier.Size(12, 400)
	items := []string{"SG001", "SG002", "SG003"}
	v := s.Stage()
	for _, it := range items { // stock for every sale
		_, err := tbl(t, v, "inventory").Update(table.Row{"quantity_in_stock": int64(100000)}, table.Query{Where: where("item_id", it)})
		require.NoError(t, err)
	}
	require.NoError(t, v.Apply(ctx))
	start := map[string]int64{}
	for _, it := range items {
		r, ok := committed(t, s, "inventory", it)
		require.True(t, ok)
		start[it] = r["quantity_in_stock"].(int64)
	}
	txStart := len(find(t, tbl(t, s.Stage(), "transactions"), table.Query{}))

	var ack acked
	ack.m = map[string]int{}
	var sold [3]atomic.Int64
	var checkedConflicts, applyConflicts atomic.Int64
	var wg, wgW sync.WaitGroup // readers, writers
	stop := make(chan struct{})
	// Batch writers: new documents and new versions of earlier ones, in indexed and plain
	// collections, as the audit log's batches and decisions are.
	for w := range 2 {
		wgW.Add(1)
		go func() {
			defer wgW.Done()
			for i := range rounds {
				id := fmt.Sprintf("w%d-%d", w, i)
				docs := []store.SysDoc{
					{Collection: "runs", ID: id, Value: map[string]any{"v": 1}, Index: &store.SysIndex{Order: fmt.Sprintf("%08d", i), Group: "pending"}},
					{Collection: "decisions", ID: id, Value: map[string]any{"v": 1}},
				}
				if i > 0 {
					prev := fmt.Sprintf("w%d-%d", w, i-1)
					docs = append(docs, store.SysDoc{Collection: "runs", ID: prev, Value: map[string]any{"v": 2}, Index: &store.SysIndex{Order: fmt.Sprintf("%08d", i-1), Group: "done"}})
				}
				if err := s.PutSysDocs(ctx, docs...); !assert.NoError(t, err) {
					return
				}
				ack.set("runs/"+id, 1)
				ack.set("decisions/"+id, 1)
				if i > 0 {
					ack.set("runs/"+fmt.Sprintf("w%d-%d", w, i-1), 2)
				}
			}
		}()
	}
	// Appliers: sales of one unit, with a document in the apply's commit; a conflict is retried.
	for a := range 3 {
		wgW.Add(1)
		go func() {
			defer wgW.Done()
			for i := range rounds {
				item := items[(a+i)%len(items)]
				for {
					sg := s.Stage()
					p, err := trySell(sg, item)
					if err != nil && sg.Moved() {
						continue // its reads straddled a commit: the engine runs such a plan again
					}
					if !assert.NoError(t, err) {
						return
					}
					checked := s.Conflicts(ctx, p)
					id := fmt.Sprintf("a%d-%d", a, i)
					err = s.ApplyPending(ctx, p, nil, store.SysDoc{Collection: "runs", ID: id, Value: map[string]any{"v": 3}, Index: &store.SysIndex{Order: "z" + id, Group: "applied"}})
					if errors.Is(checked, store.ErrConflict) {
						checkedConflicts.Add(1)
						// Versions only grow: what the check found moved has not moved back.
						assert.ErrorIs(t, err, store.ErrConflict, "the check said conflict, the apply committed")
					}
					if errors.Is(err, store.ErrConflict) {
						applyConflicts.Add(1)
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					ack.set("runs/"+id, 3)
					sold[(a+i)%len(items)].Add(1)
					break
				}
			}
		}()
	}
	// Readers: what was acknowledged before a read began is found, at that version or later;
	// an id never written is a miss without error.
	var reads, misses atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for key, min := range ack.snapshot() {
					coll, id, _ := cut(key)
					var v map[string]any
					ok, err := s.GetSys(coll, id, &v)
					reads.Add(1)
					if !assert.NoError(t, err, key) || !assert.True(t, ok, "%s was acknowledged before this read began", key) {
						return
					}
					assert.GreaterOrEqual(t, int(v["v"].(float64)), min, "%s: older than acknowledged", key)
				}
				var v map[string]any
				ok, err := s.GetSys("runs", "never-written", &v)
				misses.Add(1)
				assert.NoError(t, err)
				assert.False(t, ok)
				ok, err = s.GetSys("decisions", "never-written", &v)
				assert.NoError(t, err)
				assert.False(t, ok)
			}
		}()
	}
	// Stages reading beside the batches: a row read is a committed one.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			inv, _ := s.Stage().Table("inventory")
			rows, err := inv.Find(table.Query{})
			assert.NoError(t, err)
			assert.NotEmpty(t, rows)
		}
	}()
	wgW.Wait() // the writers and appliers end; then the readers
	close(stop)
	wg.Wait()

	for i, it := range items {
		r, ok := committed(t, s, "inventory", it)
		require.True(t, ok)
		assert.Equal(t, start[it]-sold[i].Load(), r["quantity_in_stock"].(int64), "%s: one unit per sale that committed", it)
	}
	var total int64
	for i := range sold {
		total += sold[i].Load()
	}
	assert.Equal(t, int64(3*rounds), total)
	assert.Len(t, find(t, tbl(t, s.Stage(), "transactions"), table.Query{}), txStart+int(total))
	stats, err := s.SysStats("runs")
	require.NoError(t, err)
	assert.Equal(t, 2*rounds, stats["done"].Count+2, "each writer's last is still pending")
	assert.Equal(t, 3*rounds, stats["applied"].Count)
	t.Logf("reads %d, misses %d, conflicts checked %d of %d", reads.Load(), misses.Load(), checkedConflicts.Load(), applyConflicts.Load())
	checkStore(t, s, dir)
	s2 := openAt(t, dir)
	checkStore(t, s2, dir)
}

func cut(key string) (coll, id string, ok bool) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}
