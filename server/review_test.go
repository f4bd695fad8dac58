package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/diffview"
	"github.com/starplan/starplan/engine"
)

// page sends one request as the review page does: no Authorization, the given cookie with the
// key its login answered (SessionKeyHeader), and the page's CSRF header when csrf is set; header
// pairs are set last (an empty SessionKeyHeader sends none). Redirects are not followed.
func (f *fixture) page(method, path string, body any, cookie *http.Cookie, csrf bool, header ...string) response {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(f.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, f.web.URL+path, rd)
	require.NoError(f.t, err)
	if cookie != nil {
		req.AddCookie(cookie)
		req.Header.Set(SessionKeyHeader, f.keys[cookie.Value])
	}
	if csrf {
		req.Header.Set(PageHeader, "1")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if req.Header.Get(SessionKeyHeader) == "" {
		req.Header.Del(SessionKeyHeader)
	}
	client := *f.web.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	return response{status: resp.StatusCode, body: raw, header: resp.Header}
}

// login logs in with the token and returns the session cookie; page sends its key with it.
func (f *fixture) login() *http.Cookie {
	f.t.Helper()
	r := f.page("POST", "/login", LoginRequest{Token: testToken}, nil, true)
	require.Equal(f.t, http.StatusOK, r.status, "%s", r.body)
	return f.session(r)
}

// session returns the session a login answered with: its cookie, with its key kept for page.
func (f *fixture) session(r response) *http.Cookie {
	f.t.Helper()
	var a LoginAnswer
	r.decode(f.t, &a)
	require.Regexp(f.t, `^[0-9a-f]{64}$`, a.SessionKey)
	c := sessionCookie(f.t, r)
	if f.keys == nil {
		f.keys = map[string]string{}
	}
	f.keys[c.Value] = a.SessionKey
	return c
}

func sessionCookie(t testing.TB, r response) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == SessionCookie {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", SessionCookie, r.header["Set-Cookie"])
	return nil
}

func TestReviewPageIsServedWithoutTheTokenAndLocksItselfDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.page("GET", "/", nil, nil, false)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
	csp := r.header.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		assert.Contains(t, csp, d)
	}
	assert.NotContains(t, csp, "unsafe-inline")
	assert.Equal(t, "DENY", r.header.Get("X-Frame-Options"))
	assert.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	assert.NotContains(t, string(r.body), testToken, "the page never holds the token")

	js := f.page("GET", "/assets/app.js", nil, nil, false)
	require.Equal(t, http.StatusOK, js.status)
	assert.Contains(t, js.header.Get("Content-Type"), "javascript")
	css := f.page("GET", "/assets/app.css", nil, nil, false)
	require.Equal(t, http.StatusOK, css.status)
	assert.Contains(t, css.header.Get("Content-Type"), "text/css")

	// Nothing but the page's files is public.
	for _, p := range []string{"/review/queue", "/review/runs/r_0000000000", "/v1/runs", "/v1/events", "/index.html"} {
		assert.Equal(t, http.StatusUnauthorized, f.page("GET", p, nil, nil, false).status, p)
	}
	assert.Equal(t, http.StatusNotFound, f.page("GET", "/assets/nothing.js", nil, nil, false).status)
}

