package pg

import (
	"context"
	"fmt"
)

// Notifications between the processes on one store: Notify sends a payload that every Listen on
// the same store (the same schema of the same database), in any process, receives once the
// sender's transaction commits (PostgreSQL's NOTIFY). A server relays its engine's events
// through them so that every server's subscribers see every run. Delivery is at most once, to
// listeners connected at the time; a payload is at most MaxNotifyBytes.

// MaxNotifyBytes is the largest payload Notify sends (PostgreSQL's limit is just below 8000).
const MaxNotifyBytes = 7900

// channel is the store's notification channel.
func (s *Store) channel() string {
	return "starplan_" + s.schema // at most 63 bytes: see maxSchemaName
}

// Notify sends payload to the store's listeners.
func (s *Store) Notify(ctx context.Context, payload string) error {
	if len(payload) > MaxNotifyBytes {
		return fmt.Errorf("notify: a payload of %d bytes; at most %d", len(payload), MaxNotifyBytes)
	}
	_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", s.channel(), payload)
	return err
}

// Listen calls fn with each payload sent to the store's listeners, in order, until ctx is done
// (its error then) or the connection fails. It holds one connection of the pool; ready, when not
// nil, is called once it is listening.
func (s *Store) Listen(ctx context.Context, ready func(), fn func(payload string)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+q(s.channel())); err != nil {
		return err
	}
	defer func() {
		// The connection goes back to the pool: it must not go on listening.
		conn.Exec(context.Background(), "UNLISTEN *")
	}()
	if ready != nil {
		ready()
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("listen on the PostgreSQL store: %w", err)
		}
		fn(n.Payload)
	}
}
