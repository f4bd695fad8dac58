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
