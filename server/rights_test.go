package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/tokens"
)

// token creates a stored token on the fixture's store.
func (f *fixture) token(name string, role access.Role, ttl time.Duration) string {
	f.t.Helper()
	secret, _, err := f.srv.tokens.Create(context.Background(), name, role, ttl)
	require.NoError(f.t, err)
	return secret
}

// loginWith signs in to the page with a token and returns the answer.
func (f *fixture) loginWith(token string) response {
	f.t.Helper()
	return f.page("POST", "/login", LoginRequest{Token: token}, nil, true)
}

// mcpAs connects the SDK's client over streamable HTTP with a token.
func mcpAs(t *testing.T, f *fixture, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "starplan-test", Version: "1"}, opts)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   f.web.URL + MCPPath,
		HTTPClient: &http.Client{Transport: bearer{token, f.web.Client().Transport}},
		MaxRetries: -1,
	}
	cs, err := client.Connect(testContext(t), transport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// outcome is what one operation answered: refused with forbidden-role, or not (and then whether
// it failed otherwise, with what).
type outcome struct {
	forbidden bool
	failed    string // "" when the operation succeeded
}

// runs are the runs one case works on: pending runs of someone else's (for apply and reject) and
// one of the principal's own (for reject).
type runs struct {
	theirs, theirs2, own *RunDocument
}

// transport calls operations one way. An operation a transport does not have is skipped.
type transport interface {
	name() string
	do(t *testing.T, op string, rs runs) (outcome, bool)
}

// The operations of the table, with the right each needs. "reject-own" needs only Propose; a
// proposer rejecting another's run needs Approve.
var operations = []struct {
	name  string
	right access.Right
}{
	{"describe", access.Read}, {"list", access.Read}, {"show", access.Read}, {"events", access.Read},
	{"check", access.Propose}, {"run", access.Propose}, {"ask", access.Propose}, {"reject-own", access.Propose},
	{"apply", access.Approve}, {"reject-other", access.Approve},
	{"replay", access.Administer},
}

// httpTransport sends requests with a bearer token; pageTransport under a page session.
type httpTransport struct {
	f      *fixture
	token  string
	cookie *http.Cookie // set: a page session instead of the token
}

func (h httpTransport) name() string {
	if h.cookie != nil {
		return "page"
	}
	return "http"
}

func (h httpTransport) send(method, path string, body any) response {
	if h.cookie != nil {
		return h.f.page(method, path, body, h.cookie, method != "GET")
	}
	return h.f.callWith(h.token, method, path, body)
}

func (h httpTransport) do(t *testing.T, op string, rs runs) (outcome, bool) {
	var r response
	switch op {
	case "describe":
		r = h.send("GET", "/v1/describe", nil)
	case "list":
		r = h.send("GET", "/v1/runs", nil)
	case "show":
		r = h.send("GET", "/v1/runs/"+rs.theirs.RunID, nil)
	case "events":
		return h.events(t), true
	case "check":
		r = h.send("POST", "/v1/check", CheckRequest{Program: "STATUS = 'ok'\nanswer_text = 'x'"})
	case "run":
		r = h.send("POST", "/v1/runs", RunRequest{Program: purchase("Wayfarer", 1, "Alice")})
	case "ask":
		r = h.send("POST", "/v1/ask", AskRequest{Request: "What is in stock?"})
		if r.status == http.StatusNotImplemented { // no model: allowed, and answered no-model
			return outcome{}, true
		}
	case "reject-own":
		r = h.send("POST", "/v1/runs/"+rs.own.RunID+"/reject", RejectRequest{Feedback: "no"})
	case "reject-other":
		r = h.send("POST", "/v1/runs/"+rs.theirs2.RunID+"/reject", RejectRequest{Feedback: "no"})
	case "apply":
		r = h.send("POST", "/v1/runs/"+rs.theirs.RunID+"/apply", ApplyRequest{Digest: rs.theirs.Digest})
	case "replay":
		r = h.send("POST", "/v1/runs/"+rs.theirs.RunID+"/replay", nil)
	default:
		return outcome{}, false
	}
	return h.outcome(t, r), true
}

func (h httpTransport) outcome(t *testing.T, r response) outcome {
	if r.status == http.StatusForbidden {
		code := r.errorCode(t)
		require.Equal(t, CodeForbiddenRole, code, "%s", r.body)
		return outcome{forbidden: true}
	}
	if r.status >= 400 {
		return outcome{failed: string(r.body)}
	}
	return outcome{}
}

// events opens the event stream and closes it once answered.
func (h httpTransport) events(t *testing.T) outcome {
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	path := "/v1/events"
	req, err := http.NewRequestWithContext(ctx, "GET", h.f.web.URL+path, nil)
	require.NoError(t, err)
	if h.cookie != nil {
		req.AddCookie(h.cookie)
		req.Header.Set(SessionKeyHeader, h.f.keys[h.cookie.Value])
	} else {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.f.web.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return outcome{}
	}
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	return h.outcome(t, response{status: resp.StatusCode, body: buf[:n], header: resp.Header})
}

// mcpTransport calls tools with the go-sdk client over streamable HTTP.
type mcpTransport struct {
	cs *mcp.ClientSession
}

func (mcpTransport) name() string { return "mcp" }

func (m mcpTransport) do(t *testing.T, op string, rs runs) (outcome, bool) {
	var tool string
	var args any
	switch op {
	case "describe":
		tool, args = "describe", Empty{}
	case "list":
		tool, args = "list_runs", ListInput{}
	case "show":
		tool, args = "show_run", RunRef{RunID: rs.theirs.RunID}
	case "check":
		tool, args = "check_plan", CheckRequest{Program: "STATUS = 'ok'\nanswer_text = 'x'"}
	case "run":
		tool, args = "run_plan", RunRequest{Program: purchase("Wayfarer", 1, "Alice")}
	case "reject-own":
		tool, args = "reject_run", RejectInput{RunID: rs.own.RunID, Feedback: "no"}
	case "reject-other":
		tool, args = "reject_run", RejectInput{RunID: rs.theirs2.RunID, Feedback: "no"}
	case "apply":
		tool, args = "apply_run", ApplyInput{RunID: rs.theirs.RunID, Digest: rs.theirs.Digest}
	default:
		return outcome{}, false // events, ask and replay are not MCP tools
	}
	res := call(t, m.cs, tool, args, nil)
	if !res.IsError {
		return outcome{}, true
	}
	msg := text(res)
	if strings.HasPrefix(msg, CodeForbiddenRole+": ") {
		if rs.theirs != nil && (op == "apply" || op == "show") {
			assert.Contains(t, msg, "/#/runs/"+rs.theirs.RunID, "a refusal names where a person can review the run")
		}
		return outcome{forbidden: true}, true
	}
	return outcome{failed: msg}, true
}

// Every operation on every transport is allowed to exactly the roles that hold its right, and
// refused to the others with forbidden-role; the legacy token is an admin.
func TestRightsPerRoleOperationAndTransport(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	principals := []struct {
		name  string
		role  access.Role
		token string
	}{
		{"proposer", access.Proposer, f.token("agent-1", access.Proposer, 0)},
		{"approver", access.Approver, f.token("alice", access.Approver, 0)},
		{"admin", access.Admin, f.token("ops", access.Admin, 0)},
		{"legacy-admin", access.Admin, testToken},
	}
	for _, p := range principals {
		var transports []transport
		transports = append(transports, httpTransport{f: f, token: p.token}, mcpTransport{cs: mcpAs(t, f, p.token, nil)})
		login := f.loginWith(p.token)
		if p.role.Can(access.Approve) {
			require.Equal(t, http.StatusOK, login.status, "%s", login.body)
			transports = append(transports, httpTransport{f: f, cookie: f.session(login)})
		} else {
			require.Equal(t, http.StatusForbidden, login.status, "a proposer cannot sign in to the page: %s", login.body)
			assert.Equal(t, CodeForbiddenRole, login.errorCode(t))
			assert.Contains(t, string(login.body), "cannot sign in to the review page")
		}
		for _, tr := range transports {
			for _, op := range operations {
				t.Run(p.name+"/"+tr.name()+"/"+op.name, func(t *testing.T) {
					var rs runs // only the runs the operation works on: each costs a dry run
					switch op.name {
					case "show", "apply", "replay":
						rs.theirs = f.run(purchase("Aviator", 1, "Bob"), "") // Aviator: 23 in stock, for 9 applies
					case "reject-other":
						rs.theirs2 = f.run(purchase("Sport", 1, "Bob"), "")
					case "reject-own":
						r := f.callWith(p.token, "POST", "/v1/runs", RunRequest{Program: purchase("Wayfarer", 1, "Carol")})
						require.Equal(t, http.StatusOK, r.status, "%s", r.body)
						rs.own = &RunDocument{}
						r.decode(t, rs.own)
					}
					got, ok := tr.do(t, op.name, rs)
					if !ok {
						t.Skip("not an operation of this transport")
					}
					if p.role.Can(op.right) {
						assert.False(t, got.forbidden, "%s may %s", p.role, op.name)
						assert.Empty(t, got.failed)
					} else {
						assert.True(t, got.forbidden, "%s may not %s: %s", p.role, op.name, got.failed)
					}
					if op.name == "apply" {
						want := StatePending
						if p.role.Can(access.Approve) {
							want = StateApplied
						}
						doc, err := f.srv.Show(rs.theirs.RunID)
						require.NoError(t, err)
						assert.Equal(t, want, doc.State, "a refused apply writes nothing")
					}
				})
			}
		}
	}
}

// A run records who proposed it, by the token's name.
func TestRunRecordsTheTokenThatProposedIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	secret := f.token("agent-1", access.Proposer, 0)
	r := f.callWith(secret, "POST", "/v1/runs", RunRequest{Program: purchase("Wayfarer", 1, "Carol")})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(t, &doc)
	rec, err := f.eng.Record(doc.RunID)
	require.NoError(t, err)
	assert.Equal(t, "agent-1", rec.ProposedBy)
	doc2 := f.run(purchase("Wayfarer", 1, "Carol"), "")
	rec, err = f.eng.Record(doc2.RunID)
	require.NoError(t, err)
	assert.Equal(t, tokens.LegacyName, rec.ProposedBy, "the legacy token is the admin named admin")

	// Over MCP on stdio (the in-memory pipe) the caller is the local user.
	var viaPipe RunDocument
	call(t, mcpClient(t, f, false), "run_plan", RunRequest{Program: purchase("Wayfarer", 1, "Carol")}, &viaPipe)
	rec, err = f.eng.Record(viaPipe.RunID)
	require.NoError(t, err)
	assert.Equal(t, access.Local().Name, rec.ProposedBy)
}

