package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/starplan/starplan/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One record that does not decode no longer hides the whole audit log: Runs lists the others and
// names it; Record and Prune name it (Prune removes nothing: its age is unknown). The record is
// written before the audit log's index (an older store: building the index puts it apart), or
// with its entry (damage after).
func TestAnUnreadableRecordIsNamedAndTheOthersStillList(t *testing.T) {
	for _, indexed := range []bool{false, true} {
		t.Run(fmt.Sprint("indexed=", indexed), func(t *testing.T) {
			testAnUnreadableRecord(t, indexed)
		})
	}
}

func testAnUnreadableRecord(t *testing.T, indexed bool) {
	st := openStore(t, t.TempDir())
	ctx := context.Background()
	bad := store.SysDoc{Collection: auditCollection, ID: "r_bad", Value: map[string]any{"time": "yesterday"}}
	if !indexed {
		require.NoError(t, st.PutSysDocs(ctx, bad))
	}
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, e.Close())
		assert.NoError(t, st.Close())
	})
	res, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	if indexed {
		bad.Index = &store.SysIndex{Order: orderKey(fixedNow.Add(-time.Hour)), Group: StateDone}
		require.NoError(t, st.PutSysDocs(ctx, bad))
	}

	runs, err := e.Runs()
	var ue *UnreadableError
	require.True(t, errors.As(err, &ue), "%v", err)
	assert.Equal(t, []string{"r_bad"}, ue.IDs)
	assert.Contains(t, ue.Error(), "audit record r_bad is unreadable")
	assert.Contains(t, ue.Hint(), "db check")
	require.Len(t, runs, 1)
	assert.Equal(t, res.RunID, runs[0].ID)

	_, err = e.Record("r_bad")
	assert.True(t, errors.As(err, &ue), "%v", err)

	_, err = e.Prune(ctx, PruneOptions{OlderThan: time.Nanosecond, Pending: true})
	require.True(t, errors.As(err, &ue), "%v", err)
	_, err = e.Record(res.RunID)
	assert.NoError(t, err, "a failed prune removes nothing")
}
