package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// rvmixed: an attacker's review of the engine's concurrency changes of issue 32 (mixed4): a
// conflict answered from the store's check before the commit's turn, reads of system documents
// beside commits, a listing showing a run whose dry run and conflict are both queued.

// rvmixedEngine is an engine over a fresh demo store in dir whose clock moves a millisecond per
// reading (distinct order keys, as a server's), with Wayfarer stock for every purchase.
func rvmixedEngine(t *testing.T, dir string) *Engine {
	t.Helper()
	st := openStore(t, dir)
	var tick atomic.Int64
	e, err := New(st, Options{Now: func() time.Time { return fixedNow.Add(time.Duration(tick.Add(1)) * time.Millisecond) }})
	require.NoError(t, err)
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	sg := st.StageFor(context.Background(), store.RunLimits{})
	tb, ok := sg.Table("inventory")
	require.True(t, ok)
	n, err := tb.Update(table.Row{"quantity_in_stock": int64(100000)}, table.Query{Where: map[string]any{"item_id": "SG002"}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, st.ApplyPending(context.Background(), sg.Pending(), nil))
	return e
}

// rvmixedVerifyAndCheck closes e after runs verify, then runs db check with the chain's and the
// records' checks (as internal/cli's db check does); both must be clean.
func rvmixedVerifyAndCheck(t *testing.T, e *Engine, dir string) {
	t.Helper()
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, rep.OK(), "runs verify: %v", rep.Problems)
	require.NoError(t, e.Close())
	require.NoError(t, e.Store().Close())
	chain := NewChainVerifier()
	crep, err := bolt.Check(dir, chain.CheckOptions())
	require.NoError(t, err)
	assert.True(t, crep.OK(), "db check: %v", crep.Problems)
	assert.True(t, chain.Report().OK(), "db check's chain: %v", chain.Report().Problems)
}

// runSet is a set of run ids safe for concurrent use.
type runSet struct {
	mu  sync.Mutex
	ids []string
	in  map[string]bool
}

func (s *runSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.in == nil {
		s.in = map[string]bool{}
	}
	if !s.in[id] {
		s.in[id] = true
		s.ids = append(s.ids, id)
	}
}

func (s *runSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.in[id]
}

func (s *runSet) pick(r *rand.Rand) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return "", false
	}
	return s.ids[r.IntN(len(s.ids))], true
}

// newest is the run added last.
func (s *runSet) newest() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return "", false
	}
	return s.ids[len(s.ids)-1], true
}