// A revoked token is refused from its next request on: its bearer requests, its MCP session and
// the page sessions made with it.
func TestRevocationEndsEverySession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	secret := f.token("alice", access.Approver, 0)
	cookie := f.session(f.loginWith(secret))
	cs := mcpAs(t, f, secret, nil)
	require.Equal(t, http.StatusOK, f.page("GET", "/review/queue", nil, cookie, false).status)
	require.Equal(t, http.StatusOK, f.callWith(secret, "GET", "/v1/runs", nil).status)
	require.False(t, call(t, cs, "list_runs", ListInput{}, nil).IsError)

	_, err := f.srv.tokens.Revoke(context.Background(), "alice")
	require.NoError(t, err)

	r := f.page("GET", "/review/queue", nil, cookie, false)
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Contains(t, string(r.body), "token alice was revoked")
	assert.Equal(t, http.StatusUnauthorized, f.page("GET", "/review/queue", nil, cookie, false).status, "the session has ended")
	r = f.callWith(secret, "GET", "/v1/runs", nil)
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Equal(t, CodeUnauthorized, r.errorCode(t))
	_, err = cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "list_runs", Arguments: ListInput{}})
	assert.Error(t, err, "the MCP client's next call is refused")
	assert.Equal(t, http.StatusUnauthorized, f.loginWith(secret).status)
}

