package bolt

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/internal/testtier"
)

func idxDoc(id, order, group string) store.SysDoc {
	return store.SysDoc{Collection: "runs", ID: id, Value: map[string]string{"id": id, "group": group}, Index: &store.SysIndex{Order: order, Group: group}}
}

// scanIDs reads every entry of a scan, n at a time through cursors, and returns the ids.
func scanIDs(t *testing.T, s *Store, group string, reverse bool, n int) []string {
	t.Helper()
	var out []string
	after := ""
	for {
		got := 0
		page, err := s.ScanSys("runs", store.SysScan{Group: group, After: after, Reverse: reverse, Next: func(store.SysEntry) (bool, bool) {
			got++
			return true, got < n
		}})
		require.NoError(t, err)
		for _, e := range page {
			out = append(out, e.ID)
			after = e.Cursor
		}
		if len(page) < n {
			return out
		}
	}
}

func TestSysIndexKeepsOrderGroupsAndCounts(t *testing.T) {
	s := openTemp(t)
	ready, err := s.SysIndexReady("runs")
	require.NoError(t, err)
	assert.False(t, ready, "no index before the first indexed write")

	require.NoError(t, s.PutSysDocs(bg, idxDoc("b", "2", "pending"), idxDoc("a", "1", "done"), idxDoc("c", "3", "pending")))
	require.NoError(t, s.PutSysDocs(bg, idxDoc("d", "2", "done")))
	ready, err = s.SysIndexReady("runs")
	require.NoError(t, err)
	assert.True(t, ready)

	for _, n := range []int{1, 2, 10} {
		assert.Equal(t, []string{"c", "d", "b", "a"}, scanIDs(t, s, "", true, n), "newest first, %d a page", n)
		assert.Equal(t, []string{"a", "b", "d", "c"}, scanIDs(t, s, "", false, n), "oldest first, %d a page", n)
		assert.Equal(t, []string{"c", "b"}, scanIDs(t, s, "pending", true, n))
	}
	page, err := s.ScanSys("runs", store.SysScan{Reverse: true, Next: func(store.SysEntry) (bool, bool) { return true, false }})
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.JSONEq(t, `{"id":"c","group":"pending"}`, string(page[0].JSON))
	assert.Equal(t, "pending", page[0].Group)

	// A rewrite moves the document to its new group; the counts follow.
	require.NoError(t, s.PutSysDocs(bg, idxDoc("b", "2", "applied")))
	assert.Equal(t, []string{"c"}, scanIDs(t, s, "pending", true, 5))
	assert.Equal(t, []string{"c", "d", "b", "a"}, scanIDs(t, s, "", true, 5))
	stats, err := s.SysStats("runs")
	require.NoError(t, err)
	size := func(id, g string) int64 {
		b, _ := json.Marshal(map[string]string{"id": id, "group": g})
		return int64(len(b))
	}
	assert.Equal(t, map[string]store.SysGroup{
		"pending": {Count: 1, Bytes: size("c", "pending")},
		"done":    {Count: 2, Bytes: size("a", "done") + size("d", "done")},
		"applied": {Count: 1, Bytes: size("b", "applied")},
	}, stats)

	// A collection that keeps an index takes no write without an entry.
	err = s.PutSys(bg, "runs", "e", 1)
	require.ErrorContains(t, err, "must be written with its entry")

	// A prune takes the entries out with the documents.
	got, err := s.PruneSys(bg, "runs", func(r store.SysRecord) (bool, error) { return r.ID == "c" || r.ID == "a", nil })
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c"}, got.IDs)
	assert.Equal(t, []string{"d", "b"}, scanIDs(t, s, "", true, 5))
	assert.Empty(t, scanIDs(t, s, "pending", true, 5))
	stats, err = s.SysStats("runs")
	require.NoError(t, err)
	assert.Equal(t, map[string]store.SysGroup{"done": {Count: 1, Bytes: size("d", "done")}, "applied": {Count: 1, Bytes: size("b", "applied")}}, stats)

	// Other system collections keep no index and take writes as before.
	require.NoError(t, s.PutSys(bg, "decisions", "b", "x"))
	require.NoError(t, s.Close())
	rep := checkOf(t, s.Dir(), store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

// A write the index did not see (a starplan that does not know indexes) makes it stale: it is not
// used until it is built again, and a rebuild makes it whole.
func TestSysIndexStaleUntilRebuilt(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "1", "done")))
	// What an older starplan does: a document written with no entry, its digest recorded.
	require.NoError(t, s.write(bg, func() error { return s.putSysLocked("_runs", "b", map[string]string{"id": "b"}) }))
	ready, err := s.SysIndexReady("runs")
	require.NoError(t, err)
	assert.False(t, ready)
	_, err = s.ScanSys("runs", store.SysScan{Next: func(store.SysEntry) (bool, bool) { return true, true }})
	require.ErrorIs(t, err, store.ErrNoSysIndex)
	_, err = s.SysStats("runs")
	require.ErrorIs(t, err, store.ErrNoSysIndex)
	// Writes leave a stale index alone, with or without entries.
	require.NoError(t, s.PutSysDocs(bg, idxDoc("c", "3", "done")))
	require.NoError(t, s.PutSys(bg, "runs", "d", map[string]string{"id": "d"}))

	n, err := s.RebuildSysIndex(bg, "runs", func(r store.SysRecord) (store.SysIndex, error) {
		return store.SysIndex{Order: r.ID, Group: "done"}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	assert.Equal(t, []string{"d", "c", "b", "a"}, scanIDs(t, s, "", true, 3))
	stats, err := s.SysStats("runs")
	require.NoError(t, err)
	assert.Equal(t, 4, stats["done"].Count)
	require.NoError(t, s.Close())
	rep := checkOf(t, s.Dir(), store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

// The index is written in the transaction of its documents: a batch that fails leaves neither.
func TestSysIndexFailedBatchLeavesNoEntry(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "1", "done")))
	err := s.PutSysDocs(bg, idxDoc("b", "2", "pending"), store.SysDoc{Collection: "runs", ID: "c", Value: func() {}, Index: &store.SysIndex{Order: "3", Group: "done"}})
	require.Error(t, err)
	assert.Equal(t, []string{"a"}, scanIDs(t, s, "", true, 5))
	stats, err := s.SysStats("runs")
	require.NoError(t, err)
	assert.Equal(t, map[string]store.SysGroup{"done": {Count: 1, Bytes: int64(len(`{"group":"done","id":"a"}`))}}, stats)
}