func (s *runSet) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// TestRvmixedDecisionsBesideReads: dry runs, applies (most of them conflicting: every purchase
// reads the ledger's last row), rejections, listings paged by cursor and looks at runs, all at
// once. Each apply and rejection answered is what the log holds afterwards (applied, conflict,
// rejected: exactly one, none lost), no run is both applied and rejected (a conflicted one may be rejected), a look at a run never
// goes back from a settled state to pending, each listing pass names a run at most once in
// cursor order, the data holds exactly the purchases applied (serial equivalence), and runs
// verify and db check are clean.
func TestRvmixedDecisionsBesideReads(t *testing.T) {
	dir := t.TempDir()
	e := rvmixedEngine(t, dir)
	ctx := context.Background()
	reply := example(t, "02_purchase_wayfarer.star")
	before := row(t, e.st, "inventory", "SG002")["quantity_in_stock"].(int64)
	txBefore := len(allRows(t, e.st, "transactions"))
	runs := testtier.Size(24, 300)

	var made, applied, conflicted, rejected runSet
	var wg, wgR sync.WaitGroup
	stop := make(chan struct{})
	for p := range 3 { // proposers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range runs / 3 {
				res, err := e.Run(ctx, Request{Reply: reply, UserRequest: "buy"})
				if !assert.NoError(t, err) {
					return
				}
				if assert.True(t, res.Pending, "proposer %d: %v", p, res.Diagnostics) {
					made.add(res.RunID)
				}
			}
		}()
	}
	for a := range 2 { // appliers
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(a), 1))
			for i := range runs / 2 {
				id, ok := made.pick(r)
				if i%2 == 0 { // the newest: an apply that can commit
					id, ok = made.newest()
				}
				if !ok {
					time.Sleep(time.Millisecond)
					continue
				}
				res, err := e.Apply(ctx, id)
				var re *RunError
				switch {
				case err == nil && res.Applied:
					applied.add(id)
				case err == nil && res.Outcome == OutcomeConflict:
					conflicted.add(id)
				case errors.As(err, &re):
				default:
					assert.NoError(t, err, "apply %s", id)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // a rejector
		defer wg.Done()
		r := rand.New(rand.NewPCG(7, 1))
		for range runs / 4 {
			id, ok := made.pick(r)
			if !ok {
				time.Sleep(time.Millisecond)
				continue
			}
			_, recorded, err := e.Reject(ctx, id, "no", "test")
			var re *RunError
			switch {
			case err == nil && recorded:
				rejected.add(id)
			case err == nil || errors.As(err, &re):
			default:
				assert.NoError(t, err, "reject %s", id)
			}
		}
	}()
	wgR.Add(2)
	go func() { // a lister, paging by cursor
		defer wgR.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			seen := map[string]bool{}
			last := ""
			opts := ListOptions{Limit: 5}
			for pages := 0; pages < 1000; pages++ {
				page, err := e.ListRuns(opts)
				if !assert.NoError(t, err) {
					return
				}
				for _, s := range page.Runs {
					assert.False(t, seen[s.ID], "run %s listed twice in one pass", s.ID)
					seen[s.ID] = true
					key := orderKey(s.Time) + "\x00" + s.ID
					assert.True(t, last == "" || key < last, "run %s out of order", s.ID)
					last = key
				}
				if page.NextCursor == "" {
					break
				}
				opts.Cursor = page.NextCursor
			}
		}
	}()
	go func() { // looks at runs: a settled run never looks pending again
		defer wgR.Done()
		r := rand.New(rand.NewPCG(9, 1))
		settled := map[string]string{}
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
			doc, err := e.Show(id)
			if !assert.NoError(t, err) {
				return
			}
			// A conflicted run may be rejected still (feedback for a replan: lifecycle_test).
			if was, ok := settled[id]; ok && !(was == StateConflict && doc.State == StateRejected) {
				assert.Equal(t, was, doc.State, "run %s: settled as %s, then looked %s", id, was, doc.State)
			}
			if doc.State != StatePending {
				settled[id] = doc.State
			}
		}
	}()
	wg.Wait()
	close(stop)
	wgR.Wait()

	for _, id := range applied.all() {
		assert.False(t, rejected.has(id), "run %s applied and rejected", id)
		assert.False(t, conflicted.has(id), "run %s applied and in conflict", id)
	}
	states := map[string]int{}
	for _, id := range made.all() {
		doc, err := e.Show(id)
		require.NoError(t, err)
		states[doc.State]++
		switch {
		case rejected.has(id):
			assert.Equal(t, StateRejected, doc.State, id)
		case applied.has(id):
			assert.Equal(t, StateApplied, doc.State, id)
		case conflicted.has(id):
			assert.Equal(t, StateConflict, doc.State, id)
		default:
			assert.Equal(t, StatePending, doc.State, "run %s: no apply or rejection answered for it", id)
		}
	}
	n := len(applied.all())
	assert.Equal(t, before-3*int64(n), row(t, e.st, "inventory", "SG002")["quantity_in_stock"].(int64), "three units per apply answered")
	assert.Len(t, allRows(t, e.st, "transactions"), txBefore+n, "a transaction per apply answered")
	page, err := e.ListRuns(ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, len(made.all())+0, countState(page, ""), "every run made, once")
	assert.Equal(t, states[StateApplied], page.States[StateApplied])
	assert.Equal(t, states[StateConflict], page.States[StateConflict])
	assert.Equal(t, states[StateRejected], page.States[StateRejected])
	t.Logf("runs %d: %v", len(made.all()), states)
	rvmixedVerifyAndCheck(t, e, dir)
}

// countState counts the listed runs of state ("" any).
func countState(page *RunPage, state string) int {
	n := 0
	for _, s := range page.Runs {
		if state == "" || s.State == state {
			n++
		}
	}
	return n
}

// allRows is every committed row of tbl.
func allRows(t *testing.T, st store.Store, tbl string) []table.Row {
	t.Helper()
	tb, ok := st.StageFor(context.Background(), store.RunLimits{}).Table(tbl)
	require.True(t, ok)
	rows, err := tb.Find(table.Query{})
	require.NoError(t, err)
	return rows
}
