package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rvsess: the audit writer, while it lingers, is woken by add only every auditEncodeEvery
// records (b0ec971). Records whose add does not wake it must still be written by the linger's
// batch, a full batch must still be written at once, and readers and close must still see and
// write them.

// rvsessLingering runs one dry run on e (a tailEngine: a linger of an hour) and waits until the
// writer lingers for its batch, then runs n more, none of which wakes it unless the count says.
func rvsessLingering(t *testing.T, e *Engine, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	run := func(i int) {
		res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: fmt.Sprint("run ", i)})
		require.NoError(t, err)
		ids = append(ids, res.RunID)
	}
	run(0)
	for {
		e.audit.mu.Lock()
		l := e.audit.lingering
		e.audit.mu.Unlock()
		if l {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for i := 1; i <= n; i++ {
		run(i)
	}
	return ids
}

// A batch that fills while the writer lingers (an hour here) is written at once, by the
// writer, with no reader's flush: the add of its auditBatch-th record signals full, whatever
// the wake every auditEncodeEvery. Without that signal the records wait out the linger.
func TestRvsessAFullBatchIsWrittenWhileTheWriterLingers(t *testing.T) {
	e := tailEngine(t)
	ids := rvsessLingering(t, e, auditBatch-1)
	deadline := time.Now().Add(2 * time.Minute) // a hang, not a speed: the linger is an hour
	for e.audit.commits.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a full batch was not written while the writer lingered")
		}
		time.Sleep(time.Millisecond)
	}
	for _, id := range ids { // from the store, without a flush
		_, err := e.storedRecord(id)
		require.NoError(t, err, "run %s, queued while the writer lingered", id)
	}
	assert.Equal(t, int64(1), e.audit.commits.Load(), "one batch")
}

// Records queued while the writer lingers, which did not wake it, are seen by readers before
// any commit (from the queue) and written by close.
func TestRvsessQuietRecordsAreReadAndWrittenByClose(t *testing.T) {
	e := tailEngine(t)
	ids := rvsessLingering(t, e, auditEncodeEvery-3)
	for _, id := range ids {
		rec, err := e.readRecord(id)
		require.NoError(t, err)
		assert.Equal(t, id, rec.ID)
	}
	assert.Equal(t, int64(0), e.audit.commits.Load(), "read from the queue, not after a commit")
	require.NoError(t, e.Close())
	for _, id := range ids {
		_, err := e.storedRecord(id)
		require.NoError(t, err, "run %s is written by close", id)
	}
}
