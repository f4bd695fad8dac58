package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reserve of MaxConns-MaxUnauthConns slots is for proven connections, but every connection
// starts unproven, and a connection that has not yet sent its request is the oldest-first victim
// of the next strangers' connections. On a loopback server the token holder and every local
// stranger share the client address 127.0.0.1, so with the defaults 32 connections a stranger
// opens (sending nothing, costing him nothing: each is closed for the next) close the token
// holder's connection before its first request is read. A stranger who keeps the accept queue
// full this way locks the token holder out, which issue 26 item 2 rules out.
func TestReviewStrangersEvictTheTokenHoldersFreshConnection(t *testing.T) {
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
		return f.srv.conns.unauth.Len() == DefaultMaxUnauthConnsPerAddr
	}, 10*time.Second, time.Millisecond, "the strangers' connections are admitted")

	// Now the token holder's request arrives on its connection.
	_, err = io.WriteString(holder, "GET /v1/runs?limit=1 HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+testToken+"\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, holder.SetReadDeadline(time.Now().Add(time.Minute)))
	resp, err := http.ReadResponse(bufio.NewReader(holder), nil)
	require.NoError(t, err, "the token holder's connection was closed to make room for strangers'")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
