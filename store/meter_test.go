package store

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The first limit crossed is kept, and every later call fails with it.
func TestMeterKeepsTheFirstLimit(t *testing.T) {
	m := NewMeter(context.Background(), RunLimits{HelperCalls: 1, RowsRead: 2})
	require.NoError(t, m.Call())
	room, ok := m.ReadRoom()
	assert.True(t, ok)
	assert.Equal(t, 2, room)
	assert.True(t, m.MayRead(2))
	assert.False(t, m.MayRead(3))
	var le *LimitError
	require.ErrorAs(t, m.Read(3), &le)
	assert.Equal(t, LimitRowsRead, le.Limit)
	require.ErrorAs(t, m.Call(), &le)
	assert.Equal(t, LimitRowsRead, le.Limit, "a later call fails with the first limit crossed")
	assert.Same(t, le, m.Exceeded())
}

// Rows written are bounded per table and over all tables, before anything is staged.
func TestMeterRoom(t *testing.T) {
	m := NewMeter(context.Background(), RunLimits{RowsWritten: 5, RowsWrittenPerTable: map[string]int{"a": 2}})
	require.NoError(t, m.Room("a", 1, 1, func() int { return 1 }))
	var le *LimitError
	require.ErrorAs(t, m.Room("a", 2, 1, func() int { return 2 }), &le)
	assert.Equal(t, LimitError{Limit: LimitRowsWritten, Max: 2, Table: "a"}, *le)

	m = NewMeter(context.Background(), RunLimits{RowsWritten: 5})
	require.NoError(t, m.Room("b", 0, 2, func() int { return 3 }))
	require.ErrorAs(t, m.Room("b", 0, 3, func() int { return 3 }), &le)
	assert.Equal(t, LimitError{Limit: LimitRowsWritten, Max: 5}, *le)
	m = NewMeter(context.Background(), RunLimits{})
	_, ok := m.ReadRoom()
	assert.False(t, ok, "no rows_read limit")
}

// Staged bytes are charged before they are staged; a removal gives them back.
func TestMeterCharge(t *testing.T) {
	m := NewMeter(context.Background(), RunLimits{StagedBytes: 10})
	require.NoError(t, m.Charge(8))
	require.Error(t, m.Charge(3))
	m = NewMeter(context.Background(), RunLimits{StagedBytes: 10})
	require.NoError(t, m.Charge(8))
	require.NoError(t, m.Charge(-8))
	require.NoError(t, m.Charge(10))
	assert.Equal(t, int64(2+3+9), RowSize(map[string]any{"a": "b", "c": 1}))
}

// A stopped run's calls fail with the context's cause.
func TestMeterStopped(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	m := NewMeter(ctx, RunLimits{})
	require.NoError(t, m.Call())
	stop := errors.New("deadline")
	cancel(stop)
	assert.ErrorIs(t, m.Call(), stop)
	assert.Nil(t, m.Exceeded())
}