// testClock is a settable clock for a fixture.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A token that expires is refused from then on, page session included.
func TestExpiredTokenIsRefused(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: time.Now()}
	f := newFixture(t, Options{Now: clock.now})
	secret := f.token("temp", access.Approver, time.Hour)
	cookie := f.session(f.loginWith(secret))
	require.Equal(t, http.StatusOK, f.callWith(secret, "GET", "/v1/runs", nil).status)
	clock.add(time.Hour - time.Second)
	require.Equal(t, http.StatusOK, f.page("GET", "/review/queue", nil, cookie, false).status)
	clock.add(time.Second)
	r := f.callWith(secret, "GET", "/v1/runs", nil)
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Contains(t, string(r.body), "token temp expired")
	assert.Equal(t, http.StatusUnauthorized, f.page("GET", "/review/queue", nil, cookie, false).status)
}

// No secret is echoed: not a wrong one in its refusal, not a stored one in the store or a run.
func TestSecretsAreNeitherEchoedNorStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	secret := f.token("agent-1", access.Proposer, 0)
	wrong := secret[:len(secret)-4] + "0000"
	r := f.callWith(wrong, "GET", "/v1/runs", nil)
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.NotContains(t, string(r.body), wrong[len(tokens.Prefix):])
	f.callWith(secret, "POST", "/v1/runs", RunRequest{Program: purchase("Wayfarer", 1, "Carol")})
	for _, coll := range []string{tokens.Collection, tokens.UseCollection, "runs"} {
		docs, err := f.st.ListSys(coll)
		require.NoError(t, err)
		for _, d := range docs {
			assert.NotContains(t, string(d.JSON), secret[len(secret)-40:], coll)
		}
	}
}

