package server

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/starplan/starplan/engine"
)

// Event types of a run's lifecycle, in the order they happen.
const (
	EventStarted  = "started"  // a dry run began (it has no run id yet: see RequestID)
	EventFinished = "finished" // a dry run ended: its outcome, state and digest
	EventApplied  = "applied"  // a run's changes were written
	EventRejected = "rejected" // a reviewer rejected a run, with feedback
	EventFailed   = "failed"   // a run or an apply ended without a verdict or wrote nothing: Code says why
	// EventReplanning: a reviewer rejected a run the model wrote; the model is asked again with
	// the feedback, and the new run's finished event names the rejected one as parent_run_id.
	EventReplanning = "replanning"
)

// Event is one step of a run's lifecycle, as /v1/events streams it. ID increases by one per
// event of this server process; a client that reconnects with Last-Event-ID gets what it missed,
// as far as the server still holds it (Options.EventBacklog).
type Event struct {
	ID    int64     `json:"id,omitempty"` // 0 in a run's recorded history
	Type  string    `json:"type"`
	Time  time.Time `json:"time"`
	RunID string    `json:"run_id,omitempty"`
	// ParentRunID is the rejected run a replanned run follows (finished).
	ParentRunID string         `json:"parent_run_id,omitempty"`
	RequestID   string         `json:"request_id,omitempty"` // ties started to finished
	Origin      string         `json:"origin,omitempty"`     // serve:http or serve:mcp
	Outcome     engine.Outcome `json:"outcome,omitempty"`
	State       string         `json:"state,omitempty"`
	Digest      string         `json:"digest,omitempty"`
	Rows        int            `json:"rows,omitempty"` // changed rows (finished, applied)
	Code        string         `json:"code,omitempty"` // failed: conflict, internal, ...
	Message     string         `json:"message,omitempty"`
	Feedback    string         `json:"feedback,omitempty"` // rejected
}

// broker fans events out to subscribers and keeps the last ones for reconnecting clients. A
// subscriber that falls behind by more than its buffer is cut off (its channel closed); it
// reconnects with Last-Event-ID and replays from the backlog. Publishing never blocks. The
// backlog is bounded in events and in bytes, and the subscribers in number; the text an event
// carries from elsewhere (an error, a reviewer's feedback) is cut to MaxEventText.
type broker struct {
	mu      sync.Mutex
	now     func() time.Time
	limits  brokerLimits
	last    int64
	backlog []Event // the most recent events, oldest first, with consecutive ids
	bytes   int     // eventSize of the backlog's events
	subs    map[*subscription]struct{}
	closed  bool
}

// brokerLimits bound a broker: Events and Bytes its backlog, Subscribers its listeners at once.
type brokerLimits struct {
	Events, Bytes, Subscribers int
}

// subscription is one listener. C is closed when the listener fell behind or the broker closed.
type subscription struct {
	C chan Event
}

// subscriberBuffer is how many events a listener may be behind before it is cut off.
const subscriberBuffer = 256

// MaxEventText is the most bytes of an event's message or feedback: the text a model, a plan or
// a reviewer wrote is cut (the run's record keeps what the engine keeps), so that one long error
// is not copied to every subscriber and kept in the backlog at full length.
const MaxEventText = engine.MaxMessage

// Why subscribe refuses a listener.
var (
	errDraining         = errors.New("the broker is closed")
	errTooManyListeners = errors.New("too many subscribers")
)

func newBroker(limits brokerLimits, now func() time.Time) *broker {
	return &broker{limits: limits, now: now, subs: map[*subscription]struct{}{}}
}

// eventSize is about how many bytes an event takes, in memory and as a stream's JSON: its text
// fields and a fixed part for the others.
func eventSize(e Event) int {
	return 256 + len(e.Type) + len(e.RunID) + len(e.ParentRunID) + len(e.RequestID) + len(e.Origin) +
		len(e.Outcome) + len(e.State) + len(e.Digest) + len(e.Code) + len(e.Message) + len(e.Feedback)
}

