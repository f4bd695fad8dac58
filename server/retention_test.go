package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server keeps every run unless given a retention, and says so in describe; with one, Retain
// prunes the settled runs older than it and keeps the pending ones.
func TestRetentionPrunesSettledRunsOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	f.run(example(t, "01_round_under_100.star"), "")
	rep, err := f.srv.Retain(context.Background())
	require.NoError(t, err)
	assert.Nil(t, rep, "no retention, no prune")
	d := f.describe(t)
	assert.Equal(t, "forever", d.AuditLog.Retention)
	assert.Equal(t, 1, d.AuditLog.Runs)
	assert.Positive(t, d.AuditLog.Bytes)

	f = newFixture(t, Options{Retention: time.Nanosecond})
	f.run(example(t, "01_round_under_100.star"), "")
	pending := f.run(purchase("Aviator", 1, "Ann"), "")
	time.Sleep(time.Millisecond) // the runs are older than the retention
	rep, err = f.srv.Retain(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Removed)
	assert.Equal(t, 1, rep.KeptPending)
	d = f.describe(t)
	assert.Equal(t, "1ns", d.AuditLog.Retention)
	assert.Equal(t, map[string]int{StatePending: 1}, d.AuditLog.States)
	require.NotNil(t, d.AuditLog.LastPrune)
	assert.Equal(t, 1, d.AuditLog.LastPrune.Removed)
	runs, err := f.eng.Runs()
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, pending.RunID, runs[0].ID)
	assert.Equal(t, "30d", FormatRetention(30*24*time.Hour))
}

func (f *fixture) describe(t *testing.T) Description {
	t.Helper()
	r := f.call("GET", "/v1/describe", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var d Description
	r.decode(t, &d)
	return d
}
