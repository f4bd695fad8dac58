package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/bolt"
)

// relayFixture is `starplan serve` running in process on a store, and a way to run client
// commands on the same store, as another process would.
type relayFixture struct {
	t    *testing.T
	dir  string
	errb *syncBuffer
	stop context.CancelFunc
	code chan int
}

func startServe(t *testing.T) *relayFixture {
	// A short directory: a unix socket's path has at most 107 bytes.
	base, err := os.MkdirTemp("", "sp")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	return startServeAt(t, filepath.Join(base, "store"))
}

// startServeAt is startServe on the store in dir.
func startServeAt(t *testing.T, dir string) *relayFixture {
	ctx := deadline(t)
	f := &relayFixture{t: t, dir: dir, errb: &syncBuffer{}, code: make(chan int, 1)}
	sctx, stop := context.WithCancel(ctx)
	f.stop = stop
	go func() {
		ios := IOStreams{In: strings.NewReader(""), Out: io.Discard, Err: f.errb, Getenv: func(string) string { return "" }}
		f.code <- MainContext(sctx, []string{"--db", f.dir, "--in-process", "serve", "--listen", "127.0.0.1:0"}, ios)
	}()
	// Wait for the socket (the server prints the line after listening on it).
	for !strings.Contains(f.errb.String(), "go through") {
		select {
		case c := <-f.code:
			t.Fatalf("serve exited with %d: %s", c, f.errb)
		case <-ctx.Done():
			t.Fatalf("serve never listened: %s", f.errb)
		default:
			waitABit()
		}
	}
	t.Cleanup(func() { f.shutdown() })
	return f
}

func (f *relayFixture) shutdown() int {
	f.stop()
	select {
	case c := <-f.code:
		f.code <- c
		return c
	case <-deadline(f.t).Done():
		f.t.Fatal("serve did not stop")
		return -1
	}
}

// run is a client command on the server's store, with its own streams.
func (f *relayFixture) run(ctx context.Context, ios IOStreams, args ...string) int {
	if ios.Getenv == nil {
		ios.Getenv = func(k string) string { return map[string]string{"NO_COLOR": "1"}[k] }
	}
	return MainContext(ctx, append([]string{"--db", f.dir}, args...), ios)
}

func (f *relayFixture) runOut(args ...string) output {
	var out, errb syncBuffer
	code := f.run(context.Background(), IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb}, args...)
	return output{code, out.String(), errb.String()}
}

// While a server holds the store, the commands that use it run inside the server for the
// client: the same output, the client's input and working directory, its exit code.
func TestCommandsGoThroughARunningServer(t *testing.T) {
	t.Parallel()
	f := startServe(t)

	// exec on a terminal: the plan is read from the client's directory, the diff is shown, the
	// client's answer applies it.
	examples, err := filepath.Abs(filepath.Dir(example("02_purchase_wayfarer.star")))
	require.NoError(t, err)
	var out, errb syncBuffer
	code := f.run(context.Background(), IOStreams{In: strings.NewReader("y\n"), Out: &out, Err: &errb, OutTTY: true, InTTY: true, Dir: examples},
		"exec", "02_purchase_wayfarer.star")
	require.Equal(t, ExitOK, code, "%s\n%s\n%s", out.String(), errb.String(), f.errb)
	assert.Contains(t, out.String(), "~ SG002    6 → 3")
	assert.Contains(t, out.String(), "Apply these changes? [y/N]")
	assert.Contains(t, out.String(), "Applied run r_")

	// Piped, the result document; the exit code is the run's.
	o := f.runOut("exec", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	assert.True(t, res.Pending)
	o = f.runOut("apply", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)
	o = f.runOut("apply", res.RunID)
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "already applied")

	o = f.runOut("runs", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	var runs []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(o.out), &runs))
	assert.Len(t, runs, 2)
	o = f.runOut("db", "dump", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, `"transactions"`)

	// What must have the file to itself still says the store is in use, and by whom.
	o = f.runOut("db", "check")
	assert.Equal(t, ExitInternal, o.code)
	assert.Contains(t, o.err, "is held by `starplan serve`")

	// Once the server is gone, so is its socket, and commands open the store themselves.
	require.Equal(t, ExitOK, f.shutdown(), f.errb.String())
	_, err = os.Stat(filepath.Join(f.dir, SocketName))
	assert.True(t, os.IsNotExist(err), "the socket is removed")
	o = f.runOut("runs", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	require.NoError(t, json.Unmarshal([]byte(o.out), &runs))
	assert.Len(t, runs, 2)
}

