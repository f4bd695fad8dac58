package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/server"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

// deadline bounds a test that talks to a server, so a hang fails instead of hanging; it never
// decides an outcome.
func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	if out != nil {
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, out))
	}
	return res
}

// TestServeMCPStdio runs `starplan serve --mcp-stdio` in process, with plans in isolated workers,
// and drives it with the SDK's client over its standard input and output.
func TestServeMCPStdio(t *testing.T) {
	t.Parallel()
	ctx := deadline(t)
	dir := filepath.Join(t.TempDir(), "store")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		ios := IOStreams{In: inR, Out: outW, Err: &errb, Getenv: func(string) string { return "" }}
		code <- Main([]string{"--db", dir, "serve", "--mcp-stdio"}, ios)
		outW.Close()
	}()

	client := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err)

	var run, applied server.RunDocument
	res := callTool(t, ctx, cs, "run_plan", server.RunRequest{Program: readFile(t, example("02_purchase_wayfarer.star")), Request: "3 Wayfarer for Alice"}, &run)
	require.False(t, res.IsError)
	require.Equal(t, server.StatePending, run.State)
	res = callTool(t, ctx, cs, "apply_run", map[string]any{"run_id": run.RunID, "digest": run.Digest}, &applied)
	require.False(t, res.IsError)
	assert.Equal(t, server.StateApplied, applied.State)

	require.NoError(t, cs.Close()) // closes the server's standard input: it ends, exit 0
	require.Equal(t, ExitOK, <-code, errb.String())
	_, err = os.Stat(filepath.Join(dir, server.TokenFile))
	assert.True(t, os.IsNotExist(err), "stdio alone needs no token")

	// The run was recorded before the process let go of the store.
	st, err := bolt.Open(dir, bolt.Options{})
	require.NoError(t, err)
	defer st.Close()
	e, err := engine.New(st, engine.Options{})
	require.NoError(t, err)
	defer e.Close()
	rec, err := e.Record(run.RunID)
	require.NoError(t, err)
	assert.True(t, rec.Applied)
	assert.Equal(t, server.OriginMCP, rec.Origin)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// starplanBinary builds cmd/starplan once for the package's tests (into binDir, removed by
// TestMain) and returns its path.
func starplanBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the starplan binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the binary with")
	}
	built.once.Do(buildStarplan)
	require.NoError(t, built.err, "%s", built.out)
	return built.path
}

// buildStarplan builds cmd/starplan into a new binDir, once (built.once): at a test's first
// starplanBinary, or earlier from TestMain (prebuild).
func buildStarplan() {
	dir, err := os.MkdirTemp("", "starplan-cli-test-")
	if err != nil {
		built.err = err
		return
	}
	binDir = dir
	built.path = filepath.Join(dir, "starplan")
	cmd := exec.Command("go", "build", "-o", built.path, "github.com/starplan/starplan/cmd/starplan")
	cmd.Dir = built.dir // not the process's directory: a test may have moved it (t.Chdir) by now
	built.out, built.err = cmd.CombinedOutput()
}

// built is the starplan binary the package's tests share, built on first use.
var built struct {
	dir  string // the package's directory, where the build runs ("": the process's own)
	once sync.Once
	path string
	out  []byte
	err  error
}

// TestServeBinaryMCPStdio starts the real binary as an MCP client would (mcp.CommandTransport).
func TestServeBinaryMCPStdio(t *testing.T) {
	t.Parallel()
	bin := starplanBinary(t)
	ctx := deadline(t)
	dir := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(bin, "--db", dir, "serve", "--mcp-stdio")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	errb := &syncBuffer{}
	cmd.Stderr = errb
	client := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "%s", errb)

	var d server.Description
	res := callTool(t, ctx, cs, "describe", map[string]any{}, &d)
	require.False(t, res.IsError)
	assert.Equal(t, "inventory", d.Domain)
	var run, applied, again server.RunDocument
	callTool(t, ctx, cs, "run_plan", server.RunRequest{Program: readFile(t, example("02_purchase_wayfarer.star"))}, &run)
	require.Equal(t, server.StatePending, run.State, "%v", run.Diagnostics)
	res = callTool(t, ctx, cs, "apply_run", map[string]any{"run_id": run.RunID, "digest": "sha256:wrong"}, nil)
	assert.True(t, res.IsError)
	callTool(t, ctx, cs, "apply_run", map[string]any{"run_id": run.RunID, "digest": run.Digest}, &applied)
	callTool(t, ctx, cs, "apply_run", map[string]any{"run_id": run.RunID, "digest": run.Digest}, &again)
	assert.Equal(t, server.StateApplied, applied.State)
	assert.Equal(t, applied, again)
	require.NoError(t, cs.Close(), "the server exits 0 when its standard input closes: %s", errb)
}

