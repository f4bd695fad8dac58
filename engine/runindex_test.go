package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// synthRecord is a bare record in one of the states, at fixedNow minus i/3 minutes (three runs
// share each time).
func synthRecord(i int) *RunRecord {
	r := &RunRecord{ID: fmt.Sprintf("r_%05d", i), Time: fixedNow.Add(-time.Duration(i/3) * time.Minute),
		Request: "request " + fmt.Sprint(i), Outcome: OutcomeOK, ChangedRows: i % 4}
	switch i % 5 {
	case 0:
		r.Pending = true
	case 1:
		r.Applied = true
	case 2:
		r.Outcome = OutcomeConflict
	case 3:
		r.Outcome = OutcomeRuntimeError
	}
	return r
}

// putSynth writes n synthetic records, with their index entries unless old (a store written
// before the index).
func putSynth(t *testing.T, st store.Store, n int, old bool) {
	t.Helper()
	var docs []store.SysDoc
	for i := range n {
		d := recordDoc(synthRecord(i), false)
		if old {
			d.Index = nil
		}
		docs = append(docs, d)
		if len(docs) == 500 || i == n-1 {
			require.NoError(t, st.PutSysDocs(context.Background(), docs...))
			docs = nil
		}
	}
}

// recount lists the log the slow way, from every record and decision: the ids newest first
// (ties by id, last first) and the count of each state.
func recount(t *testing.T, e *Engine) ([]string, map[string]int) {
	t.Helper()
	require.NoError(t, e.audit.flush())
	recs, err := e.st.ListSys(auditCollection)
	require.NoError(t, err)
	decisions, err := e.Decisions()
	require.NoError(t, err)
	type run struct{ id, order string }
	var runs []run
	states := map[string]int{}
	for _, raw := range recs {
		r, err := e.decodeRecord(raw.JSON)
		require.NoError(t, err)
		runs = append(runs, run{r.ID, orderKey(r.Time)})
		states[stateOf(r.Applied, decisions[r.ID] != nil, r.Pending, r.Outcome)]++
	}
	slices.SortFunc(runs, func(a, b run) int {
		if c := strings.Compare(b.order, a.order); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	ids := []string{}
	for _, r := range runs {
		ids = append(ids, r.id)
	}
	return ids, states
}

// pageAll lists every run of opts through pages of size, checking each page's size.
func pageAll(t *testing.T, e *Engine, opts ListOptions, size int) []string {
	t.Helper()
	opts.Limit = size
	ids := []string{}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10000, "the cursors go round")
		page, err := e.ListRuns(opts)
		require.NoError(t, err)
		for _, r := range page.Runs {
			ids = append(ids, r.ID)
			if opts.State != "" {
				assert.Equal(t, opts.State, r.State)
			}
		}
		if page.NextCursor == "" {
			assert.LessOrEqual(t, len(page.Runs), size)
			return ids
		}
		assert.Len(t, page.Runs, size, "a page before the last is full")
		opts.Cursor = page.NextCursor
	}
}

func filterState(ids []string, stateOfID map[string]string, state string) []string {
	var out []string
	for _, id := range ids {
		if stateOfID[id] == state {
			out = append(out, id)
		}
	}
	return out
}

// statesOf reads the state of each run from its record and decision, once per run (filtering
// per state read them once per state: a third of the package's time under -race).
func statesOf(t *testing.T, e *Engine, ids []string) map[string]string {
	t.Helper()
	states := make(map[string]string, len(ids))
	for _, id := range ids {
		r, err := e.Record(id)
		require.NoError(t, err)
		d, _, err := e.Decision(id)
		require.NoError(t, err)
		states[id] = stateOf(r.Applied, d != nil, r.Pending, r.Outcome)
	}
	return states
}