// A client's Ctrl-C ends the command the server runs for it: the client exits 130, and the
// run it was asked to approve stays pending.
func TestRelayedCommandEndsWithItsClient(t *testing.T) {
	t.Parallel()
	f := startServe(t)
	ctx, cancel := context.WithCancel(context.Background())
	in, typing := io.Pipe() // a terminal nobody types on
	defer typing.Close()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- f.run(ctx, IOStreams{In: in, Out: &out, Err: &errb, OutTTY: true, InTTY: true}, "exec", example("02_purchase_wayfarer.star"))
	}()
	for !strings.Contains(out.String(), "[y/N]") {
		waitABit()
	}
	cancel()
	require.Equal(t, ExitInterrupted, <-done, errb.String())

	o := f.runOut("runs", "--state", "pending", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	var runs []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(o.out), &runs))
	assert.Len(t, runs, 1, "the run waits for an apply")
}

// The server runs only the commands that use its store, whatever a client sends.
func TestServerRefusesOtherCommandsOnItsSocket(t *testing.T) {
	t.Parallel()
	f := startServe(t)
	manDir := filepath.Join(t.TempDir(), "man")
	for _, args := range [][]string{{"serve"}, {"demo"}, {"db", "check"}, {"docs", "man", manDir}, {"domain", "show", t.TempDir()}} {
		conn, err := net.Dial("unix", filepath.Join(f.dir, SocketName))
		require.NoError(t, err)
		hello, _ := json.Marshal(relayHello{Version: relayVersion, Args: args})
		require.NoError(t, writeFrame(conn, frameHello, hello))
		_ = writeFrame(conn, frameEOF, nil) // the server may have answered already
		var stderr strings.Builder
		code := -1
		r := bufio.NewReader(conn)
		for code < 0 {
			typ, payload, err := readFrame(r)
			require.NoError(t, err)
			switch typ {
			case frameStderr:
				stderr.Write(payload)
			case frameExit:
				code = int(payload[3])
			}
		}
		conn.Close()
		assert.Equal(t, ExitUsage, code, "%v: %s", args, stderr.String())
		assert.Contains(t, stderr.String(), "does not run through starplan serve", args)
	}
	_, err := os.Stat(manDir)
	assert.True(t, os.IsNotExist(err), "docs man wrote nothing")

	// And a client of another protocol version is told so.
	conn, err := net.Dial("unix", filepath.Join(f.dir, SocketName))
	require.NoError(t, err)
	defer conn.Close()
	hello, _ := json.Marshal(relayHello{Version: relayVersion + 1, Args: []string{"runs"}})
	require.NoError(t, writeFrame(conn, frameHello, hello))
	typ, payload, err := readFrame(conn)
	require.NoError(t, err)
	assert.Equal(t, byte(frameStderr), typ)
	assert.Contains(t, string(payload), "version")
}

// waitABit paces a loop that waits for another goroutine; only the test's deadline bounds it.
func waitABit() { time.Sleep(5 * time.Millisecond) }

// Through a server, a command reads only the client's regular files: /dev/stdin would be the
// server's own input, and a FIFO nobody writes to would hold the server in the kernel for good.
func TestRelayedCommandsReadOnlyRegularFiles(t *testing.T) {
	t.Parallel()
	f := startServe(t)
	fifo := filepath.Join(t.TempDir(), "plan.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, args := range [][]string{{"exec", fifo}, {"db", "import", "inventory", fifo, "--format", "csv"}} {
		o := f.runOut(args...)
		assert.Equal(t, ExitUsage, o.code, "%v: %s", args, o.err)
		assert.Contains(t, o.err, "only a regular file can be read", args)
		assert.Contains(t, o.err, "pass -", args)
	}
	// The server's own process state is not the client's file, whichever way it is named: the
	// environment holds the model's key, and an error or a run's program would quote it.
	link := filepath.Join(t.TempDir(), "env")
	require.NoError(t, os.Symlink("/proc/self/environ", link))
	mounted := t.TempDir() // procfs where no prefix says so
	procAt := ""
	if syscall.Mount("proc", mounted, "proc", 0, "") == nil {
		t.Cleanup(func() { syscall.Unmount(mounted, 0) })
		procAt = filepath.Join(mounted, "self", "environ")
	}
	for _, name := range []string{"/proc/self/environ", "/proc/self/cmdline", "/dev/stdin", "/dev/fd/0", "/sys/kernel/address_bits", link, procAt} {
		if name == "" {
			continue
		}
		for _, args := range [][]string{{"exec", "--json", name}, {"db", "import", "inventory", name, "--format", "csv"}} {
			o := f.runOut(args...)
			assert.Equal(t, ExitUsage, o.code, "%v: %s", args, o.err)
			assert.Contains(t, o.err, "cannot read /proc, /sys or /dev", args)
			assert.NotContains(t, o.out+o.err, "PATH=", args)
		}
	}
	// The same plan on standard input is fine.
	plan, err := os.ReadFile(example("02_purchase_wayfarer.star"))
	require.NoError(t, err)
	var out, errb syncBuffer
	code := f.run(context.Background(), IOStreams{In: strings.NewReader(string(plan)), Out: &out, Err: &errb}, "exec", "-")
	assert.Equal(t, ExitOK, code, errb.String())
	assert.Equal(t, ExitOK, f.shutdown(), "the server stops: nothing of it is stuck: %s", f.errb)
}

