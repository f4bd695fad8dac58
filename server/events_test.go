package server

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

func TestEventsStreamARunsLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	ctx := testContext(t)
	events := f.subscribe(ctx, nil)
	assert.Empty(t, events.untilSubscribed(), "nothing happened yet")

	a := f.run(example(t, "02_purchase_wayfarer.star"), "Purchase 3 Wayfarer sunglasses for customer Alice.")
	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+a.RunID+"/apply", ApplyRequest{Digest: a.Digest}).status)
	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+a.RunID+"/apply", ApplyRequest{Digest: a.Digest}).status)
	b := f.run(purchase("Aviator", 1, "Bob"), "")
	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+b.RunID+"/reject", RejectRequest{Feedback: "not today"}).status)
	c := f.run(purchase("Aviator", 1, "Cy"), "")
	d := f.run(purchase("Aviator", 1, "Di"), "")
	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+c.RunID+"/apply", ApplyRequest{Digest: c.Digest}).status)
	require.Equal(t, http.StatusConflict, f.call("POST", "/v1/runs/"+d.RunID+"/apply", ApplyRequest{Digest: d.Digest}).status)

	var got []Event
	for len(got) < 12 {
		ev, ok := events.next()
		require.True(t, ok, "the stream ended after %d events", len(got))
		got = append(got, ev)
	}
	type step struct{ typ, run string }
	var steps []step
	for i, ev := range got {
		assert.Equal(t, int64(i+1), ev.ID, "ids count up from 1")
		assert.False(t, ev.Time.IsZero())
		assert.Equal(t, OriginHTTP, ev.Origin)
		steps = append(steps, step{ev.Type, ev.RunID})
	}
	assert.Equal(t, []step{
		{EventStarted, a.RunID}, {EventFinished, a.RunID}, {EventApplied, a.RunID}, // the second apply adds nothing
		{EventStarted, b.RunID}, {EventFinished, b.RunID}, {EventRejected, b.RunID},
		{EventStarted, c.RunID}, {EventFinished, c.RunID}, {EventStarted, d.RunID}, {EventFinished, d.RunID},
		{EventApplied, c.RunID}, {EventFailed, d.RunID},
	}, steps)
	assert.Equal(t, got[0].RequestID, got[1].RequestID, "started and finished share the request id")
	assert.Equal(t, a.Digest, got[1].Digest)
	assert.Equal(t, StatePending, got[1].State)
	assert.Equal(t, 2, got[2].Rows)
	assert.Equal(t, "not today", got[5].Feedback)
	assert.Equal(t, engine.CodeConflict, got[11].Code)
	assert.Equal(t, StateConflict, got[11].State)

	// A client that reconnects with Last-Event-ID gets what came after, then live events.
	again := f.subscribe(ctx, http.Header{"Last-Event-Id": {strconv.FormatInt(got[8].ID, 10)}})
	replayed := again.untilSubscribed()
	require.Len(t, replayed, 3)
	assert.Equal(t, got[9:], replayed)
	e := f.run(example(t, "01_round_under_100.star"), "")
	ev, ok := again.next()
	require.True(t, ok)
	assert.Equal(t, EventStarted, ev.Type)
	ev, ok = again.next()
	require.True(t, ok)
	assert.Equal(t, EventFinished, ev.Type)
	assert.Equal(t, e.RunID, ev.RunID)
	assert.Equal(t, StateDone, ev.State)
}

func TestEventsEndWhenTheServerDrains(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	events := f.subscribe(testContext(t), nil)
	events.untilSubscribed()
	f.srv.Drain()
	_, ok := events.next()
	assert.False(t, ok, "the stream ends")

	r := f.call("GET", "/v1/events", nil)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, CodeUnavailable, r.errorCode(t))
	// Requests in flight or new ones on open connections still work during the drain.
	doc := f.run(example(t, "01_round_under_100.star"), "")
	assert.Equal(t, StateDone, doc.State)
}

func TestEventsRefuseABadLastEventID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.call("GET", "/v1/events?last_event_id=soon", nil)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, CodeBadRequest, r.errorCode(t))
}

func TestBrokerCutsOffASlowSubscriberAndKeepsABoundedBacklog(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := newBroker(brokerLimits{Events: 10, Bytes: DefaultEventBacklogBytes}, func() time.Time { return now })
	slow, missed, err := b.subscribe(0)
	require.NoError(t, err)
	assert.Empty(t, missed)
	for i := 0; i < subscriberBuffer+1; i++ {
		b.publish(Event{Type: EventStarted})
	}
	n := 0
	for range slow.C { // closed after the buffer's worth: the last publish cut it off
		n++
	}
	assert.Equal(t, subscriberBuffer, n)

	_, missed, err = b.subscribe(0)
	require.NoError(t, err)
	require.Len(t, missed, 10, "the backlog keeps the last 10")
	assert.Equal(t, int64(subscriberBuffer+1-9), missed[0].ID)
	assert.Equal(t, int64(subscriberBuffer+1), missed[9].ID)
	assert.Equal(t, now, missed[9].Time)
	for i := 1; i < len(missed); i++ {
		assert.Equal(t, missed[i-1].ID+1, missed[i].ID, "replayed in order")
	}
	_, missed, _ = b.subscribe(subscriberBuffer - 1)
	require.Len(t, missed, 2, "only what came after the id given")
	assert.Equal(t, int64(subscriberBuffer), missed[0].ID)

	b.close()
	_, _, err = b.subscribe(0)
	assert.ErrorIs(t, err, errDraining)
	b.publish(Event{Type: EventStarted}) // dropped, no panic
}
