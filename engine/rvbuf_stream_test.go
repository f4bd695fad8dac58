package engine

// rvbuf: an attack on the audit writer's reused record buffers (audit6e): streams of dry runs
// racing readers (a run's record, a decision's read, Show, listings), decisions that take the
// queue, a store whose commits fail (before any work, after encoding every document, inside the
// real store after it encoded and indexed them), and Close while records are queued. After each
// scenario every stored record must be the bytes its chain entry hashed (runs verify, db check),
// the bytes encoding/json writes for it, and the bytes every reader read.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

var errRvbufDiskFull = errors.New("rvbuf: no space left on device (injected)")

// rvbufStore fails every every-th PutSysDocs, in turn: at once; after asking every document
// for its bytes and writing over the room in front of them, as a backend writes its header
// there; inside the real store, after it encoded and indexed the batch's documents (a trailing
// document that does not encode).
type rvbufStore struct {
	store.Store
	every  atomic.Int64
	n      atomic.Int64
	failed atomic.Int64
}

type rvbufBadValue struct{}

func (rvbufBadValue) EncodeJSON() ([]byte, error) { return nil, errRvbufDiskFull }

func (s *rvbufStore) PutSysDocs(ctx context.Context, docs ...store.SysDoc) error {
	k, every := s.n.Add(1), s.every.Load()
	if every <= 0 || k%every != 0 {
		return s.Store.PutSysDocs(ctx, docs...)
	}
	s.failed.Add(1)
	switch (k / every) % 3 {
	case 0:
		return errRvbufDiskFull
	case 1:
		for _, d := range docs {
			_, buf, room, err := store.EncodeSysRoom(d.Value)
			if err != nil {
				return err
			}
			for i := range room {
				buf[i] = 0xff
			}
		}
		return errRvbufDiskFull
	default:
		return s.Store.PutSysDocs(ctx, append(slices.Clone(docs), store.SysDoc{Collection: "rvbufjunk", ID: "x", Value: rvbufBadValue{}})...)
	}
}

// ApplyPending fails as PutSysDocs does, the real store's failure coming after it wrote the
// apply's rows in its transaction.
func (s *rvbufStore) ApplyPending(ctx context.Context, p *store.Pending, verify store.Verify, extra ...store.SysDoc) error {
	k, every := s.n.Add(1), s.every.Load()
	if every <= 0 || k%every != 0 {
		return s.Store.ApplyPending(ctx, p, verify, extra...)
	}
	s.failed.Add(1)
	if (k/every)%2 == 0 {
		return errRvbufDiskFull
	}
	return s.Store.ApplyPending(ctx, p, verify, append(slices.Clone(extra), store.SysDoc{Collection: "rvbufjunk", ID: "x", Value: rvbufBadValue{}})...)
}

// rvbufSeen is what the readers saw: each run's request, and the encodings of the records they
// read (decoded and encoded again) and the hashes decisions would chain as read.
type rvbufSeen struct {
	mu      sync.Mutex
	request map[string]string
	decided map[string]bool
	reads   map[string][]string
	sums    map[string][]string
	errs    []error
}

func (s *rvbufSeen) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) < 10 {
		s.errs = append(s.errs, err)
	}
}

