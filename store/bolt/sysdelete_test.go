package bolt

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPruneSysRemovesMatchesAndTheirCompanions(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg,
		store.SysDoc{Collection: "runs", ID: "r1", Value: map[string]any{"old": true}},
		store.SysDoc{Collection: "runs", ID: "r2", Value: map[string]any{"old": false}},
		store.SysDoc{Collection: "runs", ID: "r3", Value: map[string]any{"old": true}},
		store.SysDoc{Collection: "decisions", ID: "r1", Value: "rejected"},
		store.SysDoc{Collection: "decisions", ID: "r2", Value: "rejected"},
	))
	old := func(r store.SysRecord) (bool, error) {
		var v struct{ Old bool }
		err := json.Unmarshal(r.JSON, &v)
		return v.Old, err
	}
	got, err := s.PruneSys(bg, "runs", old, "decisions")
	require.NoError(t, err)
	assert.Equal(t, []string{"r1", "r3"}, got.IDs)
	assert.Equal(t, int64(len(`{"old":true}`)*2+len(`"rejected"`)), got.Bytes)

	recs, err := s.ListSys("runs")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "r2", recs[0].ID)
	ok, err := s.GetSys("decisions", "r1", new(string))
	require.NoError(t, err)
	assert.False(t, ok, "r1's decision went with it")
	ok, err = s.GetSys("decisions", "r2", new(string))
	require.NoError(t, err)
	assert.True(t, ok)

	// Nothing to prune, or no such collection: nothing happens.
	got, err = s.PruneSys(bg, "runs", old, "decisions")
	require.NoError(t, err)
	assert.Empty(t, got.IDs)
	got, err = s.PruneSys(bg, "nothing", old)
	require.NoError(t, err)
	assert.Empty(t, got.IDs)
}

// A prune that fails half-way removes nothing: it is one transaction.
func TestPruneSysIsAllOrNothing(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg,
		store.SysDoc{Collection: "runs", ID: "r1", Value: 1},
		store.SysDoc{Collection: "runs", ID: "r2", Value: 2},
	))
	boom := errors.New("unreadable")
	calls := 0
	_, err := s.PruneSys(bg, "runs", func(r store.SysRecord) (bool, error) {
		if calls++; calls == 2 {
			return false, boom
		}
		return true, nil
	})
	require.ErrorIs(t, err, boom)
	recs, err := s.ListSys("runs")
	require.NoError(t, err)
	assert.Len(t, recs, 2, "the first one, already deleted in the transaction, is back")

	_, err = s.PruneSys(bg, "no such name!", func(store.SysRecord) (bool, error) { return true, nil })
	assert.Error(t, err)
}
