package server

import (
	"container/list"
	"context"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Connections. Anyone who can reach the port can open a connection, token or not; each holds a
// descriptor and some memory until it closes. So the server holds connections to bounds
// (Options), counting apart those that have not yet carried a credential (the bearer token, or a
// review session with its key): at most MaxUnauthConns of them at once and MaxUnauthConnsPerAddr
// from one client address, out of MaxConns in all. The per-address bound does not apply to
// loopback addresses: there every local client, the token holder too, shares 127.0.0.1, so it
// could not tell strangers apart and would only make the token holder's connection cheaper to
// close. A new connection beyond a bound closes one still without a credential that the server
// has read from: first the oldest that has sent nothing, then the one whose request started
// arriving longest ago (a request that stalls before its headers is also ended by HeaderTimeout).
// A connection the server has not yet read from is never closed to make room, since its request
// (the token holder's, say) may be waiting in the socket; when only such connections stand in the
// way, Accept waits until the server has read from one, which takes no longer than a scheduling
// delay, so a flood of new connections cannot close the token holder's before its request is
// read. Proven connections, idle keep-alive ones included, are never closed to make room; when
// every slot is held by one, a new connection is refused. The MaxConns-MaxUnauthConns slots left
// over are the reserve a stranger cannot take from the token holder. A connection has
// HeaderTimeout to send its first request, and a request that carried no credential (the page's
// public files, a refused request) ends its connection: only proven connections are kept alive.
// What was refused or closed is logged, one line per interval with counts.

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
// (MaxConns, MaxUnauthConns, MaxUnauthConnsPerAddr). A connection beyond them closes one
// without a credential that the server has read from, or waits until the server has read from
// one (so its server must read every connection it accepts, as http.Server does), or, with every
// slot proven, is closed at once; Accept then goes on to the next one.
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
	l      *connLimiter
	closed bool // under l.mu; ends an Accept waiting for room
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ln.l.admit(c, ln); lc != nil {
			return lc, nil
		}
	}
}

func (ln *limitedListener) Close() error {
	ln.l.mu.Lock()
	ln.closed = true
	ln.l.room.Broadcast()
	ln.l.mu.Unlock()
	return ln.Listener.Close()
}

// connLimiter counts a listener's connections.
type connLimiter struct {
	maxConns, maxUnauth, maxPerAddr int
	log                             *log.Logger
	every                           time.Duration // connLogInterval; tests shorten it

	mu      sync.Mutex
	total   int
	unauth  *list.List // of *limitedConn without a credential yet: fresh and silent ones by arrival, then started ones by when they started
	perAddr map[string]int
	room    *sync.Cond // on mu; signalled when a connection is read from, proven or closed while admit waits
	waiting int        // admits waiting on room
	// What was refused or closed since the last report, which is due when report is set.
	refused, evicted int
	report           *time.Timer
}

func newConnLimiter(o Options) *connLimiter {
	l := &connLimiter{maxConns: o.MaxConns, maxUnauth: o.MaxUnauthConns, maxPerAddr: o.MaxUnauthConnsPerAddr,
		log: o.Log, every: connLogInterval, unauth: list.New(), perAddr: map[string]int{}}
	l.room = sync.NewCond(&l.mu)
	return l
}

// readState is how far the server got reading a connection without a credential.
type readState uint8

const (
	// fresh: the server has not read from it yet, so its request may be waiting in the socket.
	// It is never closed to make room.
	fresh readState = iota
	// silent: the server is reading and it has sent nothing. The first closed to make room.
	silent
	// started: it has sent part of a request, but no credential yet (a complete request without
	// one ends the connection). Closed to make room when no silent one is left.
	started
)

// limitedConn is an accepted connection. elem is its place in the limiter's list of connections
// without a credential, nil once it carried one or was closed.
type limitedConn struct {
	net.Conn
	l     *connLimiter
	addr  string
	elem  *list.Element
	state readState   // under l.mu, while elem is set
	watch atomic.Bool // whether Read still reports to the limiter: until started, proven or closed
	done  bool        // counted out (under l.mu)
	close sync.Once
}

func (c *limitedConn) Read(p []byte) (int, error) {
	if !c.watch.Load() {
		return c.Conn.Read(p)
	}
	c.l.reading(c)
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.l.started(c)
	}
	return n, err
}

func (c *limitedConn) Close() error {
	c.l.release(c)
	var err error
	c.close.Do(func() { err = c.Conn.Close() })
	return err
}