func (s *rvbufSeen) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.request))
	for id := range s.request {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (s *rvbufSeen) want(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.request[id]
}

// rvbufCheckRecord checks a record read for run id.
func (s *rvbufSeen) checkRecord(what, id string, rec *RunRecord) {
	if rec.ID != id || rec.Request != s.want(id) {
		s.fail(fmt.Errorf("%s of run %s (%q) read run %s asking %q", what, id, s.want(id), rec.ID, rec.Request))
		return
	}
	raw, err := rec.encodeStored()
	if err != nil {
		s.fail(fmt.Errorf("%s of run %s: encoding what was read: %w", what, id, err))
		return
	}
	s.mu.Lock()
	s.reads[id] = append(s.reads[id], string(raw))
	if rec.chainRead != "" {
		s.sums[id] = append(s.sums[id], rec.chainRead)
	}
	s.mu.Unlock()
}

// rvbufStream runs writers dry runs (pending and done) while readers read them back, a lister
// lists, and a decider rejects or applies some of the pending ones; every read is checked as it
// is made, and returned for the end's comparison with the store.
func rvbufStream(t *testing.T, e *Engine, writers, runs int) *rvbufSeen {
	t.Helper()
	ctx := context.Background()
	seen := &rvbufSeen{request: map[string]string{}, decided: map[string]bool{}, reads: map[string][]string{}, sums: map[string][]string{}}
	replies := []string{example(t, "02_purchase_wayfarer.star"), example(t, "03_two_item_order.star"), example(t, "01_round_under_100.star"), example(t, "04_not_enough_stock.star")}
	made := make(chan *Result, writers*runs)
	var done atomic.Bool
	var wg, readers sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range runs {
				req := fmt.Sprintf("writer %d run %d \"quoted\" <&> é", w, i)
				res, err := e.Run(ctx, Request{Reply: replies[(w+i)%len(replies)], UserRequest: req})
				if err != nil {
					seen.fail(err)
					return
				}
				seen.mu.Lock()
				seen.request[res.RunID] = req
				seen.mu.Unlock()
				made <- res
			}
		})
	}
	for r := range 2 {
		readers.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(r), 1))
			for !done.Load() {
				ids := seen.ids()
				if len(ids) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				// Mostly the newest: queued, or in a batch being written.
				id := ids[len(ids)-1-rnd.IntN(min(len(ids), 8))]
				if rnd.IntN(2) == 0 {
					id = ids[rnd.IntN(len(ids))]
				}
				rec, err := e.readRecord(id)
				if err != nil {
					seen.fail(fmt.Errorf("reading run %s: %w", id, err))
					return
				}
				seen.checkRecord("a read", id, rec)
				if rec, err = e.decisionRecord(id); err != nil {
					seen.fail(fmt.Errorf("a decision's read of run %s: %w", id, err))
					return
				}
				seen.checkRecord("a decision's read", id, rec)
				doc, err := e.Show(id)
				if err != nil {
					seen.fail(fmt.Errorf("showing run %s: %w", id, err))
					return
				}
				if doc.RunID != id || doc.Request != seen.want(id) {
					seen.fail(fmt.Errorf("Show of run %s (%q) showed run %s asking %q", id, seen.want(id), doc.RunID, doc.Request))
				}
			}
		})
	}
	readers.Go(func() { // the lister
		for !done.Load() {
			for _, opts := range []ListOptions{{Limit: 10}, {}} {
				page, err := e.ListRuns(opts)
				if err != nil {
					if errors.Is(err, errRvbufDiskFull) {
						continue // a listing that had to commit the queue
					}
					seen.fail(fmt.Errorf("listing: %w", err))
					return
				}
				for _, s := range page.Runs {
					if want := seen.want(s.ID); want != "" && s.Request != want {
						seen.fail(fmt.Errorf("the listing shows run %s asking %q, not %q", s.ID, s.Request, want))
					}
				}
			}
		}
	})
	readers.Go(func() { // the decider: its writes take the queue
		n := 0
		for res := range made {
			if !res.Pending {
				continue
			}
			n++
			if n%3 != 0 {
				continue
			}
			seen.mu.Lock()
			seen.decided[res.RunID] = true
			seen.mu.Unlock()
			var err error
			if n%2 == 0 {
				_, _, err = e.Reject(ctx, res.RunID, "no", "test")
			} else {
				_, err = e.ApplyWith(ctx, res.RunID, ApplyOptions{Origin: "test"})
			}
			var re *RunError
			if err != nil && !errors.Is(err, errRvbufDiskFull) && !errors.As(err, &re) {
				seen.fail(fmt.Errorf("deciding run %s: %w", res.RunID, err))
			}
		}
	})
	wg.Wait()
	close(made)
	done.Store(true)
	readers.Wait()
	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.Empty(t, seen.errs)
	require.Len(t, seen.request, writers*runs)
	return seen
}

// rvbufCheckStored checks, once the queue is written, that each run's stored record is the one
// it made, encoding/json's bytes for it, and (for a run nobody decided) the bytes every reader
// read and hashed; and that runs verify finds nothing.
func rvbufCheckStored(t *testing.T, e *Engine, seen *rvbufSeen) {
	t.Helper()
	for id, req := range seen.request {
		var raw json.RawMessage
		ok, err := e.st.GetSys(auditCollection, id, &raw)
		require.NoError(t, err)
		require.True(t, ok, "run %s was not stored", id)
		rec, err := e.decodeRecord(raw)
		require.NoError(t, err, "run %s", id)
		require.Equal(t, id, rec.ID)
		require.Equal(t, req, rec.Request)
		again, err := rec.encodeStored()
		require.NoError(t, err)
		require.Equal(t, string(raw), string(again), "run %s's stored record is not what its record encodes to", id)
		indep, err := json.Marshal(rec.stored().cut())
		require.NoError(t, err)
		require.Equal(t, string(raw), string(indep), "run %s's stored record is not encoding/json's", id)
		if seen.decided[id] {
			continue
		}
		for _, r := range seen.reads[id] {
			require.Equal(t, string(raw), r, "a reader of run %s read other bytes than the store holds", id)
		}
		for _, s := range seen.sums[id] {
			require.Equal(t, sha256Hex(raw), s, "a decision's read of run %s hashed other bytes than the store holds", id)
		}
	}
	rep, err := e.VerifyChain()
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
	require.GreaterOrEqual(t, rep.Records, len(seen.request))
}