// Input a command does not read slows its client down; it never ends the command.
func TestRelayedCommandIgnoringLotsOfInput(t *testing.T) {
	t.Parallel()
	f := startServe(t)
	lots := io.LimitReader(repeatReader('y'), 3*maxStdinBacklog)
	var out, errb syncBuffer
	code := f.run(context.Background(), IOStreams{In: lots, Out: &out, Err: &errb}, "runs", "--json")
	assert.Equal(t, ExitOK, code, errb.String())
	assert.Contains(t, out.String(), "[")
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// A stopping server ends the commands it runs for clients and tells each client how they ended:
// a command waiting for its client's answer sees its input end.
func TestStoppingServerTellsItsClients(t *testing.T) {
	t.Parallel()
	f := startServe(t)
	in, typing := io.Pipe() // a terminal nobody types on
	defer typing.Close()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- f.run(context.Background(), IOStreams{In: in, Out: &out, Err: &errb, OutTTY: true, InTTY: true}, "exec", example("02_purchase_wayfarer.star"))
	}()
	for !strings.Contains(out.String(), "[y/N]") {
		waitABit()
	}
	require.Equal(t, ExitOK, f.shutdown(), f.errb.String())
	assert.Equal(t, ExitOK, <-done, "%s\n%s", out.String(), errb.String())
	assert.Contains(t, out.String(), "Not applied. To apply later: starplan apply r_")
	assert.NotContains(t, errb.String(), "stopped answering")
}

// A server that starts while exec waits at [y/N] holds the store; the approval goes through it.
func TestApprovalGoesThroughAServerThatStartedMeanwhile(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("", "sp")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "store")
	var f *relayFixture
	answer := &promptReader{answer: "y\n", meanwhile: func() { f = startServeAt(t, dir) }}
	var out, errb syncBuffer
	code := MainContext(context.Background(), []string{"--db", dir, "exec", example("02_purchase_wayfarer.star")},
		IOStreams{In: answer, Out: &out, Err: &errb, OutTTY: true, InTTY: true, Getenv: func(k string) string { return map[string]string{"NO_COLOR": "1"}[k] }})
	require.True(t, answer.asked)
	assert.Equal(t, ExitOK, code, "%s\n%s", out.String(), errb.String())
	assert.Contains(t, out.String(), "Applied run r_")
	o := f.runOut("runs", "--state", "applied", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	var runs []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(o.out), &runs))
	assert.Len(t, runs, 1)
}

// relayOn is a relay server over an engine of a fresh store in a short directory, with its
// bounds set by lower (nil: the defaults) before it serves.
func relayOn(t *testing.T, lower func(r *relayServer)) *relayServer {
	return relayOnStore(t, nil, lower)
}

// relayOnStore is relayOn with the store filled by fill (nil: the demo data alone) first.
func relayOnStore(t *testing.T, fill func(st *bolt.Store), lower func(r *relayServer)) *relayServer {
	base, err := os.MkdirTemp("", "sp")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	st, err := bolt.Open(filepath.Join(base, "store"), bolt.Options{})
	require.NoError(t, err)
	if fill != nil {
		fill(st)
	}
	e, err := engine.New(st, engine.Options{})
	require.NoError(t, err)
	r, err := listenRelay(st.Dir(), e)
	require.NoError(t, err)
	if lower != nil {
		lower(r)
	}
	go r.serve()
	t.Cleanup(func() { r.close(0); e.Close(); st.Close() })
	return r
}

