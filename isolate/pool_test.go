package isolate

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
)

// readPlan is an honest plan whose answer depends on its input.
const readPlan = `
k = int(user_request)
total = sum([r["quantity_in_stock"] for r in inventory_tbl.search({"price": {"$lt": 100}})])
answer_text = "total %d" % (total * k)
STATUS = "success"
`

func TestRunsAPlan(t *testing.T) {
	p := newPool(t, Options{})
	st := openStore(t)
	j, _ := job(st, readPlan, sandbox.Limits{})
	j.Inputs["user_request"] = "1"
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "success", res.Globals["STATUS"])
	assert.Regexp(t, `^total \d+$`, res.Globals["answer_text"])
	assert.Positive(t, res.Steps)
	assert.Positive(t, res.Duration)
}

// TestConcurrentRunsWithBombs: eight runs at once, two of them memory bombs (one that the
// in-process guards stop, one that only the worker's limit stops): the six others give their
// own correct answers.
func TestConcurrentRunsWithBombs(t *testing.T) {
	p := newPool(t, Options{Warm: 2, MaxWorkers: 4})
	st := openStore(t)
	j, _ := job(st, readPlan, sandbox.Limits{})
	j.Inputs["user_request"] = "1"
	base := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, base.Outcome, base.Diagnostics.String())
	var unit int
	_, err := fmt.Sscanf(base.Globals["answer_text"].(string), "total %d", &unit)
	require.NoError(t, err)

	bombs := map[int]string{
		2: "s = 'x'\nwhile True:\n    s = s + s\n",
		5: "s = 'x ' * (10 << 20)\nparts = s.split(' ')\n",
	}
	results := make([]*sandbox.Result, 8)
	var wg sync.WaitGroup
	for i := range results {
		src := readPlan
		if b, ok := bombs[i]; ok {
			src = b
		}
		j, _ := job(st, src, sandbox.Limits{MaxMemory: 64 << 20, Timeout: 10 * time.Second})
		j.Inputs["user_request"] = fmt.Sprint(i + 1)
		wg.Go(func() { results[i] = p.Run(bg, j) })
	}
	wg.Wait()
	for i, res := range results {
		if _, ok := bombs[i]; ok {
			assert.Equal(t, sandbox.OutcomeLimitExceeded, res.Outcome, "run %d: %s", i, res.Diagnostics)
			assert.Equal(t, sandbox.LimitMemory, res.Limit, "run %d", i)
			continue
		}
		require.Equal(t, sandbox.OutcomeOK, res.Outcome, "run %d: %s", i, res.Diagnostics)
		assert.Equal(t, fmt.Sprintf("total %d", unit*(i+1)), res.Globals["answer_text"], "run %d", i)
	}
}

// busyWorker starts src on a pool with a single worker and returns that worker once the plan
// is running, with a channel that delivers the run's result.
func busyWorker(t *testing.T, p *Pool, src string, limits sandbox.Limits) (*proc, <-chan *sandbox.Result) {
	t.Helper()
	st := openStore(t)
	j, _ := job(st, src, limits)
	w := onlyWorker(t, p)
	out := make(chan *sandbox.Result, 1)
	go func() { out <- p.Run(bg, j) }()
	// The worker is busy once its processor time starts to climb.
	require.Eventually(t, func() bool { return cpuTicks(t, w.cmd.Process.Pid) > 5 }, 10*time.Second, time.Millisecond)
	return w, out
}

// cpuTicks is a process's user time in clock ticks.
func cpuTicks(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	var f [14]string
	_, _ = fmt.Sscan(string(b[bytesIndexAfterComm(b):]), &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12], &f[13])
	n := 0
	_, _ = fmt.Sscan(f[13], &n)
	return n
}

// bytesIndexAfterComm skips "pid (comm) " in /proc/<pid>/stat.
func bytesIndexAfterComm(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i + 2
		}
	}
	return 0
}

const spin = "n = 0\nfor i in range(1 << 40):\n    n += 1\n"

// TestWorkerKilledFromOutside: SIGKILL from another process mid-run gives a clear error, and
// the next run gets a new worker and succeeds.
func TestWorkerKilledFromOutside(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	w, out := busyWorker(t, p, spin, sandbox.Limits{MaxSteps: 1 << 60, Timeout: 30 * time.Second})
	require.NoError(t, syscall.Kill(w.cmd.Process.Pid, syscall.SIGKILL))
	res := <-out
	require.Equal(t, sandbox.OutcomeRuntimeError, res.Outcome)
	require.Len(t, res.Diagnostics, 1)
	d := res.Diagnostics[0]
	assert.Equal(t, CodeWorker, d.Code)
	assert.Contains(t, d.Message, "killed by signal SIGKILL from outside starplan")
	assert.Contains(t, d.Hint, "nothing was applied")
	assert.Equal(t, spin, res.Program, "the program is reported even though the worker died")

	st := openStore(t)
	j, _ := job(st, readPlan, sandbox.Limits{})
	j.Inputs["user_request"] = "2"
	next := p.Run(bg, j)
	assert.Equal(t, sandbox.OutcomeOK, next.Outcome, next.Diagnostics.String())
	assert.NotEqual(t, w, onlyWorker(t, p), "a new worker")
}

