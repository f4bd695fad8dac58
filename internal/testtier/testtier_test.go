package testtier

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSizeFollowsTheTier(t *testing.T) {
	t.Setenv(Env, "")
	assert.False(t, Long())
	assert.Equal(t, 20, Size(20, 200))
	t.Setenv(Env, "1")
	assert.True(t, Long())
	assert.Equal(t, 200, Size(20, 200))
}

// A skipped long test says how to run it: the variable, the package and the test.
func TestHintSaysHowToRunIt(t *testing.T) {
	assert.Equal(t, "long tier (a soak): run it with STARPLAN_LONG=1 go test -race ./internal/testtier/ -run '^TestHintSaysHowToRunIt$'", Hint(t, "a soak"))
}
