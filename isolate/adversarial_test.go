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
// time limit is a hang guard far out of reach, as in the sandbox's suite.
const (
	adversarialBudget    = 64 << 20
	parentRSSBound       = 24 << 20
	adversarialHangGuard = 5 * time.Minute
)

func TestAdversarial(t *testing.T) {
	var files []string
	for _, dir := range []string{"../testdata/adversarial", "../testdata/isolate"} {
		f, err := filepath.Glob(filepath.Join(dir, "*.star"))
		require.NoError(t, err)
		files = append(files, f...)
	}
	require.GreaterOrEqual(t, len(files), 46, "the sandbox's suite and this package's programs")
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

	j, _ := job(st, src, sandbox.Limits{MaxMemory: adversarialBudget, Timeout: adversarialHangGuard})
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
