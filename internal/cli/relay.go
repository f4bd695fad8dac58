package cli

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/engine"
)

// While `starplan serve` runs on a store it holds the store's lock, so another process cannot
// open it. The server therefore listens on a unix socket in the store directory (SocketName),
// and the commands that use the store (those marked throughServer) run inside the server when
// one answers there: the client sends its command line, environment and working directory, and
// relays its standard input to the command and the command's output and exit code back. The
// command runs as it would locally, on the server's engine and store, so its output is the
// same; only the files it names are read by the server's process (which runs as the same user:
// the server refuses any other).
//
// The protocol is a stream of frames, each a type byte, a 4-byte big-endian length and that
// many bytes: first the client's hello (JSON), then standard input and its end; the server
// answers at once (an ack when the command starts, or a busy or error answer), then with standard
// output and error, and ends with the exit code. A client that hears nothing within
// relayAnswerTimeout says so instead of waiting for good.

// SocketName is the file name of the socket a server listens on in its store directory.
const SocketName = "serve.sock"

const (
	frameHello  = 'h' // client: relayHello as JSON
	frameStdin  = 'i' // client: bytes of standard input
	frameEOF    = 'e' // client: standard input ended
	frameStdout = 'o' // server: bytes of standard output
	frameStderr = 'r' // server: bytes of standard error
	frameExit   = 'x' // server: the exit code, 4 bytes big-endian; the last frame
	frameAck    = 'a' // server: the command has started (empty)

	maxFrame = 1 << 20 // the largest frame either side accepts, in bytes
	// maxStdinBacklog is how much of the client's standard input the server holds before the
	// command reads it; more is dropped, and a command that reads on is told so (exec - reads at
	// most maxSource). The connection is read on regardless, so the client's end is noticed.
	maxStdinBacklog = maxSource + maxFrame
	// relayVersion changes when the protocol does; a server answers another with an error.
	relayVersion = 2
)

