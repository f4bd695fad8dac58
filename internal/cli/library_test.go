package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/evals"
	"github.com/starplan/starplan/llm/llmtest"
)

// lendPlan is the README walk-through's plan: Ada borrows The Dispossessed.
const lendPlan = `book = books_tbl.get({"title": {"$ieq": "The Dispossessed"}})
member = members_tbl.get({"name": {"$ieq": "Ada Lovelace"}})
why_not = may_borrow(member) if member != None else None
if book == None or member == None:
    STATUS, answer_text = "not_found", "Sorry, I can't find that book or that member."
elif book["status"] != "available":
    STATUS, answer_text = "not_available", "Sorry, it is not on the shelf right now."
elif why_not != None:
    STATUS, answer_text = "limit_reached", why_not
else:
    due = due_date()
    loans_tbl.insert({"book_id": book["book_id"], "member_id": member["member_id"],
                      "status": "out", "lent_on": now(), "due": due})
    books_tbl.update({"status": "on_loan"}, book)
    members_tbl.update({"loans_out": member["loans_out"] + 1}, member)
    STATUS, answer_text = "success", "Done: %s is lent to %s until %s." % (book["title"], member["name"], due[:10])
`

// The README's walk-through of the second domain, command by command: a copy of
// domains/library checked, made a store, a loan run, applied and listed; the same loan again
// refused by the library's own Starlark rule; the domain shown from the store.
func TestLibraryWalkThrough(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "library")
	require.NoError(t, os.CopyFS(dir, os.DirFS("../../domains/library")))
	s := newSession(t)
	o := s.run(false, "", "domain", "check", dir)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "domain library, 4 tables, no problems found")

	o = s.run(false, "", "db", "init", "--domain", dir)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.err, "seeded new store")

	plan := filepath.Join(t.TempDir(), "lend.star")
	require.NoError(t, os.WriteFile(plan, []byte(lendPlan), 0o644))
	o = s.run(false, "", "exec", plan)
	require.Equal(t, ExitOK, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	require.True(t, res.Pending, o.out)
	assert.Equal(t, "success", res.Status)
	assert.Equal(t, "on_loan", res.Changes["books"].Updated[0].After["status"])
	assert.Equal(t, "L004", res.Changes["loans"].Inserted[0]["loan_id"])

	o = s.run(false, "", "apply", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)

	// Run again, the plan sees the book out and changes nothing.
	o = s.run(false, "", "exec", plan)
	require.Equal(t, ExitOK, o.code, o.err)
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	assert.Equal(t, "not_available", res.Status)
	assert.False(t, res.Pending)

	// A plan that lends it anyway is refused by the domain's own rule, with its doc.
	blind := filepath.Join(t.TempDir(), "blind.star")
	require.NoError(t, os.WriteFile(blind, []byte(`loans_tbl.insert({"book_id": "B004", "member_id": "M002", "status": "out", "lent_on": now(), "due": due_date()})
members_tbl.update({"loans_out": 2}, {"member_id": "M002"})
STATUS, answer_text = "success", "Done."
`), 0o644))
	o = s.run(false, "", "exec", blind)
	assert.Equal(t, ExitContract, o.code, o.out)
	assert.Contains(t, o.out, `"one_loan_per_book"`)
	assert.Contains(t, o.out, "loan L005 lends book B004, but the plan does not take the book from available to on_loan")

	o = s.run(false, "", "runs")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Equal(t, 3, strings.Count(o.out, `"run_id"`), o.out)

	o = s.run(true, "", "domain", "show")
	require.Equal(t, ExitOK, o.code, o.err)
	for _, want := range []string{"Domain library", "loans (key loan_id)", "loan_status_machine", "borrower_in_good_standing"} {
		assert.Contains(t, o.out, want)
	}
}

// eval --domain makes each case's store of that domain and checks the rows a case lists.
func TestEvalOnTheLibrary(t *testing.T) {
	t.Parallel()
	_, _, run := modelSession(t, llmtest.Always(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if strings.Contains(r.Messages[1].Content, "Dispossessed") {
			return llmtest.Reply("<execute_python>\n" + lendPlan + "</execute_python>")
		}
		return llmtest.Reply("<execute_python>\nSTATUS, answer_text = \"not_found\", \"Sorry, we have no book called Dune.\"\n</execute_python>")
	})))
	suite := filepath.Join(t.TempDir(), "suite.jsonl")
	require.NoError(t, os.WriteFile(suite, []byte(
		`{"id": "a", "request": "Lend The Dispossessed to Ada Lovelace.", "status": "success", "rows_after": {"loans": {"L004": {"book_id": "B004", "member_id": "M001"}}, "books": {"B004": {"status": "on_loan"}}, "members": {"M001": {"loans_out": 1}}}}
{"id": "b", "request": "Lend Dune to Ada Lovelace.", "status": "not_found", "rows_after": {}}
{"id": "c", "request": "Lend The Dispossessed to Ada Lovelace, please.", "status": "success", "rows_after": {}}
`), 0o644))
	o := run(false, "", "eval", "--domain", "../../domains/library", suite)
	require.Equal(t, ExitOK, o.code, o.err)
	var rep evals.Report
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
	require.Len(t, rep.Cases, 3)
	assert.True(t, rep.Cases[0].Pass, rep.Cases[0].Failures)
	assert.True(t, rep.Cases[1].Pass, rep.Cases[1].Failures)
	assert.False(t, rep.Cases[2].Pass)
	assert.Contains(t, rep.Cases[2].Failures, "books B004 was added or changed, and rows_after does not list it")

	o = run(false, "", "eval", "--domain", "../../domains", suite)
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "problems in the domain")
}