// checkAgainstRecount checks that listing every run, in pages, and the kept counts agree with a
// recount of the records.
func checkAgainstRecount(t *testing.T, e *Engine) {
	t.Helper()
	want, states := recount(t, e)
	page, err := e.ListRuns(ListOptions{Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, states, page.States, "the kept counts are a recount's")
	assert.Equal(t, len(want), page.Count)
	// Small pages, so that paging crosses many page boundaries, but not thousands of pages for
	// a log of thousands of runs.
	size := max(3, len(want)/40)
	assert.Equal(t, want, pageAll(t, e, ListOptions{}, size))
	stateOfID := statesOf(t, e, want)
	for _, s := range States {
		assert.Equal(t, filterState(want, stateOfID, s), nilIfEmpty(pageAll(t, e, ListOptions{State: s}, size-1)), s)
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Listing the newest runs, or the pending ones, decodes the records of the page only, however
// many the log holds.
func TestListRunsReadsOnlyItsPage(t *testing.T) {
	st := openStore(t, t.TempDir())
	putSynth(t, st, 3000, false)
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close(); st.Close() })
	assert.Zero(t, e.IndexBuilt(), "the index was kept with the records")

	for _, c := range []struct {
		opts ListOptions
		ids  []string
	}{
		{ListOptions{Limit: 1}, []string{"r_00002"}},
		{ListOptions{Limit: 4}, []string{"r_00002", "r_00001", "r_00000", "r_00005"}},
		{ListOptions{State: StatePending, Limit: 3}, []string{"r_00000", "r_00005", "r_00010"}},
		{ListOptions{State: StateApplied, Limit: 2}, []string{"r_00001", "r_00006"}},
		{ListOptions{Since: fixedNow.Add(-time.Minute)}, []string{"r_00002", "r_00001", "r_00000", "r_00005", "r_00004", "r_00003"}},
		{ListOptions{State: StateDone, Since: fixedNow.Add(-10 * time.Minute)}, []string{"r_00004", "r_00009", "r_00014", "r_00019", "r_00024", "r_00029"}},
	} {
		e.decodes.Store(0)
		page, err := e.ListRuns(c.opts)
		require.NoError(t, err)
		var got []string
		for _, r := range page.Runs {
			got = append(got, r.ID)
		}
		assert.Equal(t, c.ids, got, "%+v", c.opts)
		assert.Equal(t, int64(len(c.ids)), e.decodes.Load(), "%+v: records decoded", c.opts)
		assert.Equal(t, 3000, page.Count)
		assert.Equal(t, 600, page.States[StatePending])
	}
	page, err := e.ListRuns(ListOptions{Limit: 1})
	require.NoError(t, err)
	r := page.Runs[0]
	assert.Equal(t, RunSummary{ID: "r_00002", Time: fixedNow, Request: "request 2", Outcome: OutcomeConflict,
		ChangedRows: 2, State: StateConflict, Bytes: r.Bytes}, r)
	assert.Positive(t, r.Bytes)
}

// Paging with cursors lists every run once, in order, whatever the page size; the counts kept
// are a recount's.
func TestListRunsPagesEveryRunOnce(t *testing.T) {
	st := openStore(t, t.TempDir())
	putSynth(t, st, 200, false)
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close(); st.Close() })
	want, _ := recount(t, e)
	require.Len(t, want, 200)
	for _, size := range []int{1, 7, 199, 200, 500} {
		assert.Equal(t, want, pageAll(t, e, ListOptions{}, size), "pages of %d", size)
	}
	checkAgainstRecount(t, e)

	// Runs written between two pages do not shift the pages: the cursor is a place, not an offset.
	page, err := e.ListRuns(ListOptions{Limit: 10})
	require.NoError(t, err)
	putSynth(t, st, 10, false) // the newest ten again, rewritten
	require.NoError(t, st.PutSysDocs(context.Background(), recordDoc(&RunRecord{ID: "r_new", Time: fixedNow.Add(time.Hour)}, false)))
	next, err := e.ListRuns(ListOptions{Limit: 10, Cursor: page.NextCursor})
	require.NoError(t, err)
	assert.Equal(t, want[10:20], idsOf(next.Runs))

	for _, bad := range []string{"x", "c1.!!", "c1.bm9zZXA"} {
		_, err = e.ListRuns(ListOptions{Cursor: bad})
		var ce *CursorError
		require.ErrorAs(t, err, &ce, bad)
		assert.Contains(t, ce.Hint(), "next_cursor")
	}
}

