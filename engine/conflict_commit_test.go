package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store/bolt"
)

// An apply that finds a conflict does not write the audit queue before answering (it used to,
// a disk sync under the apply lock that held up every other apply and rejection; issue 32), and
// what must hold still holds: the conflict is the run's last version, in the queue at once and
// in the store once the queue is written, after the runs queued before it.
func TestAConflictingApplyDoesNotCommitTheQueue(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	dry := func() string {
		res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: "buy"})
		require.NoError(t, err)
		require.True(t, res.Pending, "%+v", res)
		return res.RunID
	}
	first, second := dry(), dry() // both read the same stock
	_, err := e.Apply(ctx, first)
	require.NoError(t, err)
	later := dry() // queued, not written
	commits := e.audit.commits.Load()

	res, err := e.Apply(ctx, second)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome, "%+v", res)
	assert.Equal(t, commits, e.audit.commits.Load(), "the conflict wrote nothing to the store")

	rec, err := e.readRecord(second)
	require.NoError(t, err)
	assert.Equal(t, OutcomeConflict, rec.Outcome, "a reader sees the conflict at once")
	_, err = e.Apply(ctx, second)
	var re *RunError
	require.ErrorAs(t, err, &re, "a second apply answers as the first")
	require.NotNil(t, re.Result)
	assert.Equal(t, OutcomeConflict, re.Result.Outcome)

	require.NoError(t, e.audit.flush())
	stored, err := e.storedRecord(second)
	require.NoError(t, err)
	assert.Equal(t, OutcomeConflict, stored.Outcome, "the conflict lands after the pending version it replaces")
	assert.False(t, stored.Pending)
	_, err = e.storedRecord(later)
	require.NoError(t, err, "the run queued before the conflict is written with it")
	ok, err := e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, ok.OK(), "%+v", ok)
}

// missCountingStore counts the lookups of run records that find none: on bbolt each verifies
// the whole audit log against its digest the first time after an open.
type missCountingStore struct {
	*bolt.Store
	misses atomic.Int64
}

func (s *missCountingStore) GetSys(coll, id string, v any) (bool, error) {
	ok, err := s.Store.GetSys(coll, id, v)
	if coll == auditCollection && !ok {
		s.misses.Add(1)
	}
	return ok, err
}

// A run whose data moved before its first record left the queue conflicts without a lookup of
// its record in the store: nothing of it is there for another engine to have applied.
func TestAConflictBeforeTheRunIsWrittenLooksNothingUp(t *testing.T) {
	ctx := context.Background()
	bs := openStore(t, t.TempDir())
	st := &missCountingStore{Store: bs}
	e, err := New(st, Options{})
	require.NoError(t, err)
	e.audit.linger = time.Hour
	t.Cleanup(func() {
		assert.NoError(t, e.Close())
		assert.NoError(t, bs.Close())
	})
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: "buy"})
	require.NoError(t, err)
	require.True(t, res.Pending, "%+v", res)
	require.True(t, e.audit.unwritten(res.RunID))

	// The data moves under the run, outside the engine: every item's stock changes.
	var inv bytes.Buffer
	require.NoError(t, bs.Export(&inv, "inventory", bolt.JSON))
	var rows []map[string]any
	require.NoError(t, json.Unmarshal(inv.Bytes(), &rows))
	for _, r := range rows {
		r["quantity_in_stock"] = 1000
	}
	raw, err := json.Marshal(rows)
	require.NoError(t, err)
	_, err = bs.Import(ctx, "inventory", bytes.NewReader(raw), bolt.JSON, bolt.Upsert)
	require.NoError(t, err)

	got, err := e.Apply(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, got.Outcome, "%+v", got)
	assert.Zero(t, st.misses.Load(), "no lookup of the run in the store")
	require.NoError(t, e.audit.flush())
	stored, err := e.storedRecord(res.RunID)
	require.NoError(t, err)
	assert.Equal(t, OutcomeConflict, stored.Outcome)
}