// TestServeBinaryDrainsOnSIGTERM starts the real binary on HTTP, sends SIGTERM while a run is in
// flight, and checks that the run's response arrives whole, the process exits 0, and the audit
// log was written.
func TestServeBinaryDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	bin := starplanBinary(t)
	ctx := deadline(t)
	dir := filepath.Join(t.TempDir(), "store")
	const token = "a-test-token-for-the-binary"
	cmd := exec.Command(bin, "--db", dir, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "STARPLAN_TOKEN="+token)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	lines := bufio.NewScanner(stderr)
	var base string
	for base == "" && lines.Scan() {
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			base = m[1]
		}
	}
	require.NotEmpty(t, base, "the server says where it listens")
	var rest bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&rest, stderr); close(copied) }()

	do := func(ctx context.Context, method, path, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultClient.Do(req)
	}
	resp, err := do(ctx, "GET", "/v1/describe", "")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// Wait for the run's started event, then stop the server while the run works.
	events, err := do(ctx, "GET", "/v1/events", "")
	require.NoError(t, err)
	defer events.Body.Close()
	ev := bufio.NewScanner(events.Body)
	for ev.Scan() && ev.Text() != ": subscribed" {
	}
	slow := `n = 0
for i in range(500000):
    n += i
answer_text = "Counted to %d." % n
STATUS = "success"
`
	body, _ := json.Marshal(server.RunRequest{Program: slow})
	type answer struct {
		status int
		doc    server.RunDocument
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := do(ctx, "POST", "/v1/runs", string(body))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var a answer
		a.status = resp.StatusCode
		a.err = json.NewDecoder(resp.Body).Decode(&a.doc)
		got <- a
	}()
	for ev.Scan() && !strings.HasPrefix(ev.Text(), "event: started") {
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))

	a := <-got
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusOK, a.status)
	assert.Equal(t, engine.OutcomeOK, a.doc.Outcome, "%v", a.doc.Diagnostics)
	assert.Equal(t, server.StateDone, a.doc.State)
	for ev.Scan() { // the event stream ends with the drain
	}
	require.NoError(t, cmd.Wait())
	<-copied
	assert.Equal(t, 0, cmd.ProcessState.ExitCode(), rest.String())

	st, err := bolt.Open(dir, bolt.Options{})
	require.NoError(t, err, "the server let go of the store")
	defer st.Close()
	e, err := engine.New(st, engine.Options{})
	require.NoError(t, err)
	defer e.Close()
	rec, err := e.Record(a.doc.RunID)
	require.NoError(t, err, "the audit log was flushed before exit")
	assert.Equal(t, server.OriginHTTP, rec.Origin)
}

func TestServeRefusesAShortTokenAndAnAddressItCannotUse(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "serve", "--in-process", "--token", "short")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "at least 16 characters")
	assert.Contains(t, o.err, "warning: --token puts the token in this process's command line", "--token is answered with a warning")
	assert.Contains(t, o.err, "set STARPLAN_TOKEN")

	o = s.run(false, "", "serve", "--help")
	assert.Contains(t, o.out+o.err, "prefer STARPLAN_TOKEN or serve.token", "--help says so too")

	o = s.run(false, "", "serve", "--in-process", "--listen", "256.0.0.1:1")
	assert.Equal(t, ExitUsage, o.code, o.err)
	assert.Contains(t, o.err, "Try: pass --listen")
}

// serve says at its start how big the audit log is and how long it keeps runs; --retention
// prunes the settled runs older than it there (and hourly), never the pending ones.
func TestServeRetention(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	_, pending := s.oldRuns(40)
	o := s.run(false, "", "serve", "--in-process", "--listen", "256.0.0.1:1") // stops after the start's lines
	assert.Contains(t, o.err, "starplan serve: audit log 2 runs,")
	assert.Contains(t, o.err, "every run is kept (--retention 90d would prune settled runs older than 90 days)")

	o = s.run(false, "", "serve", "--in-process", "--retention", "soon")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "Try: give --retention 0 to keep every run")

	o = s.run(false, "", "serve", "--in-process", "--retention", "30d", "--listen", "256.0.0.1:1")
	assert.Regexp(t, `starplan serve: audit log 1 run, [0-9.]+ [KMG]?i?B; settled runs older than 30d are pruned now and hourly \(--retention; removed 1, [0-9.]+ [KMG]?i?B\)`, o.err)
	var runs []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(s.run(false, "", "runs").out), &runs))
	require.Len(t, runs, 1)
	assert.Equal(t, pending, runs[0].ID)
}

// A store written before the audit log's index gets one when serve opens it, and serve says so.
func TestServeSaysItBuiltTheRunIndex(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.NoError(t, os.MkdirAll(s.dir, 0o755))
	st, err := bolt.Open(s.dir, bolt.Options{})
	require.NoError(t, err)
	// A record as a starplan before the index wrote it: no entry.
	require.NoError(t, st.PutSysDocs(context.Background(), store.SysDoc{Collection: engine.AuditCollection, ID: "r_old",
		Value: map[string]any{"run_id": "r_old", "time": "2026-01-02T03:04:05Z", "outcome": "ok"}}))
	require.NoError(t, st.Close())
	o := s.run(false, "", "serve", "--in-process", "--listen", "256.0.0.1:1")
	assert.Contains(t, o.err, "audit log 1 run, ")
	assert.Contains(t, o.err, "its index by time and state was built now from 1 record")
	o = s.run(false, "", "serve", "--in-process", "--listen", "256.0.0.1:1")
	assert.NotContains(t, o.err, "built now", "once")
}