func TestReviewPageFilesAreSelfContained(t *testing.T) {
	t.Parallel()
	inline := regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]|<style|\son[a-z]+\s*=|javascript:`)
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(`)
	unsafe := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`)
	err := fs.WalkDir(webFiles, "web", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(webFiles, path)
		require.NoError(t, err)
		text := strings.ReplaceAll(string(raw), `xmlns="http://www.w3.org/2000/svg"`, "") // a name, not a load
		assert.NotRegexp(t, external, text, "%s loads nothing from elsewhere: the page works offline", path)
		if strings.HasSuffix(path, ".html") {
			assert.NotRegexp(t, inline, text, "%s has no inline script, style or handler: the CSP forbids them", path)
		}
		if strings.HasSuffix(path, ".js") {
			assert.NotRegexp(t, unsafe, text, "%s builds the DOM from text only", path)
		}
		return nil
	})
	require.NoError(t, err)
}

func TestLoginTradesTheTokenForAStrictSessionCookie(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.page("POST", "/login", LoginRequest{Token: testToken}, nil, false)
	assert.Equal(t, http.StatusForbidden, r.status, "a login without the page's header is refused (CSRF)")
	assert.Empty(t, r.header.Values("Set-Cookie"))
	r = f.page("POST", "/login", LoginRequest{Token: "not-the-token-at-all"}, nil, true)
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Equal(t, CodeUnauthorized, r.errorCode(t))
	assert.Empty(t, r.header.Values("Set-Cookie"))

	r = f.page("POST", "/login", LoginRequest{Token: testToken}, nil, true)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
	c := f.session(r)
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	assert.Equal(t, "/", c.Path)
	assert.NotContains(t, c.Value, testToken)
	assert.Len(t, c.Value, 64)

	// The session opens the JSON API and the page's documents.
	assert.Equal(t, http.StatusOK, f.page("GET", "/v1/runs", nil, c, false).status)
	assert.Equal(t, http.StatusOK, f.page("GET", "/review/queue", nil, c, false).status)

	// Changing anything needs the CSRF header, and a browser's Origin must be this server.
	run := RunRequest{Program: purchase("Aviator", 1, "Ann"), Request: "one Aviator"}
	r = f.page("POST", "/v1/runs", run, c, false)
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.Equal(t, CodeForbidden, r.errorCode(t))
	r = f.page("POST", "/v1/runs", run, c, true, "Origin", "http://attacker.example")
	assert.Equal(t, http.StatusForbidden, r.status)
	r = f.page("POST", "/v1/runs", run, c, true, "Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusForbidden, r.status)
	runs, err := f.eng.Runs()
	require.NoError(t, err)
	assert.Empty(t, runs, "no refused request made a run")
	r = f.page("POST", "/v1/runs", run, c, true, "Origin", f.web.URL, "Sec-Fetch-Site", "same-origin")
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)

	// A wrong bearer header is not rescued by a good cookie; a forged cookie opens nothing.
	req, err := http.NewRequest("GET", f.web.URL+"/v1/runs", nil)
	require.NoError(t, err)
	req.AddCookie(c)
	req.Header.Set("Authorization", "Bearer not-the-token-at-all")
	resp, err := f.web.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, http.StatusUnauthorized, f.page("GET", "/v1/runs", nil, &http.Cookie{Name: SessionCookie, Value: strings.Repeat("0", 64)}, false).status)

	// The page's paths answer in the API's error shape.
	r = f.page("PUT", "/login", nil, c, true)
	assert.Equal(t, http.StatusMethodNotAllowed, r.status)
	assert.Equal(t, CodeMethod, r.errorCode(t))
	r = f.page("GET", "/nothing", nil, c, false)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Equal(t, CodeNotFound, r.errorCode(t))

	// Logging out ends the session.
	r = f.page("POST", "/logout", nil, c, true)
	assert.Equal(t, http.StatusNoContent, r.status)
	assert.Equal(t, http.StatusUnauthorized, f.page("GET", "/v1/runs", nil, c, false).status)
}

func TestSessionsExpireAndAreBounded(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	ss := newSessions(clock)
	valid := func(id, key string) bool { _, ok := ss.valid(id, key); return ok }

	first, key := ss.start(caller{})
	assert.True(t, valid(first, key))
	assert.False(t, valid("", key))
	assert.False(t, valid(first, ""), "a session needs its key")
	second, key2 := ss.start(caller{})
	assert.False(t, valid(first, key2), "another session's key is not this one's")
	assert.True(t, valid(second, key2))
	advance(SessionTTL)
	assert.False(t, valid(first, key), "a session ends after SessionTTL")

	ids := make([]string, MaxSessions+10)
	keys := make([]string, len(ids))
	for i := range ids {
		ids[i], keys[i] = ss.start(caller{})
		advance(time.Second)
	}
	assert.Len(t, ss.live, MaxSessions)
	assert.Len(t, ss.keys, MaxSessions, "the keys of ended sessions go with them")
	assert.False(t, valid(ids[0], keys[0]), "the oldest sessions make room")
	assert.True(t, valid(ids[len(ids)-1], keys[len(ids)-1]))
}

func TestLoginLinkWorksOnceAndExpires(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFixture(t, Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	link := f.srv.LoginLink()
	require.Regexp(t, `^/login\?code=[0-9a-f]{64}$`, link)
	code := strings.TrimPrefix(link, "/login?code=")

	// Opening the link takes the browser to the page with the code where no request carries it;
	// the page trades it for a session.
	r := f.page("GET", link, nil, nil, false)
	require.Equal(t, http.StatusSeeOther, r.status)
	assert.Equal(t, "/#/login/code/"+code, r.header.Get("Location"))
	assert.Empty(t, r.header.Values("Set-Cookie"), "opening the link alone opens no session")
	r = f.page("POST", "/login", LoginRequest{Code: code}, nil, false)
	assert.Equal(t, http.StatusForbidden, r.status, "a login without the page's header is refused (CSRF)")
	r = f.page("POST", "/login", LoginRequest{Code: code}, nil, true)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	c := f.session(r)
	assert.Equal(t, http.StatusOK, f.page("GET", "/v1/runs", nil, c, false).status)

	again := f.page("POST", "/login", LoginRequest{Code: code}, nil, true)
	assert.Equal(t, http.StatusUnauthorized, again.status, "a link works once")
	assert.Empty(t, again.header.Values("Set-Cookie"))
	assert.Equal(t, "/#/login/expired", f.page("GET", link, nil, nil, false).header.Get("Location"), "a used link sends the browser to the login form")

	late := f.srv.LoginLink()
	mu.Lock()
	now = now.Add(LoginLinkTTL)
	mu.Unlock()
	assert.Equal(t, "/#/login/expired", f.page("GET", late, nil, nil, false).header.Get("Location"), "an unused link expires")
	assert.Equal(t, http.StatusUnauthorized, f.page("POST", "/login", LoginRequest{Code: strings.TrimPrefix(late, "/login?code=")}, nil, true).status)
	assert.Equal(t, "/#/login/expired", f.page("GET", "/login?code=", nil, nil, false).header.Get("Location"))
}

// A session cookie replayed by another process (cookies are scoped by host, not port: any page
// on another port of 127.0.0.1 receives it) authorizes nothing without the session's key, which
// only the login's answer carried.
func TestAReplayedSessionCookieAuthorizesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	run := f.run(purchase("Aviator", 1, "Ann"), "one Aviator for Ann")
	c := f.login()
	other := f.login() // another tab's session: its key is not this one's

	noKey := []string{SessionKeyHeader, ""}
	for _, p := range []string{"/v1/runs", "/v1/runs/" + run.RunID, "/review/queue", "/review/runs/" + run.RunID, "/v1/events"} {
		r := f.page("GET", p, nil, c, false, noKey...)
		assert.Equal(t, http.StatusUnauthorized, r.status, "%s without the key", p)
		assert.Equal(t, CodeUnauthorized, r.errorCode(t))
		assert.Equal(t, http.StatusUnauthorized, f.page("GET", p, nil, c, false, SessionKeyHeader, f.keys[other.Value]).status, "%s with another session's key", p)
	}
	r := f.page("POST", "/v1/runs/"+run.RunID+"/apply", ApplyRequest{Digest: run.Digest}, c, true, noKey...)
	assert.Equal(t, http.StatusUnauthorized, r.status, "the replayer cannot approve")
	r = f.page("POST", "/v1/runs", RunRequest{Program: purchase("Aviator", 1, "Bob")}, c, true, noKey...)
	assert.Equal(t, http.StatusUnauthorized, r.status, "nor dry-run")
	r = f.page("POST", "/v1/runs/"+run.RunID+"/apply?"+SessionKeyParam+"="+f.keys[c.Value], ApplyRequest{Digest: run.Digest}, c, true, noKey...)
	assert.Equal(t, http.StatusUnauthorized, r.status, "the key is a header; a query key is only for the event stream")
	doc, err := f.srv.Show(run.RunID)
	require.NoError(t, err)
	assert.Equal(t, StatePending, doc.State, "nothing was applied")

	// With its key, the session works; the event stream takes the key in its query.
	assert.Equal(t, http.StatusOK, f.page("GET", "/review/queue", nil, c, false).status)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", f.web.URL+"/v1/events?"+SessionKeyParam+"="+f.keys[c.Value], nil)
	require.NoError(t, err)
	req.AddCookie(c)
	resp, err := f.web.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	r = f.page("POST", "/v1/runs/"+run.RunID+"/apply", ApplyRequest{Digest: run.Digest}, c, true)
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

func TestQueueSummarisesRunsByFilterNewestFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	a := f.run(purchase("Aviator", 1, "Ann"), "one Aviator for Ann")
	b := f.run(purchase("Aviator", 1, "Bob"), "one Aviator for Bob")
	c := f.run(purchase("Aviator", 1, "Cy"), "one Aviator for Cy")
	f.run("x = ", "broken")
	c2 := f.login()

	queue := func(filter string) Queue {
		t.Helper()
		r := f.page("GET", "/review/queue?filter="+filter, nil, c2, false)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var q Queue
		r.decode(t, &q)
		return q
	}
	q := queue("")
	assert.Equal(t, "pending", q.Filter)
	require.Len(t, q.Runs, 3)
	assert.Equal(t, []string{c.RunID, b.RunID, a.RunID}, []string{q.Runs[0].ID, q.Runs[1].ID, q.Runs[2].ID}, "newest first")
	item := q.Runs[2]
	assert.Equal(t, "one Aviator for Ann", item.Request)
	assert.Equal(t, "API", item.Proposer)
	assert.Equal(t, engine.OutcomeOK, item.Outcome)
	assert.Equal(t, "success", item.Status)
	assert.Equal(t, StatePending, item.State)
	assert.Equal(t, "inventory: 1 updated; transactions: 1 inserted", item.Summary)
	assert.Regexp(t, `^SG001 Aviator: quantity_in_stock 2[0-9]→2[0-9]; \+TXN[0-9]+ Ann 80\.0$`, item.Headline, "what changes, row by row")
	assert.False(t, item.Time.IsZero())

	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+a.RunID+"/apply", ApplyRequest{Digest: a.Digest}).status)
	require.Equal(t, http.StatusConflict, f.call("POST", "/v1/runs/"+b.RunID+"/apply", ApplyRequest{Digest: b.Digest}).status)
	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+c.RunID+"/reject", RejectRequest{Feedback: "no"}).status)

	ids := func(q Queue) []string {
		out := []string{}
		for _, r := range q.Runs {
			out = append(out, r.ID)
		}
		return out
	}
	assert.Empty(t, queue("pending").Runs)
	assert.Equal(t, []string{a.RunID}, ids(queue("applied")))
	assert.Equal(t, []string{c.RunID}, ids(queue("rejected")))
	failed := queue("failed")
	require.Len(t, failed.Runs, 2, "failed takes failed plans and conflicts")
	assert.Equal(t, StateFailed, failed.Runs[0].State)
	assert.Equal(t, StateConflict, failed.Runs[1].State)
	assert.Len(t, queue("all").Runs, 4)

	r := f.page("GET", "/review/queue?filter=mine", nil, c2, false)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, CodeBadRequest, r.errorCode(t))
}

func TestRunReviewLaysOutTheDiffAndKeepsHostileTextAsData(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	hostile := `<script>alert("x")</script><img src=x onerror=alert(1)>`
	doc := f.run(hostilePurchase(t, hostile), "<i>one Aviator</i>")
	require.Equal(t, StatePending, doc.State, "%v", doc.Diagnostics)
	c := f.login()

	r := f.page("GET", "/review/runs/"+doc.RunID, nil, c, false)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, "application/json; charset=utf-8", r.header.Get("Content-Type"), "data, never markup")
	var rv RunReview
	r.decode(t, &rv)
	assert.Equal(t, doc.Digest, rv.Run.Digest)
	assert.Equal(t, "API", rv.Proposer)
	assert.Equal(t, "inventory: 1 updated; transactions: 1 inserted", rv.Summary)
	require.Len(t, rv.Tables, 2)
	inv := rv.Tables[0].Rows[0]
	assert.Equal(t, diffview.RowUpdated, inv.Change)
	assert.Equal(t, "item_id", inv.Cells[0].Path, "the key first")
	row := rv.Tables[1].Rows[0]
	assert.Equal(t, diffview.RowInserted, row.Change)
	var desc *diffview.Cell
	for i := range row.Cells {
		if row.Cells[i].Path == "transaction_summary" {
			desc = &row.Cells[i]
		}
	}
	require.NotNil(t, desc)
	assert.True(t, desc.Changed)
	assert.Equal(t, hostile, *desc.After, "the value as the plan wrote it; the page inserts it as text")

	// The page itself is the same file whatever the runs hold: nothing is rendered into it.
	page := f.page("GET", "/", nil, nil, false)
	want, err := fs.ReadFile(webFiles, "web/index.html")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(page.body))

	r = f.page("GET", "/review/runs/r_0000000000", nil, c, false)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Equal(t, CodeUnknownRun, r.errorCode(t))
}

func TestProposerNamesWhoMadeTheRun(t *testing.T) {
	t.Parallel()
	for origin, want := range map[string]string{
		OriginHTTP: "API", OriginMCP: "MCP", "exec": "CLI (exec)", "demo": "CLI (demo)", "ask": "ask", "": "unknown", "cron": "cron",
	} {
		assert.Equal(t, want, proposer(origin, nil), origin)
	}
	assert.Equal(t, "ask (gpt-4o-mini)", proposer("ask", &engine.ModelCall{Model: "gpt-4o-mini"}))
}

// hostilePurchase is purchase with a transaction summary that is markup.
func hostilePurchase(t testing.TB, summary string) string {
	p := purchase("Aviator", 1, "Ann")
	out := strings.Replace(p, `"Purchase of %d x %s" % (qty, item["name"])`, jsonString(t, summary), 1)
	require.NotEqual(t, p, out)
	return out
}

func jsonString(t testing.TB, s string) string {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

// brokenSale takes an Aviator off the shelf without a ledger entry, with an answer of three
// sentences: the policy refuses the unpaid item and the contract the answer's length.
const brokenSale = `item = inventory_tbl.get({"name": "Aviator"})
inventory_tbl.update({"quantity_in_stock": item["quantity_in_stock"] - 1}, {"item_id": item["item_id"]})
STATUS = "success"
answer_text = "Done. Sold. Thanks."
`

func TestRunReviewLeadsWithTheMostSeriousDiagnostic(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	doc := f.run(brokenSale, "take an Aviator")
	require.Equal(t, StateFailed, doc.State)
	codes := func(ds diag.List) []string {
		out := []string{}
		for _, d := range ds {
			out = append(out, d.Code)
		}
		return out
	}
	require.Equal(t, []string{contracts.CodeAnswerSentences, contracts.CodeLedgerMissing}, codes(doc.Diagnostics),
		"the contract lists the answer's form first")
	r := f.page("GET", "/review/runs/"+doc.RunID, nil, f.login(), false)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var rv RunReview
	r.decode(t, &rv)
	assert.Equal(t, []string{contracts.CodeLedgerMissing, contracts.CodeAnswerSentences}, codes(rv.Diagnostics), "the data first")
	assert.Equal(t, codes(doc.Diagnostics), codes(rv.Run.Diagnostics), "the run document keeps its order")
	assert.Equal(t, "SG001 Aviator: quantity_in_stock 23→22", rv.Headline)
}

func TestBySeriousnessPutsTheDataFirstAndTheCountLast(t *testing.T) {
	t.Parallel()
	d := func(stage diag.Stage, code string) diag.Diagnostic { return diag.Diagnostic{Stage: stage, Code: code} }
	in := diag.List{
		d(diag.StageContract, engine.CodeMoreDiagnostics),
		d(diag.StageModel, engine.CodeNoValidPlan),
		d(diag.StageContract, contracts.CodeAnswerTooLong),
		d(diag.StageContract, contracts.CodeStatusInvalid),
		d(diag.StageContract, "invariant-from-the-domain"),
		d(diag.StageRun, "runtime-error"),
		d(diag.StageContract, contracts.CodeWritesNotAllowed),
		d(diag.StageApply, engine.CodeConflict),
	}
	got := bySeriousness(in)
	want := []string{engine.CodeConflict, "invariant-from-the-domain", "runtime-error", contracts.CodeWritesNotAllowed,
		contracts.CodeStatusInvalid, contracts.CodeAnswerTooLong, engine.CodeNoValidPlan, engine.CodeMoreDiagnostics}
	for i, w := range want {
		assert.Equal(t, w, got[i].Code, "%d", i)
	}
	assert.Equal(t, engine.CodeMoreDiagnostics, in[0].Code, "a copy: the run's own list keeps its order")
	assert.Equal(t, diag.List{}, bySeriousness(nil), "never null in the JSON")
}
