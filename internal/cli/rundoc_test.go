package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/server"
)

// docServer is `starplan serve` in process on HTTP with a known token, and the commands that
// go through it.
type docServer struct {
	*relayFixture
	base, token string
}

const docToken = "a-token-for-the-run-document-tests"

func startDocServer(t *testing.T) *docServer {
	ctx := deadline(t)
	base, err := os.MkdirTemp("", "sp") // a unix socket's path has at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	f := &relayFixture{t: t, dir: filepath.Join(base, "store"), errb: &syncBuffer{}, code: make(chan int, 1)}
	sctx, stop := context.WithCancel(ctx)
	f.stop = stop
	go func() {
		ios := IOStreams{In: strings.NewReader(""), Out: io.Discard, Err: f.errb, Getenv: func(k string) string {
			return map[string]string{"STARPLAN_TOKEN": docToken}[k]
		}}
		f.code <- MainContext(sctx, []string{"--db", f.dir, "--in-process", "serve", "--listen", "127.0.0.1:0"}, ios)
	}()
	listening := regexp.MustCompile(`listening on (http://\S+)`)
	s := &docServer{relayFixture: f, token: docToken}
	for s.base == "" || !strings.Contains(f.errb.String(), "go through") {
		if m := listening.FindStringSubmatch(f.errb.String()); m != nil {
			s.base = m[1]
		}
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
	return s
}

func (s *docServer) do(t *testing.T, method, path string, body any) []byte {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(deadline(t), method, s.base+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", out)
	return out
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func (s *docServer) mcp(t *testing.T) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := client.Connect(deadline(t), &mcp.StreamableClientTransport{Endpoint: s.base + server.MCPPath,
		HTTPClient: &http.Client{Transport: bearerTransport{s.token}}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// compact is a document without its envelope: the CLI indents its JSON for people, HTTP and MCP
// send it on one line; the bytes of the document are otherwise the same.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, json.Compact(&out, bytes.TrimSpace(b)), "%s", b)
	return out.String()
}

// One run, one document: `runs show --json` (through the server, and on its own once the server
// is gone), GET /v1/runs/{id} and the MCP tool show_run print the same bytes, for a run in each
// state a reviewer meets. A run read back from the log keeps the scans its dry run reported.
func TestOneRunDocumentOnEveryTransport(t *testing.T) {
	t.Parallel()
	s := startDocServer(t)
	cs := s.mcp(t)
	ctx := deadline(t)

	var pending, applied, rejected, scanned engine.Document
	purchase := readFile(t, example("02_purchase_wayfarer.star"))
	require.NoError(t, json.Unmarshal(s.do(t, "POST", "/v1/runs", server.RunRequest{Program: purchase, Request: "3 Wayfarer for Alice"}), &applied))
	s.do(t, "POST", "/v1/runs/"+applied.RunID+"/apply", server.ApplyRequest{Digest: applied.Digest})
	require.NoError(t, json.Unmarshal(s.do(t, "POST", "/v1/runs", server.RunRequest{Program: purchase}), &rejected))
	s.do(t, "POST", "/v1/runs/"+rejected.RunID+"/reject", server.RejectRequest{Feedback: "not today"})
	o := s.runOut("exec", example("02_purchase_wayfarer.star")) // made by the CLI, through the server
	require.Equal(t, ExitOK, o.code, o.err)
	require.NoError(t, json.Unmarshal([]byte(o.out), &pending))
	// A read no index answers: a filter on a field the inventory does not index.
	scan := "rows = inventory_tbl.search(where={\"quantity_in_stock\": {\"$gt\": 2}})\nanswer_text = str(len(rows))\nSTATUS = \"success\"\n"
	require.NoError(t, json.Unmarshal(s.do(t, "POST", "/v1/runs", server.RunRequest{Program: scan}), &scanned))
	require.Equal(t, engine.OutcomeOK, scanned.Outcome, "%v", scanned.Diagnostics)
	require.NotEmpty(t, scanned.Scans, "the dry run reports its scan")

	shown := map[string]string{}
	for _, id := range []string{applied.RunID, rejected.RunID, pending.RunID, scanned.RunID} {
		o := s.runOut("runs", "show", "--json", id)
		require.Equal(t, ExitOK, o.code, o.err)
		cli := compact(t, []byte(o.out))
		assert.Equal(t, cli, compact(t, s.do(t, "GET", "/v1/runs/"+id, nil)), "GET /v1/runs/%s", id)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "show_run", Arguments: map[string]any{"run_id": id}})
		require.NoError(t, err)
		require.False(t, res.IsError)
		require.Len(t, res.Content, 1)
		assert.Equal(t, cli, compact(t, []byte(res.Content[0].(*mcp.TextContent).Text)), "show_run %s", id)
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var structured, printed any
		require.NoError(t, json.Unmarshal(raw, &structured))
		require.NoError(t, json.Unmarshal([]byte(cli), &printed))
		assert.Equal(t, printed, structured, "show_run's structured content is the document too")
		shown[id] = cli
	}
	var doc engine.Document
	require.NoError(t, json.Unmarshal([]byte(shown[scanned.RunID]), &doc))
	assert.Equal(t, scanned.Scans, doc.Scans, "the scans are kept in the log")
	require.NoError(t, json.Unmarshal([]byte(shown[rejected.RunID]), &doc))
	assert.Equal(t, engine.StateRejected, doc.State)
	assert.Equal(t, "not today", doc.Decision.Feedback)
	require.NoError(t, json.Unmarshal([]byte(shown[applied.RunID]), &doc))
	assert.Equal(t, engine.StateApplied, doc.State)
	assert.Equal(t, []string{server.EventStarted, server.EventFinished, server.EventApplied}, streamTypes(doc.Events))

	// Every key `runs show --json` printed before the one document is still there.
	var keys map[string]any
	require.NoError(t, json.Unmarshal([]byte(shown[pending.RunID]), &keys))
	for _, k := range []string{"run_id", "time", "origin", "request", "reply", "reply_bytes", "reply_sha256", "program", "rewrites",
		"diagnostics", "stdout", "stdout_truncated", "answer_text", "status", "changes", "changed_rows", "outcome", "steps",
		"duration_ms", "pending", "applied", "digest", "state", "events"} {
		assert.Contains(t, keys, k)
	}

	// Without the server, the CLI prints the same bytes: the document is the log's, not the
	// process's.
	require.Equal(t, ExitOK, s.shutdown(), s.errb.String())
	for id, want := range shown {
		o := s.runOut("runs", "show", "--json", id)
		require.Equal(t, ExitOK, o.code, o.err)
		assert.Equal(t, want, compact(t, []byte(o.out)), "runs show --json %s on its own", id)
	}
}

func streamTypes(evs []engine.StreamEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// A run made by the CLI tells the same lifecycle as one made over HTTP: the engine tells it,
// whatever the transport, and the server's event stream is one of its observers.
func TestACLIRunTellsTheSameEventsAsAServerRun(t *testing.T) {
	t.Parallel()
	s := startDocServer(t)
	req, err := http.NewRequestWithContext(deadline(t), "GET", s.base+"/v1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && lines.Text() != ": subscribed" {
	}
	next := func() server.Event {
		for lines.Scan() {
			if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				var ev server.Event
				require.NoError(t, json.Unmarshal([]byte(data), &ev))
				return ev
			}
		}
		t.Fatalf("the event stream ended: %v", lines.Err())
		return server.Event{}
	}
	// What a run's events say, without what differs between two runs of the same plan: ids,
	// times, who made it, the digest of data that moved between them.
	type step struct {
		Type, State string
		Outcome     engine.Outcome
		Rows        int
		Code        string
		SameRun     bool
	}
	steps := func(n int) []step {
		var out []step
		var first string
		for range n {
			ev := next()
			if first == "" {
				first = ev.RunID
			}
			out = append(out, step{ev.Type, ev.State, ev.Outcome, ev.Rows, ev.Code, ev.RunID == first})
		}
		return out
	}

	purchase := readFile(t, example("02_purchase_wayfarer.star"))
	var doc engine.Document
	require.NoError(t, json.Unmarshal(s.do(t, "POST", "/v1/runs", server.RunRequest{Program: purchase}), &doc))
	s.do(t, "POST", "/v1/runs/"+doc.RunID+"/apply", server.ApplyRequest{Digest: doc.Digest})
	overHTTP := steps(3)

	o := s.runOut("exec", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	o = s.runOut("apply", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)
	fromCLI := steps(3)

	assert.Equal(t, []step{
		{server.EventStarted, "", "", 0, "", true},
		{server.EventFinished, engine.StatePending, engine.OutcomeOK, 2, "", true},
		{server.EventApplied, engine.StateApplied, engine.OutcomeOK, 2, "", true},
	}, overHTTP)
	assert.Equal(t, overHTTP, fromCLI)
}