// db check finds an index that no longer matches the documents.
func TestCheckReportsADriftedSysIndex(t *testing.T) {
	s := openTemp(t)
	var docs []store.SysDoc
	for i := range 5 {
		docs = append(docs, idxDoc(fmt.Sprint("r", i), fmt.Sprint(i), "done"))
	}
	require.NoError(t, s.PutSysDocs(bg, docs...))
	require.NoError(t, s.Close())
	db, err := bbolt.Open(s.bolt.path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(sysIndexBucket)).Bucket([]byte("_runs"))
		if err := b.Bucket(sysIdxGroups).Bucket([]byte("done")).Delete([]byte("2\x00r2")); err != nil {
			return err
		}
		return addSysGroup(b.Bucket(sysIdxStats), "done", 0, 1)
	}))
	require.NoError(t, db.Close())
	rep := checkOf(t, s.Dir(), store.CheckOptions{})
	msgs := problemsOf(rep, CheckSysIndex)
	require.Len(t, msgs, 3, "%v", msgs)
	assert.Contains(t, msgs[0], "document r2 is not in its group done")
	assert.Contains(t, msgs[1], "groups 4 entries for 5 documents")
	assert.Contains(t, msgs[2], "keeps counts")
}

// runSysIndexLoop is the child of TestKillDuringIndexedBatches: it writes batches of indexed
// documents, new ones and rewrites that move older ones to another group, and prunes, until it
// is killed.
func runSysIndexLoop(dir string) {
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	out.WriteString("ready\n")
	out.Flush()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	groups := []string{"pending", "done", "applied", "rejected"}
	for n := 0; ; n++ {
		var docs []store.SysDoc
		for range 1 + rng.IntN(50) {
			i := rng.IntN(2000)
			docs = append(docs, idxDoc(fmt.Sprintf("r%04d", i), fmt.Sprintf("%04d", i), groups[rng.IntN(len(groups))]))
		}
		if err := s.PutSysDocs(bg, docs...); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		if n%10 == 9 {
			cut := fmt.Sprintf("r%04d", rng.IntN(2000))
			if _, err := s.PruneSys(bg, "runs", func(r store.SysRecord) (bool, error) { return r.ID < cut && rng.IntN(4) == 0, nil }); err != nil {
				fmt.Println("error:", err)
				os.Exit(2)
			}
		}
		out.WriteString(".")
		out.Flush()
	}
}

