package cli

import (
	"bytes"
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

// modelSession runs commands with the environment pointing at a scripted model server.
func modelSession(t *testing.T, steps ...llmtest.Step) (*session, *llmtest.Server, func(tty bool, input string, args ...string) output) {
	return modelSessionAt(t, newSession(t), steps...)
}

// modelSessionAt is modelSession on the store of s.
func modelSessionAt(t *testing.T, s *session, steps ...llmtest.Step) (*session, *llmtest.Server, func(tty bool, input string, args ...string) output) {
	srv := llmtest.NewServer(t, steps...)
	env := map[string]string{"OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": llmtest.APIKey, "STARPLAN_MODEL": llmtest.Model, "NO_COLOR": "1"}
	run := func(tty bool, input string, args ...string) output {
		t.Helper()
		var out, errb bytes.Buffer
		ios := IOStreams{In: strings.NewReader(input), Out: &out, Err: &errb, OutTTY: tty, InTTY: tty, ErrTTY: tty, Getenv: func(k string) string { return env[k] }}
		code := Main(append([]string{"--db", s.dir}, args...), ios)
		return output{code, out.String(), errb.String()}
	}
	return s, srv, run
}

func reply(t *testing.T, name string) llmtest.Step {
	b, err := os.ReadFile(example(name))
	require.NoError(t, err)
	return llmtest.Reply("<execute_python>\n" + string(b) + "</execute_python>")
}

func TestAskOnATerminal(t *testing.T) {
	t.Parallel()
	_, srv, run := modelSession(t, llmtest.Reply("<execute_python>\ntry:\n    x = 1\nexcept:\n    x = 2\n</execute_python>"), reply(t, "02_purchase_wayfarer.star"))
	o := run(true, "y\n", "ask", "--show-plan", "Purchase 3 Wayfarer sunglasses for customer Alice.")
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	assert.Contains(t, o.out, "Plan:")
	assert.Contains(t, o.out, "# rewritten: is-none")
	assert.Contains(t, o.out, "(2 attempts: the model repaired its plan 1 time)\n")
	assert.Regexp(t, `\n  attempt 1: check_failed: line 1:1: python-try: Starlark has no try/except`, o.out, "why the first plan failed")
	assert.NotContains(t, o.out, "attempt 2:", "the accepted attempt is the result below")
	assert.Contains(t, o.out, "Answer: Done: 3 Wayfarer sunglasses for Alice, $285.00 in total.")
	assert.Contains(t, o.out, "Apply these changes? [y/N]")
	assert.Contains(t, o.out, "Applied run r_")
	assert.Len(t, srv.Requests(), 2)
}

func TestAskJSONListsAttempts(t *testing.T) {
	t.Parallel()
	_, _, run := modelSession(t, reply(t, "01_round_under_100.star"))
	o := run(false, "", "ask", "--json", "Do you have any round sunglasses in stock that are under $100?")
	require.Equal(t, ExitOK, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	assert.Equal(t, "success", res.Status)
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, llmtest.Model, res.Attempts[0].Model)
}

func TestAskExitCodes(t *testing.T) {
	t.Parallel()
	bad := llmtest.Reply("no code here, sorry")
	_, _, run := modelSession(t, bad, bad, bad)
	o := run(false, "", "ask", "How many Aviator?")
	assert.Equal(t, ExitModel, o.code, "the model never produced a valid plan")
	assert.Contains(t, o.out, "no-valid-plan")

	_, _, run = modelSession(t, llmtest.Status(401))
	o = run(false, "", "ask", "How many Aviator?")
	assert.Equal(t, ExitModel, o.code)
	assert.Contains(t, o.err, "Try: check OPENAI_BASE_URL")
}

func TestEvalCommand(t *testing.T) {
	t.Parallel()
	_, _, run := modelSession(t, llmtest.Always(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if strings.Contains(r.Messages[1].Content, "Wayfarer") {
			return reply(t, "02_purchase_wayfarer.star")
		}
		return reply(t, "01_round_under_100.star")
	})))
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite.jsonl")
	require.NoError(t, os.WriteFile(suite, []byte(
		`{"id": "a", "request": "Purchase 3 Wayfarer sunglasses for customer Alice.", "status": "success", "stock_after": {"SG002": 3}, "transaction_amounts": [285], "balance_after": 785}
{"id": "b", "request": "Do you have any round sunglasses in stock that are under $100?", "status": "success", "stock_after": {}, "transaction_amounts": [], "balance_after": 500}
{"id": "c", "request": "Return 2 Aviator", "status": "success", "stock_after": {"SG001": 25}, "transaction_amounts": [-160], "balance_after": 340}
`), 0o644))

	o := run(true, "", "eval", "--concurrency", "2", suite)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "passed 2/3 (67%), first try 2/3 (67%)")
	assert.Contains(t, o.out, "FAIL  c")
	assert.Contains(t, o.err, "3/3 done, 2 passed", "a progress bar on a terminal, kept when done")

	o = run(false, "", "eval", suite)
	require.Equal(t, ExitOK, o.code, o.err, "some cases failed, but the model answered: the report is the result")
	var rep evals.Report
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
	assert.Equal(t, 2, rep.Passed)
}

