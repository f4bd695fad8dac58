package engine

// rvchain: an attacker's review of the chain's batch entries (f88e081) and of records encoded
// before the writer's lock (ed7b62a).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// rvQueueing is an engine whose audit writer waits an hour before it writes a batch on its own:
// records stay queued until the test flushes.
func rvQueueing(t *testing.T) *Engine {
	t.Helper()
	e := domainEngine(t, stockDomain(t, "", ""))
	e.audit.linger = time.Hour // before any record is queued: the writer reads it once woken
	return e
}

// rvQueued runs a plan and returns its record as queued (run's).
func rvQueued(t *testing.T, e *Engine, plan string) *RunRecord {
	t.Helper()
	_, rec, err := e.run(context.Background(), Request{Reply: plan, By: agent})
	require.NoError(t, err)
	return rec
}

// rvReadSum is the hash of run id's record as a decision reads it (its newest version, queued or
// stored), which the decision's chain entry carries.
func rvReadSum(t *testing.T, e *Engine, id string) string {
	t.Helper()
	rec, err := e.decisionRecord(id)
	require.NoError(t, err)
	require.NotEmpty(t, rec.chainRead)
	return rec.chainRead
}

// Two versions of one run's record in one batch (its proposal, then a failed apply's record
// queued again, as applyRecord does): the batch entry lists both, in order, with each one's
// hash; the store keeps the last; the chain verifies; and the first version put back in its
// place shows.
func TestRvchainTwoVersionsInOneBatch(t *testing.T) {
	e := rvQueueing(t)
	other := rvQueued(t, e, setQty(2, "B"))
	rec := rvQueued(t, e, setQty(1, "A"))
	again := *rec
	again.chainRead = rvReadSum(t, e, rec.ID) // as a decision reads it
	again.ApplyError, again.ApplyOrigin = "", "rvchain"
	again.chainEvent, again.chainBy = ChainRecorded, bob.Name
	e.audit.add(&again)
	first, err := e.audit.tail()[1].EncodeJSON()
	require.NoError(t, err)
	require.NoError(t, e.audit.flush())

	en := batchEntry(t, e, 2)
	require.Equal(t, ChainBatch, en.Event)
	require.Len(t, en.Records, 3)
	assert.Equal(t, []string{other.ID, rec.ID, rec.ID}, []string{en.Records[0].RunID, en.Records[1].RunID, en.Records[2].RunID})
	assert.Equal(t, []string{ChainProposed, ChainProposed, ChainRecorded}, []string{en.Records[0].Event, en.Records[1].Event, en.Records[2].Event})
	assert.Equal(t, bob.Name, en.Records[2].By)
	stored := rvRaw(t, e, rec.ID)
	assert.Contains(t, string(stored), `"apply_origin":"rvchain"`, "the store keeps the last version")
	assert.Equal(t, sha256Hex(stored), en.Records[2].Record)
	assert.Equal(t, sha256Hex(first), en.Records[1].Record)
	assert.Equal(t, "[]", chainProblems(t, e))

	rvPutRaw(t, e, rec.ID, first) // the earlier version, chained too, but not last
	assert.Contains(t, chainProblems(t, e), "run "+rec.ID+": its record does not match the hash chained at entry 2")
}

// A decision's commit takes the queued records along: they are chained by one batch entry,
// then the decision's record by an entry of its own, in one commit; the chain verifies, and a
// later decision about a batched run chains after it.
func TestRvchainBatchThenDecisionInOneCommit(t *testing.T) {
	e := rvQueueing(t)
	ctx := context.Background()
	decided := rvQueued(t, e, setQty(3, "C"))
	require.NoError(t, e.audit.flush())
	a := rvQueued(t, e, setQty(1, "A"))
	b := rvQueued(t, e, setQty(2, "B"))
	// What a decision writes (writeWith with its own link), with the queue in the same commit.
	d := *decided
	d.RejectedBy = bob.Name
	err := e.audit.writeWith(fixedNow, []link{{doc: recordDoc(&d, true), event: ChainRejected, by: func() string { return bob.Name }, read: rvReadSum(t, e, d.ID)}},
		func(docs []store.SysDoc) error { return e.Store().PutSysDocs(ctx, docs...) })
	require.NoError(t, err)
	batch, own := batchEntry(t, e, 3), batchEntry(t, e, 4)
	require.Equal(t, ChainBatch, batch.Event)
	require.Len(t, batch.Records, 2)
	assert.Equal(t, a.ID, batch.Records[0].RunID)
	assert.Equal(t, b.ID, batch.Records[1].RunID)
	assert.Equal(t, ChainRejected, own.Event)
	assert.Equal(t, decided.ID, own.RunID)
	assert.Equal(t, batch.Hash, own.Prev)
	assert.Equal(t, "[]", chainProblems(t, e))

	_, err = applyBy(e, a.ID, bob) // a decision about a run of the batch: its own entry, last
	require.NoError(t, err)
	assert.Equal(t, ChainApproved, batchEntry(t, e, 5).Event)
	assert.Equal(t, "[]", chainProblems(t, e))
	// The batch's version of a put back: the decision's entry, not the batch's, is a's last.
	assert.NotEqual(t, batch.Records[0].Record, sha256Hex(rvRaw(t, e, a.ID)))
}

