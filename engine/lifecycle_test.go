package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
)

// heard records what an observer is told.
type heard struct {
	mu  sync.Mutex
	evs []Event
}

func (h *heard) observe(_ context.Context, ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.evs = append(h.evs, ev)
}

// take returns what was told since the last take.
func (h *heard) take() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.evs
	h.evs = nil
	return out
}

func typesOf(evs []Event) []EventType {
	var out []EventType
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// Every step of every run reaches the observers, in order, with what telemetry needs: the run,
// its origin, its outcome and state, steps, durations, the limit that stopped it, the rows it
// writes and the codes of its diagnostics.
func TestObserversHearEveryStepOfARun(t *testing.T) {
	e, _ := newEngine(t)
	h := &heard{}
	stop := e.Observe(h.observe)
	ctx := context.Background()

	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), Origin: "exec"})
	require.NoError(t, err)
	evs := h.take()
	require.Equal(t, []EventType{EventStarted, EventChecked, EventRan, EventContract, EventPending}, typesOf(evs))
	for _, ev := range evs {
		assert.Equal(t, res.RunID, ev.RunID, ev.Type)
		assert.Equal(t, "exec", ev.Origin, ev.Type)
		assert.Equal(t, fixedNow, ev.Time, "the engine's clock")
	}
	ran, contract, pending := evs[2], evs[3], evs[4]
	assert.Equal(t, res.Steps, ran.Steps)
	assert.Positive(t, ran.Duration)
	assert.Equal(t, OutcomeOK, contract.Outcome)
	assert.Equal(t, 2, contract.RowsWritten)
	assert.Equal(t, StatePending, pending.State)
	assert.True(t, pending.Verdict())
	assert.Positive(t, pending.Duration)
	dg, err := Digest(res.Changes)
	require.NoError(t, err)
	assert.Equal(t, dg, pending.Digest)

	_, err = e.ApplyAs(ctx, res.RunID, "cli")
	require.NoError(t, err)
	evs = h.take()
	require.Equal(t, []EventType{EventApplied}, typesOf(evs))
	assert.Equal(t, "cli", evs[0].Origin, "who applied")
	assert.Equal(t, dg, evs[0].Digest)
	assert.Equal(t, StateApplied, evs[0].State)
	// The apply's steps in the store, timed from its start, in order, inside it: the conflict
	// check first, the commit last.
	steps := evs[0].ApplySteps
	require.NotEmpty(t, steps)
	assert.Equal(t, store.StepCheck, steps[0].Step)
	assert.Equal(t, store.StepCommit, steps[len(steps)-1].Step)
	for i, s := range steps {
		assert.Equal(t, "ok", s.Result, s.Step)
		assert.GreaterOrEqual(t, s.Offset, time.Duration(0), s.Step)
		assert.LessOrEqual(t, s.Offset+s.Duration, evs[0].Duration, "%s ends inside the apply", s.Step)
		if i > 0 {
			assert.GreaterOrEqual(t, s.Offset, steps[i-1].Offset+steps[i-1].Duration, "%s after %s", s.Step, steps[i-1].Step)
		}
	}

	// A refused plan: the check's codes, and the verdict failed.
	_, err = e.Run(ctx, Request{Reply: "try:\n    x = 1\nexcept:\n    pass\n"})
	require.NoError(t, err)
	evs = h.take()
	require.Equal(t, []EventType{EventStarted, EventChecked, EventFailed}, typesOf(evs))
	assert.Equal(t, OutcomeCheckFailed, evs[1].Outcome)
	assert.NotEmpty(t, evs[1].Codes)
	assert.Equal(t, evs[1].Codes, evs[2].Codes)
	assert.Equal(t, StateFailed, evs[2].State)
	assert.NoError(t, evs[2].Err, "a refusal is a verdict, not starplan's failure")

	// A limit: ran names it.
	_, err = e.Run(ctx, Request{Reply: "n = 0\nfor i in range(1000000):\n    n += i\n", Limits: sandbox.Limits{MaxSteps: 1000}})
	require.NoError(t, err)
	evs = h.take()
	require.Equal(t, []EventType{EventStarted, EventChecked, EventRan, EventFailed}, typesOf(evs))
	assert.Equal(t, sandbox.LimitSteps, evs[2].Limit)
	assert.Equal(t, []string{sandbox.CodeLimit}, evs[2].Codes)
	assert.Equal(t, sandbox.LimitSteps, evs[3].Limit)

	// A contract violation: the rules broken.
	_, err = e.Run(ctx, Request{Reply: "answer_text = 'x'\nSTATUS = 'no_such_status'\n"})
	require.NoError(t, err)
	evs = h.take()
	require.Equal(t, []EventType{EventStarted, EventChecked, EventRan, EventContract, EventFailed}, typesOf(evs))
	assert.Equal(t, OutcomeContractViolation, evs[3].Outcome)
	assert.NotEmpty(t, evs[3].Codes)

	// A conflict, then a rejection of the conflicted run.
	first, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	_, err = e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), Apply: true, Origin: "exec"})
	require.NoError(t, err)
	h.take()
	_, err = e.ApplyAs(ctx, first.RunID, "serve:http")
	require.NoError(t, err)
	evs = h.take()
	require.Equal(t, []EventType{EventConflict}, typesOf(evs))
	assert.Equal(t, []string{CodeConflict}, evs[0].Codes[:1])
	assert.Equal(t, StateConflict, evs[0].State)
	steps = evs[0].ApplySteps
	require.NotEmpty(t, steps)
	last := steps[len(steps)-1]
	assert.Equal(t, store.StepCheck, last.Step, "the conflict check found it")
	assert.Equal(t, "conflict", last.Result)
	assert.LessOrEqual(t, last.Offset+last.Duration, evs[0].Duration)
	_, _, err = e.Reject(ctx, first.RunID, "no", "serve:mcp")
	require.NoError(t, err)
	evs = h.take()
	require.Equal(t, []EventType{EventRejected}, typesOf(evs))
	assert.Equal(t, "no", evs[0].Feedback)
	assert.Equal(t, "serve:mcp", evs[0].Origin)

	// A replay is no run: nothing is told.
	_, err = e.Replay(ctx, res.RunID)
	require.NoError(t, err)
	assert.Empty(t, h.take())

	// Stopped, the observer hears nothing more.
	stop()
	_, err = e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	assert.Empty(t, h.take())
}