// rvbufBoltCheck closes e and its store and runs db check with a chain verifier over dir.
func rvbufBoltCheck(t *testing.T, e *Engine, dir string) {
	t.Helper()
	_ = e.Close() // the first background write's injected error, if any
	require.NoError(t, e.Store().Close())
	chain := NewChainVerifier()
	rep, err := bolt.Check(dir, chain.CheckOptions())
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
	require.Empty(t, chain.Report().Problems)
}

func rvbufEngine(t *testing.T, every int64, linger time.Duration) (*Engine, *rvbufStore, string) {
	t.Helper()
	dir := t.TempDir()
	st := &rvbufStore{Store: openStore(t, dir)}
	st.every.Store(every)
	var mu sync.Mutex
	now := fixedNow
	e, err := New(st, Options{Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}})
	require.NoError(t, err)
	e.audit.linger = linger
	return e, st, dir
}

// A stream of dry runs with readers, listings and decisions, every batch committed.
func TestRvbufStreamWithReaders(t *testing.T) {
	e, _, dir := rvbufEngine(t, 0, time.Millisecond)
	seen := rvbufStream(t, e, 3, 60)
	require.NoError(t, e.audit.flush())
	rvbufCheckStored(t, e, seen)
	rvbufBoltCheck(t, e, dir)
}

// The same stream over a store whose commits fail, one in three, in the three ways: each failed
// batch goes back to the queue with its bytes, and is written whole by a later commit.
func TestRvbufStreamWithFailingCommits(t *testing.T) {
	e, st, dir := rvbufEngine(t, 3, time.Millisecond)
	seen := rvbufStream(t, e, 3, 60)
	require.Positive(t, st.failed.Load(), "no commit failed")
	t.Logf("%d of %d commits failed; %d runs decided", st.failed.Load(), st.n.Load(), len(seen.decided))
	st.every.Store(0)
	require.NoError(t, e.audit.flush())
	rvbufCheckStored(t, e, seen)
	rvbufBoltCheck(t, e, dir)
}

// Close while records are queued (a linger of an hour: nothing written before it) and readers
// read them: Close writes them all, and every reader read the bytes stored.
func TestRvbufCloseWhileQueued(t *testing.T) {
	e, _, dir := rvbufEngine(t, 0, time.Hour)
	ctx := context.Background()
	seen := &rvbufSeen{request: map[string]string{}, decided: map[string]bool{}, reads: map[string][]string{}, sums: map[string][]string{}}
	for i := range 40 {
		req := fmt.Sprint("queued ", i)
		res, err := e.Run(ctx, Request{Reply: example(t, "03_two_item_order.star"), UserRequest: req})
		require.NoError(t, err)
		seen.request[res.RunID] = req
	}
	ids := seen.ids()
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			for k := range 200 {
				id := ids[(r*7+k)%len(ids)]
				rec, err := e.decisionRecord(id)
				if err != nil {
					seen.fail(err)
					return
				}
				seen.checkRecord("a read while closing", id, rec)
			}
		})
	}
	require.NoError(t, e.Close())
	wg.Wait()
	require.Empty(t, seen.errs)
	for i := range 5 { // after Close a record is written at once
		req := fmt.Sprint("after close ", i)
		res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), UserRequest: req})
		require.NoError(t, err)
		seen.request[res.RunID] = req
	}
	rvbufCheckStored(t, e, seen)
	rvbufBoltCheck(t, e, dir)
}

// Close over a store that fails every commit: Close says so, the records stay queued with their
// bytes (readers still read them, encoded as they were), and once the store writes again a
// flush stores exactly those bytes, the chain and db check agreeing.
func TestRvbufCloseOverAFailingStore(t *testing.T) {
	e, st, dir := rvbufEngine(t, 1, time.Hour)
	ctx := context.Background()
	seen := &rvbufSeen{request: map[string]string{}, decided: map[string]bool{}, reads: map[string][]string{}, sums: map[string][]string{}}
	for i := range 30 {
		req := fmt.Sprint("kept ", i)
		res, err := e.Run(ctx, Request{Reply: example(t, []string{"02_purchase_wayfarer.star", "03_two_item_order.star"}[i%2]), UserRequest: req})
		require.NoError(t, err)
		seen.request[res.RunID] = req
	}
	require.ErrorIs(t, e.Close(), errRvbufDiskFull)
	require.Len(t, e.audit.tail(), 30, "a failed write lost queued records")
	for _, id := range seen.ids() {
		rec, err := e.decisionRecord(id)
		require.NoError(t, err)
		seen.checkRecord("a read after a failed close", id, rec)
	}
	require.Empty(t, seen.errs)
	st.every.Store(0)
	require.NoError(t, e.audit.flush())
	require.Empty(t, e.audit.tail())
	rvbufCheckStored(t, e, seen)
	rvbufBoltCheck(t, e, dir)
}