// admit counts c in, closing connections without a credential to make room (victim); while
// only connections the server has not read from yet stand in the way, it waits for the server to
// read one. It returns nil (and closes c) when every slot is held by a proven connection, or when
// ln is closed meanwhile.
func (l *connLimiter) admit(c net.Conn, ln *limitedListener) *limitedConn {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	byAddr := !isLoopback(addr) // every local client shares a loopback address (see the top)
	lc := &limitedConn{Conn: c, l: l, addr: addr}
	lc.watch.Store(true)
	var evict []*limitedConn
	closed := 0 // of evict, counted and closed while waiting
	l.mu.Lock()
	for ln == nil || !ln.closed {
		wait := false
		if byAddr && l.perAddr[addr] >= l.maxPerAddr {
			if v := l.victim(addr); v != nil {
				evict = append(evict, l.drop(v))
			} else {
				wait = true
			}
		}
		if !wait && (l.unauth.Len() >= l.maxUnauth || l.total >= l.maxConns) {
			if v := l.victim(""); v != nil {
				evict = append(evict, l.drop(v))
			} else {
				wait = l.unauth.Len() > 0 // fresh ones, soon read; with none, every slot is proven
			}
		}
		if !wait {
			break
		}
		if len(evict) > 0 { // close them now rather than after the wait
			l.evicted += len(evict)
			closed += len(evict)
			l.mu.Unlock()
			closeAll(evict)
			evict = nil
			l.mu.Lock()
			continue
		}
		l.waiting++
		l.room.Wait()
		l.waiting--
	}
	admitted := l.total < l.maxConns && (ln == nil || !ln.closed)
	if admitted {
		l.total++
		lc.elem = l.unauth.PushBack(lc)
		l.perAddr[addr]++
	} else if ln == nil || !ln.closed {
		l.refused++
	}
	l.evicted += len(evict)
	if (len(evict)+closed > 0 || !admitted) && l.report == nil && l.log != nil {
		l.report = time.AfterFunc(l.every, l.flush)
	}
	l.mu.Unlock()
	closeAll(evict)
	if !admitted {
		_ = c.Close()
		return nil
	}
	return lc
}

// closeAll closes connections counted out to make room; their server goroutines see the error and
// end.
func closeAll(conns []*limitedConn) {
	for _, old := range conns {
		old.close.Do(func() { _ = old.Conn.Close() })
	}
}

// victim is the connection without a credential (from addr, unless it is "") to close to make
// room: the oldest silent one, else the one that started its request longest ago; nil when all
// of them are fresh. l.mu is held.
func (l *connLimiter) victim(addr string) *limitedConn {
	var first *limitedConn
	for e := l.unauth.Front(); e != nil; e = e.Next() {
		c := e.Value.(*limitedConn)
		if addr != "" && c.addr != addr {
			continue
		}
		switch {
		case c.state == silent:
			return c
		case c.state == started && first == nil:
			first = c
		}
	}
	return first
}

// drop counts c out; l.mu is held.
func (l *connLimiter) drop(c *limitedConn) *limitedConn {
	if c.done {
		return c
	}
	c.done = true
	c.watch.Store(false)
	l.total--
	if c.elem != nil {
		l.unauth.Remove(c.elem)
		c.elem = nil
		if l.perAddr[c.addr]--; l.perAddr[c.addr] <= 0 {
			delete(l.perAddr, c.addr)
		}
	}
	l.signal()
	return c
}

// signal wakes an admit waiting for room; l.mu is held.
func (l *connLimiter) signal() {
	if l.waiting > 0 {
		l.room.Broadcast()
	}
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(c)
}

// reading notes that the server reads from c: if it was fresh, it is silent until bytes arrive.
func (l *connLimiter) reading(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.elem != nil && c.state == fresh {
		c.state = silent
		l.signal()
	}
}

// started notes that c sent the first bytes of a request; it goes behind those that started
// before it.
func (l *connLimiter) started(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.watch.Store(false)
	if c.elem != nil && c.state != started {
		c.state = started
		l.unauth.MoveToBack(c.elem)
		l.signal()
	}
}

func (l *connLimiter) prove(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.watch.Store(false)
	if c.elem == nil {
		return
	}
	l.unauth.Remove(c.elem)
	c.elem = nil
	if l.perAddr[c.addr]--; l.perAddr[c.addr] <= 0 {
		delete(l.perAddr, c.addr)
	}
	l.signal()
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
