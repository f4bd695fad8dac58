package isolate

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
)

// TestAReplyWithoutOneProgramSpendsNoWorker: issue 10's reply of many distinct blocks (200,000
// there; 20,000 keep this test light under -race) is answered from the parent's one
// extraction, before any worker. The only worker is stopped
// (SIGSTOP), so a run sent to it could only end at the time limit and cost a second
// extraction in the parent; the result must be the extraction's own.
func TestAReplyWithoutOneProgramSpendsNoWorker(t *testing.T) {
	t.Parallel() // waits for another process (main_test.go: which tests overlap)
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1, KillGrace: 100 * time.Millisecond})
	w := onlyWorker(t, p)
	require.NoError(t, syscall.Kill(w.cmd.Process.Pid, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(w.cmd.Process.Pid, syscall.SIGCONT) }) // before the pool's Close

	var blocks strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&blocks, "<execute_python>x = %d</execute_python>\n", i)
	}
	st := openStore(t)
	for _, tc := range []struct{ name, reply, code string }{
		{"20,000 distinct blocks", blocks.String(), sandbox.CodeAmbiguousProgram},
		{"prose", "I cannot look that up.", sandbox.CodeNoProgram},
	} {
		j, _ := job(st, tc.reply, sandbox.Limits{Timeout: time.Second})
		res := p.Run(bg, j)
		assert.Equal(t, sandbox.OutcomeCheckFailed, res.Outcome, "%s: %s", tc.name, res.Diagnostics)
		require.Len(t, res.Diagnostics, 1, tc.name)
		assert.Equal(t, tc.code, res.Diagnostics[0].Code, tc.name)
		assert.Empty(t, res.Program, tc.name)
	}
	assert.Same(t, w, onlyWorker(t, p), "the stopped worker was never given a run")
}

// TestAFailedRunReportsTheProgramExtractedBeforeIt: a reply of many identical blocks (one
// program) whose worker dies mid-run reports that program. failure and limitFailure take the
// program Run extracted and never see the reply, so the parent cannot extract twice.
func TestAFailedRunReportsTheProgramExtractedBeforeIt(t *testing.T) {
	t.Parallel() // waits for another process (main_test.go: which tests overlap)
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	reply := strings.Repeat("<execute_python>\n"+spin+"</execute_python>\n", 10_000)
	w, out := busyWorker(t, p, reply, sandbox.Limits{MaxSteps: 1 << 60, Timeout: 30 * time.Second})
	require.NoError(t, syscall.Kill(w.cmd.Process.Pid, syscall.SIGKILL))
	res := <-out
	require.Equal(t, sandbox.OutcomeRuntimeError, res.Outcome, res.Diagnostics.String())
	assert.Contains(t, res.Diagnostics[0].Message, "killed by signal SIGKILL")
	assert.Equal(t, spin, res.Program)
}

// A bare job (a compiled plan, a replay) reaches the worker as the program itself: a tag in one
// of its strings is text, in the parent and in the worker.
func TestBareJobIsNotExtracted(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	st := openStore(t)
	j, _ := job(st, "s = \"<execute_python>\"\nanswer_text = s + \" ok\"\n", sandbox.Limits{})
	j.Bare = true
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "<execute_python> ok", res.Globals["answer_text"])
}
