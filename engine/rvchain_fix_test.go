package engine

// chainfix: the two HIGH findings of the rvchain review, fixed (an edit laundered by a decision:
// ChainEntry.Read; a record removed after a prune: the checkpoint's PrunedRuns set), on bbolt and
// PostgreSQL, with runs verify and db check (the store's Check fed to a ChainVerifier) agreeing;
// and logs of an older starplan, whose entries carry neither field, still verifying.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/store/pg"
)

// rvBackend opens a fresh demo store for a test and runs db check on it (the store's Check with
// the options internal/cli's db check gives it); check may close e (bbolt's check needs the file).
type rvBackend struct {
	name  string
	open  func(t *testing.T) store.Store
	check func(t *testing.T, e *Engine, opts store.CheckOptions) *store.CheckReport
}

func rvBackends() []rvBackend {
	var dir string
	return []rvBackend{{
		name: "bolt",
		open: func(t *testing.T) store.Store { dir = t.TempDir(); return openStore(t, dir) },
		check: func(t *testing.T, e *Engine, opts store.CheckOptions) *store.CheckReport {
			require.NoError(t, e.Close())
			require.NoError(t, e.Store().Close())
			rep, err := bolt.Check(dir, opts)
			require.NoError(t, err)
			return rep
		},
	}, {
		name: "pg",
		open: func(t *testing.T) store.Store {
			if os.Getenv(pgtest.EnvDSN) == "" { // .ci/run sets it; no throw-away cluster of our own here
				t.Skip("no PostgreSQL: .ci/run go test ./engine -run Chainfix runs it")
			}
			st, err := pg.Create(context.Background(), pgtest.DSN(t), store.Inventory(), pg.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			return st
		},
		check: func(t *testing.T, e *Engine, opts store.CheckOptions) *store.CheckReport {
			require.NoError(t, e.audit.flush())
			rep, err := e.Store().(*pg.Store).Check(context.Background(), opts)
			require.NoError(t, err)
			return rep
		},
	}}
}

// rvBoth is what runs verify and then db check report (they must agree), e done with after.
func rvBoth(t *testing.T, b rvBackend, e *Engine) string {
	t.Helper()
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	chain := NewChainVerifier()
	crep := b.check(t, e, chain.CheckOptions())
	require.True(t, crep.OK(), "%v", crep.Problems)
	verify, check := fmt.Sprint(rep.Problems), fmt.Sprint(chain.Report().Problems)
	assert.Equal(t, verify, check, "runs verify and db check disagree")
	return verify
}

func TestChainfixOnBothStores(t *testing.T) {
	for _, b := range rvBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			engine := func(t *testing.T) (*Engine, *clock) {
				clk := &clock{now: fixedNow}
				e, err := New(b.open(t), Options{Now: clk.Now})
				require.NoError(t, err)
				t.Cleanup(func() { e.Close() }) // before the store's (bbolt's check closes both first)
				return e, clk
			}
			run := func(t *testing.T, e *Engine, name string) *Result {
				res, err := e.Run(ctx, Request{Reply: example(t, name)})
				require.NoError(t, err)
				require.NoError(t, e.audit.flush())
				return res
			}
			t.Run("prune then remove a kept record", func(t *testing.T) {
				e, clk := engine(t)
				run(t, e, "01_round_under_100.star")
				clk.advance(40 * 24 * time.Hour)
				kept := run(t, e, "03_two_item_order.star")
				_, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
				require.NoError(t, err)
				require.Equal(t, "[]", chainProblems(t, e))
				_, err = e.Store().PruneSys(ctx, auditCollection, func(d store.SysRecord) (bool, error) { return d.ID == kept.RunID, nil })
				require.NoError(t, err)
				assert.Contains(t, rvBoth(t, b, e), "the runs missing: "+kept.RunID)
			})
			t.Run("edit before a decision", func(t *testing.T) {
				e, _ := engine(t)
				res := run(t, e, "02_purchase_wayfarer.star")
				require.True(t, res.Pending)
				raw := string(rvRaw(t, e, res.RunID))
				edited := strings.Replace(raw, `"request":"`, `"request":"edited `, 1)
				require.NotEqual(t, raw, edited)
				rvPutRaw(t, e, res.RunID, json.RawMessage(edited))
				_, err := applyBy(e, res.RunID, bob)
				require.NoError(t, err)
				assert.Contains(t, rvBoth(t, b, e), "run "+res.RunID+": the decision chained at entry 3 read a record that is not the one chained at entry 2: the record was edited before the decision")
			})
		})
	}
}

