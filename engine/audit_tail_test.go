package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
)

// tailEngine returns an engine whose clock moves a second per reading and whose audit log keeps
// what it queues until a flush (a linger of an hour).
func tailEngine(t *testing.T) *Engine {
	t.Helper()
	st := openStore(t, t.TempDir())
	var mu sync.Mutex
	now := fixedNow
	e, err := New(st, Options{Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}})
	require.NoError(t, err)
	e.audit.linger = time.Hour
	t.Cleanup(func() {
		assert.NoError(t, e.Close())
		assert.NoError(t, st.Close())
	})
	return e
}

// listAll pages through the log with opts, returning each page.
func listAll(t *testing.T, e *Engine, opts ListOptions) []*RunPage {
	t.Helper()
	var pages []*RunPage
	for {
		p, err := e.ListRuns(opts)
		require.NoError(t, err)
		pages = append(pages, p)
		if p.NextCursor == "" || len(pages) > 20 {
			return pages
		}
		opts.Cursor = p.NextCursor
	}
}

// A listing and a run's page show the runs still queued in the audit log without writing them
// (a listing used to commit the queue, a disk sync per listing under load), and answer what
// they answer once the queue is written: the same pages, cursors and counts.
func TestListingsReadTheQueueWithoutACommit(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	var ids []string
	run := func(reply string) {
		res, err := e.Run(ctx, Request{Reply: reply, UserRequest: "buy"})
		require.NoError(t, err)
		ids = append(ids, res.RunID)
	}
	for range 3 {
		run(example(t, "02_purchase_wayfarer.star")) // pending
		run(example(t, "01_round_under_100.star"))   // done
	}
	require.NoError(t, e.audit.flush()) // six in the store
	for range 2 {
		run(example(t, "02_purchase_wayfarer.star"))
		run(example(t, "04_not_enough_stock.star"))
	}
	commits := e.audit.commits.Load()
	require.Len(t, e.audit.tail(), 4, "four runs still queued")

	options := []ListOptions{{}, {Limit: 3}, {Limit: 1}, {State: StatePending, Limit: 2}, {State: StateDone}, {Since: fixedNow.Add(10 * time.Second), Limit: 2}}
	var before [][]*RunPage
	for _, o := range options {
		before = append(before, listAll(t, e, o))
	}
	doc, err := e.Show(ids[len(ids)-1])
	require.NoError(t, err)
	assert.Equal(t, ids[len(ids)-1], doc.RunID)
	assert.Equal(t, commits, e.audit.commits.Load(), "the listings and the run's page wrote nothing")
	assert.Len(t, e.audit.tail(), 4)
	all := before[0][0]
	require.Len(t, all.Runs, 10)
	assert.Equal(t, 10, all.Count)
	assert.Equal(t, ids[len(ids)-1], all.Runs[0].ID, "newest first, the queued ones among them")

	require.NoError(t, e.audit.flush())
	for i, o := range options {
		assert.Equal(t, before[i], listAll(t, e, o), "listing %+v before and after the queue was written", o)
	}
}

// A queued record that writes a stored run's record again (an apply that found a conflict)
// would have the run counted twice beside the store's: a listing writes the queue first then.
func TestListingWritesAQueuedRewriteFirst(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	require.True(t, res.Pending)
	require.NoError(t, e.audit.flush())
	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	rec.chainEvent, rec.chainBy = ChainRecorded, "test"
	e.audit.add(rec)
	commits := e.audit.commits.Load()
	page, err := e.ListRuns(ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, commits+1, e.audit.commits.Load(), "the rewrite was written first")
	assert.Equal(t, 1, page.Count)
	assert.Len(t, page.Runs, 1)
}

// A decision on a run whose record is still queued (an apply, a rejection, right after the dry
// run) writes the queue in its own commit, before its record: the decided version lands last,
// and the chain has the run proposed, then decided.
func TestDecisionsWriteTheQueueFirst(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	runs := make([]*Result, 3)
	for i := range runs {
		res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
		require.NoError(t, err)
		require.True(t, res.Pending)
		runs[i] = res
	}
	require.Len(t, e.audit.tail(), 3)
	applied, err := e.Apply(ctx, runs[0].RunID)
	require.NoError(t, err)
	require.True(t, applied.Applied)
	assert.Empty(t, e.audit.tail(), "the apply's commit took the queue")
	_, recorded, err := e.RejectWith(ctx, runs[1].RunID, RejectOptions{Feedback: "no"})
	require.NoError(t, err)
	require.True(t, recorded)
	require.NoError(t, e.audit.flush())

	rec, err := e.Record(runs[0].RunID)
	require.NoError(t, err)
	assert.True(t, rec.Applied, "the applied version, not the queued pending one")
	rec, err = e.Record(runs[1].RunID)
	require.NoError(t, err)
	assert.Equal(t, access.Local().Name, rec.RejectedBy)
	assert.False(t, rec.Pending)
	page, err := e.ListRuns(ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{StateApplied: 1, StateRejected: 1, StatePending: 1}, page.States)
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep.Problems)
}

// The background writer leaves the queue to a decision on its way to the writer's lock (which
// commits the queue with its own record), rather than make it wait for a batch's commit; a
// reader's flush writes whatever comes, and with no decision on its way the writer writes.
func TestTheWriterLeavesTheQueueToADecision(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	_, err := e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	require.Len(t, e.audit.tail(), 1)
	commits := e.audit.commits.Load()

	e.audit.deciding.Add(1) // a decision on its way
	require.NoError(t, e.audit.flushUnlessDeciding())
	assert.Len(t, e.audit.tail(), 1, "the writer wrote the queue a decision was on its way to take")
	assert.Equal(t, commits, e.audit.commits.Load())
	require.NoError(t, e.audit.flush())
	assert.Empty(t, e.audit.tail(), "a reader's flush waited for the decision")
	e.audit.deciding.Add(-1)

	_, err = e.Run(ctx, Request{Reply: example(t, "01_round_under_100.star")})
	require.NoError(t, err)
	require.NoError(t, e.audit.flushUnlessDeciding())
	assert.Empty(t, e.audit.tail())
	assert.Equal(t, commits+2, e.audit.commits.Load())
}
