package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/llm/llmtest"
)

// zeros is an endless input that counts what was read of it.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// TestEndlessInputStopsAtTheBound: `exec /dev/zero` read forever; every command that reads a
// plan or a reply now stops one byte past maxSource and says which input and which bound.
func TestEndlessInputStopsAtTheBound(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero here")
	}
	for _, cmd := range []string{"exec", "check", "run"} {
		t.Run(cmd, func(t *testing.T) {
			o := newSession(t).run(false, "", cmd, "/dev/zero")
			assert.Equal(t, ExitUsage, o.code)
			assert.Contains(t, o.err, "Error: /dev/zero is larger than 4.0 MiB, the most starplan reads of a plan or a model reply")
			assert.Contains(t, o.err, "Try: give the file that holds one plan (at most 64.0 KiB) or one model reply")
			assert.Empty(t, o.out)
		})
	}
}

func TestEndlessStandardInputStopsAtTheBound(t *testing.T) {
	t.Parallel()
	in := &zeros{}
	var out, errb bytes.Buffer
	code := Main([]string{"--db", t.TempDir(), "exec", "-"}, IOStreams{In: in, Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errb.String(), "Error: standard input is larger than 4.0 MiB")
	assert.LessOrEqual(t, in.n, int64(maxSource)+1, "read to the bound and one byte, not more")
}

func TestReadAtMost(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 99, 100} {
		b, err := readAtMost(strings.NewReader(strings.Repeat("a", n)), 100)
		require.NoError(t, err, "%d bytes", n)
		assert.Len(t, b, n)
	}
	z := &zeros{}
	_, err := readAtMost(z, 100)
	var tl *tooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Equal(t, int64(100), tl.limit)
	_, err = readAtMost(strings.NewReader(strings.Repeat("a", 101)), 100)
	require.ErrorAs(t, err, &tl)
}

// TestAPlanFileAtTheBoundIsRead: the bound refuses only what is past it.
func TestAPlanFileAtTheBoundIsRead(t *testing.T) {
	t.Parallel()
	line := "x = 1\n"
	src := strings.Repeat(line, maxSource/len(line))
	src += strings.Repeat("#", maxSource-len(src))
	require.Len(t, src, maxSource)
	var out, errb bytes.Buffer
	got, err := readPlan(context.Background(), IOStreams{In: strings.NewReader(src), Out: &out, Err: &errb}, "-")
	require.NoError(t, err)
	assert.Equal(t, src, got)
}

// TestAskGzipBombIsAModelError: a reply past the client's bound ends ask at once as a model
// problem (exit 6), naming the bound, with one request made and nothing run or stored.
func TestAskGzipBombIsAModelError(t *testing.T) {
	t.Parallel()
	_, srv, run := modelSession(t, llmtest.GzipBomb(500<<20)) // one step: a retry would fail the test
	o := run(false, "", "ask", "How many Aviator?")
	assert.Equal(t, ExitModel, o.code)
	assert.Contains(t, o.err, "larger than 4 MiB (counted after decompression)")
	assert.Empty(t, o.out)
	assert.Len(t, srv.Requests(), 1)
}

// Opening a FIFO nobody writes to blocks in the kernel; the command still ends when its context
// does (Ctrl-C), with exit 130.
func TestReadPlanGivesWayToCtrlC(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "plan.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- MainContext(ctx, []string{"check", fifo}, IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
	}()
	cancel()
	select {
	case c := <-code:
		assert.Equal(t, ExitInterrupted, c, errb.String())
	case <-time.After(time.Minute):
		t.Fatal("the command kept waiting on the FIFO after its context ended")
	}
	// Let the abandoned open finish, so the test leaves nothing blocked behind.
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
}