// An edit before a rejection shows too (decisions.go), and one before an apply that conflicts
// (its record queued, chained in a batch entry's record write).
func TestChainfixEditBeforeRejectionOrConflict(t *testing.T) {
	ctx := context.Background()
	edit := func(t *testing.T, e *Engine, id string) {
		raw := string(rvRaw(t, e, id))
		rvPutRaw(t, e, id, json.RawMessage(strings.Replace(raw, `"origin":"`, `"origin":"x`, 1)))
	}
	e := domainEngine(t, stockDomain(t, "", ""))
	rejected := propose(t, e, agent, setQty(1, "A"))
	conflicted := propose(t, e, agent, setQty(2, "B"))
	mover := propose(t, e, agent, setQty(3, "B"))
	require.NoError(t, e.audit.flush())
	_, err := applyBy(e, mover.RunID, bob)
	require.NoError(t, err)
	require.Equal(t, "[]", chainProblems(t, e))
	edit(t, e, rejected.RunID)
	edit(t, e, conflicted.RunID)
	_, _, err = e.RejectWith(ctx, rejected.RunID, RejectOptions{Feedback: "no", By: alice})
	require.NoError(t, err)
	res, err := applyBy(e, conflicted.RunID, bob)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome)
	require.NoError(t, e.audit.flush())
	msgs := chainProblems(t, e)
	assert.Contains(t, msgs, "run "+rejected.RunID+": the decision chained at entry")
	assert.Contains(t, msgs, "run "+conflicted.RunID+": the decision chained at entry")
	assert.NotContains(t, msgs, mover.RunID)
}

// A record added outside starplan (a forged pending run) and then applied: the apply's entry is
// the run's first, and it read a record no entry chains, of a run not older than the chain.
func TestChainfixForgedRecordDecidedShows(t *testing.T) {
	e := domainEngine(t, stockDomain(t, "", ""))
	res := propose(t, e, agent, setQty(1, "A"))
	require.NoError(t, e.audit.flush())
	const forged = "r_0000000000000000000000zz"
	rvPutRaw(t, e, forged, json.RawMessage(strings.ReplaceAll(string(rvRaw(t, e, res.RunID)), res.RunID, forged)))
	require.Contains(t, chainProblems(t, e), "run "+forged+" has a record but no chain entry")
	_, err := applyBy(e, forged, bob)
	require.NoError(t, err)
	assert.Contains(t, chainProblems(t, e), "run "+forged+": the decision chained at entry 3 read a record that no entry before it chains")
}

