package sandbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Limits.Effective is the one merge of a run's limits: the request's own, then the runner's
// defaults, then the package's, field by field; a negative field counts as unset.
func TestLimitsEffective(t *testing.T) {
	all := Limits{MaxSteps: DefaultMaxSteps, Timeout: DefaultTimeout, MaxOutput: DefaultMaxOutput,
		MaxMemory: DefaultMaxMemory, MaxProgram: DefaultMaxProgram, MaxNesting: DefaultMaxNesting}
	assert.Equal(t, all, Limits{}.Effective(Limits{}), "nothing set: the package defaults")

	own := Limits{MaxSteps: 1, Timeout: 2, MaxOutput: 3, MaxMemory: 4, MaxProgram: 5, MaxNesting: 6}
	defaults := Limits{MaxSteps: 10, Timeout: 20, MaxOutput: 30, MaxMemory: 40, MaxProgram: 50, MaxNesting: 60}
	assert.Equal(t, own, own.Effective(defaults), "the request's own win")
	assert.Equal(t, defaults, Limits{}.Effective(defaults), "then the runner's")

	negative := Limits{Timeout: -time.Second, MaxOutput: -1, MaxMemory: -1, MaxProgram: -1, MaxNesting: -1}
	assert.Equal(t, Limits{MaxSteps: 10, Timeout: 20, MaxOutput: 30, MaxMemory: 40, MaxProgram: 50, MaxNesting: 60},
		negative.Effective(defaults), "a negative limit is unset, never unlimited")
	assert.Equal(t, all, negative.Effective(negative), "negative defaults are unset too")

	mixed := Limits{MaxSteps: 7, MaxMemory: 8}.Effective(Limits{Timeout: time.Minute, MaxMemory: 9})
	assert.Equal(t, Limits{MaxSteps: 7, Timeout: time.Minute, MaxOutput: DefaultMaxOutput, MaxMemory: 8,
		MaxProgram: DefaultMaxProgram, MaxNesting: DefaultMaxNesting}, mixed, "field by field")
}
