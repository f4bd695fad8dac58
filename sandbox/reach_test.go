package sandbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
)

// measuringEnv is an environment with a helper measure() that records, in *got, what the
// calling run's values hold by the reachable-size estimate, and a frozen shared list `big` of
// 10,000 strings of 1 KB.
func measuringEnv(got *int64) *Env {
	var env *Env
	big := make([]starlark.Value, 10_000)
	for i := range big {
		big[i] = starlark.String(fmt.Sprintf("%01024d", i))
	}
	shared := starlark.NewList(big)
	shared.Freeze()
	env = NewEnv(builtins.Registry{
		{Name: "big", Group: builtins.GroupDomain, Doc: "shared data", Value: shared},
		{Name: "measure", Group: builtins.GroupDomain, Doc: "records the estimate", Value: starlark.NewBuiltin("measure",
			func(thread *starlark.Thread, _ *starlark.Builtin, _ starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
				*got, _ = reachableBytes(thread, env.shared(), 0)
				return starlark.None, nil
			})},
	})
	return env
}

// measurer runs programs that call measure() in one environment, made once.
type measurer struct {
	env *Env
	got int64
}

func newMeasurer() *measurer {
	m := &measurer{}
	m.env = measuringEnv(&m.got)
	return m
}

// measure runs src, which calls measure(), and returns the estimate it recorded.
func (m *measurer) measure(t *testing.T, src string) int64 {
	t.Helper()
	m.got = -1
	got := &m.got
	res := m.env.Run(context.Background(), Request{Reply: src, Globals: []string{}})
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	require.NotEqual(t, int64(-1), *got, "measure() was called")
	return *got
}

func TestReachableSizeEstimate(t *testing.T) {
	m := newMeasurer()
	measure := m.measure
	empty := measure(t, "measure()\n")
	assert.Less(t, empty, int64(4<<10), "a run that holds nothing")

	t.Run("a 10 MB string", func(t *testing.T) {
		got := measure(t, "s = 'x' * 10000000\nmeasure()\n")
		assert.GreaterOrEqual(t, got, int64(10_000_000))
		assert.Less(t, got, int64(11_000_000))
	})
	t.Run("a list of 250,000 small ints", func(t *testing.T) {
		// One 16-byte interface slot each: small ints are held in the slot itself.
		got := measure(t, "l = list(range(250000))\nmeasure()\n")
		assert.GreaterOrEqual(t, got, int64(4_000_000))
		assert.Less(t, got, int64(10_000_000))
	})
	t.Run("a dict", func(t *testing.T) {
		// 25,000 entries with keys of 6 characters: a hash table entry is 56 bytes.
		got := measure(t, "d = {str(100000 + i): i for i in range(25000)}\nmeasure()\n")
		assert.GreaterOrEqual(t, got, int64(25_000*(56+6)))
		assert.Less(t, got, int64(25_000*256))
	})
	t.Run("a function's locals", func(t *testing.T) {
		got := measure(t, "def f():\n    s = 'y' * 5000000\n    measure()\n    return len(s)\nn = f()\n")
		assert.GreaterOrEqual(t, got, int64(5_000_000))
	})
	t.Run("shared values are counted once", func(t *testing.T) {
		// A thousand references to one 1 MB string, and one list three times.
		got := measure(t, "s = 'x' * 1000000\nl = [s for _ in range(1000)]\na = [0] * 100000\nb = [a, a, a]\nt = (a, b)\nmeasure()\n")
		assert.GreaterOrEqual(t, got, int64(1_000_000+100_000*16))
		assert.Less(t, got, int64(4_000_000))
	})
	t.Run("values every run shares are not counted", func(t *testing.T) {
		got := measure(t, "mine = big\nfirst = big[0]\nrows = [big[i] for i in range(len(big))]\nmeasure()\n")
		assert.Less(t, got, empty+10_000*(headerBytes+slotBytes)+4<<10, "10 MB of shared strings are not the run's")
	})
	t.Run("cycles end", func(t *testing.T) {
		got := measure(t, "l = [1]\nl.append(l)\nd = {}\nd['self'] = d\nd['l'] = l\nmeasure()\n")
		assert.Less(t, got, int64(4<<10))
	})
}

// A walk stops once it has counted more than it was asked to look for, and says so.
func TestReachableSizeStopsEarly(t *testing.T) {
	var got int64
	var partial bool
	env := NewEnv(builtins.Registry{
		{Name: "measure", Group: builtins.GroupDomain, Doc: "records the estimate", Value: starlark.NewBuiltin("measure",
			func(thread *starlark.Thread, _ *starlark.Builtin, _ starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
				got, partial = reachableBytes(thread, nil, 1<<20)
				return starlark.None, nil
			})},
	})
	// No time limit to speak of: under -race on a busy machine the list takes seconds to build,
	// and the test is about where the walk stops, not how fast.
	res := env.Run(context.Background(), Request{Reply: "l = [str(i) * 10 for i in range(200000)]\nmeasure()\n", Globals: []string{},
		Limits: Limits{Timeout: time.Hour}})
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.True(t, partial)
	assert.Greater(t, got, int64(1<<20))
	// The whole list holds about 200,000 × (16 + 32 + 60) bytes, 21 MB.
	assert.Less(t, got, int64(5<<20), "the walk stopped soon after its bound, not at the end of the list")
}

// reachableBytes estimates the bytes held by every value the thread's frames reach, leaving
// out shared values. It stops counting once the estimate passes stopAt (when not 0) or the walk
// has met maxWalkNodes values, and then reports partial: the run holds at least that much.
func reachableBytes(thread *starlark.Thread, shared map[any]struct{}, stopAt int64) (bytes int64, partial bool) {
	r := newReach(shared, stopAt)
	r.thread(thread)
	return r.bytes, r.partial
}
