package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/engine"
)

// whoFor is a read-only plan that answers with the subject its run acts for.
const whoFor = `answer_text = "For %s." % run_subject()
STATUS = "success"`

// A run names its subject in POST /v1/runs; the answer and GET /v1/runs/{id} show it.
func TestSubjectOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	r := f.call("POST", "/v1/runs", RunRequest{Program: whoFor, Request: "who", Subject: "C42"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(t, &doc)
	assert.Equal(t, "For C42.", doc.AnswerText)
	assert.Equal(t, "C42", doc.Subject)

	r = f.call("GET", "/v1/runs/"+doc.RunID, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var shown RunDocument
	r.decode(t, &shown)
	assert.Equal(t, "C42", shown.Subject)

	// The lists a reviewer picks from name the subject too.
	r = f.call("GET", "/v1/runs", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var list RunList
	r.decode(t, &list)
	require.Len(t, list.Runs, 1)
	assert.Equal(t, "C42", list.Runs[0].Subject)
	q, err := f.srv.Queue("all")
	require.NoError(t, err)
	require.Len(t, q.Runs, 1)
	assert.Equal(t, "C42", q.Runs[0].Subject)

	r = f.call("POST", "/v1/runs", RunRequest{Program: whoFor, Subject: strings.Repeat("x", access.MaxSubject+1)})
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, engine.CodeSubjectInvalid, r.errorCode(t))
}

// A token pinned to a subject acts for it when the request names none, and is refused 403
// subject-mismatch when it names another, over HTTP and over MCP; nothing is recorded then.
func TestPinnedTokenRefusesAnotherSubject(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	secret, _, err := f.srv.tokens.CreateFor(context.Background(), "agent-c1", access.Proposer, 0, "C1")
	require.NoError(t, err)

	r := f.callWith(secret, "POST", "/v1/runs", RunRequest{Program: whoFor, Subject: "C2"})
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Equal(t, engine.CodeSubjectMismatch, r.errorCode(t))
	assert.Contains(t, string(r.body), `agent-c1 may act only for subject \"C1\", not for \"C2\"`)

	r = f.callWith(secret, "POST", "/v1/runs", RunRequest{Program: whoFor})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(t, &doc)
	assert.Equal(t, "C1", doc.Subject)
	assert.Equal(t, "For C1.", doc.AnswerText)

	cs := mcpAs(t, f, secret, nil)
	res := call(t, cs, "run_plan", RunRequest{Program: whoFor, Subject: "C2"}, nil)
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(text(res), engine.CodeSubjectMismatch+": "), text(res))

	var mdoc RunDocument
	res = call(t, cs, "run_plan", RunRequest{Program: whoFor, Subject: "C1"}, &mdoc)
	require.False(t, res.IsError, text(res))
	assert.Equal(t, "C1", mdoc.Subject)

	list, err := f.eng.ListRuns(engine.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.Runs, 2, "the refused runs were not recorded")
}

// A token pinned to a subject reads that subject's runs only: the list keeps to them (paged
// through the log, the counts left zero), another subject's run is unknown to show and replay
// over HTTP and MCP, and the stream of every run's events is closed to it.
func TestPinnedTokenReadsOnlyItsSubject(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	c1, _, err := f.srv.tokens.CreateFor(context.Background(), "agent-c1", access.Proposer, 0, "C1")
	require.NoError(t, err)
	run := func(token, subject string) RunDocument {
		r := f.callWith(token, "POST", "/v1/runs", RunRequest{Program: whoFor, Subject: subject})
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var doc RunDocument
		r.decode(t, &doc)
		return doc
	}
	var own []string
	var other RunDocument
	for i := range 6 { // newest first: C2, C1, C2, C1, ...; the admin's runs act for C2
		if i%2 == 0 {
			own = append([]string{run(c1, "").RunID}, own...)
		} else {
			other = run(testToken, "C2")
		}
	}

	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		r := f.callWith(c1, "GET", "/v1/runs?limit=2&cursor="+cursor, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var list RunList
		r.decode(t, &list)
		assert.Equal(t, "C1", list.Subject)
		assert.Zero(t, list.Count, "the log's counts are every subject's")
		assert.LessOrEqual(t, len(list.Runs), 2)
		for _, s := range list.Runs {
			assert.Equal(t, "C1", s.Subject)
			ids = append(ids, s.ID)
		}
		if cursor = list.NextCursor; cursor == "" {
			break
		}
	}
	assert.Equal(t, own, ids, "every run of C1, newest first, once")

	r := f.call("GET", "/v1/runs", nil)
	var all RunList
	r.decode(t, &all)
	assert.Len(t, all.Runs, 6, "an unpinned token lists every run")
	assert.Empty(t, all.Subject)

	r = f.callWith(c1, "GET", "/v1/runs/"+other.RunID, nil)
	assert.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	assert.Equal(t, CodeUnknownRun, r.errorCode(t))
	assert.NotContains(t, string(r.body), "C2")
	r = f.callWith(c1, "GET", "/v1/runs/"+own[0], nil)
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)

	r = f.callWith(c1, "GET", "/v1/events", nil)
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Equal(t, engine.CodeSubjectMismatch, r.errorCode(t))

	cs := mcpAs(t, f, c1, nil)
	res := call(t, cs, "show_run", RunRef{RunID: other.RunID}, nil)
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(text(res), CodeUnknownRun+": "), text(res))
	var mlist RunList
	res = call(t, cs, "list_runs", ListInput{Limit: 50}, &mlist)
	require.False(t, res.IsError, text(res))
	assert.Len(t, mlist.Runs, 3)
	assert.Equal(t, "C1", mlist.Subject)
}

