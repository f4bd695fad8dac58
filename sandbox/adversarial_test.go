package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/internal/testtier"
)

// The adversarial suite runs under a smaller memory budget than the default so that it is quick,
// and checks that the host's heap never grew by more than that budget plus a slack.
// The slack is the budget again plus 16 MiB: the guards refuse amplifying operations before they
// allocate, but the heap watchdog stops a run that allocates by other means only once its heap
// is past the budget and garbage cannot explain it (see watchdog), which is up to twice the
// budget. The hard bound is the isolated worker's.
//
// Which limit stops a program must not depend on how fast the machine is: a program stopped at
// its 10 M steps on an idle machine is stopped by a 10 s clock on a loaded one under -race. So
// the suite's time limit is a hang guard far out of reach, and no program may be stopped by it.
//
// A program whose header wants the step limit runs under adversarialSteps instead of the default
// 10 M: that it is stopped by steps (and not by memory, a hang or an error) does not depend on
// the size of the budget, and under -race the default's 10 M steps cost seconds per program.
const (
	adversarialBudget    = 64 << 20
	adversarialHangGuard = 5 * time.Minute
	adversarialSteps     = 1_000_000
)

// adversarialLimits are the limits a program of the suite runs under, given its "# want:" words.
func adversarialLimits(want []string) Limits {
	l := Limits{MaxMemory: adversarialBudget, Timeout: adversarialHangGuard}
	if len(want) > 1 && want[0] == string(OutcomeLimitExceeded) && want[1] == string(LimitSteps) {
		l.MaxSteps = adversarialSteps
	}
	if len(want) > 1 && want[0] == string(OutcomeLimitExceeded) && want[1] == string(LimitMemory) {
		// A program that must be stopped for its memory is stopped at a quarter of the budget in
		// the normal tier (a lower ceiling is reached sooner, never later; the long tier uses the
		// whole budget): filling 64 MiB under the race detector took seconds a program.
		l.MaxMemory = testtier.Size(int64(adversarialBudget/4), int64(adversarialBudget))
	}
	return l
}

// TestAdversarial runs every hostile program in testdata/adversarial. The first line of each
// says what must happen: "# want: OUTCOME [LIMIT|CODE] [stdout_truncated]".
func TestAdversarial(t *testing.T) {
	files, err := filepath.Glob("../testdata/adversarial/*.star")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 40, "the suite has at least 40 programs")
	env := testEnv()
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		t.Run(strings.TrimSuffix(filepath.Base(file), ".star"), func(t *testing.T) {
			checkAdversarial(t, env, string(src))
		})
	}
	t.Run("one_mebibyte_program", func(t *testing.T) {
		checkAdversarial(t, env, "# want: check_failed program-too-large\n"+strings.Repeat("x = 'padding padding padding'\n", (1<<20)/30))
	})
	t.Run("deep_brackets", func(t *testing.T) {
		checkAdversarial(t, env, "# want: check_failed nesting-too-deep\nx = "+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+"\n")
	})
	t.Run("deep_blocks", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("# want: check_failed nesting-too-deep\n")
		for i := range 200 {
			b.WriteString(strings.Repeat(" ", i) + "if True:\n")
		}
		b.WriteString(strings.Repeat(" ", 200) + "x = 1\n")
		checkAdversarial(t, env, b.String())
	})
}

