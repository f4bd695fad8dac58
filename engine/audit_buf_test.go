package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A queued record's bytes go back to the encoders' buffers once its batch has committed
// (queuedRecord.release), but not while a reader that took the record from the tail before the
// commit reads them (pin): the pinned bytes stay the record's, whatever is encoded after.
func TestAPinnedRecordKeepsItsBytes(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: "the pinned one"})
	require.NoError(t, err)
	q := e.audit.tail()[0]
	require.True(t, q.pin(), "queued, not written: its bytes are there to pin")
	raw, err := q.EncodeJSON()
	require.NoError(t, err)
	want := string(raw)
	require.NoError(t, e.audit.flush())
	for i := range 20 { // records encoded into whatever buffers went back
		_, err := e.Run(ctx, Request{Reply: example(t, "03_two_item_order.star"), UserRequest: fmt.Sprint("after ", i)})
		require.NoError(t, err)
	}
	require.NoError(t, e.audit.flush())
	got, err := q.EncodeJSON()
	require.NoError(t, err)
	require.Equal(t, want, string(got), "a pinned record's bytes were released and written over")
	q.unpin()
	var stored json.RawMessage
	_, err = e.st.GetSys(auditCollection, res.RunID, &stored)
	require.NoError(t, err)
	require.Equal(t, want, string(stored))

	// Unpinned and written, a record lets its bytes go: a pin then fails, and the reader reads
	// the store.
	require.NoError(t, e.audit.flush())
	_, err = e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: "released"})
	require.NoError(t, err)
	q = e.audit.tail()[0]
	_, err = q.EncodeJSON()
	require.NoError(t, err)
	require.NoError(t, e.audit.flush())
	require.False(t, q.pin(), "a written record's bytes were kept")
}

// A reader that took the tail before its record's batch committed (readRecordIn) reads the
// record from the store, with the hash of the stored bytes for a decision: never the buffer
// the record's bytes were released to.
func TestAReaderOfAWrittenBatchReadsTheStore(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: "read late"})
	require.NoError(t, err)
	tail := e.audit.tail()
	require.Len(t, tail, 1)
	require.NoError(t, e.audit.flush())
	for i := range 20 { // into the buffer the record's went back to
		_, err := e.Run(ctx, Request{Reply: example(t, "03_two_item_order.star"), UserRequest: fmt.Sprint("after ", i)})
		require.NoError(t, err)
	}
	e.audit.encode(new(recordEncoder))
	rec, err := e.readRecordIn(tail, res.RunID, true)
	require.NoError(t, err)
	require.Equal(t, res.RunID, rec.ID)
	require.Equal(t, "read late", rec.Request)
	var stored json.RawMessage
	_, err = e.st.GetSys(auditCollection, res.RunID, &stored)
	require.NoError(t, err)
	require.Equal(t, sha256Hex(stored), rec.chainRead)
}

// Readers of the log (a run's page, a listing) race the writer committing batches and the
// encoder reusing their buffers; each reads every run as it was recorded. Run with -race.
func TestReadersRaceTheBuffersOfWrittenBatches(t *testing.T) {
	st := openStore(t, t.TempDir())
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	e.audit.linger = time.Millisecond // many batches, each soon written
	t.Cleanup(func() {
		require.NoError(t, e.Close())
		require.NoError(t, st.Close())
	})
	ctx := context.Background()
	reply := example(t, "03_two_item_order.star")
	const runs = 150
	type ran struct{ id, request string }
	ids := make(chan ran, runs)
	var wg sync.WaitGroup
	var readErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { readErr = err }) }
	for range 2 {
		wg.Go(func() {
			for r := range ids {
				for range 5 { // while its batch is queued, written, and its buffer taken again
					rec, err := e.readRecord(r.id)
					if err != nil {
						fail(err)
						return
					}
					if rec.ID != r.id || rec.Request != r.request {
						fail(fmt.Errorf("read run %s (%q) as run %s asking %q", r.id, r.request, rec.ID, rec.Request))
						return
					}
				}
				if _, err := e.ListRuns(ListOptions{Limit: 5}); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	for i := range runs {
		req := fmt.Sprint("request ", i)
		res, err := e.Run(ctx, Request{Reply: reply, UserRequest: req})
		require.NoError(t, err)
		ids <- ran{res.RunID, req}
	}
	close(ids)
	wg.Wait()
	require.NoError(t, readErr)
}

// A lingering writer is woken every auditEncodeEvery records, and encodes them then: not for each
// record, which cost a run a wake of the writer's thread and the writer a sleep after it.
func TestALingeringWriterWakesEverySixteenRecords(t *testing.T) {
	e := tailEngine(t)
	var mu sync.Mutex
	var encoded []int // the records encoded after each of the writer's windows
	e.audit.around = func(write func() error) error {
		err := write()
		e.audit.mu.Lock()
		n := e.audit.encoded
		e.audit.mu.Unlock()
		mu.Lock()
		encoded = append(encoded, n)
		mu.Unlock()
		return err
	}
	ctx := context.Background()
	run := func(i int) {
		_, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: fmt.Sprint("run ", i)})
		require.NoError(t, err)
	}
	waitFor := func(cond func() bool) {
		for !cond() {
			time.Sleep(time.Millisecond)
		}
	}
	run(0)
	waitFor(func() bool { // the writer encoded the first and lingers
		e.audit.mu.Lock()
		defer e.audit.mu.Unlock()
		return e.audit.lingering
	})
	for i := 1; i < auditEncodeEvery; i++ {
		run(i)
	}
	waitFor(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(encoded) > 0 && encoded[len(encoded)-1] == auditEncodeEvery
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, auditEncodeEvery}, encoded, "the writer was woken for records in between")
}
