package engine

// rvchain: an attacker's review of the audit log's hash chain (batch entries, issue 32). Each
// test here is a way to change the stored log as someone who can write the store would (through
// the store's own API, so its digests stay right), and asserts that runs verify (VerifyChain)
// and db check (a ChainVerifier fed the stored documents, chainProblems) notice.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// rvRaw reads the stored bytes of run id's record.
func rvRaw(t *testing.T, e *Engine, id string) json.RawMessage {
	t.Helper()
	var raw json.RawMessage
	ok, err := e.Store().GetSys(auditCollection, id, &raw)
	require.NoError(t, err)
	require.True(t, ok, "run %s has a record", id)
	return raw
}

// rvPutRaw stores raw as run id's record, and checks that the store keeps those very bytes (so
// that a test's "verifies" is about the chain, not about a re-encoding).
func rvPutRaw(t *testing.T, e *Engine, id string, raw json.RawMessage) {
	t.Helper()
	rec, err := e.decodeRecord(raw)
	require.NoError(t, err)
	require.NoError(t, e.Store().PutSysDocs(context.Background(),
		store.SysDoc{Collection: auditCollection, ID: id, Value: raw, Index: recordIndex(rec, false)}))
	assert.Equal(t, string(raw), string(rvRaw(t, e, id)), "the store keeps the bytes as given")
}

// Two runs' records swapped between their ids (each stored under the other's id): runs show A
// then shows B's record, apply A reads B's. Each record still matches the hash chained for the
// run_id inside it, so a verifier that keys records by that run_id (and not by the id they are
// stored under) sees nothing.
func TestRvchainSwappedRecordsShow(t *testing.T) {
	e, runs := batchedEngine(t)
	a, b := runs[0].RunID, runs[1].RunID
	rawA, rawB := rvRaw(t, e, a), rvRaw(t, e, b)
	rvPutRaw(t, e, a, rawB)
	rvPutRaw(t, e, b, rawA)
	rec, err := e.Record(a)
	if err == nil {
		assert.NotEqual(t, b, rec.ID, "runs show %s answers with run %s's record", a, b)
	}
	msgs := chainProblems(t, e)
	assert.Contains(t, msgs, a, "runs verify / db check: two records swapped between runs %s and %s: %s", a, b, msgs)
}

// A run's record copied under a new id: a run that never ran (Z) is in the log, a copy of A. A
// verifier keyed by the run_id inside the record counts the copy as A again.
func TestRvchainDuplicatedRecordShows(t *testing.T) {
	e, runs := batchedEngine(t)
	const forged = "r_0000000000000000000000zz"
	rvPutRaw(t, e, forged, rvRaw(t, e, runs[0].RunID))
	msgs := chainProblems(t, e)
	assert.Contains(t, msgs, forged, "runs verify / db check: a record copied under a new id: %s", msgs)
}

// After a prune, a record that the prune kept is removed. Its last chain entry is older than the
// prune's checkpoint, and the verifier forgives every missing record whose last entry is before
// the last checkpoint: the removal does not show.
func TestRvchainPruneThenRemoveKeptRecordShows(t *testing.T) {
	e, clk := clockedEngine(t)
	ctx := context.Background()
	old, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	require.NoError(t, e.audit.flush())
	clk.advance(40 * 24 * time.Hour)
	kept, err := e.Run(ctx, Request{Reply: example(t, "03_two_item_order.star")})
	require.NoError(t, err)
	require.NoError(t, e.audit.flush())
	rep, err := e.Prune(ctx, PruneOptions{OlderThan: 30 * 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Removed, "the old run goes")
	require.Equal(t, "[]", chainProblems(t, e), "the pruned log verifies")
	_, err = e.Record(old.RunID)
	require.Error(t, err)

	// The attacker: the kept run's record goes, through the store's own API.
	_, err = e.Store().PruneSys(ctx, auditCollection, func(d store.SysRecord) (bool, error) { return d.ID == kept.RunID, nil })
	require.NoError(t, err)
	_, err = e.Record(kept.RunID)
	require.Error(t, err, "the kept run is gone")
	msgs := chainProblems(t, e)
	assert.Contains(t, msgs, kept.RunID, "runs verify / db check: a run the prune kept was removed after it: %s", msgs)
}

// A pending run's record is edited after its batch and before its decision (the stored change
// and the writes it applies: quantity 1 becomes 999). While pending, runs verify reports the
// edit. Then an approver applies the run: the decision reads the edited record, applies the
// edited writes and chains the edited bytes, and the chain verifies again: the edit left no
// trace, and the store holds data nobody proposed.
func TestRvchainEditBeforeDecisionShows(t *testing.T) {
	e := domainEngine(t, stockDomain(t, "", ""))
	res := propose(t, e, agent, setQty(1, "A"))
	require.NoError(t, e.audit.flush())
	raw := string(rvRaw(t, e, res.RunID))
	require.Contains(t, raw, `"qty":1`)
	edited := strings.ReplaceAll(raw, `"qty":1`, `"qty":999`)
	rvPutRaw(t, e, res.RunID, json.RawMessage(edited))
	require.Contains(t, chainProblems(t, e), "was edited after it was written", "the edit shows while the run is pending")

	_, err := applyBy(e, res.RunID, bob)
	if err != nil {
		t.Logf("apply of the edited record refused: %v", err)
		return // refused: fine
	}
	got := row(t, e.Store(), "items", "A")
	msgs := chainProblems(t, e)
	assert.Contains(t, msgs, res.RunID, "after the apply (which wrote qty %v), runs verify / db check still show the edit: %s", got["qty"], msgs)
}