// Prunes accumulate: with a pending run pinning the chain's start (its entries stay, and all
// after them), a second prune that removes nothing of the chain still accounts for the runs it
// removed, and the set carries over; a kept record removed between the two prunes is not
// excused by the second (nor are its entries removed), so it keeps showing.
func TestChainfixSecondPrune(t *testing.T) {
	ctx := context.Background()
	e, clk := clockedEngine(t)
	run := func(name string) *Result {
		res, err := e.Run(ctx, Request{Reply: example(t, name)})
		require.NoError(t, err)
		require.NoError(t, e.audit.flush())
		return res
	}
	prune := func(removed int) {
		rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
		require.NoError(t, err)
		if removed >= 0 {
			require.Equal(t, removed, rep.Removed)
		}
	}
	pending := run("02_purchase_wayfarer.star")
	require.True(t, pending.Pending)
	run("01_round_under_100.star")
	clk.advance(40 * 24 * time.Hour)
	run("01_round_under_100.star") // removed by the second prune
	prune(1)
	assert.Equal(t, "[]", chainProblems(t, e))
	clk.advance(40 * 24 * time.Hour)
	run("01_round_under_100.star")
	prune(1)
	assert.Equal(t, "[]", chainProblems(t, e), "a second prune, the chain's start pinned")
	en := batchEntry(t, e, readHead(t, e).Seq)
	assert.Equal(t, ChainCheckpoint, en.Event)
	assert.Equal(t, 2, en.PrunedRuns, "the first prune's run and the second's")

	// The attacker removes a kept record between two prunes.
	clk.advance(40 * 24 * time.Hour)
	victim := run("01_round_under_100.star")
	clk.advance(10 * 24 * time.Hour)
	run("01_round_under_100.star")
	_, err := e.Store().PruneSys(ctx, auditCollection, func(d store.SysRecord) (bool, error) { return d.ID == victim.RunID, nil })
	require.NoError(t, err)
	require.Contains(t, chainProblems(t, e), "run "+victim.RunID+": its record is missing, and no prune removed it")
	clk.advance(25 * 24 * time.Hour)
	prune(1) // the run 75 days old
	msgs := chainProblems(t, e)
	assert.Contains(t, msgs, "the runs missing: ")
	assert.Contains(t, msgs, victim.RunID, "the next prune does not excuse it")
	// Nor any prune after, and its entries stay.
	_, _, err = e.RejectWith(ctx, pending.RunID, RejectOptions{Feedback: "no", By: alice})
	require.NoError(t, err)
	clk.advance(40 * 24 * time.Hour)
	run("01_round_under_100.star")
	clk.advance(40 * 24 * time.Hour)
	prune(-1)
	assert.Contains(t, chainProblems(t, e), victim.RunID)
}

func readHead(t *testing.T, e *Engine) chainHead {
	var h chainHead
	ok, err := e.Store().GetSys(ChainCollection, chainHeadID, &h)
	require.NoError(t, err)
	require.True(t, ok)
	return h
}

// rvOldForm rewrites e's chain as a starplan before chainForm wrote it: no form, no read_sha256,
// no pruned_runs, each entry sealed again and linked to the one before (the first keeps its link).
func rvOldForm(t *testing.T, e *Engine) {
	t.Helper()
	ctx := context.Background()
	docs, err := e.Store().ListSys(ChainCollection)
	require.NoError(t, err)
	var es []ChainEntry
	for _, d := range docs {
		if d.ID == chainHeadID {
			continue
		}
		var en ChainEntry
		require.NoError(t, json.Unmarshal(d.JSON, &en))
		es = append(es, en)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
	for i := range es {
		en := &es[i]
		en.Form, en.Read, en.PrunedRuns, en.PrunedRunsSHA256 = 0, "", 0, ""
		for k := range en.Records {
			en.Records[k].Read = ""
		}
		if i > 0 {
			en.Prev = es[i-1].Hash
		}
		raw, err := en.sealed()
		require.NoError(t, err)
		require.NotContains(t, string(raw), "form")
		require.NotContains(t, string(raw), "read_sha256")
		require.NotContains(t, string(raw), "pruned_runs")
		require.NoError(t, e.Store().PutSys(ctx, ChainCollection, chainID(en.Seq), json.RawMessage(raw)))
	}
	last := es[len(es)-1]
	require.NoError(t, e.Store().PutSys(ctx, ChainCollection, chainHeadID, chainHead{Seq: last.Seq, Hash: last.Hash}))
	e.chain.mu.Lock()
	e.chain.head = chainHead{Seq: last.Seq, Hash: last.Hash}
	e.chain.mu.Unlock()
}

// A log an older starplan wrote (entries without form, read_sha256 or pruned_runs: decisions,
// a batch, a prune's checkpoint) verifies, and so does this starplan's log written on after it:
// decisions on runs the old one proposed, and a prune after the old checkpoint.
func TestChainfixOldFormLogVerifies(t *testing.T) {
	ctx := context.Background()
	e, clk := clockedEngine(t)
	run := func(name string) *Result {
		res, err := e.Run(ctx, Request{Reply: example(t, name)})
		require.NoError(t, err)
		return res
	}
	pending := run("02_purchase_wayfarer.star") // pins the chain's start
	run("01_round_under_100.star")
	clk.advance(40 * 24 * time.Hour)
	a, b, c := run("02_purchase_wayfarer.star"), run("03_two_item_order.star"), run("02_purchase_wayfarer.star")
	require.NoError(t, e.audit.flush()) // a batch entry
	_, err := e.ApplyWith(ctx, a.RunID, ApplyOptions{By: bob})
	require.NoError(t, err)
	_, _, err = e.RejectWith(ctx, b.RunID, RejectOptions{Feedback: "no", By: alice})
	require.NoError(t, err)
	_, err = e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, "[]", chainProblems(t, e))

	rvOldForm(t, e)
	assert.Equal(t, "[]", chainProblems(t, e), "the older starplan's log")

	// This starplan goes on: a decision on a run the old one chained, a prune after its checkpoint.
	_, err = e.ApplyWith(ctx, c.RunID, ApplyOptions{By: bob}) // conflicts or applies: a decision either way
	require.NoError(t, err)
	clk.advance(40 * 24 * time.Hour)
	run("01_round_under_100.star")
	clk.advance(40 * 24 * time.Hour)
	_, err = e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
	require.NoError(t, err)
	assert.Equal(t, "[]", chainProblems(t, e), "the old log, written on by this starplan")
	_, err = e.Record(pending.RunID)
	require.NoError(t, err)
}

