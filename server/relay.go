package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/starplan/starplan/engine"
)

// Several servers on one store (a PostgreSQL database) each publish their own engine's events;
// the relay carries them to the others, so that every server's /v1/events streams every run
// whichever server made it. A store that several processes share offers notifications
// (Notifier, store/pg's Notify and Listen over PostgreSQL's NOTIFY): each event this server
// publishes is sent with the server's id, and each one received from another id is published
// here, with this server's next event id; a server's own events come back to it and are
// dropped, never shown twice. Delivery is as the store's: at most once, to servers listening at
// the time (a server that was down misses what happened meanwhile; the runs are in the store).
// Sending never holds up a run: events wait in a buffer of relayBuffer and are dropped when it
// is full.

// Notifier is a store shared by several processes that carries notifications between them.
type Notifier interface {
	// Notify sends payload (at most MaxNotifyBytes) to every Listen on the store.
	Notify(ctx context.Context, payload string) error
	// Listen calls fn with each payload sent, in order, until ctx is done or the connection
	// fails; ready is called once it listens.
	Listen(ctx context.Context, ready func(), fn func(payload string)) error
}

// maxNotifyBytes is the largest payload the relay sends (store/pg's MaxNotifyBytes).
const maxNotifyBytes = 7900

// relayBuffer is how many events may wait to be sent to the other servers.
const relayBuffer = 1024

// relayRetry is how long the relay waits before listening again after its connection failed.
const relayRetry = time.Second

// relayed is one event as it goes between servers.
type relayed struct {
	From  string `json:"from"`
	Event Event  `json:"event"`
}

// relay sends this server's events to the others and publishes theirs.
type relay struct {
	n      Notifier
	id     string
	out    chan Event
	stop   context.CancelFunc
	done   sync.WaitGroup
	ready  chan struct{} // closed once the first Listen listens
	readyO sync.Once
}

// startRelay starts relaying when the engine's store is a Notifier; nil otherwise.
func (s *Server) startRelay() *relay {
	n, ok := s.eng.Store().(Notifier)
	if !ok {
		return nil
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	ctx, cancel := context.WithCancel(context.Background())
	r := &relay{n: n, id: hex.EncodeToString(id[:]), out: make(chan Event, relayBuffer), stop: cancel, ready: make(chan struct{})}
	r.done.Add(2)
	go func() {
		defer r.done.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-r.out:
				if e.Type == EventFinished {
					// The other servers' clients may ask for the run as soon as they hear of it.
					_ = r.flush(s.eng, e.RunID)
				}
				if p, ok := r.payload(e); ok {
					if err := n.Notify(ctx, p); err != nil && ctx.Err() == nil {
						s.opts.Log.Printf("relaying event %s of run %s to the other servers: %v", e.Type, e.RunID, err)
					}
				}
			}
		}
	}()
	go func() {
		defer r.done.Done()
		for {
			err := n.Listen(ctx, func() { r.readyO.Do(func() { close(r.ready) }) }, func(p string) {
				var m relayed
				if json.Unmarshal([]byte(p), &m) != nil || m.From == r.id || m.Event.Type == "" {
					return // our own, or not an event
				}
				m.Event.ID, m.Event.RequestID = 0, "" // this server numbers its events; request ids are the sender's
				s.events.publish(m.Event)
			})
			if ctx.Err() != nil {
				return
			}
			s.opts.Log.Printf("listening for the other servers' events: %v (again in %s)", err, relayRetry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(relayRetry):
			}
		}
	}()
	// A server that says it serves hears the others' events from then on: wait for the first
	// LISTEN (a store that does not answer is reported by the listener, and serving goes on).
	select {
	case <-r.ready:
	case <-time.After(relayStartWait):
		s.opts.Log.Printf("not yet listening for the other servers' events after %s; going on", relayStartWait)
	}
	return r
}

// relayStartWait is how long New waits for the relay to listen.
const relayStartWait = 10 * time.Second

// payload is e as sent to the other servers, its message and feedback cut further when the
// whole would be longer than a notification holds.
func (r *relay) payload(e Event) (string, bool) {
	e.ID = 0
	for range 3 {
		b, err := json.Marshal(relayed{From: r.id, Event: e})
		if err != nil {
			return "", false
		}
		if len(b) <= maxNotifyBytes {
			return string(b), true
		}
		e.Message, e.Feedback = clip(e.Message, len(e.Message)/4), clip(e.Feedback, len(e.Feedback)/4)
	}
	return "", false
}

// flush writes the engine's queued audit records to the store (engine.Engine.Record does),
// so that the other servers find run id the moment this one answers or tells of it; nothing
// when the store is this server's alone.
func (r *relay) flush(eng *engine.Engine, id string) error {
	if r == nil || id == "" {
		return nil
	}
	_, err := eng.Record(id)
	var re *engine.RunError
	if errors.As(err, &re) {
		return nil // a run without a record (it failed before it had one)
	}
	return err
}

// send queues e, an event this server published, for the other servers; it never blocks.
func (r *relay) send(e Event) {
	if r == nil {
		return
	}
	select {
	case r.out <- e:
	default: // the store is slow to take them: the other servers miss this one
	}
}

// close stops relaying and waits for the relay's connection to go back to the store.
func (r *relay) close() {
	if r == nil {
		return
	}
	r.stop()
	r.done.Wait()
}
