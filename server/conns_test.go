package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a log a server writes from its goroutines while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveLimited serves f's server on a loopback listener through HTTPServer and Listener, as
// starplan serve does, and returns its address.
func serveLimited(t *testing.T, f *fixture) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := f.srv.HTTPServer()
	done := make(chan error, 1)
	go func() { done <- hs.Serve(f.srv.Listener(ln)) }()
	t.Cleanup(func() {
		hs.Close()
		assert.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return ln.Addr().String()
}

// Strangers who hold connections open, idle or after a refused request, cannot crowd out the
// token holder: the server holds a bounded number of their connections, closing the oldest to
// make room, ends a connection whose request carried no credential, and says so in its log, a
// line per interval rather than a line per connection.
func TestStrangersConnectionsLeaveRoomForTheTokenHolder(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	const maxUnauth, perAddr, total = 4, 3, 8
	f := newFixture(t, Options{MaxConns: total, MaxUnauthConns: maxUnauth, MaxUnauthConnsPerAddr: perAddr, Log: log.New(logs, "", 0)})
	f.srv.conns.every = 100 * time.Millisecond
	addr := serveLimited(t, f)

	// 20 connections that send nothing, and 20 that each send one request without the token
	// and would keep the connection alive.
	var idle, refused []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		idle = append(idle, c)
	}
	for range 20 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		refused = append(refused, c)
	}
	for _, c := range refused {
		_, err := io.WriteString(c, "GET /v1/runs HTTP/1.1\r\nHost: "+addr+"\r\nConnection: keep-alive\r\n\r\n")
		require.NoError(t, err)
	}

	// The token holder, on new connections each time, is served throughout.
	for i := range 5 {
		client := &http.Client{Transport: &http.Transport{}}
		req, err := http.NewRequest("GET", "http://"+addr+"/v1/runs?limit=1", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := client.Do(req)
		require.NoError(t, err, "request %d of the token holder", i)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		client.CloseIdleConnections()
	}

	// Each connection of a request without a credential was ended after its answer (if it was
	// not closed before, to make room).
	for i, c := range refused {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // bounds a hang only
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			assert.True(t, resp.Close, "connection %d: the answer says the connection closes", i)
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			_, err = c.Read(make([]byte, 1))
		}
		assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err), "connection %d ends: %v", i, err)
	}

	// At most maxUnauth connections without a credential are held; the others were closed.
	f.srv.conns.mu.Lock()
	held, unauth := f.srv.conns.total, f.srv.conns.unauth.Len()
	f.srv.conns.mu.Unlock()
	assert.LessOrEqual(t, unauth, maxUnauth)
	assert.LessOrEqual(t, held, total)
	closed := 0
	for _, c := range idle {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) || isReset(err) {
			closed++
		}
		if closed >= len(idle)-maxUnauth {
			break // the rest may still be open, waiting for their header timeout
		}
	}
	assert.GreaterOrEqual(t, closed, len(idle)-maxUnauth, "the oldest idle connections were closed to make room")

	// The log counts what was closed, in a few lines, not one per connection.
	count := regexp.MustCompile(`closed (\d+) that had carried no credential`)
	var lines []string
	require.Eventually(t, func() bool {
		lines = count.FindAllString(logs.String(), -1)
		n := 0
		for _, m := range count.FindAllStringSubmatch(logs.String(), -1) {
			k, _ := strconv.Atoi(m[1])
			n += k
		}
		return n >= len(idle)-maxUnauth
	}, time.Minute, 20*time.Millisecond, "the log reports the closed connections: %s", logs.String())
	assert.Less(t, len(lines), len(idle)-maxUnauth, "a line per interval, not per connection: %s", logs.String())
}

// isReset reports whether err is a connection reset by the server's close.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// When every slot is held by connections that carried the token, a new one is refused at once,
// and the refusal is logged.
func TestConnectionsBeyondMaxConnsAreRefused(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	f := newFixture(t, Options{MaxConns: 2, MaxUnauthConns: 2, MaxUnauthConnsPerAddr: 2, Log: log.New(logs, "", 0)})
	f.srv.conns.every = 50 * time.Millisecond
	addr := serveLimited(t, f)
	var held []*http.Client
	for range 2 {
		client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
		req, err := http.NewRequest("GET", "http://"+addr+"/v1/runs?limit=1", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		held = append(held, client) // its connection stays open, idle and proven
	}
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	_, err = c.Read(make([]byte, 1))
	assert.True(t, errors.Is(err, io.EOF) || isReset(err), "the third connection is closed at once: %v", err)
	require.Eventually(t, func() bool { return regexp.MustCompile(`refused 1 with all 2 slots held`).MatchString(logs.String()) },
		time.Minute, 20*time.Millisecond, "%s", logs.String())
	for _, h := range held {
		h.CloseIdleConnections()
	}
}

// On a loopback server every local client shares 127.0.0.1, so the per-address bound does not
// apply there: a local stranger's connections, as many as MaxUnauthConnsPerAddr and more, do not
// close the token holder's connection that has not yet sent its request. (Before, the 33rd
// connection from 127.0.0.1 closed the token holder's, the oldest, and a stranger who kept the
// accept queue full locked the token holder out.)
func TestLocalStrangersConnectionsDoNotCloseTheTokenHoldersBeforeItsRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	addr := serveLimited(t, f)

	holder, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer holder.Close()
	require.Eventually(t, func() bool {
		f.srv.conns.mu.Lock()
		defer f.srv.conns.mu.Unlock()
		return f.srv.conns.unauth.Len() == 1
	}, 10*time.Second, time.Millisecond, "the token holder's connection is admitted")

	for range DefaultMaxUnauthConnsPerAddr {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
	}
	require.Eventually(t, func() bool {
		f.srv.conns.mu.Lock()
		defer f.srv.conns.mu.Unlock()
		return f.srv.conns.unauth.Len() == DefaultMaxUnauthConnsPerAddr+1
	}, 10*time.Second, time.Millisecond, "the strangers' connections are admitted, and none was closed for them")

	// Now the token holder's request arrives on its connection.
	_, err = io.WriteString(holder, "GET /v1/runs?limit=1 HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+testToken+"\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, holder.SetReadDeadline(time.Now().Add(time.Minute)))
	resp, err := http.ReadResponse(bufio.NewReader(holder), nil)
	require.NoError(t, err, "the token holder's connection was closed to make room for strangers'")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// pipeConn admits one end of a pipe to l, as a connection from one remote address (not loopback),
// and returns it with the client's end.
func pipeConn(t *testing.T, l *connLimiter) (*limitedConn, net.Conn) {
	t.Helper()
	server, client := net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	c := l.admit(server, nil)
	require.NotNil(t, c)
	return c, client
}

// serve reads c as the server's goroutine does, until it is closed.
func serve(c *limitedConn) {
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
}

// untilState waits until the server's reading brought c to state s.
func untilState(t *testing.T, l *connLimiter, c *limitedConn, s readState) {
	t.Helper()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return c.state == s
	}, time.Minute, time.Millisecond)
}