// relayHello is what the client sends first.
type relayHello struct {
	Version int               `json:"version"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Dir     string            `json:"dir"`
	OutTTY  bool              `json:"out_tty"`
	InTTY   bool              `json:"in_tty"`
	ErrTTY  bool              `json:"err_tty"`
	Width   int               `json:"width"`
}

// relayedEnv are the environment variables a relayed command may read: colour, width, and the
// model's configuration (ask). Others stay with the client.
func relayedEnv(getenv func(string) string) map[string]string {
	env := map[string]string{}
	for _, k := range []string{"NO_COLOR", "TERM", "COLUMNS", "OPENAI_API_KEY", "OPENAI_BASE_URL", "STARPLAN_MODEL"} {
		if v := getenv(k); v != "" {
			env[k] = v
		}
	}
	return env
}

// host is what a command running inside a server for a client uses instead of opening the store.
type host struct {
	eng *engine.Engine
}

// throughServerAnnotation marks the commands that run inside a server on their store when one
// answers on its socket: always ("yes"), or only when given no arguments (throughWithoutArgs:
// an argument names something of the client's, such as a directory, which the server must not
// read).
const (
	throughServerAnnotation = "starplan/through-server"
	throughWithoutArgs      = "without-args"
)

func throughServer(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[throughServerAnnotation] = "yes"
	return cmd
}

// writeFrame writes a frame in one write: a frame is whole on the wire or not at all, and a
// peer that has read it and gone does not fail a second write of its (maybe empty) payload.
func writeFrame(w io.Writer, typ byte, payload []byte) error {
	frame := make([]byte, 5+len(payload))
	frame[0] = typ
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(payload)))
	copy(frame[5:], payload)
	_, err := w.Write(frame)
	return err
}

func readFrame(r io.Reader) (typ byte, payload []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("a frame of %d bytes is larger than %d", n, maxFrame)
	}
	// Read as it arrives: a peer that announces a large frame and stalls holds only what it sent.
	payload, err = io.ReadAll(io.LimitReader(r, int64(n)))
	if err == nil && len(payload) < int(n) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return 0, nil, err
	}
	return head[0], payload, nil
}

// frameWriter writes each Write as one frame (or several, for a large one) of its type.
type frameWriter struct {
	mu  *sync.Mutex // shared by a connection's writers
	w   io.Writer
	typ byte
}

func (f frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for done := 0; done < len(p); {
		n := min(len(p)-done, maxFrame)
		if err := writeFrame(f.w, f.typ, p[done:done+n]); err != nil {
			return done, err
		}
		done += n
	}
	return len(p), nil
}

// stallWriter writes to a client's connection, giving each write idle to go through: a client
// that stops reading (a forgotten pipe, a suspended terminal) ends its command, which fail
// cancels, instead of holding a command slot for good.
type stallWriter struct {
	conn   net.Conn
	idle   time.Duration
	fail   func()
	broken atomic.Pointer[error] // the first failed write's error: every later write fails at once
}

func (w *stallWriter) Write(p []byte) (int, error) {
	if err := w.broken.Load(); err != nil {
		return 0, *err
	}
	if w.idle > 0 {
		w.conn.SetWriteDeadline(time.Now().Add(w.idle))
	}
	n, err := w.conn.Write(p)
	if err != nil {
		w.broken.CompareAndSwap(nil, &err)
		w.fail()
	}
	return n, err
}

// relayCommand runs the command through the server on its store, if one answers on the store's
// socket. relayed is false when none does: the command then runs here.
func relayCommand(ctx context.Context, ios IOStreams, g *globalOptions) (code int, relayed bool, err error) {
	target, err := storeTarget(ios, g)
	if err != nil {
		return 0, false, nil // the command reports it itself
	}
	dir, local := localDir(target)
	if !local {
		return 0, false, nil // a database's store: every process opens it itself
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	conn, err := d.DialContext(dctx, "unix", filepath.Join(dir, SocketName))
	cancel()
	if err != nil {
		return 0, false, nil // no server (or a stale socket a killed server left)
	}
	defer conn.Close()
	wd := ios.Dir
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return 0, true, withCode(ExitInternal, fmt.Errorf("finding the working directory: %w", err), "")
		}
	}
	hello, err := json.Marshal(relayHello{Version: relayVersion, Args: ios.args, Env: relayedEnv(ios.Getenv), Dir: wd,
		OutTTY: ios.OutTTY, InTTY: ios.InTTY, ErrTTY: ios.ErrTTY, Width: ios.Width})
	if err != nil {
		return 0, true, withCode(ExitInternal, err, "")
	}
	var mu sync.Mutex
	if err := writeFrame(conn, frameHello, hello); err != nil {
		return 0, true, serverGone(dir, err)
	}
	// Standard input goes to the command as it comes; the command may never read it.
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, rerr := ios.In.Read(buf)
			if n > 0 {
				mu.Lock()
				werr := writeFrame(conn, frameStdin, buf[:n])
				mu.Unlock()
				if werr != nil {
					return
				}
			}
			if rerr != nil {
				mu.Lock()
				_ = writeFrame(conn, frameEOF, nil)
				mu.Unlock()
				return
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // Ctrl-C: the server cancels the command
	defer stop()
	r := bufio.NewReader(conn)
	// A server answers every hello at once; one whose socket accepts but that never answers (it
	// is stuck, or its relay has stopped) is named, not waited for in silence.
	answerWithin := relayAnswerTimeout
	if ios.relayAnswer > 0 {
		answerWithin = ios.relayAnswer
	}
	conn.SetReadDeadline(time.Now().Add(answerWithin))
	for answered := false; ; {
		typ, payload, err := readFrame(r)
		if err != nil {
			if ctx.Err() != nil {
				return 0, true, ctx.Err()
			}
			if !answered && errors.Is(err, os.ErrDeadlineExceeded) {
				return 0, true, withCode(ExitInternal, fmt.Errorf("the server on %s accepted the command but did not answer within %s", dir, answerWithin),
					"see whether starplan serve is still running on it (stop it, or restart it); nothing was run")
			}
			return 0, true, serverGone(dir, err)
		}
		if !answered {
			answered = true
			conn.SetReadDeadline(time.Time{})
		}
		switch typ {
		case frameAck:
		case frameStdout:
			ios.Out.Write(payload)
		case frameStderr:
			ios.Err.Write(payload)
		case frameExit:
			if len(payload) != 4 {
				return 0, true, serverGone(dir, errors.New("a malformed exit frame"))
			}
			return int(binary.BigEndian.Uint32(payload)), true, nil
		default:
			return 0, true, serverGone(dir, fmt.Errorf("an unknown frame %q", typ))
		}
	}
}

func serverGone(dir string, err error) error {
	return withCode(ExitInternal, fmt.Errorf("the server on %s stopped answering: %w", dir, err),
		"see whether starplan serve is still running on it; the command may or may not have finished (starplan runs shows what was recorded)")
}

// relayServer runs the commands of clients that connect to a server's socket.
type relayServer struct {
	host    *host
	ln      net.Listener
	path    string
	ctx     context.Context // cancelled when the server stops: running commands end
	stop    context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]*stdinBuffer // each client's input (nil until its hello is read)
	closing bool
	// slots holds a token per command running; pending counts connections whose hello has not
	// come yet (they hold no slot).
	slots   chan struct{}
	pending int
	// The bounds below (tests lower them): maxRelayClients, maxRelayPending, helloTimeout and
	// relayIdleInput.
	maxClients   int
	maxPending   int
	helloTimeout time.Duration
	idle         time.Duration
}

// The bounds of a relay server: commands run at once (the next client is told the server is
// busy, at once), connections that have not said what they want yet (more are closed as they
// come) and how long they may take to, how long a command may wait on its client (for input, a
// forgotten `exec -` or `[y/N]`, before that input ends; to take output, a client that stopped
// reading, before the command is ended), and how long a stopping server waits
// for the commands it ended to say so to their clients. relayAnswerTimeout is how long a client
// waits for the server's first answer.
const (
	maxRelayClients    = 64
	maxRelayPending    = 256
	helloTimeout       = 10 * time.Second
	relayIdle          = 10 * time.Minute
	relayEndWait       = 2 * time.Second
	relayAnswerTimeout = 10 * time.Second
)

// listenRelay listens on the store directory's socket. A socket file left by a server that is
// gone is replaced: the store's lock, which this server holds, proves no other server runs.
func listenRelay(dir string, eng *engine.Engine) (*relayServer, error) {
	path := filepath.Join(dir, SocketName)
	if len(path) >= 108 { // sockaddr_un's sun_path, with its terminating zero
		return nil, fmt.Errorf("the socket path %s is longer than a unix socket path may be", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &relayServer{host: &host{eng: eng}, ln: ln, path: path, ctx: ctx, stop: stop, conns: map[net.Conn]*stdinBuffer{},
		maxClients: maxRelayClients, maxPending: maxRelayPending, helloTimeout: helloTimeout, idle: relayIdle}, nil
}

// serve accepts clients until close. A failed accept (a descriptor flood's EMFILE) is waited
// out, never the end of the relay; a connection beyond maxPending that has not yet said what it
// wants is closed at once.
func (s *relayServer) serve() {
	s.slots = make(chan struct{}, s.maxClients)
	var backoff time.Duration
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			conn.Close()
			return
		}
		if s.pending >= s.maxPending {
			s.mu.Unlock()
			conn.Close()
			continue
		}
		s.pending++
		s.conns[conn] = nil
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				conn.Close()
			}()
			s.run(conn)
		}()
	}
}

// helloDone marks a connection's hello as read (or failed): it no longer counts as pending.
func (s *relayServer) helloDone() {
	s.mu.Lock()
	s.pending--
	s.mu.Unlock()
}

// close stops accepting, lets the commands still running finish for at most grace, then ends
// them: their contexts are cancelled (Ctrl-C's exit code) and their input ends, so a command
// waiting for its client's answer returns. Each has relayEndWait to tell its client; then the
// connections are closed and the socket removed. A command stuck in the kernel (it should not
// be: hosted commands open only regular files) is left behind rather than holding the server.
func (s *relayServer) close(grace time.Duration) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.closing = true
	s.ln.Close()
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	wait := func(d time.Duration) bool {
		select {
		case <-done:
			return true
		case <-time.After(d):
			return false
		}
	}
	if !wait(grace) {
		s.mu.Lock()
		s.stop()
		for _, in := range s.conns {
			if in != nil {
				in.close(io.EOF)
			}
		}
		s.mu.Unlock()
		if !wait(relayEndWait) {
			s.mu.Lock()
			for c := range s.conns {
				c.Close()
			}
			s.mu.Unlock()
			wait(relayEndWait)
		}
	}
	s.stop()
	os.Remove(s.path)
}

// hostWhileWaiting lets the commands of other processes use the store through this one while it
// holds the store for a long time (ask, waiting for a model), as `starplan serve` does. The
// returned function stops, giving those commands a moment to finish. Where no socket can be
// made, nothing is served: the others then find the store in use, as before.
func hostWhileWaiting(ios IOStreams, e *engine.Engine) (stop func()) {
	if ios.host != nil { // already inside a server
		return func() {}
	}
	dir, local := storeDirOf(e)
	if !local {
		return func() {} // nobody waits for a database's store: every process opens it itself
	}
	relay, err := listenRelay(dir, e)
	if err != nil {
		return func() {}
	}
	go relay.serve()
	return func() { relay.close(hostGrace) }
}

// hostGrace is how long a command that hosted others waits for them before it ends them.
const hostGrace = 2 * time.Second

// run serves one client: its command, with its input, output and exit code.
func (s *relayServer) run(conn net.Conn) {
	helloDone := sync.OnceFunc(s.helloDone)
	defer helloDone()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	client := &stallWriter{conn: conn, idle: s.idle, fail: cancel}
	var wmu sync.Mutex
	exit := func(code int) {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(code))
		wmu.Lock()
		_ = writeFrame(client, frameExit, b[:])
		wmu.Unlock()
	}
	stderr := frameWriter{mu: &wmu, w: client, typ: frameStderr}
	if err := samePeer(conn); err != nil {
		fmt.Fprintf(stderr, "Error: %s\n", err)
		exit(ExitUsage)
		return
	}
	defer func() {
		// A fault in one client's command must not take the server down with it.
		if v := recover(); v != nil {
			fmt.Fprintf(stderr, "Error: starplan failed while running the command: %v\n", v)
			exit(ExitInternal)
		}
	}()
	conn.SetReadDeadline(time.Now().Add(s.helloTimeout))
	r := bufio.NewReader(conn)
	typ, payload, err := readFrame(r)
	conn.SetReadDeadline(time.Time{})
	helloDone()
	var hello relayHello
	if err == nil && typ == frameHello {
		err = json.Unmarshal(payload, &hello)
	} else if err == nil {
		err = fmt.Errorf("the first frame is %q, not a hello", typ)
	}
	if err == nil && hello.Version != relayVersion {
		err = fmt.Errorf("the client speaks version %d of the protocol, this server %d", hello.Version, relayVersion)
	}
	if err != nil {
		fmt.Fprintf(stderr, "Error: %s\nTry: use the same starplan binary as the server\n", safe(err.Error()))
		exit(ExitUsage)
		return
	}
	// The slot is freed once the command's exit code is known and before the client hears it, so
	// a client that runs its next command as soon as this one ends finds the slot free.
	release := sync.OnceFunc(func() { <-s.slots })
	select {
	case s.slots <- struct{}{}:
		defer release()
	default:
		fmt.Fprintf(stderr, "Error: the server on this store is busy (%d commands running, the most it runs at once)\nTry: run the command again in a moment; starplan runs shows what the others did\n", s.maxClients)
		exit(ExitInternal)
		return
	}
	wmu.Lock()
	err = writeFrame(client, frameAck, nil)
	wmu.Unlock()
	if err != nil {
		return
	}
	in := newStdinBuffer()
	in.idle = s.idle
	defer in.close(io.EOF) // the command is over: a reader waiting to add input gives up
	s.mu.Lock()
	s.conns[conn] = in
	s.mu.Unlock()
	go func() {
		// The client's input, until it ends; then the connection's end is the client's Ctrl-C.
		for {
			typ, payload, err := readFrame(r)
			switch {
			case err != nil:
				in.close(io.ErrUnexpectedEOF)
				cancel()
				return
			case typ == frameStdin:
				if !in.add(payload) {
					return // the command ended
				}
			case typ == frameEOF:
				in.close(io.EOF)
			}
		}
	}()
	ios := IOStreams{
		In: in, Out: frameWriter{mu: &wmu, w: client, typ: frameStdout}, Err: stderr,
		OutTTY: hello.OutTTY, InTTY: hello.InTTY, ErrTTY: hello.ErrTTY, Width: hello.Width,
		Getenv: func(k string) string { return hello.Env[k] },
		Dir:    hello.Dir,
		host:   s.host,
	}
	code := MainContext(ctx, hello.Args, ios)
	release()
	exit(code)
}

// stdinBuffer holds a client's standard input until the command reads it.
type stdinBuffer struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte
	err  error // set when the input ended
	// idle is how long a Read waits for input before the input ends with an *idleInputError
	// (0: for good).
	idle time.Duration
	// overflow: input was dropped (see add); a Read past what was kept fails.
	overflow bool
}

// idleInputError ends a relayed command's input that its client left waiting.
type idleInputError struct{ idle time.Duration }

func (e *idleInputError) Error() string {
	return fmt.Sprintf("no input came from the client for %s, so the server stopped waiting for it", e.idle)
}

func newStdinBuffer() *stdinBuffer {
	b := &stdinBuffer{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// add appends input, or drops it (for good) once the command has maxStdinBacklog bytes it has
// not read: a command that reads on gets errInputTooLarge after what was kept. It never waits,
// so the connection is read on and the client's end noticed. False once the input is closed.
func (b *stdinBuffer) add(p []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return false
	}
	if b.overflow || len(b.buf)+len(p) > maxStdinBacklog {
		b.overflow = true
		return true
	}
	b.buf = append(b.buf, p...)
	b.cond.Broadcast()
	return true
}

// errInputTooLarge is what a command reads after the input a relay kept for it, when its client
// sent more than maxStdinBacklog bytes it had not read.
var errInputTooLarge = fmt.Errorf("the input is larger than the %s a command run through the server may be sent", builtins.FormatBytes(maxStdinBacklog))

func (b *stdinBuffer) close(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
	b.cond.Broadcast()
}

func (b *stdinBuffer) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 && b.overflow {
		return 0, errInputTooLarge
	}
	if len(b.buf) == 0 && b.err == nil && b.idle > 0 {
		timedOut := false
		t := time.AfterFunc(b.idle, func() {
			b.mu.Lock()
			timedOut = true
			b.cond.Broadcast()
			b.mu.Unlock()
		})
		defer t.Stop()
		for len(b.buf) == 0 && b.err == nil && !timedOut {
			b.cond.Wait()
		}
		if len(b.buf) == 0 && b.err == nil {
			b.err = &idleInputError{b.idle}
		}
	}
	for len(b.buf) == 0 && b.err == nil {
		b.cond.Wait()
	}
	if len(b.buf) == 0 {
		return 0, b.err
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	b.cond.Broadcast() // room for a waiting add
	return n, nil
}

// relayRefusal is the error of a command a client asked a server for that does not run there.
func relayRefusal(cmd *cobra.Command) error {
	return withCode(ExitUsage, fmt.Errorf("%s does not run through starplan serve", strings.TrimPrefix(cmd.CommandPath(), "starplan ")),
		"stop the server on this store to run it, or run it on another store with --db")
}

// errNotRegular is the error of a file a command running in a server for a client may not read.
var errNotRegular = errors.New("through the server on this store only a regular file can be read, not a pipe, device or terminal; pass - and send it on standard input")

// errProcessState is the error of a path that names the server's own process state rather than
// a file of the client's: /proc (environ, fds, memory), /sys, and links through them (/dev/fd,
// /dev/stdin). Read there by the server, it would be the server's environment, model key
// included, not anything the client has.
var errProcessState = errors.New("through the server on this store a command cannot read /proc, /sys or /dev: those would be the server's own process state, not the client's files; copy the file, or pass - and send it on standard input")

// hostedPath resolves every link of path and refuses one that is, or passes through, a system
// directory of process state. The file is then opened by the resolved path, so a link cannot
// change between the look and the open into one of them (a "magic" link of /proc/self/fd is never
// followed: it does not resolve to a name).
func hostedPath(path string) (string, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		if strings.HasPrefix(filepath.Clean(path), "/proc/") || strings.HasPrefix(filepath.Clean(path), "/dev/") {
			return "", errProcessState
		}
		return "", err
	}
	for _, dir := range []string{"/proc", "/sys", "/dev"} {
		if resolved == dir || strings.HasPrefix(resolved, dir+"/") {
			return "", errProcessState
		}
	}
	return resolved, nil
}

func regularOnly(f *os.File) (*os.File, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, errNotRegular
	}
	return f, nil
}

// openInput opens a file a command reads: the client's regular file when it runs in a server
// for a client (see openRegular), any file otherwise.
func (s IOStreams) openInput(name string) (*os.File, error) {
	if s.host != nil {
		path, err := hostedPath(s.path(name))
		if err != nil {
			return nil, err
		}
		return openRegular(path)
	}
	return os.Open(s.path(name))
}
