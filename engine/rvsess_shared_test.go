package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

// rvsess: three servers on one store they share (bbolt under one lock, as sharedStore), each
// keeping what it queues until a flush, take turns at legal operations chosen by a seeded
// generator: proposals, applies and approvals (two needed), rejections, data moved under
// pending runs, applies that fail with starplan's own error, runs applied as they run, flushes,
// prunes with --pending, a server closed and opened again. One operation at a time, so each
// seed is one interleaving, the same every time. After each operation the log must hold: a run
// answered applied is never rejected and a run answered rejected never applied, a rejected
// run's record says so, and at the end (everything flushed) runs verify and db check find
// nothing wrong. Every error must be one a user's situation explains (a *RunError, an
// *ApprovalError, the injected lost connection); anything else is reported with the seed's
// steps.

type rvsessWorld struct {
	t      *testing.T
	dir    string
	st     store.Store
	lock   *sync.Mutex
	clk    *clock
	stores []*rvrejStore
	es     []*Engine
	runs   []string
	// applied and rejected: what the engines answered.
	applied, rejected map[string]bool
	log               []string
	closed            bool
}

func rvsessOpenWorld(t *testing.T, n int) *rvsessWorld {
	t.Helper()
	w := &rvsessWorld{t: t, dir: t.TempDir(), lock: &sync.Mutex{}, clk: &clock{now: fixedNow},
		applied: map[string]bool{}, rejected: map[string]bool{}}
	st, err := bolt.Open(w.dir, bolt.Options{Domain: stockDomain(t, `{"required_approvals": 2}`, "")})
	require.NoError(t, err)
	w.st = st
	for i := 0; i < n; i++ {
		w.stores = append(w.stores, &rvrejStore{Store: st, lock: sharedStore{st, w.lock}})
		w.es = append(w.es, nil)
		w.reopen(i)
	}
	t.Cleanup(func() {
		if !w.closed {
			for _, e := range w.es {
				e.Close()
			}
			st.Close()
		}
	})
	return w
}

func (w *rvsessWorld) reopen(i int) {
	e, err := New(w.stores[i], Options{Now: w.clk.Now})
	require.NoError(w.t, err)
	e.audit.linger = time.Hour // what it queues waits for a flush (or a decision's commit)
	w.es[i] = e
}

// expected reports whether err is a user's situation.
func rvsessExpected(err error) bool {
	var re *RunError
	var ae *ApprovalError
	return err == nil || errors.As(err, &re) || errors.As(err, &ae) || strings.Contains(err.Error(), "connection to the database was lost")
}

func (w *rvsessWorld) step(r *rand.Rand) error {
	ctx := context.Background()
	i := r.IntN(len(w.es))
	e := w.es[i]
	pick := func() string {
		if len(w.runs) == 0 {
			return "none"
		}
		return w.runs[max(0, len(w.runs)-1-r.IntN(4))] // the last few: most are still pending
	}
	approvers := []access.Principal{alice, bob, carol, root}
	items := []string{"A", "B", "C"}
	switch op := r.IntN(20); op {
	case 0, 1, 7, 19: // a proposal
		res, err := e.Run(ctx, Request{Reply: setQty(r.IntN(50), items[r.IntN(3)]), By: agent})
		w.log = append(w.log, fmt.Sprintf("%d propose -> %v", i, err))
		if err != nil {
			return err
		}
		w.runs = append(w.runs, res.RunID)
	case 2, 3, 12, 13, 14, 15, 16: // an apply or approval
		id, by := pick(), approvers[r.IntN(4)]
		if r.IntN(3) == 0 {
			w.stores[i].failNext.Store(true)
		}
		res, err := applyBy(e, id, by)
		w.stores[i].failNext.Store(false)
		w.log = append(w.log, fmt.Sprintf("%d apply %s by %s -> %v %v", i, short(id), by.Name, outcomeOf(res), err))
		if err != nil {
			return err
		}
		if res.Applied {
			if w.rejected[id] {
				return fmt.Errorf("run %s applied after a rejection was answered recorded", id)
			}
			w.applied[id] = true
		}
	case 4, 17, 18: // a rejection
		id := pick()
		_, recorded, err := e.RejectWith(ctx, id, RejectOptions{Feedback: "no", By: approvers[r.IntN(4)]})
		w.log = append(w.log, fmt.Sprintf("%d reject %s -> %v %v", i, short(id), recorded, err))
		if err != nil {
			return err
		}
		if recorded {
			if w.applied[id] {
				return fmt.Errorf("run %s rejected after an apply was answered", id)
			}
			w.rejected[id] = true
		}
	case 5: // the data moves
		it := items[r.IntN(3)]
		setItem(w.t, w.st, it, 100+r.IntN(50))
		w.log = append(w.log, "data "+it)
	case 6: // a flush
		err := e.audit.flush()
		w.log = append(w.log, fmt.Sprintf("%d flush -> %v", i, err))
		return err
	case 8: // a run applied as it runs
		res, err := e.Run(ctx, Request{Reply: setQty(r.IntN(50), items[r.IntN(3)]), By: root, Apply: true})
		w.log = append(w.log, fmt.Sprintf("%d run+apply -> %v %v", i, outcomeOf(res), err))
		if err != nil {
			return err
		}
		w.runs = append(w.runs, res.RunID)
		if res.Applied {
			w.applied[res.RunID] = true
		}
	case 9: // time passes; a prune of the old runs, pending ones too
		w.clk.advance(time.Duration(1+r.IntN(20)) * 24 * time.Hour)
		w.log = append(w.log, fmt.Sprintf("%d time", i))
		if r.IntN(2) == 0 {
			rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour, Pending: true})
			w.log = append(w.log, fmt.Sprintf("%d prune -> %+v %v", i, rep, err))
			return err
		}
	case 10: // a server closed and opened again
		if r.IntN(3) > 0 {
			w.log = append(w.log, "nothing")
			return nil
		}
		err := e.Close()
		w.log = append(w.log, fmt.Sprintf("%d close -> %v", i, err))
		if err != nil {
			return err
		}
		w.reopen(i)
	case 11: // a reader
		_, err := e.Record(pick())
		var re *RunError
		if errors.As(err, &re) {
			err = nil
		}
		w.log = append(w.log, fmt.Sprintf("%d record -> %v", i, err))
		return err
	}
	return nil
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func outcomeOf(res *Result) string {
	if res == nil {
		return "-"
	}
	return fmt.Sprintf("%s pending=%v applied=%v", res.Outcome, res.Pending, res.Applied)
}