// A pinned proposer that an auto-approval rule lets apply applies its own subject's runs only:
// another subject's run is unknown to it, and nothing is written.
func TestPinnedProposerAppliesOnlyItsSubject(t *testing.T) {
	t.Parallel()
	f, _ := approvalFixture(t, `{"auto": [{"name": "small_sale", "doc": "at most two rows", "kind": "auto_apply", "params": {"max_rows_written": 2, "tables": ["inventory", "transactions"]}}]}`)
	c1, _, err := f.srv.tokens.CreateFor(context.Background(), "agent-c1", access.Proposer, 0, "C1")
	require.NoError(t, err)
	other := f.callWith(testToken, "POST", "/v1/runs", RunRequest{Program: purchase("Wayfarer", 1, "Alice"), Request: "a sale", Subject: "C2"})
	require.Equal(t, http.StatusOK, other.status, "%s", other.body)
	var doc RunDocument
	other.decode(t, &doc)
	require.Equal(t, StatePending, doc.State)
	before := f.committed("inventory", "SG002")["quantity_in_stock"]

	r := f.applyAs(c1, &doc)
	assert.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	assert.Equal(t, CodeUnknownRun, r.errorCode(t))
	assert.Equal(t, before, f.committed("inventory", "SG002")["quantity_in_stock"], "nothing written")

	mine := f.proposeAs(c1, 1)
	r = f.applyAs(c1, mine)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.NotEqual(t, before, f.committed("inventory", "SG002")["quantity_in_stock"], "its own run applied")
}

// A pinned caller's listing reads a bounded part of the log per answer: past the bound it
// answers a short page (here none of its runs) with a next_cursor, and the cursor goes on to the
// runs beyond.
func TestPinnedListingIsBoundedPerAnswer(t *testing.T) {
	old := pinnedScanRuns
	pinnedScanRuns = 4
	t.Cleanup(func() { pinnedScanRuns = old })
	f := newFixture(t, Options{})
	c1, _, err := f.srv.tokens.CreateFor(context.Background(), "agent-c1", access.Proposer, 0, "C1")
	require.NoError(t, err)
	r := f.callWith(c1, "POST", "/v1/runs", RunRequest{Program: whoFor}) // the oldest run
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var mine RunDocument
	r.decode(t, &mine)
	for range 6 {
		r = f.call("POST", "/v1/runs", RunRequest{Program: whoFor, Subject: "C2"})
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	}

	r = f.callWith(c1, "GET", "/v1/runs?limit=2", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var first RunList
	r.decode(t, &first)
	assert.Empty(t, first.Runs, "four records read, none of them C1's")
	require.NotEmpty(t, first.NextCursor, "the answer says where to go on")

	r = f.callWith(c1, "GET", "/v1/runs?limit=2&cursor="+first.NextCursor, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var next RunList
	r.decode(t, &next)
	require.Len(t, next.Runs, 1)
	assert.Equal(t, mine.RunID, next.Runs[0].ID)
	assert.Empty(t, next.NextCursor, "the log's end")
}