// publish stamps e with the next id and the time, hands it to every subscriber and returns it
// as stamped (unstamped once the broker is closed). Its message and feedback are cut to
// MaxEventText.
func (b *broker) publish(e Event) Event {
	e.Message, e.Feedback = clip(e.Message, MaxEventText), clip(e.Feedback, MaxEventText)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return e
	}
	b.last++
	e.ID, e.Time = b.last, b.now()
	if b.limits.Events > 0 {
		b.backlog = append(b.backlog, e)
		b.bytes += eventSize(e)
		drop := 0
		for len(b.backlog)-drop > b.limits.Events || b.bytes > b.limits.Bytes && drop < len(b.backlog) {
			b.bytes -= eventSize(b.backlog[drop])
			drop++
		}
		if drop > 0 {
			clear(b.backlog[:drop]) // the dropped events' strings may be freed
			b.backlog = b.backlog[drop:]
		}
	}
	for s := range b.subs {
		select {
		case s.C <- e:
		default:
			close(s.C) // behind: cut off, it reconnects with Last-Event-ID
			delete(b.subs, s)
		}
	}
	return e
}

// subscribe registers a listener and returns the events after lastID still in the backlog. It
// refuses with errDraining once the broker is closed and with errTooManyListeners when
// limits.Subscribers are listening.
func (b *broker) subscribe(lastID int64) (s *subscription, missed []Event, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, nil, errDraining
	}
	if b.limits.Subscribers > 0 && len(b.subs) >= b.limits.Subscribers {
		return nil, nil, errTooManyListeners
	}
	for _, e := range b.backlog {
		if e.ID > lastID {
			missed = append(missed, e)
		}
	}
	s = &subscription{C: make(chan Event, subscriberBuffer)}
	b.subs[s] = struct{}{}
	return s, missed, nil
}

func (b *broker) unsubscribe(s *subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.C)
	}
}

// close ends every subscription; later publishes are dropped.
func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		close(s.C)
	}
	b.subs = nil
}

// history is a run's lifecycle as its audit record and decision keep it: the events /v1/events
// streamed for it, rebuilt from what is stored, so that they outlive the server process and
// cover runs made by the CLI or another server, in the order they happened. A history event has
// no id (ids number one process's stream) and no request id; its origin is the one the record
// keeps (a run's own origin, such as "ask", for started and finished; who applied or rejected
// it for those). What the record does not keep is not rebuilt: a replanning event (the new run's
// finished event names the rejected one as its parent) and a failed replan. digest is the digest
// of the run's changes.
func history(rec *engine.RunRecord, d *engine.Decision, digest string) []Event {
	ev := func(e Event) Event {
		e.RunID = rec.ID
		return e
	}
	finished := ev(Event{Type: EventFinished, Time: rec.Time.Add(time.Duration(rec.DurationMS * float64(time.Millisecond))),
		Origin: rec.Origin, Outcome: rec.Outcome, Digest: digest, Rows: rec.ChangedRows})
	if rec.Model != nil {
		finished.ParentRunID = rec.Model.ParentRunID
	}
	// The state the run finished in: a conflict or an apply came later, and a conflict replaced
	// the outcome, which was ok when the run finished (only accepted runs wait for an apply).
	conflict := rec.ConflictAt != nil || rec.Outcome == engine.OutcomeConflict // the latter: records from before ConflictAt
	switch {
	case rec.Applied || conflict || d != nil && rec.Outcome == engine.OutcomeOK && rec.ChangedRows > 0:
		finished.Outcome, finished.State = engine.OutcomeOK, StatePending
	default:
		finished.State = engine.StateOf(rec.Result(), nil)
	}
	out := []Event{ev(Event{Type: EventStarted, Time: rec.Time, Origin: rec.Origin}), finished}
	switch {
	case rec.AppliedAt != nil:
		out = append(out, ev(Event{Type: EventApplied, Time: *rec.AppliedAt, Origin: rec.ApplyOrigin, Outcome: rec.Outcome, State: StateApplied,
			Digest: digest, Rows: rec.ChangedRows}))
	case conflict:
		at := finished.Time // a record from before ConflictAt: the time is not known, only the order
		if rec.ConflictAt != nil {
			at = *rec.ConflictAt
		}
		out = append(out, ev(Event{Type: EventFailed, Time: at, Origin: rec.ApplyOrigin, Outcome: engine.OutcomeConflict,
			State: StateConflict, Code: engine.CodeConflict, Message: firstMessage(rec.Diagnostics)}))
	}
	if d != nil {
		out = append(out, ev(Event{Type: EventRejected, Time: d.Time, Origin: d.Origin, Outcome: rec.Outcome,
			State: StateRejected, Feedback: d.Feedback}))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}