func isClosed(l *connLimiter, c *limitedConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return c.done
}

// A connection the server has not read from yet may hold the token holder's request in its
// socket: new connections never close it to make room, however many arrive. They close one the
// server found silent instead, and while only unread ones stand in the way, the next is admitted
// once the server has read from one of them.
func TestAConnectionNotYetReadIsNotClosedToMakeRoom(t *testing.T) {
	t.Parallel()
	l := newConnLimiter(Options{MaxConns: 8, MaxUnauthConns: 2, MaxUnauthConnsPerAddr: 2})
	holder, _ := pipeConn(t, l) // accepted; its goroutine has not read yet
	stranger, _ := pipeConn(t, l)
	serve(stranger)
	untilState(t, l, stranger, silent)

	third, _ := pipeConn(t, l)
	assert.True(t, isClosed(l, stranger), "the silent stranger made room")
	assert.False(t, isClosed(l, holder), "the unread connection, older, is kept")

	// Both held connections are unread now: the next waits for the server to read one.
	server, client := net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	admitted := make(chan *limitedConn, 1)
	go func() { admitted <- l.admit(server, nil) }()
	serve(third)
	fourth := <-admitted
	require.NotNil(t, fourth)
	assert.True(t, isClosed(l, third), "the one the server found silent made room")
	assert.False(t, isClosed(l, holder))
	l.mu.Lock()
	assert.Equal(t, 2, l.unauth.Len())
	assert.Equal(t, 2, l.evicted)
	l.mu.Unlock()
}

// A stranger who sends a byte and stalls, as if a request were arriving, is closed after the
// silent connections, and before a connection whose request started arriving after his: the
// longest stalled goes first (and HeaderTimeout ends it anyway).
func TestAStalledRequestIsClosedAfterSilentConnectionsLongestStalledFirst(t *testing.T) {
	t.Parallel()
	l := newConnLimiter(Options{MaxConns: 8, MaxUnauthConns: 3, MaxUnauthConnsPerAddr: 3})
	later, laterClient := pipeConn(t, l) // arrives first, starts its request last
	staller, stallerClient := pipeConn(t, l)
	serve(staller)
	_, err := stallerClient.Write([]byte("G"))
	require.NoError(t, err)
	untilState(t, l, staller, started)
	quiet, _ := pipeConn(t, l)
	serve(quiet)
	untilState(t, l, quiet, silent)
	serve(later)
	_, err = laterClient.Write([]byte("GET / HTTP/1.1\r\n"))
	require.NoError(t, err)
	untilState(t, l, later, started)

	pipeConn(t, l)
	assert.True(t, isClosed(l, quiet), "the silent one goes first")
	assert.False(t, isClosed(l, staller))
	assert.False(t, isClosed(l, later))

	pipeConn(t, l)
	assert.True(t, isClosed(l, staller), "then the one stalled longest")
	assert.False(t, isClosed(l, later), "the request that started arriving last is kept")
}

// A connection waiting for the server to read another (Accept waits for room) is closed, and
// Accept ends, when the listener closes.
func TestAConnectionWaitingForRoomIsClosedWithTheListener(t *testing.T) {
	t.Parallel()
	l := newConnLimiter(Options{MaxConns: 8, MaxUnauthConns: 1, MaxUnauthConnsPerAddr: 1})
	pipeConn(t, l) // unread: the next admit waits
	ln := &limitedListener{Listener: closedListener{}, l: l}
	server, client := net.Pipe()
	t.Cleanup(func() { client.Close() })
	admitted := make(chan *limitedConn, 1)
	go func() { admitted <- l.admit(server, ln) }()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.waiting == 1
	}, time.Minute, time.Millisecond, "the admit waits for room")
	require.NoError(t, ln.Close())
	assert.Nil(t, <-admitted)
	_, err := client.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the waiting connection is closed")
}

// closedListener is a listener with nothing to accept.
type closedListener struct{ net.Listener }

func (closedListener) Close() error { return nil }