func checkAdversarial(t *testing.T, env *Env, src string) {
	header, _, _ := strings.Cut(src, "\n")
	want := strings.Fields(strings.TrimPrefix(header, "# want:"))
	require.NotEmpty(t, want, "the first line says what must happen")

	runtime.GC()
	base := builtins.HeapInUse()
	var peak atomic.Int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if h := builtins.HeapInUse(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	res := env.Run(context.Background(), Request{
		Reply:  src,
		Inputs: map[string]any{"user_request": "test"},
		Limits: adversarialLimits(want),
	})
	close(done)
	<-sampled

	require.NotEqual(t, LimitTime, res.Limit, "the program hung: only steps, memory or an error may stop it")

	assert.Equal(t, Outcome(want[0]), res.Outcome, res.Diagnostics.String())
	if len(want) > 1 {
		switch res.Outcome {
		case OutcomeLimitExceeded:
			assert.Equal(t, Limit(want[1]), res.Limit, res.Diagnostics.String())
		default:
			require.NotEmpty(t, res.Diagnostics)
			assert.Equal(t, want[1], res.Diagnostics[0].Code, res.Diagnostics.String())
		}
	}
	if len(want) > 2 && want[2] == "stdout_truncated" {
		assert.True(t, res.StdoutTruncated)
		assert.LessOrEqual(t, len(res.Stdout), DefaultMaxOutput+100)
	}
	if res.Outcome != OutcomeOK && res.Outcome != OutcomeCheckFailed {
		require.NotEmpty(t, res.Diagnostics)
		assert.NotEmpty(t, res.Diagnostics[0].Message)
	}
	grew := peak.Load() - base
	t.Logf("%s %s after %d steps in %s; heap grew by %s", res.Outcome, res.Limit, res.Steps, res.Duration.Round(time.Millisecond), builtins.FormatBytes(max(0, grew)))
	budget := adversarialLimits(want).MaxMemory
	assert.LessOrEqual(t, grew, budget+budget+16<<20,
		"the host heap grew by %s", builtins.FormatBytes(grew))
	runtime.GC()
}

// The run's own checkpoints bound its heap, not the watchdog's goroutine: with that goroutine
// and its collections held for good (a machine too busy to schedule them), the comprehension
// is still stopped for memory, every time, within the suite's bound, also right after a run
// stopped for memory left. Without the checkpoint's sample it would run to its step limit;
// which limit fires depends on steps only (a checkpoint's worth of this program is ~18 MiB).
func TestMemoryStoppedWithTheWatchdogStalled(t *testing.T) {
	stall := make(chan struct{})
	heapWatchdog.mu.Lock()
	heapWatchdog.stall = stall
	heapWatchdog.mu.Unlock()
	t.Cleanup(func() {
		heapWatchdog.mu.Lock()
		heapWatchdog.stall = nil
		heapWatchdog.mu.Unlock()
		close(stall)
	})
	const budget = 16 << 20
	env := testEnv()
	for i := range 3 {
		runtime.GC()
		base := builtins.HeapInUse()
		res := env.Run(context.Background(), Request{
			Reply:  "rows = [[i] * 200 for i in range(10000000)]\n",
			Inputs: map[string]any{"user_request": "test"},
			// ~150 MiB of rows at the step limit: the bound is passed by then.
			Limits: Limits{MaxMemory: budget, MaxSteps: 8 * checkpointSteps, Timeout: adversarialHangGuard},
		})
		grew := builtins.HeapInUse() - base
		require.Equal(t, OutcomeLimitExceeded, res.Outcome, "run %d: %s", i, res.Diagnostics.String())
		require.Equal(t, LimitMemory, res.Limit, "run %d after %d steps", i, res.Steps)
		assert.LessOrEqual(t, grew, int64(2*budget+16<<20), "run %d: the heap grew by %s", i, builtins.FormatBytes(grew))
	}
}

// Garbage made fast, a value of some KiB a step, is bounded by the run's own checks (Charge's
// mid-size sum), not by the heap watchdog's goroutine nor the collector's pace: with the
// watchdog held and the collector off (a machine too busy to run either), the suite's bound
// still holds. Without that sum, shift_growth left 416 MiB of dead integers under a 16 MiB
// budget: how far the host heap grew depended on the machine's load (it passed the bound at
// load 8 under -race).
func TestGarbageBoundedWithTheWatchdogStalled(t *testing.T) {
	stall := make(chan struct{})
	heapWatchdog.mu.Lock()
	heapWatchdog.stall = stall
	heapWatchdog.mu.Unlock()
	gc := debug.SetGCPercent(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(gc)
		heapWatchdog.mu.Lock()
		heapWatchdog.stall = nil
		heapWatchdog.mu.Unlock()
		close(stall)
	})
	src, err := os.ReadFile("../testdata/adversarial/shift_growth.star")
	require.NoError(t, err)
	checkAdversarial(t, testEnv(), string(src))
}
