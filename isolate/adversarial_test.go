package isolate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/sandbox"
)

// The adversarial suite runs every hostile program of the sandbox's suite, plus the ones in
// testdata/isolate aimed at what in-process guards miss, through a pool, under a small budget.
// Whatever a plan allocates stays in its worker: the parent's peak resident set must grow by
// less than parentRSSBound while it runs (the sandbox's in-process suite allows 2×budget+16 MiB
// of heap growth, and the programs of testdata/isolate grow an in-process heap by 0.5–1.3 GB).
//
// Which limit stops a program must not depend on how fast the machine is (print_flood, stopped
// at its 10 M steps on an idle machine, met a 10 s clock under -race on a loaded one), so the
// time limit is a hang guard far out of reach, as in the sandbox's suite; and a program that
// wants the step limit runs under 1 M steps, not the default 10 M, as there.
const (
	adversarialBudget    = 64 << 20
	parentRSSBound       = 24 << 20
	adversarialHangGuard = 5 * time.Minute
	adversarialSteps     = 1_000_000
)

// TestAdversarial: in the normal tier (see internal/testtier) the pool runs every program of testdata/isolate,
// whose point is the worker's own limits, and a sample of the sandbox's suite: the first program
// (by name) of each distinct "# want:" line, so that every outcome, limit and diagnostic code
// crosses the wire once. The rest of that suite is the same mechanism (the sandbox's guards,
// which sandbox's TestAdversarial runs on every program in process, in both tiers); the long
// tier runs all of it through the pool.
func TestAdversarial(t *testing.T) {
	all, err := filepath.Glob("../testdata/adversarial/*.star")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(all), 40, "the sandbox's suite")
	files := all
	if !testtier.Long() {
		files = adversarialSample(t, all)
	}
	own, err := filepath.Glob("../testdata/isolate/*.star")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(own), 6, "this package's programs")
	files = append(files, own...)
	p := newPool(t, Options{Warm: 2})
	st := openStore(t)
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		t.Run(strings.TrimSuffix(filepath.Base(file), ".star"), func(t *testing.T) {
			checkAdversarial(t, p, st, string(src))
		})
	}
	t.Run("one_mebibyte_program", func(t *testing.T) {
		checkAdversarial(t, p, st, "# want: check_failed program-too-large\n"+strings.Repeat("x = 'padding padding padding'\n", (1<<20)/30))
	})
	t.Run("deep_brackets", func(t *testing.T) {
		checkAdversarial(t, p, st, "# want: check_failed nesting-too-deep\nx = "+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+"\n")
	})
}

// checkAdversarial runs one program whose first line says what must happen:
// "# want: OUTCOME [LIMIT|CODE] [stdout_truncated]".
func checkAdversarial(t *testing.T, p *Pool, st storeT, src string) {
	header, _, _ := strings.Cut(src, "\n")
	want := strings.Fields(strings.TrimPrefix(header, "# want:"))
	require.NotEmpty(t, want, "the first line says what must happen")

	limits := sandbox.Limits{MaxMemory: adversarialBudget, Timeout: adversarialHangGuard}
	if len(want) > 1 && want[0] == string(sandbox.OutcomeLimitExceeded) && want[1] == string(sandbox.LimitSteps) {
		limits.MaxSteps = adversarialSteps
	}
	j, _ := job(st, src, limits)
	before := resetPeakRSS(t)
	res := p.Run(bg, j)
	grew := peakRSS(t) - before

	assert.Equal(t, sandbox.Outcome(want[0]), res.Outcome, res.Diagnostics.String())
	if len(want) > 1 {
		switch res.Outcome {
		case sandbox.OutcomeLimitExceeded:
			assert.Equal(t, sandbox.Limit(want[1]), res.Limit, res.Diagnostics.String())
		default:
			require.NotEmpty(t, res.Diagnostics)
			assert.Equal(t, want[1], res.Diagnostics[0].Code, res.Diagnostics.String())
		}
	}
	if len(want) > 2 && want[2] == "stdout_truncated" {
		assert.True(t, res.StdoutTruncated)
		assert.LessOrEqual(t, len(res.Stdout), sandbox.DefaultMaxOutput+100)
	}
	if res.Outcome != sandbox.OutcomeOK && res.Outcome != sandbox.OutcomeCheckFailed {
		require.NotEmpty(t, res.Diagnostics)
		assert.NotEmpty(t, res.Diagnostics[0].Message)
	}
	msg := ""
	if len(res.Diagnostics) > 0 {
		msg = res.Diagnostics[0].Message
	}
	t.Logf("%s in %s; parent peak RSS grew by %s; %.120s", res.Outcome, res.Duration.Round(time.Millisecond), builtins.FormatBytes(max(0, grew)), msg)
	assert.Less(t, grew, int64(parentRSSBound), "the parent's peak RSS grew by %s", builtins.FormatBytes(grew))
}

// adversarialSample returns the first of files (sorted by name) for each distinct first line
// ("# want: ..."), in order: one program for every outcome, limit and diagnostic code.
func adversarialSample(t *testing.T, files []string) []string {
	seen := map[string]bool{}
	var sample []string
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		header, _, _ := strings.Cut(string(src), "\n")
		if !seen[header] {
			seen[header] = true
			sample = append(sample, file)
		}
	}
	return sample
}
