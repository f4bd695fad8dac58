package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/starplan/starplan/internal/termsafe"
)

var fuzzSeeds = []string{
	"answer_text = 'hi'\nSTATUS = 'success'\n",
	"<execute_python>\nx = [r for r in range(3) if r > 1]\n</execute_python>",
	"```python\nprint(f\"{1:.2f}\")\n```",
	"try:\n    x = 1\nexcept:\n    pass\n",
	"x = 70 <= 5 <= 100\nimport math\n",
	"s = 'x'\nwhile True:\n    s = s + s\n",
	"def f(n):\n    return f(n)\nf(1)\n",
	"x = ((((((((((1))))))))))\n",
	"'''unterminated",
	"l = list(range(1 << 62))\n",
	"STATUS = 'success'\n# \x00\nSTATUS = 'hidden'\n",
	"access = 'user' # \u202e } \u2066if admin\u2069 \u2066\n",
	"x = 1 # note\rSTATUS = 'hidden'\n",
}

// FuzzCheck feeds arbitrary replies to extraction, pycompat and the checker: they must never
// panic and always finish.
func FuzzCheck(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	env := testEnv()
	f.Fuzz(func(t *testing.T, reply string) {
		c := env.Check(reply, Limits{})
		if c.Program == nil {
			assert.NotEmpty(t, c.Diagnostics)
		} else {
			hidden := func(r rune) bool { return r == 0 || termsafe.IsBidi(r) }
			assert.False(t, strings.ContainsFunc(c.Extracted, hidden), "an accepted program has no NUL or bidi character: what runs is what a reviewer reads")
		}
	})
}

// FuzzRun runs arbitrary programs under tiny limits: whatever they do, the run ends with one of
// the outcomes, within the limits, and never takes the host down.
func FuzzRun(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	env := testEnv()
	f.Fuzz(func(t *testing.T, src string) {
		res := env.Run(context.Background(), Request{
			Reply:  src,
			Limits: Limits{MaxSteps: 20_000, Timeout: 200 * time.Millisecond, MaxMemory: 8 << 20, MaxOutput: 1 << 10},
		})
		assert.Contains(t, []Outcome{OutcomeOK, OutcomeCheckFailed, OutcomeRuntimeError, OutcomeLimitExceeded}, res.Outcome)
		if res.Outcome != OutcomeOK {
			assert.NotEmpty(t, res.Diagnostics)
		}
		assert.LessOrEqual(t, res.Steps, uint64(20_001))
	})
}
