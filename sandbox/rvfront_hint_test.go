package sandbox

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRvfrontDidYouMeanIsDeterministic: an unknown name as near to two of Starlark's universe
// names (min1t: min and int) gets the same hint at every check; the universe is a map, and the
// first of equally near names won in its random order (FuzzRvfrontPooledCheck found it: two checks
// of one text differed).
func TestRvfrontDidYouMeanIsDeterministic(t *testing.T) {
	env := testEnv()
	env.checks = nil
	first := env.CheckProgram("min1t\n", Limits{}).Diagnostics
	require.Len(t, first, 1)
	require.Equal(t, CodeUnknownName, first[0].Code)
	for range 50 {
		require.Equal(t, first, env.CheckProgram("min1t\n", Limits{}).Diagnostics)
	}
}
