package evals

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/llm/llmtest"
)

func example(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "examples", name))
	require.NoError(t, err)
	return "<execute_python>\n" + string(b) + "</execute_python>"
}

const suite = `{"id": "lab-01", "request": "Do you have any round sunglasses in stock that are under $100?", "kind": "read", "status": "success", "stock_after": {}, "transaction_amounts": [], "balance_after": 500}
{"id": "lab-04", "request": "Purchase 3 Wayfarer sunglasses for customer Alice.", "kind": "mutate", "status": "success", "stock_after": {"SG002": 3}, "transaction_amounts": [285], "balance_after": 785}

{"id": "lab-07", "request": "I'd like to buy five Mystique sunglasses for a walk-in customer", "kind": "mutate", "status": "insufficient_stock", "stock_after": {}, "transaction_amounts": [], "balance_after": 500}
{"id": "lab-18", "request": "Can you reset my email password?", "kind": "other", "status": "unsupported_intent", "stock_after": {}, "transaction_amounts": [], "balance_after": 500}
{"id": "lab-05", "request": "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses.", "kind": "mutate", "status": "success", "stock_after": {"SG005": 7, "SG001": 22}, "transaction_amounts": [180, 80], "balance_after": 760}
`

// fakeModel answers each request of the suite from a script: lab-04 needs one repair, lab-18
// gets a wrong STATUS (a failure the report must show), lab-05 is answered by a server error.
func fakeModel(t *testing.T) *llm.Client {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := llmtest.NewServer(t, llmtest.Always(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		q := r.Messages[1].Content
		mu.Lock()
		seen[q]++
		n := seen[q]
		mu.Unlock()
		switch {
		case strings.Contains(q, "round sunglasses"):
			return llmtest.Reply(example(t, "01_round_under_100.star"))
		case strings.Contains(q, "Wayfarer") && n == 1:
			return llmtest.Reply("<execute_python>\ntry:\n    pass\nexcept:\n    pass\n</execute_python>")
		case strings.Contains(q, "Wayfarer"):
			return llmtest.Reply(example(t, "02_purchase_wayfarer.star"))
		case strings.Contains(q, "Mystique"):
			return llmtest.Reply(example(t, "04_not_enough_stock.star"))
		case strings.Contains(q, "password"):
			return llmtest.Reply("<execute_python>\nSTATUS = \"no_match\"\nanswer_text = \"Sorry, I found nothing.\"\n</execute_python>")
		}
		return llmtest.Status(400)
	})))
	c, err := llm.New(srv.Config())
	require.NoError(t, err)
	return c
}

func TestRunSuite(t *testing.T) {
	cases, err := Load(strings.NewReader(suite))
	require.NoError(t, err)
	require.Len(t, cases, 5)

	var progress []Progress
	var mu sync.Mutex
	rep, err := Run(context.Background(), cases, fakeModel(t), Options{Concurrency: 2, Progress: func(p Progress) {
		mu.Lock()
		progress = append(progress, p)
		mu.Unlock()
	}})
	require.NoError(t, err)
	require.Len(t, progress, 5)
	for i, p := range progress {
		assert.Equal(t, i+1, p.Done)
		assert.Equal(t, 5, p.Total)
	}
	assert.Equal(t, rep.Passed, progress[4].Passed, "the last progress counts every pass")

	byID := map[string]CaseResult{}
	for _, c := range rep.Cases {
		byID[c.ID] = c
	}
	assert.True(t, byID["lab-01"].Pass, byID["lab-01"].Failures)
	assert.True(t, byID["lab-01"].FirstTry)
	assert.True(t, byID["lab-04"].Pass, byID["lab-04"].Failures)
	assert.False(t, byID["lab-04"].FirstTry, "lab-04 needed a repair")
	assert.Equal(t, 2, byID["lab-04"].Attempts)
	assert.True(t, byID["lab-07"].Pass, byID["lab-07"].Failures)
	assert.False(t, byID["lab-18"].Pass)
	assert.Contains(t, byID["lab-18"].Failures, `STATUS "no_match", want "unsupported_intent"`)
	assert.False(t, byID["lab-05"].Pass)
	assert.NotEmpty(t, byID["lab-05"].Error)

	assert.Equal(t, 5, rep.Total)
	assert.Equal(t, 3, rep.Passed)
	assert.Equal(t, 2, rep.FirstTryPassed)
	assert.InDelta(t, 0.6, rep.PassRate, 1e-9)
	assert.InDelta(t, 0.4, rep.FirstTryRate, 1e-9)
	assert.Equal(t, 1, rep.RepairsUsed)
	assert.Equal(t, 1, rep.Errors)
	assert.Positive(t, rep.PromptTokens)
	assert.Positive(t, rep.LatencyP95MS)
	assert.GreaterOrEqual(t, rep.LatencyP95MS, rep.LatencyP50MS)
}

// A case may leave out the expectations it does not care about: they are not checked.
func TestMinimalCase(t *testing.T) {
	cases, err := Load(strings.NewReader(`{"request": "Do you have any round sunglasses in stock that are under $100?", "status": "success"}`))
	require.NoError(t, err)
	rep, err := Run(context.Background(), cases, fakeModel(t), Options{})
	require.NoError(t, err)
	require.Len(t, rep.Cases, 1)
	assert.True(t, rep.Cases[0].Pass, rep.Cases[0].Failures)
	assert.NotNil(t, rep.Cases[0].Failures, "an empty list, not null, in JSON")
}

