package engine

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// pruneLog is the size of BenchmarkPruneChained's log, in runs: $STARPLAN_PRUNE_LOG, else 20,000
// (a flag would be one the engine's tests register: TestEmbeddingLeavesTheHostsFlagsAlone).
func pruneLog(tb testing.TB) int {
	n := 20_000
	if s := os.Getenv("STARPLAN_PRUNE_LOG"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(tb, err, "STARPLAN_PRUNE_LOG")
	}
	return n
}

// seedChained writes n old runs to e's log through the hash chain, as the audit writer does,
// per records to an entry (1: an entry each, a log written one run at a time), a sixth of them
// pending, from from on, a second apart.
func seedChained(tb testing.TB, e *Engine, n, per int, from time.Time) {
	tb.Helper()
	put := func(docs []store.SysDoc) error { return e.st.PutSysDocs(context.Background(), docs...) }
	var links []link
	size := per // records a commit
	if per == 1 {
		size = 1000 // a thousand entries a commit
	}
	for i := range n {
		at := from.Add(time.Duration(i) * time.Second)
		r := &RunRecord{ID: fmt.Sprintf("seed_%07d", i), Time: at, Request: fmt.Sprintf("seeded run %d", i),
			Program: "answer_text = 'ok'\nSTATUS = 'success'\n", Outcome: OutcomeOK, Status: "success", Pending: i%6 == 0}
		links = append(links, link{doc: recordDoc(r, false), event: ChainProposed, fold: per > 1})
		if len(links) == size || i == n-1 {
			require.NoError(tb, e.chain.write(at, put, links...))
			links = links[:0]
		}
	}
}

// BenchmarkPruneChained prunes the settled runs of a chained log of -prune-log runs (an entry
// each, the chain's worst case) in steps of PruneBatch: a step's cost must not grow with the
// steps before it.
//
//	STARPLAN_PRUNE_LOG=100000 go test ./engine -run '^$' -bench PruneChained -benchtime 1x
func BenchmarkPruneChained(b *testing.B) {
	n := pruneLog(b)
	b.StopTimer()
	for range b.N {
		dir := b.TempDir()
		st := openStore(b, dir)
		clk := &clock{now: fixedNow.AddDate(-1, 0, 0)}
		e, err := New(st, Options{Now: clk.Now})
		require.NoError(b, err)
		seedChained(b, e, n, 1, clk.Now())
		clk.now = fixedNow
		b.StartTimer()
		rep, err := e.Prune(context.Background(), PruneOptions{OlderThan: 30 * 24 * time.Hour})
		b.StopTimer()
		require.NoError(b, err)
		require.Equal(b, n-(n+5)/6, rep.Removed)
		b.ReportMetric(float64(rep.Steps), "steps")
		require.NoError(b, e.Close())
		require.NoError(b, st.Close())
	}
}
