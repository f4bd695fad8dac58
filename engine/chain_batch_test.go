package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// batchedEngine is an engine whose log holds three proposals written in one batch: the chain's
// start, then one ChainBatch entry (seq 2) naming the three.
func batchedEngine(t *testing.T) (*Engine, []*Result) {
	t.Helper()
	e := domainEngine(t, stockDomain(t, "", ""))
	// The three records wait for the flush: with the 50 ms linger, a busy machine could write
	// the first before the third is queued, and the tests below expect one batch entry.
	e.audit.linger = time.Hour // before any record is queued: the writer reads it once woken
	var runs []*Result
	for _, id := range []string{"A", "B", "C"} {
		runs = append(runs, propose(t, e, agent, setQty(1, id)))
	}
	require.NoError(t, e.audit.flush())
	return e, runs
}

// batchEntry reads the chain's entry seq.
func batchEntry(t *testing.T, e *Engine, seq int64) ChainEntry {
	t.Helper()
	var en ChainEntry
	ok, err := e.Store().GetSys(ChainCollection, chainID(seq), &en)
	require.NoError(t, err)
	require.True(t, ok)
	return en
}

// chainProblems verifies e's chain both ways a user can: runs verify (VerifyChain) and db check
// (a ChainVerifier fed the stored documents), which must agree.
func chainProblems(t *testing.T, e *Engine) string {
	t.Helper()
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	v := NewChainVerifier()
	entries, err := e.Store().ListSys(ChainCollection)
	require.NoError(t, err)
	for _, d := range entries {
		require.NoError(t, v.AddEntry(d.JSON))
	}
	recs, err := e.Store().ListSys(auditCollection)
	require.NoError(t, err)
	for _, d := range recs {
		require.NoError(t, v.AddRecord(d.JSON))
	}
	check := v.Report()
	assert.Equal(t, rep.Problems, check.Problems, "runs verify and db check disagree")
	return fmt.Sprint(rep.Problems)
}

// A batch of queued records is chained by one entry that names each record write, in order, with
// the hash of the record as stored; the chain verifies.
func TestChainBatchEntry(t *testing.T) {
	e, runs := batchedEngine(t)
	en := batchEntry(t, e, 2)
	assert.Equal(t, ChainBatch, en.Event)
	assert.Empty(t, en.RunID)
	require.Len(t, en.Records, 3)
	for i, r := range en.Records {
		assert.Equal(t, runs[i].RunID, r.RunID)
		assert.Equal(t, ChainProposed, r.Event)
		assert.Equal(t, agent.Name, r.By)
		var raw json.RawMessage
		ok, err := e.Store().GetSys(auditCollection, r.RunID, &raw)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, sha256Hex(raw), r.Record)
	}
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Equal(t, 2, rep.Entries, "the start and one batch entry")
	assert.Equal(t, 3, rep.Records)

	// A decision chains its own entry after it.
	_, err = applyBy(e, runs[0].RunID, bob)
	require.NoError(t, err)
	assert.Equal(t, ChainApproved, batchEntry(t, e, 3).Event)
	assert.Equal(t, "[]", chainProblems(t, e), "no problems")
}

// Each way a batch entry can be damaged is found: edited or reordered in place (its hash), a
// record write left out or pointed at another run and sealed again (the records then do not
// match), and a batch entry whose form is wrong.
func TestChainBatchEntryDamage(t *testing.T) {
	ctx := context.Background()
	put := func(t *testing.T, e *Engine, en ChainEntry, reseal bool) {
		t.Helper()
		if reseal { // as an attacker would: sealed again, and the head moved to it
			en.seal()
			require.NoError(t, e.Store().PutSys(ctx, ChainCollection, chainHeadID, chainHead{Seq: en.Seq, Hash: en.Hash}))
		}
		require.NoError(t, e.Store().PutSys(ctx, ChainCollection, chainID(en.Seq), en))
	}
	t.Run("edited", func(t *testing.T) {
		e, _ := batchedEngine(t)
		en := batchEntry(t, e, 2)
		en.Records[1].By = "someone-else"
		put(t, e, en, false)
		assert.Contains(t, chainProblems(t, e), "chain entry 2 does not match its hash")
	})
	t.Run("reordered", func(t *testing.T) {
		e, _ := batchedEngine(t)
		en := batchEntry(t, e, 2)
		en.Records[0], en.Records[2] = en.Records[2], en.Records[0]
		put(t, e, en, false)
		assert.Contains(t, chainProblems(t, e), "chain entry 2 does not match its hash")
	})
	t.Run("a record left out", func(t *testing.T) {
		e, runs := batchedEngine(t)
		en := batchEntry(t, e, 2)
		en.Records = en.Records[:2]
		put(t, e, en, true)
		assert.Contains(t, chainProblems(t, e), runs[2].RunID+" has a record but no chain entry")
	})
	t.Run("naming the wrong record", func(t *testing.T) {
		e, runs := batchedEngine(t)
		en := batchEntry(t, e, 2)
		en.Records[0].RunID = runs[1].RunID // run A's write said to be run B's, B's kept after it
		en.Records[1], en.Records[0] = en.Records[0], en.Records[1]
		put(t, e, en, true)
		msgs := chainProblems(t, e)
		assert.Contains(t, msgs, runs[0].RunID+" has a record but no chain entry")
		assert.Contains(t, msgs, "run "+runs[1].RunID+": its record does not match the hash chained at entry 2")
	})
	t.Run("a run of its own", func(t *testing.T) {
		e, runs := batchedEngine(t)
		en := batchEntry(t, e, 2)
		en.RunID = runs[0].RunID
		put(t, e, en, true)
		assert.Contains(t, chainProblems(t, e), "chain entry 2 is a batch entry but names a run or record of its own")
	})
	t.Run("no records", func(t *testing.T) {
		e, _ := batchedEngine(t)
		en := batchEntry(t, e, 2)
		en.Records = nil
		put(t, e, en, true)
		assert.Contains(t, chainProblems(t, e), "chain entry 2 is a batch entry that lists no record writes")
	})
	t.Run("a record write without its hash", func(t *testing.T) {
		e, _ := batchedEngine(t)
		en := batchEntry(t, e, 2)
		en.Records[1].Record = ""
		put(t, e, en, true)
		assert.Contains(t, chainProblems(t, e), "chain entry 2 is a batch entry whose record write 2 lacks its run, event or hash")
	})
	t.Run("records on another entry", func(t *testing.T) {
		e, runs := batchedEngine(t)
		en := batchEntry(t, e, 2)
		en.Event, en.RunID, en.Record, en.By = ChainProposed, runs[0].RunID, en.Records[0].Record, agent.Name
		put(t, e, en, true)
		assert.Contains(t, chainProblems(t, e), "chain entry 2 lists records, but it is not a batch entry")
	})
}

// A prune removes runs named by a batch entry that also names a kept run: the entry stays (it
// chains the kept run), and the chain still verifies, the removed runs' records gone.
func TestChainBatchEntryPrune(t *testing.T) {
	e, clk := clockedEngine(t)
	ctx := context.Background()
	old, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	clk.advance(40 * 24 * time.Hour)
	kept, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	require.NoError(t, e.audit.flush()) // one batch: the old run and the kept one
	en := batchEntry(t, e, 2)
	require.Equal(t, ChainBatch, en.Event)
	require.Len(t, en.Records, 2)

	rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Removed)
	_, err = e.Record(old.RunID)
	require.Error(t, err)
	after, err := e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, after.OK(), "%v", after.Problems)
	assert.Equal(t, 1, after.Records)
	_, err = e.Record(kept.RunID)
	require.NoError(t, err)
}