func TestLoadRejectsMalformedLines(t *testing.T) {
	_, err := Load(strings.NewReader("{\"request\": \"x\", \"status\": \"success\"}\nnot json\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	_, err = Load(strings.NewReader("{\"request\": \"x\"}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs a request and a status")
}

// The suite shipped in testdata is the lab's, and loads.
func TestShippedSuiteLoads(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "eval", "lab-requests.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	cases, err := Load(f)
	require.NoError(t, err)
	assert.Len(t, cases, 35)
}

// A suite against an endpoint that refuses every request stops after the first few cases
// instead of running every case through its retries; one that answers even once never gives up.
func TestRunGivesUpOnAnUnreachableModel(t *testing.T) {
	cases, err := Load(strings.NewReader(suite))
	require.NoError(t, err)
	srv := llmtest.NewServer(t, llmtest.Always(llmtest.Status(401)))
	c, err := llm.New(srv.Config())
	require.NoError(t, err)
	_, err = Run(context.Background(), cases, c, Options{Concurrency: 1})
	var ue *UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, DefaultGiveUpAfter, ue.Cases)
	assert.Contains(t, err.Error(), "the first 3 requests all failed to reach the model")
	assert.Len(t, srv.Requests(), DefaultGiveUpAfter, "the cases after the third were never sent")

	rep, err := Run(context.Background(), cases, c, Options{Concurrency: 1, GiveUpAfter: -1})
	require.NoError(t, err, "a negative GiveUpAfter runs every case")
	assert.Equal(t, len(cases), rep.Errors)
}

// The library's suite (testdata/eval/library-requests.jsonl) runs on stores of the library
// domain and checks the rows each case lists: correct plans pass, and a plan that changes a row
// the case does not list fails, naming it.
func TestLibrarySuite(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "eval", "library-requests.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	all, err := Load(f)
	require.NoError(t, err)
	require.Len(t, all, 13)
	var cases []Case
	for _, c := range all {
		if c.ID == "lib-02" || c.ID == "lib-05" || c.ID == "lib-08" {
			cases = append(cases, c)
		}
	}
	require.Len(t, cases, 3)
	wrongPayment := Case{ID: "lib-08-wrong", Request: "Chloé pays $2.", Status: "success", RowsAfter: cases[2].RowsAfter}
	cases = append(cases, wrongPayment)
	plans := map[string]string{
		"Lend Things Fall Apart to Ben Okafor.": `book = books_tbl.get({"title": "Things Fall Apart"})
member = members_tbl.get({"name": "Ben Okafor"})
loans_tbl.insert({"book_id": book["book_id"], "member_id": member["member_id"], "status": "out", "lent_on": now(), "due": due_date()})
books_tbl.update({"status": "on_loan"}, book)
members_tbl.update({"loans_out": member["loans_out"] + 1}, member)
STATUS, answer_text = "success", "Done."`,
		"Can Chloé Martin borrow The Dispossessed?": `STATUS, answer_text = "limit_reached", may_borrow(members_tbl.get_by_key("M003"))`,
		"Chloé Martin would like to pay off her fines in full.": `m = members_tbl.get_by_key("M003")
fines_tbl.insert({"member_id": "M003", "amount": -m["fines_due"], "reason": "payment", "timestamp": now()})
members_tbl.update({"fines_due": 0.0}, m)
STATUS, answer_text = "success", "Paid."`,
		"Chloé pays $2.": `m = members_tbl.get_by_key("M003")
fines_tbl.insert({"member_id": "M003", "amount": -2.0, "reason": "payment", "timestamp": now()})
members_tbl.update({"fines_due": m["fines_due"] - 2.0}, m)
STATUS, answer_text = "success", "Paid."`,
	}
	srv := llmtest.NewServer(t, llmtest.Always(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		for q, plan := range plans {
			if strings.Contains(r.Messages[1].Content, q) {
				return llmtest.Reply("<execute_python>\n" + plan + "\n</execute_python>")
			}
		}
		return llmtest.Status(400)
	})))
	model, err := llm.New(srv.Config())
	require.NoError(t, err)
	rep, err := Run(context.Background(), cases, model, Options{Domain: os.DirFS("../domains/library")})
	require.NoError(t, err)
	byID := map[string]CaseResult{}
	for _, c := range rep.Cases {
		byID[c.ID] = c
	}
	for _, id := range []string{"lib-02", "lib-05", "lib-08"} {
		assert.True(t, byID[id].Pass, "%s: %v %s", id, byID[id].Failures, byID[id].Error)
	}
	assert.False(t, byID["lib-08-wrong"].Pass)
	assert.Equal(t, []string{"fines F003: amount is -2, want -7.5", "members M003: fines_due is 5.5, want 0"}, byID["lib-08-wrong"].Failures)

	_, err = Run(context.Background(), cases, model, Options{Domain: os.DirFS("../domains")})
	assert.ErrorContains(t, err, "the domain has problems")
}

// Giving up after one request says so in the singular.
func TestUnreachableAfterOneRequest(t *testing.T) {
	assert.Equal(t, "the first request failed to reach the model, so the suite stopped: 401", (&UnreachableError{Cases: 1, Err: "401"}).Error())
}
