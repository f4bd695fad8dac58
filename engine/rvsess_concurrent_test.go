package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/store/bolt"
)

// rvsess: three servers on one shared store (bbolt under one lock) decide the same runs at
// once: applies and approvals (two needed), rejections, failed applies, data moved, flushes.
// Whatever the interleaving, no run is both applied and rejected, an answered apply or
// rejection stands in the log, and runs verify and db check find nothing wrong. Errors must be
// a user's situation (a run-changed refusal among them) or the injected lost connection.
func TestRvsessSharedStoreConcurrently(t *testing.T) {
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("RVSESS_ROUNDS")); err == nil {
		rounds = n
	}
	for round := 1; round <= rounds; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			w := rvsessOpenWorld(t, 3)
			ctx := context.Background()
			var runs []string
			for i := 0; i < 6; i++ {
				runs = append(runs, propose(t, w.es[i%3], agent, setQty(10+i, []string{"A", "B", "C"}[i%3])).RunID)
			}
			for _, e := range w.es {
				require.NoError(t, e.audit.flush())
			}
			var mu sync.Mutex
			applied, rejected := map[string]bool{}, map[string]bool{}
			var bad []string
			var wg sync.WaitGroup
			for g := 0; g < 6; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(round*100+g), 3))
					e, st := w.es[g%3], w.stores[g%3]
					approvers := []access.Principal{alice, bob, carol, root}
					for n := 0; n < 25; n++ {
						mu.Lock()
						id := runs[r.IntN(len(runs))]
						mu.Unlock()
						var err error
						switch r.IntN(6) {
						case 0, 1, 2:
							if r.IntN(4) == 0 {
								st.failNext.Store(true)
							}
							var res *Result
							res, err = applyBy(e, id, approvers[r.IntN(4)])
							if err == nil && res.Applied {
								mu.Lock()
								applied[id] = true
								mu.Unlock()
							}
						case 3:
							var recorded bool
							_, recorded, err = e.RejectWith(ctx, id, RejectOptions{Feedback: "no", By: approvers[r.IntN(4)]})
							if err == nil && recorded {
								mu.Lock()
								rejected[id] = true
								mu.Unlock()
							}
						case 4:
							err = e.audit.flush()
						case 5:
							var res *Result
							res, err = e.Run(ctx, Request{Reply: setQty(r.IntN(9), "A"), By: agent})
							if err == nil && res.Pending {
								mu.Lock()
								runs = append(runs, res.RunID)
								mu.Unlock()
							}
						}
						if !rvsessExpected(err) {
							mu.Lock()
							bad = append(bad, fmt.Sprintf("server %d: %v", g%3, err))
							mu.Unlock()
						}
					}
				}(g)
			}
			wg.Wait()
			require.Empty(t, bad)
			for id := range applied {
				require.False(t, rejected[id], "run %s answered both applied and rejected", id)
			}
			w.runs = runs
			w.applied, w.rejected = applied, rejected
			require.Empty(t, w.check(true))
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