// A proposer rejects its own runs, not another's.
func TestProposerRejectsOnlyItsOwnRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	secret := f.token("agent-1", access.Proposer, 0)
	other := f.run(purchase("Wayfarer", 1, "Bob"), "")
	r := f.callWith(secret, "POST", "/v1/runs/"+other.RunID+"/reject", RejectRequest{Feedback: "no"})
	require.Equal(t, http.StatusForbidden, r.status)
	assert.Equal(t, CodeForbiddenRole, r.errorCode(t))
	assert.Contains(t, string(r.body), "which admin proposed")
	doc, err := f.srv.Show(other.RunID)
	require.NoError(t, err)
	assert.Equal(t, StatePending, doc.State)
}

// MCP over HTTP serves no standalone stream: a drain never waits on one.
func TestMCPRefusesTheStandaloneStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.call("GET", MCPPath, nil)
	assert.Equal(t, http.StatusMethodNotAllowed, r.status)
	assert.Equal(t, CodeMethod, r.errorCode(t))
}

// BenchmarkBearer is what resolving a request's credential costs: the legacy token (a constant-
// time compare) and a stored token (a lookup of its record by id, a constant-time compare of
// the hash, and at most one recorded use per minute).
func BenchmarkBearer(b *testing.B) {
	f := newFixture(b, Options{})
	secret, _, err := f.srv.tokens.Create(context.Background(), "agent-1", access.Proposer, 0)
	require.NoError(b, err)
	ctx := context.Background()
	for _, c := range []struct{ name, token string }{{"legacy", testToken}, {"stored", secret}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := f.srv.bearer(ctx, c.token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHTTPApply: the apply path over HTTP (a pending run's apply: digest check, role check,
// atomic write, audit record), with the legacy admin token and with a stored approver token;
// the dry run before each apply, and the restocking every 20, are not timed.
func BenchmarkHTTPApply(b *testing.B) {
	f := newFixture(b, Options{})
	secret, _, err := f.srv.tokens.Create(context.Background(), "alice", access.Approver, 0)
	require.NoError(b, err)
	i := 0
	for _, c := range []struct{ name, token string }{{"legacy", testToken}, {"stored", secret}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				if i++; i%20 == 1 { // restock the Aviator: 23 again
					row := f.committed("inventory", "SG001")
					row["quantity_in_stock"] = 23
					raw, err := json.Marshal([]any{row})
					require.NoError(b, err)
					_, err = f.st.Import(context.Background(), "inventory", bytes.NewReader(raw), bolt.JSON, bolt.Upsert)
					require.NoError(b, err)
				}
				doc := f.run(purchase("Aviator", 1, "Bench"), "")
				if doc.State != StatePending {
					b.Fatalf("%+v", doc)
				}
				b.StartTimer()
				r := f.callWith(c.token, "POST", "/v1/runs/"+doc.RunID+"/apply", ApplyRequest{Digest: doc.Digest})
				if r.status != http.StatusOK {
					b.Fatalf("%d %s", r.status, r.body)
				}
			}
		})
	}
}
