package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/bolt"
)

// A run's recorded history is what the event stream said about it, and it is kept with the
// run: another server over the same store, after the first has gone, shows the same events.
func TestRunsKeepTheirEventsAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	open := func() (*Server, func()) {
		st, err := bolt.Open(dir, bolt.Options{})
		require.NoError(t, err)
		eng, err := engine.New(st, engine.Options{})
		require.NoError(t, err)
		srv, err := New(eng, Options{Token: testToken})
		require.NoError(t, err)
		return srv, func() {
			srv.Drain()
			require.NoError(t, eng.Close())
			require.NoError(t, st.Close())
		}
	}
	srv, stop := open()
	sub, _, err := srv.events.subscribe(0)
	require.NoError(t, err)

	run := func(customer string) *RunDocument {
		doc, err := srv.Run(ctx, RunRequest{Program: purchase("Aviator", 1, customer), Request: "one Aviator"}, OriginHTTP)
		require.NoError(t, err)
		require.Equal(t, StatePending, doc.State)
		return doc
	}
	applied, rejected, conflicting, waiting := run("Ann"), run("Bob"), run("Cy"), run("Di")
	_, err = srv.Apply(ctx, applied.RunID, applied.Digest, OriginMCP)
	require.NoError(t, err)
	_, err = srv.Reject(ctx, rejected.RunID, "not today", OriginHTTP)
	require.NoError(t, err)
	doc, err := srv.Apply(ctx, conflicting.RunID, conflicting.Digest, OriginHTTP)
	require.NoError(t, err)
	require.Equal(t, StateConflict, doc.State)
	failed, err := srv.Run(ctx, RunRequest{Program: "answer_text = 'x'\nSTATUS = 'no_such_status'\n"}, OriginHTTP)
	require.NoError(t, err)

	// What the stream said, per run, without what only a stream has (ids, request ids).
	live := map[string][]Event{}
	for range 4*2 + 3 + 2 { // four dry runs, one apply, one rejection, one conflict, one failed run
		ev := <-sub.C
		if ev.Type == EventStarted {
			continue
		}
		ev.ID, ev.RequestID = 0, ""
		live[ev.RunID] = append(live[ev.RunID], ev)
	}
	stop()

	srv, stop = open()
	defer stop()
	for _, id := range []string{applied.RunID, rejected.RunID, conflicting.RunID, waiting.RunID, failed.RunID} {
		doc, err := srv.Show(id)
		require.NoError(t, err)
		require.NotEmpty(t, doc.Events, id)
		started := doc.Events[0]
		assert.Equal(t, EventStarted, started.Type, id)
		assert.Equal(t, OriginHTTP, started.Origin, id)
		var recorded []Event
		for _, ev := range doc.Events[1:] {
			assert.False(t, ev.Time.Before(started.Time), "%s: %s is not before the run started", id, ev.Type)
			recorded = append(recorded, ev)
		}
		want := live[id]
		require.Len(t, recorded, len(want), "%s: %v", id, recorded)
		for i := range want {
			want[i].Time, recorded[i].Time = time.Time{}, time.Time{} // each was taken at its own moment
			assert.Equal(t, want[i], recorded[i], "%s: event %d", id, i)
		}
	}
	doc, err = srv.Show(applied.RunID)
	require.NoError(t, err)
	assert.Equal(t, []string{EventStarted, EventFinished, EventApplied}, types(doc.Events))
	assert.Equal(t, *doc.AppliedAt, doc.Events[2].Time)
	doc, err = srv.Show(conflicting.RunID)
	require.NoError(t, err)
	assert.Equal(t, []string{EventStarted, EventFinished, EventFailed}, types(doc.Events))
	assert.Equal(t, engine.CodeConflict, doc.Events[2].Code)
	doc, err = srv.Show(rejected.RunID)
	require.NoError(t, err)
	assert.Equal(t, "not today", doc.Events[2].Feedback)
}

func types(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// The history is in the order things happened, also for a run that conflicted and was then
// rejected, and a conflict recorded before its time was kept still shows.
func TestHistoryOrderAndOldConflicts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	rec := &engine.RunRecord{ID: "r_1", Time: t0, Origin: "exec", Outcome: engine.OutcomeConflict, ChangedRows: 2,
		ConflictAt: at(5), ApplyError: "rejected by the reviewer"}
	d := &engine.Decision{RunID: "r_1", Decision: engine.DecisionRejected, Feedback: "no", Time: *at(9), Origin: OriginHTTP}
	history := func(rec *engine.RunRecord, d *engine.Decision) []Event {
		doc, err := engine.RecordDocument(rec, d)
		require.NoError(t, err)
		return doc.Events
	}
	evs := history(rec, d)
	assert.Equal(t, []string{EventStarted, EventFinished, EventFailed, EventRejected}, types(evs))
	assert.Equal(t, StatePending, evs[1].State, "it was pending when it finished")
	assert.Equal(t, engine.OutcomeConflict, evs[3].Outcome)

	old := &engine.RunRecord{ID: "r_2", Time: t0, Origin: "exec", Outcome: engine.OutcomeConflict, ChangedRows: 2, ApplyError: "moved"}
	evs = history(old, nil)
	assert.Equal(t, []string{EventStarted, EventFinished, EventFailed}, types(evs))
	assert.Equal(t, StatePending, evs[1].State)
	assert.Equal(t, engine.CodeConflict, evs[2].Code)
}
