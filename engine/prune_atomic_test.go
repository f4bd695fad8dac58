package engine

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/pg"
)

// errDiskFull is the fault checkpointFault injects.
var errDiskFull = errors.New("no space left on device (injected)")

// checkpointFault is a store whose write of the failAt-th prune checkpoint fails, as a full
// disk would fail it: the fault between a prune's removal of its runs and the hash chain's
// checkpoint that excuses them.
type checkpointFault struct {
	store.Store
	failAt atomic.Int32 // the checkpoint write that fails, counting from 1; 0: none
	seen   atomic.Int32
}

// fails counts a write holding a checkpoint and reports whether it is the one that fails.
func (s *checkpointFault) fails(docs []store.SysDoc) bool {
	for _, d := range docs {
		if en, ok := d.Value.(*ChainEntry); ok && en.Event == ChainCheckpoint {
			return s.seen.Add(1) == s.failAt.Load()
		}
	}
	return false
}

func (s *checkpointFault) PutSysDocs(ctx context.Context, docs ...store.SysDoc) error {
	if s.fails(docs) {
		return errDiskFull
	}
	return s.Store.PutSysDocs(ctx, docs...)
}

func (s *checkpointFault) PruneSysOldest(ctx context.Context, p store.SysPrune) (store.SysPruned, error) {
	if then := p.Then; then != nil {
		p.Then = func(removed []string) (store.SysAfter, error) {
			after, err := then(removed)
			if err == nil && s.fails(after.Put) {
				err = errDiskFull
			}
			return after, err
		}
	}
	return s.Store.PruneSysOldest(ctx, p)
}

// A prune whose checkpoint cannot be written removes nothing, and a prune in steps that fails
// part way leaves the steps before complete, each excused by its own checkpoint: runs verify
// and db check report nothing, on bbolt and on PostgreSQL. (In two commits, the records went
// and the checkpoint did not: every pruned run was reported as removed outside starplan, for
// good.)
func TestPruneIsAllOrNothing(t *testing.T) {
	for _, b := range rvBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			raw := b.open(t)
			fault := &checkpointFault{Store: raw}
			var st store.Store = fault
			if ss, ok := raw.(store.SysSerializer); ok { // PostgreSQL: the chain's lock goes on working
				st = struct {
					*checkpointFault
					store.SysSerializer
				}{fault, ss}
			}
			clk := &clock{now: fixedNow}
			e, err := New(st, Options{Now: clk.Now})
			require.NoError(t, err)
			defer func() { e.Close() }()
			var old []string
			for range 5 {
				res, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
				require.NoError(t, err)
				require.NoError(t, e.audit.flush()) // an entry each, so a prune in steps cuts the chain at each
				old = append(old, res.RunID)
				// A minute apart: a prune goes oldest first, and runs of one instant are in the
				// order of their random ids (the oldest two were any two of them, 1 in 15 times).
				clk.advance(time.Minute)
			}
			rejected, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
			require.NoError(t, err)
			_, _, err = e.RejectWith(ctx, rejected.RunID, RejectOptions{Feedback: "no", By: alice})
			require.NoError(t, err)
			old = append(old, rejected.RunID)
			clk.advance(40 * 24 * time.Hour)
			fresh, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
			require.NoError(t, err)
			verify := func(what string) {
				t.Helper()
				rep, err := e.VerifyChain()
				require.NoError(t, err)
				assert.Empty(t, rep.Problems, what)
			}
			month := PruneOptions{OlderThan: 30 * 24 * time.Hour}

			fault.failAt.Store(1)
			rep, err := e.Prune(ctx, month)
			require.ErrorIs(t, err, errDiskFull)
			assert.Zero(t, rep.Removed)
			assert.ElementsMatch(t, append([]string{fresh.RunID}, old...), ids(t, e), "nothing removed")
			verify("after a prune whose checkpoint failed")

			// In steps of two runs, the second step's checkpoint fails: the first step stands.
			e.pruneBatch = 2
			fault.seen.Store(0)
			fault.failAt.Store(2)
			rep, err = e.Prune(ctx, month)
			require.ErrorIs(t, err, errDiskFull)
			assert.Equal(t, 2, rep.Removed, "the report says what the completed step removed")
			assert.ErrorContains(t, err, "the steps done stand, each whole: runs removed 2, in steps 1")
			assert.Equal(t, 1, rep.Steps)
			assert.ElementsMatch(t, append([]string{fresh.RunID}, old[2:]...), ids(t, e), "the oldest two removed")
			verify("after a prune that failed at its second step")

			fault.failAt.Store(0)
			rep, err = e.Prune(ctx, month)
			require.NoError(t, err)
			assert.Equal(t, 4, rep.Removed)
			assert.Equal(t, 2, rep.Steps)
			assert.Equal(t, []string{fresh.RunID}, ids(t, e))
			decisions, err := e.Decisions()
			require.NoError(t, err)
			assert.Empty(t, decisions, "the rejected run's decision went with it")
			verify("after the prune completed")

			// db check agrees with runs verify, on the store itself.
			require.NoError(t, e.Close())
			e, err = New(raw, Options{Now: clk.Now})
			require.NoError(t, err)
			assert.Equal(t, "[]", rvBoth(t, b, e))
		})
	}
}