func idsOf(runs []RunSummary) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// Runs, applies, conflicts, rejections and prunes keep the index and its counts with the records.
func TestRunIndexFollowsEveryWrite(t *testing.T) {
	e, clk := clockedEngine(t)
	ctx := context.Background()
	run := func(name string) *Result {
		t.Helper()
		res, err := e.Run(ctx, Request{Reply: example(t, name)})
		require.NoError(t, err)
		clk.advance(time.Minute)
		return res
	}
	run("01_round_under_100.star")
	applied := run("02_purchase_wayfarer.star")
	conflicted := run("02_purchase_wayfarer.star")
	rejected := run("03_two_item_order.star")
	doneThenRejected := run("01_round_under_100.star")
	pending := run("03_two_item_order.star")
	checkAgainstRecount(t, e)

	_, err := e.Apply(ctx, applied.RunID)
	require.NoError(t, err)
	res, err := e.Apply(ctx, conflicted.RunID)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome)
	_, _, err = e.Reject(ctx, rejected.RunID, "no", "test")
	require.NoError(t, err)
	_, _, err = e.Reject(ctx, doneThenRejected.RunID, "no", "test") // not pending: only its decision changes its state
	require.NoError(t, err)
	checkAgainstRecount(t, e)
	page, err := e.ListRuns(ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{StateDone: 1, StateApplied: 1, StateConflict: 1, StateRejected: 2, StatePending: 1}, page.States)

	clk.advance(24 * time.Hour)
	run("01_round_under_100.star")
	rep, err := e.Prune(ctx, PruneOptions{OlderThan: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Removed)
	checkAgainstRecount(t, e)
	page, err = e.ListRuns(ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{StateDone: 1, StatePending: 1}, page.States)
	assert.Equal(t, pending.RunID, page.Runs[1].ID)
}

// A store written before the index gets one when an engine opens it, from its records and
// decisions; listing then reads a page only.
func TestRunIndexBuiltForAnOldStore(t *testing.T) {
	st := openStore(t, t.TempDir())
	putSynth(t, st, 300, true)
	require.NoError(t, st.PutSys(context.Background(), decisionCollection, "r_00003", &Decision{RunID: "r_00003", Decision: DecisionRejected}))
	ready, err := st.SysIndexReady(auditCollection)
	require.NoError(t, err)
	require.False(t, ready, "an old store has no index")

	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close(); st.Close() })
	assert.Equal(t, 300, e.IndexBuilt())
	checkAgainstRecount(t, e)
	e.decodes.Store(0)
	page, err := e.ListRuns(ListOptions{State: StateRejected, Limit: 5})
	require.NoError(t, err)
	assert.Equal(t, []string{"r_00003"}, idsOf(page.Runs))
	assert.Equal(t, int64(1), e.decodes.Load())

	e2, err := New(st, Options{})
	require.NoError(t, err)
	assert.Zero(t, e2.IndexBuilt(), "built once")
	require.NoError(t, e2.Close())
}

// A prune reads the records before its cut, not the whole log.
func TestPruneReadsTheOldRunsOnly(t *testing.T) {
	st := openStore(t, t.TempDir())
	const n = 600 // three a minute: the oldest 200 minutes old
	putSynth(t, st, n, false)
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close(); st.Close() })
	e.decodes.Store(0)
	rep, err := e.Prune(context.Background(), PruneOptions{OlderThan: (n/3 - 10) * time.Minute})
	require.NoError(t, err)
	assert.Equal(t, int64(27), e.decodes.Load(), "the runs of the 9 minutes before the cut")
	assert.Equal(t, 27-rep.KeptPending, rep.Removed)
	assert.Equal(t, 5, rep.KeptPending)
	checkAgainstRecount(t, e)
}
