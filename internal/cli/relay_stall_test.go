package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store/bolt"
)

// relayOnBig is relayOn over a store whose inventory holds n more rows, so that a dump is far
// larger than a socket's buffers.
func relayOnBig(t *testing.T, n int, lower func(r *relayServer)) *relayServer {
	return relayOnStore(t, func(st *bolt.Store) {
		var b bytes.Buffer
		b.WriteString("[")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"item_id":"ZZ%06d","name":"n%d","description":"%0200d","quantity_in_stock":1,"price":1.5}`, i, i, i)
		}
		b.WriteString("]")
		_, err := st.Import(context.Background(), "inventory", &b, bolt.JSON, bolt.Upsert)
		require.NoError(t, err)
	}, lower)
}

// A client that starts a command with a large output and then never reads once held its slot
// for good: the command blocked writing to it, with no deadline. A write that does not go
// through within the idle bound ends the command, and the slot serves the next client.
func TestRelayClientThatStopsReadingGivesUpItsSlot(t *testing.T) {
	t.Parallel()
	r := relayOnBig(t, 5000, func(r *relayServer) { r.maxClients, r.idle = 1, 50*time.Millisecond })
	stalled := helloOn(t, r, "db", "dump")
	ackOf(t, stalled) // and never read again
	time.Sleep(200 * time.Millisecond)

	served := func() bool {
		conn := helloOn(t, r, "runs", "--json")
		defer conn.Close()
		code, _ := exitOf(t, conn)
		return code == ExitOK
	}
	assert.Eventually(t, served, 15*time.Second, 250*time.Millisecond,
		"a client that stopped reading kept the only slot: every later command was told the server is busy")
}

// The relay notices a client's end (its Ctrl-C) by reading its connection; the goroutine that
// reads it once stopped reading while maxStdinBacklog bytes waited unread, so a client that sent
// that much input to a command that does not read it and then went away was never noticed, and
// the command (here an ask waiting on its model) ran on for nobody. Input past the bound is
// dropped instead, and the connection read on.
func TestRelayNoticesAClientGoneBehindAFullInputBacklog(t *testing.T) {
	t.Parallel()
	clientGoneCancelsAsk(t, maxStdinBacklog/maxFrame+4)
}

// With no input sent, the same client's end cancels the ask: the test's own control.
func TestRelayClientGoneCancelsAsk(t *testing.T) {
	t.Parallel()
	clientGoneCancelsAsk(t, 0)
}

func clientGoneCancelsAsk(t *testing.T, chunks int) {
	asked, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body) // the server notices a closed connection only after the body
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-req.Context().Done():
			select {
			case cancelled <- struct{}{}:
			default:
			}
		case <-time.After(20 * time.Second):
		}
		http.Error(w, "too slow", http.StatusServiceUnavailable)
	}))
	defer model.Close()

	r := relayOn(t, nil)
	conn, err := net.Dial("unix", r.path)
	require.NoError(t, err)
	b, _ := json.Marshal(relayHello{Version: relayVersion, Args: []string{"ask", "how many Aviators are in stock?"},
		Env: map[string]string{"NO_COLOR": "1", "OPENAI_BASE_URL": model.URL, "OPENAI_API_KEY": "k"}})
	require.NoError(t, writeFrame(conn, frameHello, b))
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	ackOf(t, conn)
	// More input than the server holds unread; the writes past it block, so from a goroutine.
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		chunk := make([]byte, maxFrame)
		for range chunks {
			if writeFrame(conn, frameStdin, chunk) != nil {
				return
			}
		}
	}()
	// The client goes once its ask waits on the model and its input is past the backlog (a
	// second's sleep stood for both: on a loaded machine the ask could still be on its way, and
	// the client's end then cancelled it before the model was asked). A relay that stops
	// reading never takes the last writes: the guard lets the client go regardless, and the
	// wait for the cancellation below fails.
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("the ask never reached its model")
	}
	select {
	case <-wrote:
	case <-time.After(30 * time.Second):
	}
	conn.Close() // the client's Ctrl-C
	select {
	case <-cancelled:
	case <-time.After(15 * time.Second):
		t.Fatal("the client went away but its ask still waits on the model: the relay stopped reading its connection")
	}
}

// Input past the backlog is dropped, not held against the client; a command that reads on is
// told its input was too large rather than given a part of it.
func TestRelayInputPastTheBacklogIsRefusedNotCut(t *testing.T) {
	t.Parallel()
	b := newStdinBuffer()
	require.True(t, b.add(make([]byte, maxStdinBacklog)))
	require.True(t, b.add([]byte("more")), "the reader goes on reading its client")
	b.close(io.EOF)
	got, err := io.ReadAll(b)
	assert.Len(t, got, maxStdinBacklog)
	assert.ErrorIs(t, err, errInputTooLarge)
}