// Options.Observe hears a run applied at once as pending then applied, and the history rebuilt
// from the log tells the same steps the API shows as were told live.
func TestTheRecordedHistoryIsWhatObserversHeard(t *testing.T) {
	h := &heard{}
	st := openStore(t, t.TempDir())
	at := fixedNow
	var mu sync.Mutex
	clock := func() time.Time { // a clock that moves: the history is ordered by time
		mu.Lock()
		defer mu.Unlock()
		at = at.Add(time.Second)
		return at
	}
	e, err := New(st, Options{Now: clock, Observe: h.observe})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, e.Close())
		assert.NoError(t, st.Close())
	})
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), Apply: true, Origin: "exec"})
	require.NoError(t, err)
	live := h.take()
	require.Equal(t, []EventType{EventStarted, EventChecked, EventRan, EventContract, EventPending, EventApplied}, typesOf(live))

	doc, err := e.Show(res.RunID)
	require.NoError(t, err)
	var told []StreamEvent
	for _, ev := range live {
		if s, ok := ev.Stream(); ok {
			told = append(told, s)
		}
	}
	require.Len(t, doc.Events, len(told))
	for i := range told {
		told[i].Time, doc.Events[i].Time = time.Time{}, time.Time{} // each was taken at its own moment
		assert.Equal(t, told[i], doc.Events[i], "event %d", i)
	}
}

// The conflict of a run is its answer to every later apply, from the engine, so every transport
// gives the same.
func TestAConflictedRunAnswersEveryApplyWithItsConflict(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	first, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	_, err = e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), Apply: true})
	require.NoError(t, err)
	conflict, err := e.Apply(ctx, first.RunID)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, conflict.Outcome)

	_, err = e.Apply(ctx, first.RunID)
	var re *RunError
	require.ErrorAs(t, err, &re)
	require.NotNil(t, re.Result, "the refusal carries the conflict")
	assert.Equal(t, conflict.Outcome, re.Result.Outcome)
	assert.Equal(t, conflict.Diagnostics, re.Result.Diagnostics)
	assert.Equal(t, conflict.Changes, re.Result.Changes)

	// A run that cannot be applied for another reason carries none.
	done, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	_, err = e.Apply(ctx, done.RunID)
	require.ErrorAs(t, err, &re)
	assert.Nil(t, re.Result)
}

// A run read back from the log keeps the scans its dry run reported.
func TestARecordKeepsItsScans(t *testing.T) {
	e, _ := newEngine(t)
	res, err := e.Run(context.Background(), Request{Reply: "rows = inventory_tbl.search(where={\"quantity_in_stock\": {\"$gt\": 2}})\nanswer_text = str(len(rows))\nSTATUS = \"success\"\n"})
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	require.NotEmpty(t, res.Scans)
	doc, err := e.Show(res.RunID)
	require.NoError(t, err)
	assert.Equal(t, res.Scans, doc.Scans)
}

// A slow observer behind Buffered never holds a run up: what its queue cannot take is dropped
// and counted, what it took arrives in order.
func TestBufferedObserverNeverHoldsARunUp(t *testing.T) {
	e, _ := newEngine(t)
	release := make(chan struct{})
	h := &heard{}
	slow := func(ctx context.Context, ev Event) {
		<-release // stuck until the runs are over
		h.observe(ctx, ev)
	}
	obs, stop := Buffered(slow, 2)
	e.Observe(obs)
	ctx := context.Background()
	for range 3 {
		_, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")}) // returns though slow waits
		require.NoError(t, err)
	}
	close(release)
	dropped := stop()
	got := h.take()
	// 3 runs × 5 events; the goroutine holds one, the queue two.
	assert.Equal(t, int64(15), dropped+int64(len(got)))
	assert.LessOrEqual(t, len(got), 3)
	assert.Positive(t, dropped)
	require.NotEmpty(t, got)
	assert.Equal(t, EventStarted, got[0].Type, "the first event, in order")
	obs(ctx, Event{Type: EventStarted}) // after stop: dropped, no panic
	assert.Equal(t, dropped+1, stop())
}
