package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// Between two steps of a prune, the engine's applies and rejections go on (the apply lock is a
// step's, not the whole prune's: a server's every apply and rejection waited for the whole
// prune, a minute at 1M runs). Each later step judges a run as its record then says: an old
// pending run applied between steps stays (applied now), one rejected goes, and one whose apply
// conflicted (its record queued by the apply, not yet written) goes with its conflict record,
// which the step writes first (never after its run went). The log verifies, bbolt and
// PostgreSQL, runs verify and db check.
func TestRvPruneDecisionsBetweenSteps(t *testing.T) {
	for _, b := range rvBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			clk := &clock{now: fixedNow}
			e, err := New(b.open(t), Options{Now: clk.Now})
			require.NoError(t, err)
			defer func() { e.Close() }()
			e.audit.linger = time.Hour // before any record is queued: p[2]'s conflict record stays queued until a flush
			run := func(name string) string {
				t.Helper()
				res, err := e.Run(ctx, Request{Reply: example(t, name)})
				require.NoError(t, err)
				require.NoError(t, e.audit.flush())
				clk.advance(time.Second)
				return res.RunID
			}
			var p, r [3]string
			for i := range 3 {
				p[i] = run("02_purchase_wayfarer.star") // pending; each buys the same row
				r[i] = run("01_round_under_100.star")
			}
			clk.advance(40 * 24 * time.Hour)
			fresh := run("01_round_under_100.star")
			e.pruneBatch = 1
			between := 0
			e.pruneStepped = func() {
				between++
				if !e.applyMu.TryLock() {
					t.Errorf("step %d: the apply lock is held between two steps of a prune", between)
					return
				}
				e.applyMu.Unlock()
				if between != 1 {
					return
				}
				// The first step kept p[0] (read, passed) and removed r[0].
				_, err := e.Apply(ctx, p[0])
				assert.NoError(t, err)
				_, _, err = e.RejectWith(ctx, p[1], RejectOptions{Feedback: "no", By: alice})
				assert.NoError(t, err)
				res, err := e.Apply(ctx, p[2])
				assert.NoError(t, err)
				assert.Equal(t, OutcomeConflict, res.Outcome)
			}
			rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
			require.NoError(t, err)
			assert.Equal(t, 5, rep.Removed, "r[0..2], p[1] rejected and p[2] in conflict")
			assert.ElementsMatch(t, []string{p[0], fresh}, ids(t, e))
			rec, err := e.Record(p[0])
			require.NoError(t, err)
			assert.True(t, rec.Applied)
			assert.Equal(t, "[]", rvBoth(t, b, e))
		})
	}
}

// A prune whose context ends between two steps stops there: the report says what the steps done
// removed, with the context's error, the next step removed nothing, and the log verifies.
func TestRvPruneCancelledBetweenSteps(t *testing.T) {
	for _, b := range rvBackends() {
		t.Run(b.name, func(t *testing.T) {
			clk := &clock{now: fixedNow}
			e, err := New(b.open(t), Options{Now: clk.Now})
			require.NoError(t, err)
			defer func() { e.Close() }()
			var old []string
			for range 4 {
				res, err := e.Run(context.Background(), Request{Reply: example(t, "01_round_under_100.star")})
				require.NoError(t, err)
				require.NoError(t, e.audit.flush())
				old = append(old, res.RunID)
			}
			clk.advance(40 * 24 * time.Hour)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e.pruneBatch = 2
			e.pruneStepped = cancel
			rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, 2, rep.Removed)
			assert.Equal(t, 1, rep.Steps)
			assert.Len(t, ids(t, e), 2, "the second step removed nothing")
			assert.Equal(t, "[]", rvBoth(t, b, e))
		})
	}
}

// Two prunes of one engine at once (serve's retention and runs prune through the server): the
// apply lock is a step's, so their steps interleave. Each reads the chain again after the
// other's checkpoint (chainPrune.catchUp), every old run goes once, and the log verifies.
func TestRvPruneTwoPrunesOfOneEngineInterleave(t *testing.T) {
	for _, b := range rvBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			clk := &clock{now: fixedNow}
			e, err := New(b.open(t), Options{Now: clk.Now})
			require.NoError(t, err)
			defer func() { e.Close() }()
			var pending string
			for i := range 9 {
				name := "01_round_under_100.star"
				if i == 4 {
					name = "02_purchase_wayfarer.star"
				}
				res, err := e.Run(ctx, Request{Reply: example(t, name)})
				require.NoError(t, err)
				require.NoError(t, e.audit.flush())
				if i == 4 {
					pending = res.RunID
				}
			}
			clk.advance(40 * 24 * time.Hour)
			month := PruneOptions{OlderThan: 30 * 24 * time.Hour}
			e.pruneBatch = 2
			depth, inner := 0, 0
			e.pruneStepped = func() {
				if depth > 0 { // a step of the inner prune
					inner++
					return
				}
				depth++
				rep, err := e.Prune(ctx, PruneOptions{OlderThan: 20 * 24 * time.Hour}) // another age
				depth--
				assert.NoError(t, err)
				assert.NotZero(t, rep.Removed)
			}
			rep, err := e.Prune(ctx, month)
			require.NoError(t, err)
			assert.NotZero(t, rep.Removed)
			assert.NotZero(t, inner, "the inner prune made several steps")
			assert.Equal(t, []string{pending}, ids(t, e))
			assert.Equal(t, "[]", rvBoth(t, b, e))
		})
	}
}

// A log partly older than the chain, pruned in steps of one run: the first steps find the
// chain not begun (no checkpoint), a run recorded between two steps begins it, and the later
// steps and a second prune (another age, --pending) write checkpoints over the start and the
// unchained records' removal. The log verifies after each prune.
func TestRvPrunePartlyChainedLogInSteps(t *testing.T) {
	for _, b := range rvBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st := b.open(t)
			var docs []store.SysDoc
			for i := range 6 {
				r := &RunRecord{ID: fmt.Sprintf("old_%d", i), Time: fixedNow.Add(-time.Duration(100-i) * 24 * time.Hour),
					Request: "an old run", Program: "answer_text = 'ok'\nSTATUS = 'success'\n", Outcome: OutcomeOK, Status: "success", Pending: i%3 == 2}
				docs = append(docs, store.SysDoc{Collection: AuditCollection, ID: r.ID, Value: r})
			}
			require.NoError(t, st.PutSysDocs(ctx, docs...))
			clk := &clock{now: fixedNow}
			e, err := New(st, Options{Now: clk.Now})
			require.NoError(t, err)
			defer func() { e.Close() }()
			verify := func(what string) {
				t.Helper()
				rep, err := e.VerifyChain()
				require.NoError(t, err)
				assert.Empty(t, rep.Problems, what)
			}
			e.pruneBatch = 1
			var chained []string
			e.pruneStepped = func() {
				if len(chained) < 2 {
					res, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
					assert.NoError(t, err)
					assert.NoError(t, e.audit.flush())
					chained = append(chained, res.RunID)
				}
			}
			rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
			require.NoError(t, err)
			assert.Equal(t, 4, rep.Removed)
			verify("after the first prune")
			clk.advance(40 * 24 * time.Hour)
			e.pruneStepped = nil
			rep, err = e.Prune(ctx, PruneOptions{OlderThan: 35 * 24 * time.Hour, Pending: true})
			require.NoError(t, err)
			assert.Equal(t, 4, rep.Removed, "the two old pending runs and the two chained ones")
			assert.Empty(t, ids(t, e))
			assert.Equal(t, "[]", rvBoth(t, b, e))
		})
	}
}
