package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
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
	ctx := deadline(t)
	// A short directory: a unix socket's path has at most 107 bytes.
	base, err := os.MkdirTemp("", "sp")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	f := &relayFixture{t: t, dir: filepath.Join(base, "store"), errb: &syncBuffer{}, code: make(chan int, 1)}
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

	// What must have the file to itself still says the store is in use.
	o = f.runOut("db", "check")
	assert.Equal(t, ExitInternal, o.code)
	assert.Contains(t, o.err, "in use")

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
	for _, args := range [][]string{{"serve"}, {"demo"}, {"db", "check"}, {"docs", "man", manDir}} {
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
