package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/table"
)

// /dev/null is a character device but not a terminal: `exec < /dev/null` must not ask.
func TestDevNullIsNotATerminal(t *testing.T) {
	t.Parallel()
	f, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, isTerminal(f))
}

func TestColor(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	mode := func(m string) *string { return &m }
	for _, tc := range []struct {
		name string
		ios  IOStreams
		want bool
	}{
		{"terminal", IOStreams{OutTTY: true, Getenv: env()}, true},
		{"pipe", IOStreams{OutTTY: false, Getenv: env()}, false},
		{"NO_COLOR", IOStreams{OutTTY: true, Getenv: env("NO_COLOR", "1")}, false},
		{"TERM=dumb", IOStreams{OutTTY: true, Getenv: env("TERM", "dumb")}, false},
		{"always on a pipe", IOStreams{OutTTY: false, Getenv: env("NO_COLOR", "1"), colorMode: mode("always")}, true},
		{"never on a terminal", IOStreams{OutTTY: true, Getenv: env(), colorMode: mode("never")}, false},
	} {
		assert.Equal(t, tc.want, tc.ios.Color(), tc.name)
	}
}

func TestColorFlag(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	plan := example("02_purchase_wayfarer.star")
	o := s.run(true, "n\n", "--color", "always", "exec", "--request", "Purchase 3 Wayfarer sunglasses for customer Alice.", plan)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "\x1b[", "--color always colours even with NO_COLOR set")
	o = s.run(true, "n\n", "--color", "never", "exec", "--request", "Purchase 3 Wayfarer sunglasses for customer Alice.", plan)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.NotContains(t, o.out, "\x1b[")
	o = s.run(true, "", "--color", "sometimes", "runs")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "use auto, always or never")
}

// Columns line up by display width: a CJK name takes two columns a character.
func TestPrintTableAlignsWideCharacters(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printTable(&b, []string{"name", "stock"}, []table.Row{
		{"name": "サングラス", "stock": int64(3)},
		{"name": "Aviator", "stock": int64(12)},
	}, 40)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	require.Len(t, lines, 3)
	col := func(line, cell string) int { return termsafe.Width(line[:strings.Index(line, cell)]) }
	assert.Equal(t, col(lines[0], "stock"), col(lines[1], "3"), b.String())
	assert.Equal(t, col(lines[0], "stock"), col(lines[2], "12"), b.String())
}

// The diff wraps to the terminal's width, not a fixed 100 columns.
func TestDiffFitsTheTerminalWidth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	ios := IOStreams{In: strings.NewReader("n\n"), Out: &out, Err: &bytes.Buffer{}, OutTTY: true, InTTY: true, Width: 60,
		Getenv: func(k string) string { return map[string]string{"NO_COLOR": "1"}[k] }}
	code := Main([]string{"--db", dir, "--in-process", "exec", "--request", "two items", example("03_two_item_order.star")}, ios)
	require.Equal(t, ExitOK, code, out.String())
	diff := out.String()[strings.Index(out.String(), "Changes"):]
	for _, line := range strings.Split(diff, "\n") {
		if strings.HasPrefix(line, "Apply these changes?") || strings.HasPrefix(line, "(") {
			break
		}
		assert.LessOrEqual(t, termsafe.Width(line), 60, "%q", line)
	}
}

// A command its context cancels (Ctrl-C, through Command's signal.NotifyContext) exits 130 and
// leaves a store another command can open: the audit log flushed, the lock released.
func TestInterruptedCommandExits130(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &session{t: t, dir: dir}
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }}
	code := MainContext(ctx, []string{"--db", dir, "--in-process", "exec", "--request", "two items", example("03_two_item_order.star")}, ios)
	assert.Equal(t, ExitInterrupted, code, errb.String())
	assert.Contains(t, errb.String(), "interrupted")

	o := s.run(false, "", "runs")
	require.Equal(t, ExitOK, o.code, o.err)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	code := Main([]string{"--version"}, IOStreams{In: strings.NewReader(""), Out: &out, Err: &out, Getenv: func(string) string { return "" }})
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out.String(), "starplan version ")
	assert.Contains(t, out.String(), runtime.Version())

	got := describeBuild(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-25T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}})
	assert.Equal(t, "v0.3.0, commit 0123456789ab+dirty of 2026-11-25T10:00:00Z, go1.26.8", got)
}