// helloOn connects to r and sends a hello for args; the command starts (or is refused) then.
func helloOn(t *testing.T, r *relayServer, args ...string) net.Conn {
	t.Helper()
	conn, err := net.Dial("unix", r.path)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // a relay that never answers fails the test, not hangs it
	b, _ := json.Marshal(relayHello{Version: relayVersion, Args: args, Env: map[string]string{"NO_COLOR": "1"}})
	require.NoError(t, writeFrame(conn, frameHello, b))
	return conn
}

// ackOf reads a connection's first frame, which must say the command started.
func ackOf(t *testing.T, conn net.Conn) {
	t.Helper()
	typ, _, err := readFrame(conn)
	require.NoError(t, err)
	require.Equal(t, byte(frameAck), typ)
}

// exitOf reads a relay connection's frames to its exit code, collecting standard error.
func exitOf(t *testing.T, conn net.Conn) (int, string) {
	var stderr strings.Builder
	r := bufio.NewReader(conn)
	for {
		typ, payload, err := readFrame(r)
		require.NoError(t, err)
		switch typ {
		case frameStderr:
			stderr.Write(payload)
		case frameExit:
			return int(payload[3]), stderr.String()
		}
	}
}

// A client that connects and never says what it wants is answered and let go after the hello
// deadline, instead of holding a slot for good.
func TestRelayHelloDeadline(t *testing.T) {
	t.Parallel()
	r := relayOn(t, func(r *relayServer) { r.helloTimeout = 50 * time.Millisecond })
	conn, err := net.Dial("unix", r.path)
	require.NoError(t, err)
	defer conn.Close()
	code, stderr := exitOf(t, conn)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, stderr, "timeout")
}

// At most maxClients commands run at once: the next client is told the server is busy at once,
// and is served again once a slot is free.
func TestRelayClientCap(t *testing.T) {
	t.Parallel()
	r := relayOn(t, func(r *relayServer) { r.maxClients = 1 })
	first := helloOn(t, r, "exec", "-") // reads its plan from input that has not ended
	ackOf(t, first)
	code, stderr := exitOf(t, helloOn(t, r, "runs", "--json"))
	assert.Equal(t, ExitInternal, code)
	assert.Contains(t, stderr, "the server on this store is busy (1 commands running")
	assert.Contains(t, stderr, "Try: run the command again")

	require.NoError(t, writeFrame(first, frameEOF, nil))
	code, _ = exitOf(t, first)
	assert.Equal(t, ExitRejected, code, "an empty plan")
	code, _ = exitOf(t, helloOn(t, r, "runs", "--json"))
	assert.Equal(t, ExitOK, code, "a slot freed is served")
}

// 64 forgotten `exec -` fill every slot; the 65th command is answered, not left hanging.
func TestRelayFullOfStuckClientsAnswersTheNext(t *testing.T) {
	t.Parallel()
	r := relayOn(t, nil)
	for range maxRelayClients {
		ackOf(t, helloOn(t, r, "exec", "-"))
	}
	var out, errb syncBuffer
	ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }}
	code := MainContext(deadline(t), []string{"--db", filepath.Dir(r.path), "runs"}, ios)
	assert.Equal(t, ExitInternal, code)
	assert.Contains(t, errb.String(), "busy (64 commands running")
}

// Connections that say nothing hold no command slot; past maxPending they are closed at once.
func TestRelaySilentConnectionsHoldNoSlot(t *testing.T) {
	t.Parallel()
	r := relayOn(t, func(r *relayServer) { r.maxClients, r.maxPending = 1, 3 })
	pending := func(n int) {
		require.Eventually(t, func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.pending == n
		}, 10*time.Second, time.Millisecond)
	}
	silent := func() {
		conn, err := net.Dial("unix", r.path)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
	}
	silent()
	silent()
	pending(2)
	code, _ := exitOf(t, helloOn(t, r, "runs", "--json"))
	assert.Equal(t, ExitOK, code, "the silent connections hold no slot")

	silent()
	pending(3)
	extra, err := net.Dial("unix", r.path)
	require.NoError(t, err)
	defer extra.Close()
	_, _, err = readFrame(extra)
	assert.Error(t, err, "a connection past the pending bound is closed unanswered")
	pending(3)
}

