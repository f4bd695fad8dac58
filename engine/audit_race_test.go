package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/starplan/starplan/store"
	"github.com/stretchr/testify/require"
)

// failingApply is a store whose applies fail for a reason that is not the data (a full disk).
type failingApply struct{ store.Store }

func (failingApply) ApplyPending(context.Context, *store.Pending, store.Verify, ...store.SysDoc) error {
	return errors.New("the disk is full")
}

// An apply that fails for a reason of starplan's own queues the run's record again, still
// pending; the record is the audit writer's from then on, and the applying goroutine must not
// change it while the writer encodes it on its own goroutine: ApplyWith set ApplyOrigin back
// after the queue took the record, a data race whose outcome (the stored record with or without
// who tried) depended on which came first. Here the record stays queued (tailEngine lingers
// for an hour) until ApplyAs has returned, so a change made after the queue took it shows in
// the stored record every time. The record keeps who tried.
func TestFailedApplyLeavesTheQueuedRecordAlone(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	require.True(t, res.Pending)
	require.NoError(t, e.audit.flush())
	st := e.st
	e.st = failingApply{st}
	_, err = e.ApplyAs(ctx, res.RunID, "serve:http")
	require.ErrorContains(t, err, "the disk is full")
	require.Len(t, e.audit.tail(), 1, "the failed apply queues the still-pending record")
	e.st = st
	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	require.True(t, rec.Pending)
	require.NotNil(t, rec.Writes)
	require.Equal(t, "serve:http", rec.ApplyOrigin)
	applied, err := e.Apply(ctx, res.RunID)
	require.NoError(t, err)
	require.True(t, applied.Applied)
}