// An entry of this starplan's form that lacks the field it must carry is damage: a decision's
// without read_sha256, a checkpoint without pruned_runs_sha256 (each sealed again, as the
// chain's last, so only the missing field is wrong).
func TestChainfixNewEntryMissingItsFieldShows(t *testing.T) {
	ctx := context.Background()
	reseal := func(t *testing.T, e *Engine, change func(*ChainEntry)) {
		h := readHead(t, e)
		en := batchEntry(t, e, h.Seq)
		change(&en)
		en.seal()
		require.NoError(t, e.Store().PutSys(ctx, ChainCollection, chainID(en.Seq), en))
		require.NoError(t, e.Store().PutSys(ctx, ChainCollection, chainHeadID, chainHead{Seq: en.Seq, Hash: en.Hash}))
	}
	t.Run("decision", func(t *testing.T) {
		e := domainEngine(t, stockDomain(t, "", ""))
		res := propose(t, e, agent, setQty(1, "A"))
		_, err := applyBy(e, res.RunID, bob)
		require.NoError(t, err)
		require.Equal(t, "[]", chainProblems(t, e))
		reseal(t, e, func(en *ChainEntry) {
			require.Equal(t, ChainApproved, en.Event)
			require.NotEmpty(t, en.Read)
			en.Read = ""
		})
		assert.Contains(t, chainProblems(t, e), "chains a decision on run "+res.RunID+" without the hash of the record it read (read_sha256)")
	})
	t.Run("checkpoint", func(t *testing.T) {
		e, clk := clockedEngine(t)
		_, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
		require.NoError(t, err)
		clk.advance(40 * 24 * time.Hour)
		_, err = e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
		require.NoError(t, err)
		require.Equal(t, "[]", chainProblems(t, e))
		reseal(t, e, func(en *ChainEntry) {
			require.Equal(t, ChainCheckpoint, en.Event)
			require.NotEmpty(t, en.PrunedRunsSHA256)
			en.PrunedRunsSHA256 = ""
		})
		assert.Contains(t, chainProblems(t, e), "is a prune's checkpoint that does not name the runs prunes removed (pruned_runs_sha256)")
	})
}