// A record is not changed once queued: the caller changing its own record after add (as
// applyRecord's caller may), even before the writer encodes the copy, leaves the queued bytes,
// and their hash, as they were at add.
func TestRvchainQueuedRecordIsACopy(t *testing.T) {
	e := rvQueueing(t)
	rec := rvQueued(t, e, setQty(1, "A"))
	want, err := rec.stored().encode() // the caller's, before it changes it
	require.NoError(t, err)
	rec.ApplyError, rec.Pending, rec.Writes, rec.ApprovedBy = "changed after add", false, nil, []string{"mallory"}
	rec.Truncated = append(rec.Truncated, "x")
	rec.chainEvent = ChainConflict
	require.NoError(t, e.audit.flush())
	got := rvRaw(t, e, rec.ID)
	assert.Equal(t, string(want), string(got))
	en := batchEntry(t, e, 2)
	assert.Equal(t, ChainProposed, en.Event)
	assert.Equal(t, sha256Hex(got), en.Record)
	assert.Equal(t, "[]", chainProblems(t, e))
}

// A prune whose removed runs fill a whole batch entry removes it; one whose batch entry names a
// kept run keeps it (TestChainBatchEntryPrune); either way the rest verifies.
func TestRvchainPruneWholeBatch(t *testing.T) {
	e, clk := clockedEngine(t)
	e.audit.linger = time.Hour
	ctx := context.Background()
	var old []string
	for range 3 {
		res, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
		require.NoError(t, err)
		old = append(old, res.RunID)
	}
	require.NoError(t, e.audit.flush()) // entry 2: a batch of the three old runs
	clk.advance(40 * 24 * time.Hour)
	var kept []string
	for range 2 {
		res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
		require.NoError(t, err)
		kept = append(kept, res.RunID)
	}
	require.NoError(t, e.audit.flush()) // entry 3: a batch of the two kept
	rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, 3, rep.Removed)
	var en ChainEntry
	ok, err := e.Store().GetSys(ChainCollection, chainID(2), &en)
	require.NoError(t, err)
	assert.False(t, ok, "the old runs' batch entry went with them")
	assert.Equal(t, ChainCheckpoint, batchEntry(t, e, 4).Event)
	assert.Equal(t, "[]", chainProblems(t, e))
	for _, id := range kept {
		_, err := e.Record(id)
		require.NoError(t, err)
	}
}

// Two versions of one run in one batch, on bbolt (records stored in sequence, a batch appended):
// db check finds one record of the run, not a second left under its earlier place, and the
// listing shows the run once.
func TestRvchainTwoVersionsInOneBatchDBCheck(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	e.audit.linger = time.Hour
	_, rec, err := e.run(context.Background(), Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	for i := range 3 {
		again := *rec
		again.chainRead = rvReadSum(t, e, rec.ID)
		again.ApplyOrigin = fmt.Sprint("try ", i)
		again.chainEvent, again.chainBy = ChainRecorded, bob.Name
		e.audit.add(&again)
	}
	require.NoError(t, e.audit.flush())
	runs, err := e.Runs()
	require.NoError(t, err)
	assert.Len(t, runs, 1)
	assert.Contains(t, string(rvRaw(t, e, rec.ID)), `"apply_origin":"try 2"`)
	verify, check := rvVerifyAndCheck(t, e, dir)
	assert.Equal(t, "[]", verify)
	assert.Equal(t, "[]", check)
}
