package bolt

import (
	"encoding/json"
	"errors"
	"fmt"
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

// PruneSysOldest reads the index a chunk at a time (pruneChunk entries), removing as it goes:
// across chunks, and across prunes bounded by Max, every document before the cut is offered once,
// in order, and only those.
func TestPruneSysOldestAcrossChunks(t *testing.T) {
	s := openTemp(t)
	const n = 3*pruneChunk + 17
	var docs []store.SysDoc
	for i := range n {
		group := "done"
		if i%3 == 0 {
			group = "pending" // kept
		}
		docs = append(docs, idxDoc(fmt.Sprintf("r%05d", i), fmt.Sprintf("%05d", i), group))
	}
	require.NoError(t, s.PutSysDocs(bg, docs...))
	cut := fmt.Sprintf("%05d", n-5) // the last five stay
	var offered []string
	p := store.SysPrune{Coll: "runs", Before: cut, Max: pruneChunk + 100, Drop: func(r store.SysRecord) (bool, error) {
		offered = append(offered, r.ID)
		var v map[string]string
		require.NoError(t, json.Unmarshal(r.JSON, &v))
		return v["group"] == "done", nil
	}}
	removed, prunes := 0, 0
	for {
		got, err := s.PruneSysOldest(bg, p)
		require.NoError(t, err)
		prunes++
		assert.LessOrEqual(t, len(got.IDs), p.Max)
		removed += len(got.IDs)
		if !got.More {
			break
		}
		p.After = got.Cursor
	}
	var want []string
	for i := range n - 5 {
		want = append(want, fmt.Sprintf("r%05d", i))
	}
	assert.Equal(t, want, offered, "each once, in order")
	assert.Equal(t, (n-5)-(n-5+2)/3, removed)
	assert.Equal(t, 2, prunes, "2056 removed, at most 1124 a prune")
	stats, err := s.SysStats("runs")
	require.NoError(t, err)
	assert.Equal(t, n-removed, stats["pending"].Count+stats["done"].Count, "the index follows")
}
