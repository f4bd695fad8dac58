package cli

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/errcode"
)

// An apply that other servers on a shared store kept changing the run under (the engine's
// *RunError of errcode.RunChanged) is a refusal: exit 2 with the engine's hint, and its --json
// code is the server's (run-changed), not bad-request.
func TestRunChangedIsARefusalWithTheServersCode(t *testing.T) {
	t.Parallel()
	refusal := &engine.RunError{ID: "r_1", Code: errcode.RunChanged, Problem: "changed on another server while this decision was made", Hint: "look at the run again"}
	err := engineError(refusal)
	var ee *exitError
	require.True(t, errors.As(err, &ee))
	assert.Equal(t, ExitUsage, ee.code)
	assert.Equal(t, "look at the run again", ee.hint)
	assert.Equal(t, errcode.RunChanged, codeOf(err, ee.code))

	plain := engineError(&engine.RunError{ID: "r_1", Problem: "was already applied"})
	require.True(t, errors.As(plain, &ee))
	assert.Equal(t, errcode.BadRequest, codeOf(plain, ee.code), "a RunError without a code keeps its exit's")
}