func TestEvalExitsSixWhenTheModelIsUnreachable(t *testing.T) {
	t.Parallel()
	_, srv, run := modelSession(t)
	srv.Close()
	suite := filepath.Join(t.TempDir(), "suite.jsonl")
	require.NoError(t, os.WriteFile(suite, []byte(`{"request": "How many Aviator?", "status": "success"}`+"\n"), 0o644))
	o := run(false, "", "eval", suite)
	assert.Equal(t, ExitModel, o.code, o.out)
}

// While ask waits for the model it holds the store, and lets other commands on it run through
// it instead of failing on the lock.
func TestAskLetsOtherCommandsUseTheStoreWhileTheModelThinks(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	var meanwhile output
	_, _, run := modelSessionAt(t, s, llmtest.Func(func(llmtest.Request) llmtest.Step {
		meanwhile = s.run(false, "", "exec", "--apply", example("02_purchase_wayfarer.star"))
		return reply(t, "01_round_under_100.star")
	}))
	o := run(false, "", "ask", "--json", "Do you have any round sunglasses in stock that are under $100?")
	require.Equal(t, ExitOK, o.code, o.err)
	require.Equal(t, ExitOK, meanwhile.code, "the other command ran through ask: %s", meanwhile.err)
	assert.Contains(t, meanwhile.out, `"applied": true`)
	var runs []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(s.run(false, "", "runs", "--json").out), &runs))
	assert.Len(t, runs, 2)
	_, err := os.Stat(filepath.Join(s.dir, SocketName))
	assert.True(t, os.IsNotExist(err), "ask removed its socket")
}

// starplan prompt prints the system prompt exactly as ask sends it.
func TestPromptIsWhatAskSends(t *testing.T) {
	t.Parallel()
	s, srv, run := modelSession(t, reply(t, "01_round_under_100.star"))
	o := run(false, "", "ask", "--json", "Do you have any round sunglasses in stock that are under $100?")
	require.Equal(t, ExitOK, o.code, o.err)
	reqs := srv.Requests()
	require.NotEmpty(t, reqs)
	p := s.run(false, "", "prompt")
	require.Equal(t, ExitOK, p.code, p.err)
	assert.Equal(t, reqs[0].Messages[0].Content, p.out)
}

// starplan describe says what a planner needs: tables with field types, helpers with their
// signatures (the domain's own included), the contract and the rules.
func TestDescribe(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "describe")
	assert.Equal(t, ExitUsage, o.code, "a read never creates a store")
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	o = s.run(false, "", "describe", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	var d struct {
		Domain string `json:"domain"`
		Tables []struct {
			Value  string `json:"value"`
			Fields []struct{ Name, Type string }
		} `json:"tables"`
		Helpers []struct{ Name, Signature string } `json:"helpers"`
		Rules   []struct{ Name string }            `json:"rules"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.out), &d))
	assert.Equal(t, "inventory", d.Domain)
	require.Len(t, d.Tables, 2)
	assert.Equal(t, "inventory_tbl", d.Tables[0].Value)
	var sigs []string
	for _, h := range d.Helpers {
		sigs = append(sigs, h.Signature)
	}
	assert.Contains(t, sigs, `next_transaction_id(tbl=transactions_tbl, prefix="TXN")`)
	assert.NotEmpty(t, d.Rules)

	o = s.run(true, "", "describe")
	require.Equal(t, ExitOK, o.code, o.err)
	for _, want := range []string{"Domain inventory", "inventory_tbl  6 rows, key item_id", "quantity_in_stock", "get_current_balance(tbl=transactions_tbl)", "Contract  STATUS is one of success", "balance_chain"} {
		assert.Contains(t, o.out, want)
	}
}
