package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/starplan/starplan/builtins"
)

// The watchdog samples slowly while every run is below a quarter of its budget, and fast once
// one is past it: the slow interval is safe only because it ends there.
func TestWatchdogSamplesFastPastAQuarterOfABudget(t *testing.T) {
	const limit = 64 << 20
	b := builtins.NewBudget(limit)
	b.Growth(0) // a reading below every other one: the baseline is 0 from here on
	w := &watchdog{runs: map[*watched]struct{}{{budget: b}: {}}}
	assert.False(t, w.busy(0), "no growth: the slow interval")
	assert.False(t, w.busy(limit/idleGrowth-1))
	assert.True(t, w.busy(limit/idleGrowth+1), "past a quarter: the fast interval")
	assert.False(t, (&watchdog{runs: map[*watched]struct{}{}}).busy(limit), "no runs, nothing to watch")
}