// With --json, a failure is JSON on stdout too, with the documented exit code, whether it is a
// usage error, an unknown run or a bad flag.
func TestJSONErrors(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "runs", "show", "r_0000000000", "--json")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.out, `"code": "no-store"`)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	for _, tc := range []struct {
		args []string
		code int
		name string
	}{
		{[]string{"runs", "show", "r_0000000000", "--json"}, ExitUsage, "unknown-run"},
		{[]string{"apply", "r_0000000000", "--json"}, ExitUsage, "unknown-run"},
		{[]string{"runs", "replay", "r_0000000000", "--json"}, ExitUsage, "unknown-run"},
		{[]string{"exec", "--json", "--no-such-flag", "x.star"}, ExitUsage, "bad-request"},
		{[]string{"exec", "--json", "no-such-file.star"}, ExitUsage, "bad-request"},
		{[]string{"runs", "--bogus", "--json=1"}, ExitUsage, "bad-request"},
	} {
		o := s.run(false, "", tc.args...)
		require.Equal(t, tc.code, o.code, "%v: %s", tc.args, o.err)
		var doc errorDocument
		require.NoError(t, json.Unmarshal([]byte(o.out), &doc), "%v: stdout %q", tc.args, o.out)
		assert.Equal(t, tc.name, doc.Error.Code, tc.args)
		assert.Equal(t, tc.code, doc.Error.ExitCode, tc.args)
		assert.NotEmpty(t, doc.Error.Message, tc.args)
		assert.Contains(t, o.err, "Error: ", "people still get the text on stderr")
	}
	o = s.run(false, "", "runs", "show", "r_0000000000")
	assert.Empty(t, o.out, "without --json stdout stays empty")
}

func TestEvalBar(t *testing.T) {
	t.Parallel()
	assert.Contains(t, evalBar(0, 4, 0, 0), "0/4 done, 0 passed, 0s elapsed, about — left")
	bar := evalBar(1, 4, 1, 10*time.Second)
	assert.Contains(t, bar, "1/4 done, 1 passed, 10s elapsed, about 30s left")
	assert.Contains(t, evalBar(4, 4, 3, 40*time.Second), "4/4 done, 3 passed, 40s elapsed, about 0s left")
}

// ask says what it is waiting for on a terminal's stderr: the model, the attempt, the time.
func TestAskWaitingShowsTheModelAndAttempt(t *testing.T) {
	t.Parallel()
	var errb syncBuffer
	waiting := askWaiting(IOStreams{Err: &errb, ErrTTY: true}, "gpt-test")
	require.NotNil(t, waiting)
	done := waiting(2, 3)
	done()
	assert.Contains(t, errb.String(), "asking gpt-test to repair its plan (attempt 2 of at most 3)")
	assert.True(t, strings.HasSuffix(errb.String(), "\r\x1b[K"), "the line is cleared when the call returns")
	assert.Nil(t, askWaiting(IOStreams{Err: &errb}, "gpt-test"), "no display when stderr is not a terminal")
}

// On a dumb terminal ask's progress is a plain line per attempt: no carriage return, no escape.
func TestAskWaitingOnADumbTerminalPrintsPlainLines(t *testing.T) {
	t.Parallel()
	var errb syncBuffer
	ios := IOStreams{Err: &errb, ErrTTY: true, Getenv: func(k string) string { return map[string]string{"TERM": "dumb"}[k] }}
	waiting := askWaiting(ios, "gpt-test")
	require.NotNil(t, waiting)
	waiting(1, 3)()
	waiting(2, 3)()
	assert.Equal(t, "asking gpt-test for a plan (attempt 1 of at most 3)\nasking gpt-test to repair its plan (attempt 2 of at most 3)\n", errb.String())

	var bar syncBuffer
	tk := startTicker(&bar, true, func(elapsed time.Duration) string { return "line" })
	tk.Finish()
	assert.Equal(t, "line\nline\n", bar.String(), "eval's bar: at the start and at the end, no redraws")
}

// syncBuffer is a bytes.Buffer that another goroutine (a ticker, a server) may write while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
