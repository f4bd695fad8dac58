package sandbox

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
)

// Sixteen runs share the process; one holds memory past its budget. The hog is stopped for
// memory and the fifteen others, which hold almost nothing, finish. Before memory was attributed
// per run, every run that overlapped the hog's growth was stopped with it.
//
// The innocents start first and loop until the hog's run has ended, so they overlap its whole
// growth whatever the machine's speed; their loop is bounded in steps in case the hog is never
// stopped. Nothing here waits on a clock.
func TestConcurrentRunsAreBlamedOnlyForTheirOwnMemory(t *testing.T) {
	const (
		innocents = 15
		budget    = 32 << 20
	)
	var ready sync.WaitGroup
	ready.Add(innocents)
	var hogDone atomic.Bool
	env := NewEnv(builtins.Registry{
		{Name: "ready", Group: builtins.GroupDomain, Doc: "the run has started", Value: starlark.NewBuiltin("ready",
			func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
				ready.Done()
				return starlark.None, nil
			})},
		{Name: "hog_done", Group: builtins.GroupDomain, Doc: "the hog's run has ended", Value: starlark.NewBuiltin("hog_done",
			func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
				// The innocents stay live runs while the hog allocates, but idle: spinning, 15
				// of them took 15/16 of the CPU from the hog (seconds under -race).
				time.Sleep(time.Millisecond)
				return starlark.Bool(hogDone.Load()), nil
			})},
	})
	// Each iteration allocates nothing: small ints live in their interface slot.
	innocent := "ready()\nn = 0\nfor i in range(5000000):\n    if hog_done():\n        break\n    n -= 1\n"
	// About 1.2 KB held per iteration: the budget is passed after about 28,000 of them, and the
	// loop ends at three times the budget if nothing stops it.
	hog := "keep = []\nfor i in range(80000):\n    keep.append(str(i) * 200)\n"
	limits := Limits{MaxMemory: budget, MaxSteps: 100_000_000, Timeout: time.Hour}

	runtime.GC() // earlier tests' garbage would raise every run's baseline
	results := make([]*Result, innocents)
	var wg sync.WaitGroup
	for i := range innocents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = env.Run(context.Background(), Request{Reply: innocent, Limits: limits, Globals: []string{"n"}})
		}()
	}
	ready.Wait()
	hogResult := env.Run(context.Background(), Request{Reply: hog, Limits: limits, Globals: []string{}})
	hogDone.Store(true)
	wg.Wait()

	assert.Equal(t, OutcomeLimitExceeded, hogResult.Outcome, hogResult.Diagnostics.String())
	assert.Equal(t, LimitMemory, hogResult.Limit, hogResult.Diagnostics.String())
	for i, res := range results {
		assert.Equal(t, OutcomeOK, res.Outcome, "innocent %d: %s", i, res.Diagnostics.String())
	}
}

// The interpreter calls a run's OnMaxSteps at every checkpoint; the step limit must still stop
// the run at exactly the step where a plain thread with that limit stops, whether or not the
// limit is a multiple of checkpointSteps.
func TestStepLimitBetweenCheckpoints(t *testing.T) {
	src := "n = 0\nwhile True:\n    n -= 1\n"
	for _, limit := range []uint64{1000, checkpointSteps - 1, checkpointSteps, checkpointSteps + 1, 3*checkpointSteps + 12345} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			res := run(t, src, Limits{MaxSteps: limit, Timeout: time.Hour})
			require.Equal(t, OutcomeLimitExceeded, res.Outcome, res.Diagnostics.String())
			assert.Equal(t, LimitSteps, res.Limit)
			assert.Equal(t, limit, res.Steps)
			require.Len(t, res.Diagnostics, 1)
			assert.Contains(t, res.Diagnostics[0].Message, fmt.Sprintf("step limit of %d exceeded", limit))

			// The same program on a thread with nothing but the limit.
			thread := &starlark.Thread{}
			thread.SetMaxExecutionSteps(limit)
			opts := &syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true}
			globals, err := starlark.ExecFileOptions(opts, thread, "plan.star", src, nil)
			require.Error(t, err)
			assert.Equal(t, globals["n"].String(), fmt.Sprint(res.Globals["n"]), "stopped at the same step")
		})
	}
}

// Work a builtin charges (builtins.ChargeWork) can carry the step count past a checkpoint in one
// jump: the run goes on, and the limit still stops it when the jump reaches it.
func TestChargedWorkAcrossCheckpoints(t *testing.T) {
	src := "x = pow(7, 100000)\ns = str(x)\nn = len(s)\n"
	res := run(t, src, Limits{MaxSteps: 100_000_000, Timeout: time.Hour})
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	require.Greater(t, res.Steps, uint64(2*checkpointSteps), "the conversion is charged more than a checkpoint interval")

	res = run(t, src, Limits{MaxSteps: res.Steps - 1, Timeout: time.Hour})
	assert.Equal(t, OutcomeLimitExceeded, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, LimitSteps, res.Limit)
}

// Once the runs of a burst have left, a run that begins after them and is swept alone is judged
// as any lone run: past one and a half times its budget it is stopped at once, not held for a
// collection as if it had overlapped them. The watchdog ended "several runs are active" only at
// the next sample, and took that sample's time for when they left, so a run that began long
// after waited for a collection (on a busy machine, or with collections held, it grew on: 57 MiB
// on a 16 MiB budget, when -shuffle put the adversarial suite after a burst).
func TestARunAfterABurstIsJudgedAlone(t *testing.T) {
	const limit = 16 << 20
	w := &watchdog{runs: map[*watched]struct{}{}}
	t0 := time.Now()
	nothingShared := func() map[any]struct{} { return nil }
	var burst []*watched
	for range 2 {
		r := &watched{budget: builtins.NewBudget(limit), began: t0, cancel: func() {}, shared: nothingShared}
		w.runs[r] = struct{}{}
		burst = append(burst, r)
	}
	w.sweep(t0.Add(time.Millisecond), builtins.HeapInUse()+3*limit) // over together: a round
	require.True(t, w.several)
	for i, r := range burst {
		w.leave(r, t0.Add(time.Duration(2+i)*time.Millisecond))
	}

	late := &watched{budget: builtins.NewBudget(limit), began: t0.Add(time.Second), cancel: func() {}, shared: nothingShared}
	w.runs[late] = struct{}{}
	stop := w.sweep(t0.Add(2*time.Second), builtins.HeapInUse()+2*limit)
	assert.Equal(t, []*watched{late}, stop, "past 1.5 times its budget, alone, after the burst left")
	assert.False(t, w.several)
}