// TestDeadlineKillsAStuckWorker: a worker that stops answering (here: stopped by SIGSTOP, as a
// builtin that never returns to the interpreter would be) is killed KillGrace after the run's
// timeout, and the run ends at the time limit.
func TestDeadlineKillsAStuckWorker(t *testing.T) {
	t.Parallel() // waits for another process (main_test.go: which tests overlap)
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1, KillGrace: 100 * time.Millisecond})
	start := time.Now()
	w, out := busyWorker(t, p, spin, sandbox.Limits{MaxSteps: 1 << 60, Timeout: 500 * time.Millisecond})
	require.NoError(t, syscall.Kill(w.cmd.Process.Pid, syscall.SIGSTOP))
	res := <-out
	assert.Equal(t, sandbox.OutcomeLimitExceeded, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, sandbox.LimitTime, res.Limit)
	require.NotEmpty(t, res.Diagnostics)
	assert.Contains(t, res.Diagnostics[0].Message, "the worker was stopped 100ms after it")
	assert.Less(t, time.Since(start), 10*time.Second)
}

// TestCancel: a cancelled context stops the run's worker at once; the pool carries on.
func TestCancel(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	st := openStore(t)
	ctx, cancel := context.WithCancel(bg)
	j, _ := job(st, spin, sandbox.Limits{MaxSteps: 1 << 60, Timeout: 30 * time.Second})
	time.AfterFunc(200*time.Millisecond, cancel)
	res := p.Run(ctx, j)
	assert.Equal(t, sandbox.OutcomeRuntimeError, res.Outcome)
	require.NotEmpty(t, res.Diagnostics)
	assert.Equal(t, sandbox.CodeCancelled, res.Diagnostics[0].Code)
	assert.Less(t, res.Duration, 10*time.Second)

	res = p.Run(ctx, j)
	assert.Equal(t, sandbox.CodeCancelled, res.Diagnostics[0].Code, "an already cancelled context: %s", res.Diagnostics)

	j, _ = job(st, readPlan, sandbox.Limits{})
	j.Inputs["user_request"] = "1"
	assert.Equal(t, sandbox.OutcomeOK, p.Run(bg, j).Outcome)
}

// TestWorkersAreReusedAndReplaced: a worker serves run after run with fresh globals; after any
// limit it is replaced.
func TestWorkersAreReusedAndReplaced(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	st := openStore(t)
	run := func(src string) *sandbox.Result {
		j, _ := job(st, src, sandbox.Limits{MaxSteps: 100_000})
		return p.Run(bg, j)
	}
	first := onlyWorker(t, p)
	require.Equal(t, sandbox.OutcomeOK, run("leak = 1\n").Outcome)
	res := run("x = leak\n")
	assert.Equal(t, sandbox.OutcomeCheckFailed, res.Outcome, "a run does not see the previous run's globals")
	require.Equal(t, sandbox.OutcomeOK, run("y = 2\n").Outcome)
	assert.Same(t, first, onlyWorker(t, p), "the same worker served three runs")

	res = run("while True:\n    pass\n")
	require.Equal(t, sandbox.OutcomeLimitExceeded, res.Outcome)
	assert.Equal(t, sandbox.LimitSteps, res.Limit, "steps stay steps")
	second := onlyWorker(t, p)
	assert.NotSame(t, first, second, "discarded after a limit")
	assert.Equal(t, sandbox.OutcomeOK, run("z = 3\n").Outcome)
}

// TestWorkerTooLargeForASmallerBudget: a worker whose data segment grew past what the next
// run's budget allows is not given that run.
func TestWorkerTooLargeForASmallerBudget(t *testing.T) {
	// The overhead leaves a fresh worker room for what the race detector maps per thread (its
	// trace parts count towards RLIMIT_DATA); the first run's string is well past it.
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1, Overhead: 24 << 20})
	st := openStore(t)
	j, _ := job(st, "s = 'x' * (48 << 20)\nn = len(s)\n", sandbox.Limits{MaxMemory: 256 << 20})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	big := onlyWorker(t, p)
	require.Greater(t, big.vmData-big.vmData0, int64(2*(4<<20)+24<<20), "the worker kept its mappings, more than the next run may have")

	j, _ = job(st, "n = 1\n", sandbox.Limits{MaxMemory: 4 << 20})
	res = p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.NotSame(t, big, onlyWorker(t, p))
}

func TestClose(t *testing.T) {
	p := newPool(t, Options{Warm: 2})
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "idempotent")
	st := openStore(t)
	j, _ := job(st, "x = 1\n", sandbox.Limits{})
	res := p.Run(bg, j)
	assert.Equal(t, sandbox.OutcomeRuntimeError, res.Outcome)
	require.NotEmpty(t, res.Diagnostics)
	assert.Contains(t, res.Diagnostics[0].Message, "the pool is closed")
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Empty(t, p.live)
}

func TestNewPoolErrors(t *testing.T) {
	_, err := NewPool(Options{})
	assert.ErrorContains(t, err, "Command is required")
	_, err = NewPool(Options{Command: []string{"/nonexistent/starplan"}})
	assert.ErrorContains(t, err, "no such file")
	_, err = NewPool(Options{Command: []string{"/bin/false"}})
	assert.ErrorContains(t, err, "did not start")
}

// TestInputsThatCannotCross: an input that is not plain data fails the run with a clear
// message, before any worker is spent on it.
func TestInputsThatCannotCross(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	w := onlyWorker(t, p)
	st := openStore(t)
	j, _ := job(st, "x = 1\n", sandbox.Limits{})
	j.Inputs["user_request"] = struct{ A int }{1}
	res := p.Run(bg, j)
	assert.Equal(t, sandbox.OutcomeRuntimeError, res.Outcome)
	require.NotEmpty(t, res.Diagnostics)
	assert.Contains(t, res.Diagnostics[0].Message, "cannot be sent to the worker")

	j, _ = job(st, "x = 1\n", sandbox.Limits{})
	assert.Equal(t, sandbox.OutcomeOK, p.Run(bg, j).Outcome)
	assert.Same(t, w, onlyWorker(t, p), "the worker was not spent")
}
