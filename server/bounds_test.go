package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/llm/llmtest"
)

// A model endpoint that answers with a 3.5 MiB error message: the answer to /v1/ask, the failed
// event every subscriber gets and the event the backlog keeps are each cut to a few KiB.
func TestAModelsHugeErrorIsCutEverywhereItGoes(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("the model is down; ", (7<<19)/19) // 3.5 MiB
	body, err := json.Marshal(map[string]any{"error": map[string]any{"message": huge, "type": "invalid_request_error"}})
	require.NoError(t, err)
	f, _ := modelFixture(t, llmtest.Always(llmtest.Respond(http.StatusBadRequest, string(body), "Content-Type: application/json")))
	events := f.subscribe(testContext(t), nil)
	events.untilSubscribed()

	r := f.call("POST", "/v1/ask", AskRequest{Request: "hi"})
	assert.Equal(t, http.StatusBadGateway, r.status)
	assert.Equal(t, CodeModel, r.errorCode(t))
	assert.Contains(t, string(r.body), "the model is down", "the start of the model's text is kept")
	assert.Less(t, len(r.body), 2*engine.MaxMessage+1024, "the answer quotes a bounded excerpt")

	var failed Event
	for ev, ok := events.next(); ok; ev, ok = events.next() {
		if ev.Type == EventFailed {
			failed = ev
			break
		}
	}
	require.Equal(t, CodeModel, failed.Code)
	assert.Contains(t, failed.Message, "the model is down")
	assert.LessOrEqual(t, len(failed.Message), MaxEventText+len("…"), "the event carries a bounded excerpt")

	_, missed, err := f.srv.events.subscribe(0)
	require.NoError(t, err)
	require.NotEmpty(t, missed)
	for _, e := range missed {
		assert.LessOrEqual(t, len(e.Message), MaxEventText+len("…"), "the backlog keeps a bounded excerpt")
	}
}

// The backlog is bounded in bytes as well as in events, and an event's text is cut.
func TestBrokerBacklogIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	b := newBroker(brokerLimits{Events: 1024, Bytes: 64 << 10}, time.Now)
	feedback := strings.Repeat("no. ", 1<<18) // 1 MiB, as a reviewer may send (Options.MaxBody)
	for i := 0; i < 200; i++ {
		e := b.publish(Event{Type: EventRejected, RunID: "r_1", Feedback: feedback})
		assert.LessOrEqual(t, len(e.Feedback), MaxEventText+len("…"))
	}
	_, missed, err := b.subscribe(0)
	require.NoError(t, err)
	require.NotEmpty(t, missed, "the newest events are kept")
	size := 0
	for i, e := range missed {
		size += eventSize(e)
		if i > 0 {
			assert.Equal(t, missed[i-1].ID+1, e.ID, "consecutive")
		}
	}
	assert.LessOrEqual(t, size, 64<<10)
	assert.Less(t, len(missed), 200, "the oldest made room")
	assert.Equal(t, int64(200), missed[len(missed)-1].ID)
	assert.Equal(t, size, b.bytes)
}

// Beyond MaxSubscribers an event stream is refused with 503 and a hint; closing one makes room.
func TestEventStreamsAreBoundedInNumber(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{MaxSubscribers: 2})
	ctx, cancel := context.WithCancel(testContext(t))
	first := f.subscribe(ctx, nil)
	first.untilSubscribed()
	second := f.subscribe(testContext(t), nil)
	second.untilSubscribed()

	r := f.call("GET", "/v1/events", nil)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, CodeTooManyStreams, r.errorCode(t))
	assert.NotEmpty(t, r.header.Get("Retry-After"))

	cancel() // the first stream's client goes away
	first.resp.Body.Close()
	require.Eventually(t, func() bool {
		f.srv.events.mu.Lock()
		defer f.srv.events.mu.Unlock()
		return len(f.srv.events.subs) < 2
	}, time.Minute, 10*time.Millisecond, "the server notices the closed stream")
	third := f.subscribe(testContext(t), nil)
	third.untilSubscribed()
}
