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
