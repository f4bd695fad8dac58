package server

import (
	"container/list"
	"context"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Connections. Anyone who can reach the port can open a connection, token or not; each holds a
// descriptor and some memory until it closes. So the server holds connections to bounds
// (Options), counting apart those that have not yet carried a credential (the bearer token, or a
// review session with its key): at most MaxUnauthConns of them at once and MaxUnauthConnsPerAddr
// from one client address, out of MaxConns in all. A new connection beyond a bound closes the
// oldest one still without a credential; when every connection has carried one, a new one beyond
// MaxConns is refused. The MaxConns-MaxUnauthConns slots left over are the reserve a stranger
// cannot take from the token holder. A connection has HeaderTimeout to send its first request,
// and a request that carried no credential (the page's public files, a refused request) ends its
// connection: only proven connections are kept alive. What was refused or closed is logged, one
// line per interval with counts.

// Defaults of the connection bounds in Options.
const (
	// DefaultMaxConns is how many connections the server holds at once, in all.
	DefaultMaxConns = 512
	// DefaultMaxUnauthConns is how many of them may be waiting to carry a credential.
	DefaultMaxUnauthConns = 128
	// DefaultMaxUnauthConnsPerAddr is how many of those may come from one client address.
	DefaultMaxUnauthConnsPerAddr = 32
	// DefaultHeaderTimeout is how long a connection has to send a request's headers.
	DefaultHeaderTimeout = 5 * time.Second
	// DefaultIdleTimeout is how long a proven connection is kept alive between requests.
	DefaultIdleTimeout = 2 * time.Minute
	// connLogInterval is how often refused and closed connections are reported, at most.
	connLogInterval = 10 * time.Second
)

// HTTPServer returns an http.Server for the API (Handler) with the timeouts of Options and the
// hook that lets a request's credential prove its connection. Serve it on Listener(ln): the two
// hold connections to the bounds of Options together.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.opts.HeaderTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		ErrorLog:          s.opts.Log,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if lc, ok := c.(*limitedConn); ok {
				return context.WithValue(ctx, connKey{}, lc)
			}
			return ctx
		},
	}
}

// Listener wraps ln so that the connections it accepts keep to the bounds of Options
// (MaxConns, MaxUnauthConns, MaxUnauthConnsPerAddr). A connection beyond them is closed at
// once; Accept then goes on to the next one.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: s.conns}
}

// connKey is the context key of a request's *limitedConn.
type connKey struct{}

// proven marks r's connection as one that carried a credential: it no longer counts against the
// bounds of connections without one, and is never closed to make room.
func proven(r *http.Request) {
	if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		lc.l.prove(lc)
	}
}

type limitedListener struct {
	net.Listener
	l *connLimiter
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ln.l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// connLimiter counts a listener's connections.
type connLimiter struct {
	maxConns, maxUnauth, maxPerAddr int
	log                             *log.Logger
	every                           time.Duration // connLogInterval; tests shorten it

	mu      sync.Mutex
	total   int
	unauth  *list.List // of *limitedConn without a credential yet, oldest first
	perAddr map[string]int
	// What was refused or closed since the last report, which is due when report is set.
	refused, evicted int
	report           *time.Timer
}

func newConnLimiter(o Options) *connLimiter {
	return &connLimiter{maxConns: o.MaxConns, maxUnauth: o.MaxUnauthConns, maxPerAddr: o.MaxUnauthConnsPerAddr,
		log: o.Log, every: connLogInterval, unauth: list.New(), perAddr: map[string]int{}}
}

// limitedConn is an accepted connection. elem is its place in the limiter's list of connections
// without a credential, nil once it carried one or was closed.
type limitedConn struct {
	net.Conn
	l     *connLimiter
	addr  string
	elem  *list.Element
	done  bool // counted out (under l.mu)
	close sync.Once
}

func (c *limitedConn) Close() error {
	c.l.release(c)
	var err error
	c.close.Do(func() { err = c.Conn.Close() })
	return err
}

// admit counts c in, closing the oldest connections without a credential to make room; it
// returns nil (and closes c) when every slot is held by a proven connection.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	lc := &limitedConn{Conn: c, l: l, addr: addr}
	var evict []*limitedConn
	l.mu.Lock()
	if l.perAddr[addr] >= l.maxPerAddr {
		for e := l.unauth.Front(); e != nil; e = e.Next() {
			if old := e.Value.(*limitedConn); old.addr == addr {
				evict = append(evict, l.drop(old))
				break
			}
		}
	}
	if l.unauth.Len() >= l.maxUnauth || l.total >= l.maxConns {
		if e := l.unauth.Front(); e != nil {
			evict = append(evict, l.drop(e.Value.(*limitedConn)))
		}
	}
	admitted := l.total < l.maxConns
	if admitted {
		l.total++
		lc.elem = l.unauth.PushBack(lc)
		l.perAddr[addr]++
	} else {
		l.refused++
	}
	l.evicted += len(evict)
	if (len(evict) > 0 || !admitted) && l.report == nil && l.log != nil {
		l.report = time.AfterFunc(l.every, l.flush)
	}
	l.mu.Unlock()
	for _, old := range evict {
		old.close.Do(func() { _ = old.Conn.Close() }) // its server goroutine sees the error and ends
	}
	if !admitted {
		_ = c.Close()
		return nil
	}
	return lc
}

// drop counts c out; l.mu is held.
func (l *connLimiter) drop(c *limitedConn) *limitedConn {
	if c.done {
		return c
	}
	c.done = true
	l.total--
	if c.elem != nil {
		l.unauth.Remove(c.elem)
		c.elem = nil
		if l.perAddr[c.addr]--; l.perAddr[c.addr] <= 0 {
			delete(l.perAddr, c.addr)
		}
	}
	return c
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(c)
}

func (l *connLimiter) prove(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.elem == nil {
		return
	}
	l.unauth.Remove(c.elem)
	c.elem = nil
	if l.perAddr[c.addr]--; l.perAddr[c.addr] <= 0 {
		delete(l.perAddr, c.addr)
	}
}

// flush reports what was refused and closed since the last report, in one line.
func (l *connLimiter) flush() {
	l.mu.Lock()
	refused, evicted := l.refused, l.evicted
	l.refused, l.evicted, l.report = 0, 0, nil
	held, unauth := l.total, l.unauth.Len()
	l.mu.Unlock()
	l.log.Printf("connections in the last %s: closed %d that had carried no credential to make room (at most %d wait for one, %d per client address), "+
		"refused %d with all %d slots held by proven connections; now %d open, %d without a credential",
		l.every, evicted, l.maxUnauth, l.maxPerAddr, refused, l.maxConns, held, unauth)
}
