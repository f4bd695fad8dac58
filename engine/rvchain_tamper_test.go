package engine

// rvchain: an attacker's review of the audit log's hash chain (batch entries, issue 32). Each
// test here is a way to change the stored log as someone who can write the store would (through
// the store's own API, so its digests stay right), and asserts that runs verify (VerifyChain)
// and db check (a ChainVerifier fed the stored documents, chainProblems) notice.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
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

// rvEngine is an engine over a fresh demo store in dir that the test closes itself (db check
// needs the store to itself); three dry runs are in its log, in one batch.
func rvEngine(t *testing.T, dir string) (*Engine, []string) {
	t.Helper()
	st := openStore(t, dir)
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	var ids []string
	for range 3 {
		res, err := e.Run(context.Background(), Request{Reply: example(t, "01_round_under_100.star")})
		require.NoError(t, err)
		ids = append(ids, res.RunID)
	}
	require.NoError(t, e.audit.flush())
	return e, ids
}

// rvVerifyAndCheck returns what runs verify (VerifyChain) and then db check (the store's Check
// with the options internal/cli's db check gives it) report, e closed in between.
func rvVerifyAndCheck(t *testing.T, e *Engine, dir string) (verify, check string) {
	t.Helper()
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.NoError(t, e.Store().Close())
	chain := NewChainVerifier()
	crep, err := bolt.Check(dir, chain.CheckOptions())
	require.NoError(t, err)
	require.True(t, crep.OK(), "%v", crep.Problems)
	return fmt.Sprint(rep.Problems), fmt.Sprint(chain.Report().Problems)
}

// Two runs' records swapped between their ids (each stored under the other's id): runs show A
// then shows B's record, apply A reads B's. Each record still matches the hash chained for the
// run_id inside it, so a verifier that keys records by that run_id (and not by the id they are
// stored under) saw nothing (ecc7f15).
func TestRvchainSwappedRecordsShow(t *testing.T) {
	dir := t.TempDir()
	e, ids := rvEngine(t, dir)
	a, b := ids[0], ids[1]
	rawA, rawB := rvRaw(t, e, a), rvRaw(t, e, b)
	rvPutRaw(t, e, a, rawB)
	rvPutRaw(t, e, b, rawA)
	verify, check := rvVerifyAndCheck(t, e, dir)
	assert.Contains(t, verify, "the record stored as run "+a+" carries the id of run "+b, "runs verify")
	assert.Contains(t, check, "the record stored as run "+a+" carries the id of run "+b, "db check")
}

// A run's record copied under a new id: a run that never ran (Z) is in the log, a copy of A. A
// verifier keyed by the run_id inside the record counted the copy as A again (ecc7f15).
func TestRvchainDuplicatedRecordShows(t *testing.T) {
	dir := t.TempDir()
	e, ids := rvEngine(t, dir)
	const forged = "r_0000000000000000000000zz"
	rvPutRaw(t, e, forged, rvRaw(t, e, ids[0]))
	verify, check := rvVerifyAndCheck(t, e, dir)
	for what, got := range map[string]string{"runs verify": verify, "db check": check} {
		assert.Contains(t, got, "the record stored as run "+forged+" carries the id of run "+ids[0], what)
		assert.Contains(t, got, "run "+ids[0]+" has more than one record", what)
	}
	// A verifier told no ids (ChainVerifier.AddRecord) still finds the copy.
	v := NewChainVerifier()
	st := openStoreAgain(t, dir)
	recs, err := st.ListSys(auditCollection)
	require.NoError(t, err)
	for _, d := range recs {
		require.NoError(t, v.AddRecord(d.JSON))
	}
	assert.Contains(t, fmt.Sprint(v.Report().Problems), "run "+ids[0]+" has more than one record")
}

// openStoreAgain opens the store in dir, closed when the test ends.
func openStoreAgain(t *testing.T, dir string) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(dir, bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	return st
}

// After a prune, a record that the prune kept is removed. Its last chain entry is older than the
// prune's checkpoint; the verifier forgave every missing record whose last entry was before the
// last checkpoint (c6f994b), so the removal did not show. The checkpoint now names (count and
// hash) the runs prunes removed that the entries before it name, and only those are excused.
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
// edited writes and chains the edited bytes; the chain verified again (c6f994b): the edit left
// no trace, and the store held data nobody proposed. The decision's entry now carries the hash
// of the record it read (read_sha256), which is not the one the run's last entry chained.
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
