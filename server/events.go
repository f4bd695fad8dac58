package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/starplan/starplan/engine"
)

// Event types of a run's lifecycle as /v1/events streams them: the engine's (engine.StreamEvent),
// in the order they happen.
const (
	EventStarted  = engine.StreamStarted  // a run began
	EventFinished = engine.StreamFinished // a dry run ended: its outcome, state and digest
	EventApplied  = engine.StreamApplied  // a run's changes were written
	EventRejected = engine.StreamRejected // a reviewer rejected a run, with feedback
	EventFailed   = engine.StreamFailed   // a run or an apply ended without a verdict or wrote nothing: Code says why
	// EventReplanning: a reviewer rejected a run the model wrote; the model is asked again with
	// the feedback, and the new run's finished event names the rejected one as parent_run_id.
	EventReplanning = engine.StreamReplanning
)

// Event is one step of a run's lifecycle, as /v1/events streams it. ID increases by one per
// event of this server process; a client that reconnects with Last-Event-ID gets what it missed,
// as far as the server still holds it (Options.EventBacklog). The events of runs come from the
// engine's lifecycle (observe), whatever made the run: this server's HTTP and MCP, or a CLI
// command relayed to it.
type Event = engine.StreamEvent

// callKey is the context key of a call's own values (callValues) for the events its runs make.
type callKey struct{}

// callValues is what a call adds to the events of its runs: the request id that ties started to
// finished, and the observer told each event as published (an MCP call's progress).
type callValues struct {
	requestID string
	obs       observer
}

// withCall returns ctx carrying a call's request id and observer for observe.
func withCall(ctx context.Context, requestID string, obs observer) context.Context {
	return context.WithValue(ctx, callKey{}, &callValues{requestID: requestID, obs: obs})
}

// observe is the server's observer of the engine (engine.Observer): each step the API shows goes
// on the event stream, with the request id of the call that made it, and to that call's
// observer. It never blocks: the broker drops listeners that fall behind.
func (s *Server) observe(ctx context.Context, ev engine.Event) {
	e, ok := ev.Stream()
	if !ok {
		return
	}
	c, _ := ctx.Value(callKey{}).(*callValues)
	if c != nil {
		e.RequestID = c.requestID
	}
	e = s.events.publish(e)
	if e.ID != 0 {
		s.relay.send(e) // to the other servers on the store
	}
	if c != nil && c.obs != nil {
		c.obs(e)
	}
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
