package isolate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
)

// TestStats: the pool counts its workers as they start, run and end: a busy worker while a plan
// runs, and a kill by its reason (the caller's cancel) with the replacement it needs.
func TestStats(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	onlyWorker(t, p)
	st := p.Stats()
	assert.Equal(t, 1, st.MaxWorkers)
	assert.Equal(t, 1, st.Live)
	assert.Equal(t, 0, st.Busy)
	assert.Equal(t, uint64(1), st.Started)
	assert.Len(t, st.Kills, len(killReasons), "every reason is present, counted or not")

	ctx, cancel := context.WithCancel(bg)
	j, _ := job(openStore(t), spin, sandbox.Limits{MaxSteps: 1 << 60, Timeout: 30 * time.Second})
	out := make(chan *sandbox.Result, 1)
	go func() { out <- p.Run(ctx, j) }()
	require.Eventually(t, func() bool { return p.Stats().Busy == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	res := <-out
	require.Equal(t, sandbox.CodeCancelled, res.Diagnostics[0].Code)

	onlyWorker(t, p) // the replacement
	st = p.Stats()
	assert.Equal(t, 0, st.Busy)
	assert.Equal(t, uint64(1), st.Kills["cancel"])
	assert.Equal(t, uint64(0), st.Kills["timeout"])
	assert.Equal(t, uint64(1), st.Discarded, "the killed worker was replaced")
	assert.Equal(t, uint64(2), st.Started)
}

// TestStatsCalls: the pool counts each table call a plan makes, one per round trip over the
// pipe, and nothing for a plan that calls no table; a search answered in parts is one call.
func TestStatsCalls(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	st := bigStore(t, findPart+10) // a search of every row crosses in two parts
	run := func(src string) {
		t.Helper()
		j, _ := job(st, src, sandbox.Limits{})
		res := p.Run(bg, j)
		require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	}
	before := p.Stats().Calls
	run("x = 1\n")
	assert.Equal(t, before, p.Stats().Calls, "a plan without table calls makes no round trip")
	run(`a = inventory_tbl.get_by_key("SG001")
b = inventory_tbl.search({})
c = transactions_tbl.last()
if len(b) <= 2048:
    fail("the search should need two parts, not %d rows" % len(b))
`)
	assert.Equal(t, before+3, p.Stats().Calls)
}
