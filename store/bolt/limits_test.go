package bolt

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

func TestRunLimits(t *testing.T) {
	s := openTemp(t)
	for _, tc := range []struct {
		name   string
		limits store.RunLimits
		run    func(tb table.Table) error
		want   store.LimitError
	}{
		{
			name:   "helper calls",
			limits: store.RunLimits{HelperCalls: 3},
			run: func(tb table.Table) error {
				for range 4 {
					if _, _, err := tb.Get("SG001"); err != nil {
						return err
					}
				}
				return nil
			},
			want: store.LimitError{Limit: store.LimitHelperCalls, Max: 3},
		},
		{
			name:   "rows read",
			limits: store.RunLimits{RowsRead: 10},
			run: func(tb table.Table) error {
				for range 2 {
					if _, err := tb.Find(table.Query{}); err != nil {
						return err
					}
				}
				return nil
			},
			want: store.LimitError{Limit: store.LimitRowsRead, Max: 10},
		},
		{
			name:   "rows written in total",
			limits: store.RunLimits{RowsWritten: 5},
			run: func(tb table.Table) error {
				_, err := tb.Update(table.Row{"quantity_in_stock": 1}, table.Query{Match: func(table.Row) (bool, error) { return true, nil }})
				return err
			},
			want: store.LimitError{Limit: store.LimitRowsWritten, Max: 5},
		},
		{
			name:   "rows written to one table",
			limits: store.RunLimits{RowsWrittenPerTable: map[string]int{"inventory": 2}},
			run: func(tb table.Table) error {
				for i := 7; i < 10; i++ {
					if _, err := tb.Insert(table.Row{"item_id": fmt.Sprintf("SG%03d", i), "name": "x", "quantity_in_stock": 1, "price": 1.0}); err != nil {
						return err
					}
				}
				return nil
			},
			want: store.LimitError{Limit: store.LimitRowsWritten, Max: 2, Table: "inventory"},
		},
		{
			name:   "staged bytes",
			limits: store.RunLimits{StagedBytes: 2000},
			run: func(tb table.Table) error {
				for i := 7; i < 20; i++ {
					if _, err := tb.Insert(table.Row{"item_id": fmt.Sprintf("SG%03d", i), "name": "x",
						"description": strings.Repeat("d", 500), "quantity_in_stock": 1, "price": 1.0}); err != nil {
						return err
					}
				}
				return nil
			},
			want: store.LimitError{Limit: store.LimitMemory, Max: 2000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.StageFor(context.Background(), tc.limits)
			tb := tbl(t, v, "inventory")
			err := tc.run(tb)
			var le *store.LimitError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tc.want, *le)
			assert.Equal(t, &tc.want, v.Exceeded())
			_, _, err = tb.Get("SG002")
			assert.ErrorAs(t, err, &le, "once crossed, every later call fails")
			// Under the limit, the same work goes through.
			ok := s.StageFor(context.Background(), store.RunLimits{HelperCalls: 100, RowsRead: 100, RowsWritten: 100, StagedBytes: 1 << 20})
			require.NoError(t, tc.run(tbl(t, ok, "inventory")))
			assert.Nil(t, ok.Exceeded())
		})
	}
	// A whole-table update is refused before a row is staged.
	v := s.StageFor(context.Background(), store.RunLimits{RowsWritten: 5})
	_, err := tbl(t, v, "inventory").Update(table.Row{"price": 1}, table.Query{Match: func(table.Row) (bool, error) { return true, nil }})
	require.Error(t, err)
	assert.True(t, v.ChangeSet().Empty())
}

// A scan runs in starplan, not in the plan: it stops when the run's context is done. It looks at
// the context every store.ScanCheckEvery rows, and at every row for a slow filter ($regex): the
// table holds a few rows more than ScanCheckEvery, so that both looks are reached (the long tier
// holds three times as many).
func TestScansStopWithTheRun(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	s := openTemp(t)
	v := s.Stage()
	tx := tbl(t, v, "transactions")
	for i := 2; i < testtier.Size(store.ScanCheckEvery+10, 3*store.ScanCheckEvery); i++ {
		_, err := tx.Insert(txnRow(fmt.Sprintf("TXN%05d", i), 1))
		require.NoError(t, err)
	}
	require.NoError(t, v.Apply(bg))

	slow := map[string]any{"customer_name": map[string]any{"$regex": "^zz"}}
	plain := map[string]any{"customer_name": map[string]any{"$gt": "zz"}}
	for _, q := range []table.Query{{Where: slow}, {Where: slow, Reverse: true}, {Where: plain}, {Where: plain, Reverse: true}} {
		ctx := &doneAfter{Context: context.Background(), n: 1} // live for the call, done in the scan
		run := s.StageFor(ctx, store.RunLimits{})
		_, err := tbl(t, run, "transactions").Find(q)
		assert.ErrorIs(t, err, context.Canceled, "%v", q.Where)
		assert.Less(t, ctx.n, 0, "the scan looked")
	}
	// The same scans with a live context complete.
	for _, w := range []map[string]any{slow, plain} {
		rows, err := tbl(t, s.StageFor(context.Background(), store.RunLimits{}), "transactions").Find(table.Query{Where: w})
		require.NoError(t, err)
		assert.Empty(t, rows)
	}
}

// doneAfter is a context that reports done after its first n looks.
type doneAfter struct {
	context.Context
	n int
}

func (c *doneAfter) Err() error {
	c.n--
	if c.n < 0 {
		return context.Canceled
	}
	return nil
}

// A $regex can take milliseconds a row, so a scan with one looks at its run's deadline at every
// row, not every few thousand: a run that is over stops at once.
func TestSlowFilterScanStopsAtTheDeadline(t *testing.T) {
	s := openAt(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	inv := tbl(t, s.StageFor(ctx, store.RunLimits{}), "inventory")
	_, err := inv.Find(table.Query{Where: map[string]any{"name": map[string]any{"$regex": "^A"}}})
	assert.ErrorIs(t, err, context.Canceled)
	// Also over an index's candidates: a poor index (every row shares the value) and a regex.
	_, err = inv.Find(table.Query{Where: map[string]any{"name": map[string]any{"$ieq": "aviator"}, "description": map[string]any{"$regex": "^A"}}})
	assert.ErrorIs(t, err, context.Canceled)
	m, err := table.Compile(nil, map[string]any{"name": map[string]any{"$regex": "^A"}})
	require.NoError(t, err)
	assert.True(t, m.Slow())
	m, err = table.Compile(nil, map[string]any{"name": "A"})
	require.NoError(t, err)
	assert.False(t, m.Slow())
}

// A limit's message counts in words that agree with the number.
func TestLimitErrorCountsAgree(t *testing.T) {
	for _, tc := range []struct {
		err  store.LimitError
		want string
	}{
		{store.LimitError{Limit: store.LimitHelperCalls, Max: 1}, "the plan made more than 1 table call (limit helper_calls)"},
		{store.LimitError{Limit: store.LimitRowsRead, Max: 1}, "the plan read more than 1 row (limit rows_read)"},
		{store.LimitError{Limit: store.LimitRowsWritten, Max: 1}, "the plan changed more than 1 row (limit rows_written)"},
		{store.LimitError{Limit: store.LimitRowsWritten, Max: 1, Table: "inventory"}, "the plan changed more than 1 row of inventory (limit rows_written)"},
		{store.LimitError{Limit: store.LimitRowsWritten, Max: 2}, "the plan changed more than 2 rows (limit rows_written)"},
	} {
		assert.Equal(t, tc.want, tc.err.Error())
	}
}