// A command waiting for input its client never sends gives up after the idle bound.
func TestRelayIdleInputEnds(t *testing.T) {
	t.Parallel()
	r := relayOn(t, func(r *relayServer) { r.idle = 20 * time.Millisecond })
	conn := helloOn(t, r, "exec", "-")
	code, stderr := exitOf(t, conn)
	assert.Equal(t, ExitInternal, code, stderr)
	assert.Contains(t, stderr, "no input came from the client for 20ms")
}

// failingListener fails its first n Accepts as a process out of descriptors does.
type failingListener struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.n > 0
	l.n--
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// A failed accept (a descriptor flood) once ended the relay for good, and every later command
// hung. The relay waits it out and serves again.
func TestRelayServesAgainAfterFailedAccepts(t *testing.T) {
	t.Parallel()
	r := relayOn(t, func(r *relayServer) { r.ln = &failingListener{Listener: r.ln, n: 5} })
	code, stderr := exitOf(t, helloOn(t, r, "runs", "--json"))
	assert.Equal(t, ExitOK, code, stderr)
}

// A server whose socket accepts but never answers is named after relayAnswer, not waited on.
func TestRelayClientGivesUpOnASilentServer(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("", "sp")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	ln, err := net.Listen("unix", filepath.Join(base, SocketName))
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, never answered
		}
	}()
	var out, errb syncBuffer
	ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }, relayAnswer: 50 * time.Millisecond}
	code := MainContext(deadline(t), []string{"--db", base, "runs"}, ios)
	assert.Equal(t, ExitInternal, code)
	assert.Contains(t, errb.String(), "accepted the command but did not answer within 50ms")
}

// A command that needs the store to itself, on a store a server holds, names the server (its
// pid and address) and says to stop it; once it stops, its info file is gone and the command
// runs. A store held by another command gets the plain message.
func TestAStoreHeldByAServerNamesIt(t *testing.T) {
	t.Parallel()
	f := startServe(t)
	for !strings.Contains(f.errb.String(), "listening on http://") {
		waitABit()
	}
	var addr string
	for !strings.Contains(addr, "http://") {
		if info, ok := readServeInfo(f.dir); ok {
			addr = info.HTTP
		} else {
			waitABit()
		}
	}
	require.Contains(t, f.errb.String(), "listening on "+addr+" ")

	// Both at once: each waits out the store's lock timeout before it looks for the server.
	var wg sync.WaitGroup
	for _, args := range [][]string{{"db", "check"}, {"db", "init"}} {
		wg.Go(func() {
			o := f.runOut(args...)
			assert.Equal(t, ExitInternal, o.code, args)
			assert.Contains(t, o.err, fmt.Sprintf("Error: the store at %s is held by `starplan serve` (pid %d, serving %s)\n", f.dir, os.Getpid(), addr), args)
			assert.Contains(t, o.err, fmt.Sprintf("Try: stop the server (Ctrl-C where it runs, or kill %d), then run this command again", os.Getpid()), args)
			assert.NotContains(t, o.err, "wait for the other starplan command", args)
		})
	}
	wg.Wait()

	require.Equal(t, ExitOK, f.shutdown(), f.errb.String())
	_, err := os.Stat(filepath.Join(f.dir, ServeInfoName))
	assert.True(t, os.IsNotExist(err), "the info file is removed")
	o := f.runOut("db", "check")
	assert.Equal(t, ExitOK, o.code, o.err)

	// Held by a process that is not a server (here: this one, through an open store), the
	// message is the plain one, even with a stale info file left by a killed server.
	_, err = writeServeInfo(f.dir, serveInfo{PID: 1, HTTP: "http://127.0.0.1:1"})
	require.NoError(t, err)
	st, err := bolt.Open(f.dir, bolt.Options{MustExist: true})
	require.NoError(t, err)
	defer st.Close()
	o = f.runOut("db", "check")
	assert.Equal(t, ExitInternal, o.code)
	assert.Contains(t, o.err, "is in use by another starplan process")
	assert.NotContains(t, o.err, "starplan serve")

	// Nor when that process answers on the socket as ask does while it waits for the model: the
	// stale file names another pid than the one listening.
	if runtime.GOOS == "linux" {
		relay, err := listenRelay(f.dir, nil)
		require.NoError(t, err)
		go relay.serve()
		defer relay.close(0)
		o = f.runOut("db", "check")
		assert.Equal(t, ExitInternal, o.code)
		assert.Contains(t, o.err, "is in use by another starplan process")
		assert.NotContains(t, o.err, "starplan serve")
	}
}
