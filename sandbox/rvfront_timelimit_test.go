package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
)

// A run its caller cancelled stays a cancellation when its time limit passes before the run
// notices (it is inside a helper's call): before the run's own timer, the time limit was the
// timeout of a context derived from the caller's, which a cancellation ended for good. Here the
// caller's context has ended before the run begins, so the time limit's timer can only fire
// after the cancellation, whatever the speed.
func TestRvfrontCancelledRunIsNotATimeLimit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	thread := &starlark.Thread{Name: "plan"}
	limits := Limits{Timeout: time.Millisecond}.Effective(Limits{})
	b := bind(ctx, thread, limits, nil, watchNone)
	time.Sleep(50 * time.Millisecond) // the time limit's timer has fired (50 times over)
	b.end(nil)
	assert.Equal(t, Limit(""), b.reason.get(), "the caller's cancellation came first")
	_, err := starlark.ExecFile(thread, planFile, "x = 1\n", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the run was cancelled")
}

// The same through Run: a helper's call outlasts the time limit of a run whose caller has
// cancelled it; the run ends cancelled, not stopped by its time limit.
func TestRvfrontCancelledRunInAHelperIsNotATimeLimit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env := NewEnv(builtins.Registry{{Name: "slow", Group: builtins.GroupDomain, Doc: "sleeps past the time limit",
		Value: starlark.NewBuiltin("slow", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			time.Sleep(50 * time.Millisecond)
			return starlark.None, nil
		})}})
	res := env.Run(ctx, Request{Reply: "slow()\nx = 1\n", Bare: true, Limits: Limits{Timeout: time.Millisecond}})
	require.NotEmpty(t, res.Diagnostics)
	assert.Equal(t, OutcomeRuntimeError, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, Limit(""), res.Limit)
	assert.Equal(t, CodeCancelled, res.Diagnostics[0].Code)
}
