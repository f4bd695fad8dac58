package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/llm/llmtest"
)

// timedDoc is a result document with its timings object (exec, ask --timings --json).
type timedDoc struct {
	engine.Result
	Timings map[string]float64 `json:"timings"`
}

// TestExecTimings: exec --timings prints the run's phase durations for people, and as the
// timings object of the JSON document, the apply's included with --apply; without the flag the
// document has none.
func TestExecTimings(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "exec", "--json", example("01_round_under_100.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	assert.NotContains(t, o.out, `"timings"`, "only when asked for")

	o = s.run(false, "", "exec", "--json", "--timings", "--apply", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	var doc timedDoc
	require.NoError(t, json.Unmarshal([]byte(o.out), &doc))
	assert.True(t, doc.Applied)
	for _, k := range []string{"check_ms", "run_ms", "diff_ms", "contract_ms", "dry_run_ms", "apply_ms", "runs"} {
		assert.Contains(t, doc.Timings, k)
	}
	assert.Greater(t, doc.Timings["run_ms"], 0.0)
	assert.Greater(t, doc.Timings["dry_run_ms"], 0.0)
	assert.Greater(t, doc.Timings["apply_ms"], 0.0, "--apply's commit")
	assert.Greater(t, doc.Timings["apply_check_ms"], 0.0, "the apply's conflict check")
	assert.Greater(t, doc.Timings["apply_commit_ms"], 0.0, "the apply's commit in the store")
	assert.LessOrEqual(t, doc.Timings["apply_check_ms"]+doc.Timings["apply_commit_ms"], doc.Timings["apply_ms"], "parts of the apply")
	assert.Equal(t, 0.0, doc.Timings["check_ms"], "a check that passed is in run_ms")
	for _, k := range []string{"extract_ms", "worker_wait_ms", "worker_setup_ms", "rewrite_ms", "static_check_ms", "execute_ms"} {
		assert.Contains(t, doc.Timings, k)
	}
	assert.Greater(t, doc.Timings["static_check_ms"], 0.0, "a new program is parsed and compiled")
	assert.Greater(t, doc.Timings["execute_ms"], 0.0, "the plan ran")
	assert.Greater(t, doc.Timings["diff_ms"], 0.0, "the sale changes rows: their before and after")
	assert.Equal(t, 0.0, doc.Timings["worker_wait_ms"], "in process, no worker")
	assert.LessOrEqual(t, doc.Timings["extract_ms"]+doc.Timings["rewrite_ms"]+doc.Timings["static_check_ms"]+doc.Timings["execute_ms"],
		doc.Timings["run_ms"], "the runner's phases are parts of its call")
	assert.Equal(t, 1.0, doc.Timings["runs"])
	assert.NotContains(t, doc.Timings, "model_ms", "no model")

	o = s.run(false, "x = (\n", "exec", "--json", "--timings", "-")
	var failed timedDoc
	require.NoError(t, json.Unmarshal([]byte(o.out), &failed), o.out+o.err)
	assert.Equal(t, engine.OutcomeCheckFailed, failed.Outcome)
	assert.Greater(t, failed.Timings["check_ms"], 0.0, "a failed check has its own time")
	assert.Equal(t, 0.0, failed.Timings["run_ms"])
	assert.Greater(t, failed.Timings["static_check_ms"], 0.0, "the parse that failed")
	assert.Equal(t, 0.0, failed.Timings["execute_ms"], "nothing ran")

	o = s.run(true, "", "exec", "--timings", example("01_round_under_100.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	d := `[0-9.]+[µm]?s`
	assert.Regexp(t, `\ntimings: check 0s, run `+d+`, diff `+d+`, contract `+d+`, dry run `+d+`; in the runner: extract `+d+`, rewrite `+d+`, static check `+d+`, execute `+d+`\n`, o.out)
}

// TestAskTimings: ask --timings adds the model's time and the attempts' phases together.
func TestAskTimings(t *testing.T) {
	t.Parallel()
	_, _, run := modelSession(t, llmtest.Reply("<execute_python>\nx = (\n</execute_python>"), reply(t, "01_round_under_100.star"))
	o := run(false, "", "ask", "--json", "--timings", "Do you have any round sunglasses in stock that are under $100?")
	require.Equal(t, ExitOK, o.code, o.err)
	var doc timedDoc
	require.NoError(t, json.Unmarshal([]byte(o.out), &doc))
	require.Len(t, doc.Attempts, 2)
	assert.Equal(t, 2.0, doc.Timings["runs"], "the repair's run and the accepted one")
	assert.Greater(t, doc.Timings["model_ms"], 0.0)
	assert.Greater(t, doc.Timings["check_ms"], 0.0, "the first attempt failed its check")
	assert.Greater(t, doc.Timings["run_ms"], 0.0)

	_, _, run = modelSession(t, reply(t, "01_round_under_100.star"))
	o = run(true, "", "ask", "--timings", "Do you have any round sunglasses in stock that are under $100?")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Regexp(t, `\ntimings: check 0s, run .*, model [0-9.]+[µm]?s; in the runner: extract .*, execute [0-9.]+[µm]?s\n`, o.out)
}
