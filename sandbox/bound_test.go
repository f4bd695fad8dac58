package sandbox

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"
)

// manyMegabytes builds n strings of 1,000,000 bytes: each is under the size from which a guard
// consults the budget (builtins.CheckThreshold), so only a measure of the heap sees them add up.
const manyMegabytes = "[str(i % 10) * 1000000 for i in range(600)]"

// A domain file's top level is held to its memory budget as a plan's run is: 600 strings of
// 1 MB, each too small for a guard to refuse, are stopped at the 64 MiB budget, and the
// diagnostic names that limit.
func TestModuleTopLevelHeldToItsMemoryBudget(t *testing.T) {
	t.Cleanup(LiftModuleTime(10 * time.Minute)) // which limit fires must not depend on the machine's speed
	_, ds := NewEnv().LoadModule(HelpersFile, "_big = "+manyMegabytes+"\n", false)
	require.Len(t, ds, 1)
	assert.Equal(t, CodeLimit, ds[0].Code)
	assert.Contains(t, ds[0].Message, "memory limit of 64.0 MiB exceeded")
	assert.Equal(t, 1, ds[0].Line)
	assert.Contains(t, ds[0].Hint, "inside a function")
}

// The top level's step limit is named too, and says what to do.
func TestModuleTopLevelStepLimit(t *testing.T) {
	t.Cleanup(LiftModuleTime(10 * time.Minute)) // which limit fires must not depend on the machine's speed
	_, ds := NewEnv().LoadModule(HelpersFile, "while True:\n    pass\n", false)
	require.Len(t, ds, 1)
	assert.Equal(t, CodeLimit, ds[0].Code)
	assert.Contains(t, ds[0].Message, "step limit of 1000000 exceeded")
	assert.Contains(t, ds[0].Hint, "move the work into a function")
}

// A call of a module's function is held to its memory budget as a run is, and says which limit
// stopped it; the next call runs.
func TestCallHeldToItsMemoryBudget(t *testing.T) {
	reg, ds := NewEnv().LoadModule("rules.star", "def big(x):\n    held = "+manyMegabytes+"\n    return len(held)\n\ndef small(x):\n    return [x]\n", false)
	require.Empty(t, ds)
	fns := map[string]starlark.Callable{}
	for _, h := range reg {
		fns[h.Name] = h.Value.(starlark.Callable)
	}
	_, _, err := Call(t.Context(), fns["big"], starlark.Tuple{starlark.None}, Limits{MaxMemory: 64 << 20})
	var le *LimitError
	require.True(t, errors.As(err, &le), "%v", err)
	assert.Equal(t, LimitMemory, le.Limit)
	assert.Contains(t, err.Error(), "memory limit of 64.0 MiB exceeded")

	v, steps, err := Call(t.Context(), fns["small"], starlark.Tuple{starlark.MakeInt(7)}, Limits{MaxMemory: 64 << 20})
	require.NoError(t, err)
	assert.Equal(t, "[7]", v.String())
	assert.Positive(t, steps)

	_, steps, err = Call(t.Context(), fns["small"], starlark.Tuple{starlark.None}, Limits{MaxSteps: 1})
	require.True(t, errors.As(err, &le), "%v", err)
	assert.Equal(t, LimitSteps, le.Limit)
	assert.Equal(t, uint64(1), steps, "never more than the limit")
}

// A guard's refusal on a domain file's top level names the line it refused, as a limit measured
// at a checkpoint does: the innermost frame is the guard's builtin, which has no place.
func TestModuleTopLevelGuardRefusalNamesItsLine(t *testing.T) {
	_, ds := NewEnv().LoadModule(HelpersFile, "small = 1\n_big = 'x' * (200 << 20)\n", false)
	require.Len(t, ds, 1)
	assert.Equal(t, CodeLimit, ds[0].Code)
	assert.Contains(t, ds[0].Message, "memory limit")
	assert.Equal(t, 2, ds[0].Line, ds[0].Message)
	assert.Positive(t, ds[0].Col)
}
