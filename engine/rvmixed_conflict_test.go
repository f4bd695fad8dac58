package engine

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// noChecker hides the store's ConflictChecker: the engine then finds a conflict in
// ApplyPending's own check, as before the check ahead of the commit's turn, and as with the
// PostgreSQL store, which has none.
type noChecker struct{ store.Store }

// chainEvents are the run's events in the store's hash chain, in order (single and batch
// entries alike), "event by".
func chainEvents(t *testing.T, st store.Store, id string) []string {
	t.Helper()
	docs, err := st.ListSys(ChainCollection)
	require.NoError(t, err)
	var entries []ChainEntry
	for _, d := range docs {
		var en ChainEntry
		if json.Unmarshal(d.JSON, &en) == nil && en.Seq > 0 {
			entries = append(entries, en)
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Seq < entries[j].Seq })
	var out []string
	for _, en := range entries {
		if en.RunID == id {
			out = append(out, en.Event+" "+en.By)
		}
		for _, r := range en.Records {
			if r.RunID == id {
				out = append(out, r.Event+" "+r.By)
			}
		}
	}
	return out
}

// conflictAnswer makes a run, moves the row it buys, applies it and returns what the
// apply answered, the run's record and its chain events once written, and the store's counts.
func conflictAnswer(t *testing.T, hide bool) (*Result, *RunRecord, []string, map[string]store.SysGroup) {
	t.Helper()
	st := openStore(t, t.TempDir())
	var s store.Store = st
	if hide {
		s = noChecker{st}
	}
	e, err := New(s, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	_, isChecker := e.st.(store.ConflictChecker)
	require.Equal(t, !hide, isChecker)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: "buy"})
	require.NoError(t, err)
	require.True(t, res.Pending)
	sg := st.StageFor(ctx, store.RunLimits{})
	tb, ok := sg.Table("inventory")
	require.True(t, ok)
	_, err = tb.Update(table.Row{"quantity_in_stock": int64(1000)}, table.Query{Where: map[string]any{"item_id": "SG002"}})
	require.NoError(t, err)
	require.NoError(t, st.ApplyPending(ctx, sg.Pending(), nil))
	got, err := e.ApplyWith(ctx, res.RunID, ApplyOptions{Origin: "test"})
	require.NoError(t, err)
	rec, err := e.Record(res.RunID) // writes the queue
	require.NoError(t, err)
	stats, err := st.SysStats(AuditCollection)
	require.NoError(t, err)
	// The run's id is random: the same in both answers for the comparison.
	got.RunID, rec.ID = "", ""
	got.DurationMS, rec.DurationMS = 0, 0 // the dry run's time
	return got, rec, chainEvents(t, st, res.RunID), stats
}

// TestRvmixedConflictRecordedAsWithoutTheCheck: a conflict answered from the store's check
// before the commit's turn is answered and recorded exactly as ApplyPending's own check
// answered and recorded it (a store without the check): the result, the record (outcome,
// diagnostics, error, approvals, origin), the chain's events and the index's counts.
func TestRvmixedConflictRecordedAsWithoutTheCheck(t *testing.T) {
	fast, fastRec, fastChain, fastStats := conflictAnswer(t, false)
	slow, slowRec, slowChain, slowStats := conflictAnswer(t, true)
	assert.Equal(t, OutcomeConflict, fast.Outcome)
	assert.Equal(t, slow, fast)
	assert.Equal(t, slowRec, fastRec)
	require.Len(t, fastChain, 2)
	assert.Equal(t, "conflict "+orLocal(access.Principal{}).Name, fastChain[1])
	assert.Equal(t, slowChain, fastChain)
	// Counts only: the records' bytes differ with the dry run's measured duration_ms.
	assert.Equal(t, slowStats[StateConflict].Count, fastStats[StateConflict].Count)
	assert.Len(t, fastStats, len(slowStats))
	assert.Equal(t, 1, fastStats[StateConflict].Count)
}

// moveWayfarer commits a change of the row every purchase of Wayfarer reads, by another writer.
func moveWayfarer(t *testing.T, st store.Store, qty int64) {
	t.Helper()
	ctx := context.Background()
	sg := st.StageFor(ctx, store.RunLimits{})
	tb, ok := sg.Table("inventory")
	require.True(t, ok)
	_, err := tb.Update(table.Row{"quantity_in_stock": qty}, table.Query{Where: map[string]any{"item_id": "SG002"}})
	require.NoError(t, err)
	require.NoError(t, st.ApplyPending(ctx, sg.Pending(), nil))
}

// TestRvmixedPagingAcrossAFlushWithAQueuedConflict: a listing paged by cursor while runs whose
// dry run and conflict are both queued (shown without a commit) are written between its pages
// names every run once, in order, each in its last state, with the counts of a listing after
// the write; and a run's second queued record is never counted as a run of its own.
func TestRvmixedPagingAcrossAFlushWithAQueuedConflict(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	var ids []string
	for range 3 {
		res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
		require.NoError(t, err)
		ids = append(ids, res.RunID)
	}
	require.NoError(t, e.audit.flush()) // three stored
	for range 3 {
		res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
		require.NoError(t, err)
		ids = append(ids, res.RunID)
	}
	moveWayfarer(t, e.st, 1000)
	for _, id := range []string{ids[3], ids[5]} { // queued dry runs: their conflicts queued too
		res, err := e.Apply(ctx, id)
		require.NoError(t, err)
		require.Equal(t, OutcomeConflict, res.Outcome)
	}
	require.Len(t, e.audit.tail(), 5)
	commits := e.audit.commits.Load()

	first, err := e.ListRuns(ListOptions{Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, commits, e.audit.commits.Load(), "no commit")
	assert.Equal(t, 6, first.Count)
	assert.Equal(t, map[string]int{StatePending: 4, StateConflict: 2}, first.States)
	conflicts, err := e.ListRuns(ListOptions{State: StateConflict})
	require.NoError(t, err)
	assert.Len(t, conflicts.Runs, 2)
	require.NoError(t, e.audit.flush()) // between the pages

	seen := map[string]string{}
	var order []string
	for _, p := range []*RunPage{first} {
		for _, s := range p.Runs {
			seen[s.ID] = s.State
			order = append(order, s.ID)
		}
	}
	cursor := first.NextCursor
	for cursor != "" {
		p, err := e.ListRuns(ListOptions{Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		assert.Equal(t, first.Count, p.Count)
		assert.Equal(t, first.States, p.States)
		for _, s := range p.Runs {
			_, dup := seen[s.ID]
			assert.False(t, dup, "run %s listed twice", s.ID)
			seen[s.ID] = s.State
			order = append(order, s.ID)
		}
		cursor = p.NextCursor
	}
	want := []string{ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]} // newest first
	assert.Equal(t, want, order)
	assert.Equal(t, StateConflict, seen[ids[3]])
	assert.Equal(t, StateConflict, seen[ids[5]])
	assert.Equal(t, StatePending, seen[ids[4]])
}