// check holds the store to what the engines answered; with flush, every server's queue is
// written first and runs verify runs too.
func (w *rvsessWorld) check(flush bool) []string {
	var problems []string
	if flush {
		for i, e := range w.es {
			if err := e.audit.flush(); err != nil {
				problems = append(problems, fmt.Sprintf("server %d's flush: %v", i, err))
			}
		}
	}
	ds, err := w.es[0].Decisions()
	require.NoError(w.t, err)
	for _, id := range w.runs {
		rec, err := w.es[0].storedRecord(id)
		if err != nil {
			continue // pruned
		}
		_, rejected := ds[id]
		switch {
		case rejected && rec.Applied:
			problems = append(problems, fmt.Sprintf("run %s rejected and applied", id))
		case rejected && (rec.RejectedBy == "" || rec.Pending):
			problems = append(problems, fmt.Sprintf("run %s rejected but its record says %s", id, recordState(rec)))
		case w.applied[id] && !rec.Applied:
			problems = append(problems, fmt.Sprintf("run %s answered applied but its record says %s", id, recordState(rec)))
		case w.rejected[id] && !rejected:
			problems = append(problems, fmt.Sprintf("run %s answered rejected but no decision is stored", id))
		}
	}
	if flush {
		rep, err := w.es[0].VerifyChain()
		require.NoError(w.t, err)
		for _, p := range rep.Problems {
			problems = append(problems, "runs verify: "+p.Message)
		}
	}
	return problems
}

func TestRvsessSharedStoreSequences(t *testing.T) {
	seeds := 20
	if n, err := strconv.Atoi(os.Getenv("RVSESS_SEEDS")); err == nil {
		seeds = n
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := rvsessOpenWorld(t, 3)
			r := rand.New(rand.NewPCG(uint64(seed), 7))
			for n := 0; n < 60; n++ {
				if err := w.step(r); !rvsessExpected(err) {
					t.Fatalf("seed %d step %d: %v\n%s", seed, n, err, strings.Join(w.log, "\n"))
				}
				if p := w.check(n%20 == 19); len(p) > 0 {
					t.Fatalf("seed %d step %d:\n%s\n--- steps:\n%s", seed, n, strings.Join(p, "\n"), strings.Join(w.log, "\n"))
				}
			}
			for i, e := range w.es {
				require.NoError(t, e.Close(), "server %d", i)
			}
			w.closed = true
			require.NoError(t, w.st.Close())
			v := NewChainVerifier()
			rep, err := bolt.Check(w.dir, v.CheckOptions())
			require.NoError(t, err)
			require.True(t, rep.OK(), "db check: %v", rep.Problems)
			require.Empty(t, v.Report().Problems)
		})
	}
}