// Between two steps of a prune, others append to the chain: this engine's dry runs and, on
// PostgreSQL, another server's runs and its rejection of an old pending run, which a later step
// then removes. The next step reads only what they appended (chainPrune.catchUp), and the log
// verifies after the prune.
func TestPruneStepsFollowWritesBetweenThem(t *testing.T) {
	for _, b := range rvBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			var st, st2 store.Store
			if b.name == "pg" { // and another server on the same database
				if os.Getenv(pgtest.EnvDSN) == "" {
					t.Skip("no PostgreSQL: .ci/run go test ./engine -run PruneSteps runs it")
				}
				dsn := pgtest.DSN(t)
				ps, err := pg.Create(ctx, dsn, store.Inventory(), pg.Options{})
				require.NoError(t, err)
				t.Cleanup(func() { ps.Close() })
				st = ps
				ps2, err := pg.Open(ctx, dsn, pg.Options{})
				require.NoError(t, err)
				t.Cleanup(func() { ps2.Close() })
				st2 = ps2
			} else {
				st = b.open(t)
			}
			clk := &clock{now: fixedNow}
			e, err := New(st, Options{Now: clk.Now})
			require.NoError(t, err)
			defer func() { e.Close() }()
			other := e
			if st2 != nil {
				other, err = New(st2, Options{Now: clk.Now})
				require.NoError(t, err)
				defer other.Close()
			}
			run := func(e *Engine, name string) *Result {
				t.Helper()
				res, err := e.Run(ctx, Request{Reply: example(t, name)})
				require.NoError(t, err)
				require.NoError(t, e.audit.flush())
				return res
			}
			var pending []string
			for i := range 6 {
				if i%3 == 1 {
					pending = append(pending, run(e, "02_purchase_wayfarer.star").RunID)
				} else {
					run(e, "01_round_under_100.star")
				}
			}
			clk.advance(40 * 24 * time.Hour)
			between := 0
			e.pruneBatch = 1
			e.pruneStepped = func() {
				between++
				run(other, "01_round_under_100.star")
				if between == 1 && other != e { // the run the next step offers: the chain's prefix goes past it
					_, _, err := other.RejectWith(ctx, pending[0], RejectOptions{Feedback: "no", By: alice})
					require.NoError(t, err)
				}
			}
			rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
			require.NoError(t, err)
			want := 4
			if other != e {
				want = 5 // the run rejected between two steps, with its decision
			}
			assert.Equal(t, want, rep.Removed)
			assert.Equal(t, want, rep.Steps)
			assert.Equal(t, want, between)
			if other != e {
				require.NoError(t, other.Close())
			}
			assert.Equal(t, "[]", rvBoth(t, b, e))
		})
	}
}
