package engine

import (
	"context"
	"os"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/contracts"
)

// A loans domain whose writes are made on behalf of a member: a member may only hold loans of
// their own (a starlark rule reading run_subject()), and its helper borrows for the run's subject.
var loansDomain = fstest.MapFS{
	"domain.json": {Data: []byte(`{"name": "loans", "tables": [{"name": "loans", "key": "loan_id", "fields": [
		{"name": "loan_id", "type": "string", "required": true, "read_only": true},
		{"name": "member_id", "type": "string", "required": true},
		{"name": "book", "type": "string", "required": true}]}]}`)},
	"seed.json": {Data: []byte(`{"loans": [{"loan_id": "L1", "member_id": "M1", "book": "B1"}]}`)},
	"policy.json": {Data: []byte(`{"name": "loans",
		"contract": {"statuses": ["success", "refused"], "write_status": "success", "answer_max_sentences": 2, "answer_max_chars": 200},
		"subject": {"required_for_writes": true},
		"rules": [{"name": "own_loans", "kind": "starlark", "doc": "a member touches only their own loans", "params": {"function": "own_loans"}}]}`)},
	"invariants.star": {Data: []byte(`
def own_loans(changes):
    found = []
    ch = changes.get("loans", {})
    rows = ch.get("inserted", []) + [u["after"] for u in ch.get("updated", [])] + [u["before"] for u in ch.get("updated", [])]
    for r in rows:
        if r["member_id"] != run_subject():
            found.append("loan %s is member %s's, and the run acts for %s" % (r["loan_id"], r["member_id"], run_subject()))
    return found
`)},
	"helpers.star": {Data: []byte(`
def borrow(loan_id, book):
    """Lends book to the member the run acts for.

    Example: borrow("L9", "B2")
    """
    loans_tbl.insert({"loan_id": loan_id, "member_id": run_subject(), "book": book})
`)},
}

func loansEngine(t *testing.T) *Engine {
	dom, errs := LoadDomain(loansDomain)
	require.Empty(t, errs)
	return domainEngine(t, dom)
}

const lendToM2 = `loans_tbl.insert({"loan_id": "L2", "member_id": "M2", "book": "B2"})
STATUS, answer_text = "success", "Lent."`

// A plan that acts for M1 but writes M2's loan directly is refused by the subject rule alone;
// the same plan for M2 passes, is recorded with its subject, applies (the rule sees the
// recorded subject again) and replays identically.
func TestSubjectRule(t *testing.T) {
	e := loansEngine(t)
	ctx := context.Background()

	res, err := e.Run(ctx, Request{Reply: lendToM2, Subject: "M1"})
	require.NoError(t, err)
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	require.Len(t, res.Diagnostics, 1, res.Diagnostics.String())
	assert.Equal(t, "own_loans", res.Diagnostics[0].Code)
	assert.Equal(t, "loan L2 is member M2's, and the run acts for M1", res.Diagnostics[0].Message)

	res, err = e.Run(ctx, Request{Reply: lendToM2, Subject: "M2"})
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.Equal(t, "M2", rec.Subject)
	doc, err := e.Show(res.RunID)
	require.NoError(t, err)
	assert.Equal(t, "M2", doc.Subject)

	rep, err := e.Replay(ctx, res.RunID)
	require.NoError(t, err)
	assert.True(t, rep.Identical, rep.Differences)

	applied, err := e.Apply(ctx, res.RunID)
	require.NoError(t, err)
	assert.True(t, applied.Applied, applied.Diagnostics.String())
}

// The plan and the domain's helpers read the run's subject with run_subject(); None without one.
func TestSubjectSeenByPlanAndHelpers(t *testing.T) {
	e := loansEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: `borrow("L3", "B3")
STATUS, answer_text = "success", "Lent to " + run_subject() + "."`, Subject: "M7"})
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "Lent to M7.", res.AnswerText)
	require.Len(t, res.Changes["loans"].Inserted, 1)
	assert.Equal(t, "M7", res.Changes["loans"].Inserted[0]["member_id"])

	res, err = e.Run(ctx, Request{Reply: "<execute_python>\nSTATUS, answer_text = \"refused\", \"Nobody: %s.\" % (run_subject() == None)\n</execute_python>"})
	require.NoError(t, err)
	assert.Equal(t, "Nobody: True.", res.AnswerText)
}

// A domain whose writes require a subject refuses a run that writes without one, and lets one
// that writes nothing through.
func TestSubjectRequiredForWrites(t *testing.T) {
	e := loansEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: lendToM2})
	require.NoError(t, err)
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	assert.Equal(t, contracts.CodeSubjectRequired, res.Diagnostics[0].Code)
	assert.Contains(t, res.Diagnostics[0].Message, "this domain's writes require a subject")

	res, err = e.Run(ctx, Request{Reply: "<execute_python>\nSTATUS, answer_text = \"refused\", \"Nothing to do.\"\n</execute_python>"})
	require.NoError(t, err)
	assert.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
}

// A proposer pinned to a subject acts for it when the request names none or the same one, and is
// refused when it names another; a subject that cannot be an id is refused.
func TestSubjectPinned(t *testing.T) {
	e := loansEngine(t)
	ctx := context.Background()
	agent := access.Principal{Name: "agent-m2", Role: access.Proposer, Subject: "M2"}

	_, err := e.Run(ctx, Request{Reply: lendToM2, Subject: "M1", By: agent})
	var se *SubjectError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, CodeSubjectMismatch, se.Code)
	assert.Contains(t, se.Problem, `agent-m2 may act only for subject "M2", not for "M1"`)

	for _, asked := range []string{"", "M2"} {
		res, err := e.Run(ctx, Request{Reply: lendToM2, Subject: asked, By: agent})
		require.NoError(t, err)
		require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
		rec, err := e.Record(res.RunID)
		require.NoError(t, err)
		assert.Equal(t, "M2", rec.Subject)
	}

	_, err = e.Ask(ctx, nil, AskRequest{Question: "lend", Subject: "M1", By: agent})
	require.ErrorAs(t, err, &se, "refused before the model is asked")

	_, err = e.Run(ctx, Request{Reply: lendToM2, Subject: " M2"})
	require.ErrorAs(t, err, &se)
	assert.Equal(t, CodeSubjectInvalid, se.Code)
}

// The library's example loan (to Ada Lovelace, M001) made on behalf of member M002 is refused by
// the library's subject rule alone; on behalf of M001, or by the staff (no subject), it passes.
func TestLibraryMemberActsForSelf(t *testing.T) {
	e := libraryEngine(t)
	ctx := context.Background()
	src, err := os.ReadFile("../domains/library/example.star")
	require.NoError(t, err)
	plan := "<execute_python>\n" + string(src) + "\n</execute_python>"

	res, err := e.Run(ctx, Request{Reply: plan, Subject: "M002"})
	require.NoError(t, err)
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	var codes []string
	for _, d := range res.Diagnostics {
		codes = append(codes, d.Code)
	}
	assert.Equal(t, []string{"member_acts_for_self", "member_acts_for_self"}, codes, "the loan and the member row are M001's")
	assert.Equal(t, "the run acts for member M002 but changes a row of member M001 in members", res.Diagnostics[0].Message)

	for _, subject := range []string{"M001", ""} {
		res, err = e.Run(ctx, Request{Reply: plan, Subject: subject})
		require.NoError(t, err)
		assert.Equal(t, OutcomeOK, res.Outcome, "subject %q: %s", subject, res.Diagnostics.String())
	}
}