// TestKillDuringIndexedBatches SIGKILLs a process that writes and prunes indexed documents, at
// random points, and after every kill checks that the index matches the documents: it is
// written in their transactions, so a kill leaves both before or both after a batch.
func TestKillDuringIndexedBatches(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	kills := testtier.Size(8, 30)
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	for i := range kills {
		cmd := helperCmd(t, "sysindex", dir)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		r := bufio.NewReader(stdout)
		line, err := r.ReadString('\n')
		require.NoError(t, err, "kill %d: child output %q", i, line)
		require.Equal(t, "ready\n", line)
		first, err := r.ReadByte()
		require.NoError(t, err, "kill %d: the child ended before its first batch", i)
		require.Equal(t, byte('.'), first, "kill %d: the child's first batch failed", i)
		time.Sleep(time.Duration(rng.IntN(20000)) * time.Microsecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_, _ = io.Copy(io.Discard, r)
		_ = cmd.Wait()

		rep := checkOf(t, dir, store.CheckOptions{})
		require.True(t, rep.OK(), "kill %d: %v", i, rep.Problems)
		s, err := Open(dir, Options{})
		require.NoError(t, err)
		recs, err := s.ListSys("runs")
		require.NoError(t, err)
		stats, err := s.SysStats("runs")
		require.NoError(t, err, "kill %d: the index is current", i)
		total := 0
		for _, g := range stats {
			total += g.Count
		}
		assert.Equal(t, len(recs), total, "kill %d", i)
		assert.Len(t, scanIDs(t, s, "", true, 500), len(recs), "kill %d", i)
		require.NoError(t, s.Close())
	}
}

// PruneSysOldest offers drop only the documents the index orders before the cut.
func TestPruneSysBeforeReadsTheOldestOnly(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "1", "done"), idxDoc("b", "2", "pending"), idxDoc("c", "3", "done"), idxDoc("d", "4", "done")))
	var seen []string
	got, err := s.PruneSysOldest(bg, store.SysPrune{Coll: "runs", Before: "3", Drop: func(r store.SysRecord) (bool, error) {
		seen = append(seen, r.ID)
		return r.ID != "b", nil
	}})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, seen, "c and d sort at or after the cut")
	assert.Equal(t, []string{"a"}, got.IDs)
	assert.Equal(t, []string{"d", "c", "b"}, scanIDs(t, s, "", true, 5))

	// Without a current index, every document is offered.
	require.NoError(t, s.write(bg, func() error { return s.putSysLocked("_runs", "e", map[string]string{"id": "e"}) }))
	seen = nil
	_, err = s.PruneSysOldest(bg, store.SysPrune{Coll: "runs", Before: "3", Drop: func(r store.SysRecord) (bool, error) {
		seen = append(seen, r.ID)
		return false, nil
	}})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"b", "c", "d", "e"}, seen)
}

// An index entry is written as encoding/json writes it, whatever its strings hold.
func TestSysEntryMarshalIsEncodingJSON(t *testing.T) {
	strs := []string{"", "2026-11-29T06:00:00.000001Z", "pending", "a\"b", `a\b`, "<&>", "\x01", "é", "\u2028", "\x7f", "0000000a-0001-8000-805e-000000000000"}
	for _, o := range strs {
		for _, g := range strs {
			for _, k := range strs {
				for _, n := range []int64{0, 5686, -1} {
					e := sysEntry{Order: o, Group: g, Bytes: n, Key: k}
					want, err := json.Marshal(e)
					require.NoError(t, err)
					require.Equal(t, string(want), string(e.marshal()), "%#v", e)
				}
			}
		}
	}
}

// TestSysIndexAppendsFillPages: the entries of records written in time order are appended, and
// bbolt, told nothing, splits each page it appends to half full, so the index took twice the
// pages (and the audit log's batches twice the page writes) it needs. They fill their pages, as
// written and as rebuilt.
func TestSysIndexAppendsFillPages(t *testing.T) {
	s := openTemp(t)
	for n := 0; n < 3000; n += 250 {
		docs := make([]store.SysDoc, 0, 250)
		for i := n; i < n+250; i++ {
			docs = append(docs, idxDoc(fmt.Sprintf("r%08d", i), fmt.Sprintf("2026-01-01T00:%08d", i), "pending"))
		}
		require.NoError(t, s.PutSysDocs(bg, docs...))
	}
	filled := func(how string) {
		require.NoError(t, s.bolt.db.View(func(tx *bbolt.Tx) error {
			b := sysIndexOf(tx, "_runs")
			require.NotNil(t, b)
			buckets := map[string]*bbolt.Bucket{"ids": b.Bucket(sysIdxIDs), "order": b.Bucket(sysIdxOrder),
				"group": b.Bucket(sysIdxGroups).Bucket([]byte("pending"))}
			for name, bk := range buckets {
				st := bk.Stats()
				require.Greater(t, st.LeafPageN, 4, name)
				fill := float64(st.LeafInuse) / float64(st.LeafPageN*tx.DB().Info().PageSize)
				assert.Greater(t, fill, 0.85, "%s %s: leaf pages %d, %.0f %% used", how, name, st.LeafPageN, 100*fill)
			}
			return nil
		}))
	}
	filled("written")
	n, err := s.RebuildSysIndex(bg, "runs", func(r store.SysRecord) (store.SysIndex, error) {
		var v map[string]string
		if err := json.Unmarshal(r.JSON, &v); err != nil {
			return store.SysIndex{}, err
		}
		return store.SysIndex{Order: "2026-01-01T00:" + r.ID[1:], Group: v["group"]}, nil
	})
	require.NoError(t, err)
	require.Equal(t, 3000, n)
	filled("rebuilt")
}
