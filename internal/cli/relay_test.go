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
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
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
	f := startServe(t)
	fifo := filepath.Join(t.TempDir(), "plan.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, args := range [][]string{{"exec", "/dev/stdin"}, {"exec", fifo}, {"db", "import", "inventory", fifo, "--format", "csv"}} {
		o := f.runOut(args...)
		assert.Equal(t, ExitUsage, o.code, "%v: %s", args, o.err)
		assert.Contains(t, o.err, "only a regular file can be read", args)
		assert.Contains(t, o.err, "pass -", args)
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
// bounds lowered for a test.
func relayOn(t *testing.T, clients int, hello time.Duration) *relayServer {
	base, err := os.MkdirTemp("", "sp")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	st, err := store.Open(filepath.Join(base, "store"), store.Options{})
	require.NoError(t, err)
	e, err := engine.New(st, engine.Options{})
	require.NoError(t, err)
	r, err := listenRelay(st.Dir(), e)
	require.NoError(t, err)
	r.maxClients, r.helloTimeout = clients, hello
	go r.serve()
	t.Cleanup(func() { r.close(0); e.Close(); st.Close() })
	return r
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
	r := relayOn(t, 4, 50*time.Millisecond)
	conn, err := net.Dial("unix", r.path)
	require.NoError(t, err)
	defer conn.Close()
	code, stderr := exitOf(t, conn)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, stderr, "timeout")
}

// At most maxClients commands run at once: the next client waits until one ends.
func TestRelayClientCap(t *testing.T) {
	r := relayOn(t, 1, time.Minute)
	hello := func(args ...string) net.Conn {
		conn, err := net.Dial("unix", r.path)
		require.NoError(t, err)
		b, _ := json.Marshal(relayHello{Version: relayVersion, Args: args, Env: map[string]string{"NO_COLOR": "1"}})
		require.NoError(t, writeFrame(conn, frameHello, b))
		return conn
	}
	first := hello("exec", "-") // reads its plan from input that has not ended
	defer first.Close()
	second := hello("runs", "--json")
	defer second.Close()
	done := make(chan int, 1)
	go func() { code, _ := exitOf(t, second); done <- code }()
	select {
	case <-done:
		t.Fatal("the second client was served while the first held the only slot")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, writeFrame(first, frameEOF, nil))
	code, _ := exitOf(t, first)
	assert.Equal(t, ExitRejected, code, "an empty plan")
	assert.Equal(t, ExitOK, <-done)
}

// A command that needs the store to itself, on a store a server holds, names the server (its
// pid and address) and says to stop it; once it stops, its info file is gone and the command
// runs. A store held by another command gets the plain message.
func TestAStoreHeldByAServerNamesIt(t *testing.T) {
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

	for _, args := range [][]string{{"db", "check"}, {"db", "init"}} {
		o := f.runOut(args...)
		assert.Equal(t, ExitInternal, o.code, args)
		assert.Contains(t, o.err, fmt.Sprintf("Error: the store at %s is held by `starplan serve` (pid %d, serving %s)\n", f.dir, os.Getpid(), addr), args)
		assert.Contains(t, o.err, fmt.Sprintf("Try: stop the server (Ctrl-C where it runs, or kill %d), then run this command again", os.Getpid()), args)
		assert.NotContains(t, o.err, "wait for the other starplan command", args)
	}

	require.Equal(t, ExitOK, f.shutdown(), f.errb.String())
	_, err := os.Stat(filepath.Join(f.dir, ServeInfoName))
	assert.True(t, os.IsNotExist(err), "the info file is removed")
	o := f.runOut("db", "check")
	assert.Equal(t, ExitOK, o.code, o.err)

	// Held by a process that is not a server (here: this one, through an open store), the
	// message is the plain one, even with a stale info file left by a killed server.
	_, err = writeServeInfo(f.dir, serveInfo{PID: 1, HTTP: "http://127.0.0.1:1"})
	require.NoError(t, err)
	st, err := store.Open(f.dir, store.Options{MustExist: true})
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
