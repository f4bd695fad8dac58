package bolt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sell stages the sale of one unit of the named item: stock down, a transaction in.
func sell(t testing.TB, v table.View, name string) {
	t.Helper()
	inv, tx := tbl(t, v, "inventory"), tbl(t, v, "transactions")
	rows := find(t, inv, table.Query{Where: where("name", name), Limit: 1})
	require.Len(t, rows, 1)
	item := rows[0]
	_, err := inv.Update(table.Row{"quantity_in_stock": item["quantity_in_stock"].(int64) - 1}, table.Query{Where: where("item_id", item["item_id"])})
	require.NoError(t, err)
	last := find(t, tx, table.Query{Reverse: true, Limit: 1})[0]
	_, err = tx.Insert(table.Row{
		"customer_name":             "Alice",
		"transaction_summary":       "one " + name,
		"transaction_amount":        item["price"],
		"balance_after_transaction": last["balance_after_transaction"].(float64) + item["price"].(float64),
		"timestamp":                 "2025-01-02T10:00:00",
	})
	require.NoError(t, err)
}

func TestApplyWritesEverythingAndPersists(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	v := s.Stage()
	sell(t, v, "Aviator")
	_, err := tbl(t, v, "inventory").Remove(table.Query{Where: where("name", "Moon")})
	require.NoError(t, err)
	require.NoError(t, v.Apply(bg, store.SysDoc{Collection: "runs", ID: "run-1", Value: map[string]any{"applied": true}}))

	check := func(s *Store) {
		row, ok := committed(t, s, "inventory", "SG001")
		require.True(t, ok)
		assert.Equal(t, int64(22), row["quantity_in_stock"])
		_, ok = committed(t, s, "inventory", "SG006")
		assert.False(t, ok)
		row, ok = committed(t, s, "transactions", "TXN002")
		require.True(t, ok)
		assert.Equal(t, 580.0, row["balance_after_transaction"])
		var run map[string]any
		found, err := s.GetSys("runs", "run-1", &run)
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, true, run["applied"])
	}
	check(s)
	// Indexes follow applies.
	rows := find(t, tbl(t, s.Stage(), "inventory"), table.Query{Where: where("quantity_in_stock", 22)})
	assert.Equal(t, []any{"SG001"}, keys(t, rows, "item_id"))
	rows = find(t, tbl(t, s.Stage(), "inventory"), table.Query{Where: where("name", "Moon")})
	assert.Empty(t, rows)

	require.NoError(t, s.Close())
	check(openAt(t, dir))
}

func TestApplyConflicts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *Store)
		run   func(t *testing.T, v table.View) // the run under test
		other func(t *testing.T, v table.View) // a run applied in between
		want  store.Conflict
	}{
		{
			name:  "changed row was changed",
			run:   func(t *testing.T, v table.View) { sell(t, v, "Aviator") },
			other: func(t *testing.T, v table.View) { update(t, v, "SG001", table.Row{"price": 81}) },
			want:  store.Conflict{Table: "inventory", Key: "SG001", Seen: 1, Now: 2},
		},
		{
			name: "read row was changed",
			run: func(t *testing.T, v table.View) {
				_, _, err := tbl(t, v, "inventory").Get("SG002")
				require.NoError(t, err)
				update(t, v, "SG001", table.Row{"price": 1})
			},
			other: func(t *testing.T, v table.View) { update(t, v, "SG002", table.Row{"price": 1}) },
			want:  store.Conflict{Table: "inventory", Key: "SG002", Seen: 1, Now: 2},
		},
		{
			name: "found row was deleted",
			run: func(t *testing.T, v table.View) {
				find(t, tbl(t, v, "inventory"), table.Query{Where: where("name", "Moon")})
				update(t, v, "SG001", table.Row{"price": 1})
			},
			other: func(t *testing.T, v table.View) {
				_, err := tbl(t, v, "inventory").Remove(table.Query{Where: where("item_id", "SG006")})
				require.NoError(t, err)
			},
			want: store.Conflict{Table: "inventory", Seen: 1, Now: 2,
				Read: `the inventory rows matching {"name":"Moon"} changed after the run read them (a row was inserted, changed or removed)`},
		},
		{
			name: "missing key was inserted",
			run: func(t *testing.T, v table.View) {
				_, ok, err := tbl(t, v, "inventory").Get("SG007")
				require.NoError(t, err)
				require.False(t, ok)
				update(t, v, "SG001", table.Row{"price": 1})
			},
			other: func(t *testing.T, v table.View) { insertItem(t, v, "SG007") },
			want:  store.Conflict{Table: "inventory", Key: "SG007", Seen: 0, Now: 2},
		},
		{
			name:  "inserted key was inserted",
			run:   func(t *testing.T, v table.View) { insertItem(t, v, "SG007") },
			other: func(t *testing.T, v table.View) { insertItem(t, v, "SG007") },
			want:  store.Conflict{Table: "inventory", Key: "SG007", Seen: 0, Now: 2},
		},
		{
			name: "whole table read and the table changed",
			setup: func(t *testing.T, s *Store) {
				v := s.Stage()
				tx := tbl(t, v, "transactions")
				for i := 2; i <= store.BigRead+2; i++ {
					_, err := tx.Insert(txnRow(fmt.Sprintf("TXN%03d", i), 1))
					require.NoError(t, err)
				}
				require.NoError(t, v.Apply(bg))
			},
			run: func(t *testing.T, v table.View) {
				require.Len(t, find(t, tbl(t, v, "transactions"), table.Query{}), store.BigRead+2)
				update(t, v, "SG001", table.Row{"price": 1})
			},
			other: func(t *testing.T, v table.View) {
				// A row the run never returned: only the table-level read notices it.
				_, err := tbl(t, v, "transactions").Insert(txnRow("TXN900", 1))
				require.NoError(t, err)
			},
			want: store.Conflict{Table: "transactions", Seen: 2, Now: 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTemp(t)
			if tc.setup != nil {
				tc.setup(t, s)
			}
			v := s.Stage()
			tc.run(t, v)
			before := dumpString(t, s)
			o := s.Stage()
			tc.other(t, o)
			require.NoError(t, o.Apply(bg))
			after := dumpString(t, s)

			err := v.Apply(bg, store.SysDoc{Collection: "runs", ID: "x", Value: 1})
			require.Error(t, err)
			assert.ErrorIs(t, err, store.ErrConflict)
			var ce *store.ConflictError
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, ce.Conflicts, tc.want)
			assert.Contains(t, err.Error(), "nothing was written")
			assert.NotEqual(t, before, after)
			assert.Equal(t, after, dumpString(t, s), "a conflicting apply writes nothing")
			found, err := s.GetSys("runs", "x", new(int))
			require.NoError(t, err)
			assert.False(t, found, "nor its extra documents")
		})
	}
}

func TestApplyWithoutConflictWhenOthersTouchOtherRows(t *testing.T) {
	s := openTemp(t)
	v := s.Stage()
	sell(t, v, "Aviator") // reads SG001 and the last transaction
	o := s.Stage()
	update(t, o, "SG002", table.Row{"price": 99})
	require.NoError(t, o.Apply(bg))
	require.NoError(t, v.Apply(bg), "changes to rows the run never saw do not conflict")
	row, _ := committed(t, s, "inventory", "SG002")
	assert.Equal(t, 99.0, row["price"])
}

func TestReadsAreRecordedAsPredicates(t *testing.T) {
	s := openTemp(t)
	v := s.Stage()
	inv := tbl(t, v, "inventory")
	_, err := inv.Count(table.Query{Where: where("name", "Moon")})
	require.NoError(t, err)
	_ = inv.Len()
	find(t, inv, table.Query{Where: where("name", "Moon")})
	find(t, inv, table.Query{Where: where("name", "Moon")}) // the same question twice is one read
	_, _, err = tbl(t, v, "transactions").Get("TXN404")
	require.NoError(t, err)
	reads := v.Pending().Reads
	require.Len(t, reads, 4)
	assert.Equal(t, store.PendingRead{Table: "inventory", Version: 1, Pred: store.PredCount, Where: []byte(`{"name":"Moon"}`), N: 1}, reads[0])
	assert.Equal(t, store.PendingRead{Table: "inventory", Version: 1, Pred: store.PredCount, N: 6}, reads[1])
	assert.Equal(t, store.PredRows, reads[2].Pred)
	assert.Equal(t, int64(1), reads[2].N)
	assert.NotEmpty(t, reads[2].Digest)
	assert.Equal(t, store.PendingRead{Table: "transactions", Key: "TXN404", Version: 0}, reads[3])
}

func TestPendingAppliesInAnotherProcessLifetime(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	v := s.Stage()
	sell(t, v, "Sport")
	p := v.Pending()
	require.NoError(t, s.Close())

	s = openAt(t, dir) // versions are persisted: the reopened store still knows what the run saw
	require.NoError(t, s.ApplyPending(bg, p, nil))
	row, _ := committed(t, s, "inventory", "SG004")
	assert.Equal(t, int64(10), row["quantity_in_stock"])
	err := s.ApplyPending(bg, p, nil)
	assert.ErrorIs(t, err, store.ErrConflict, "a pending run applies once")
}

func TestApplyPendingRejectsMalformed(t *testing.T) {
	s := openTemp(t)
	for _, tc := range []struct {
		name string
		p    store.Pending
		want string
	}{
		{"domain", store.Pending{Domain: "library"}, "library domain"},
		{"table", store.Pending{Writes: []store.PendingWrite{{Table: "nope", Key: "a"}}}, `unknown table "nope"`},
		{"key kind", store.Pending{Writes: []store.PendingWrite{{Table: "inventory", Key: 1.0}}}, "must be a string"},
		{"row", store.Pending{Writes: []store.PendingWrite{{Table: "inventory", Key: "SG001", Base: 1, Row: table.Row{"item_id": "SG001", "name": "x", "quantity_in_stock": -3, "price": 1}}}}, `"quantity_in_stock" = -3 must be an int >= 0`},
		{"key mismatch", store.Pending{Writes: []store.PendingWrite{{Table: "inventory", Key: "SG002", Base: 1, Row: table.Row{"item_id": "SG001", "name": "x", "quantity_in_stock": 3, "price": 1}}}}, "carries key"},
		{"twice", store.Pending{Writes: []store.PendingWrite{{Table: "inventory", Key: "SG001", Base: 1}, {Table: "inventory", Key: "SG001", Base: 1}}}, "written twice"},
		{"read table", store.Pending{Reads: []store.PendingRead{{Table: "nope", Key: "a"}}}, `unknown table "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dumpString(t, s)
			err := s.ApplyPending(bg, &tc.p, nil)
			assert.ErrorContains(t, err, tc.want)
			assert.False(t, errors.Is(err, store.ErrConflict))
			assert.Equal(t, before, dumpString(t, s))
		})
	}
}

func TestApplyHonoursContext(t *testing.T) {
	s := openTemp(t)
	v := s.Stage()
	update(t, v, "SG001", table.Row{"price": 1})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	assert.ErrorIs(t, v.Apply(ctx), context.Canceled)
	row, _ := committed(t, s, "inventory", "SG001")
	assert.Equal(t, 80.0, row["price"])
}

func TestEmptyApplyWritesNothing(t *testing.T) {
	s := openTemp(t)
	seq := s.seq
	require.NoError(t, s.Stage().Apply(bg))
	assert.Equal(t, seq, s.seq)
}

func update(t testing.TB, v table.View, key string, fields table.Row) {
	t.Helper()
	n, err := tbl(t, v, "inventory").Update(fields, table.Query{Where: where("item_id", key)})
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func insertItem(t testing.TB, v table.View, key string) {
	t.Helper()
	_, err := tbl(t, v, "inventory").Insert(table.Row{"item_id": key, "name": "New " + key, "quantity_in_stock": 1, "price": 10})
	require.NoError(t, err)
}

func dumpString(t testing.TB, s *Store) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, s.Dump(&b))
	return b.String()
}

func TestReopenKeepsKeyOrderOfRowsInsertedOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	for _, k := range []string{"SG100", "SG050", "SG0075", "SG007"} {
		v := s.Stage()
		insertItem(t, v, k)
		require.NoError(t, v.Apply(bg))
	}
	update(t, s.Stage(), "SG001", table.Row{"price": 1}) // staged only, never applied
	require.NoError(t, s.Close())
	s = openAt(t, dir)
	inv := tbl(t, s.Stage(), "inventory")
	want := []any{"SG001", "SG002", "SG003", "SG004", "SG005", "SG006", "SG007", "SG050", "SG0075", "SG100"}
	assert.Equal(t, want, keys(t, find(t, inv, table.Query{}), "item_id"))
	k, err := inv.Insert(table.Row{"name": "Next", "quantity_in_stock": 1, "price": 1})
	require.NoError(t, err)
	assert.Equal(t, "SG101", k, "the highest key number survives a reopen")
}

// TestConcurrentStages runs readers on their own stages while another goroutine applies; run
// with -race it checks the committed state's locking.
func TestConcurrentStages(t *testing.T) {
	s := openTemp(t)
	done := make(chan struct{})
	errs := make(chan error, 8)
	for range 3 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				v := s.Stage()
				inv := tbl(t, v, "inventory")
				rows, err := inv.Find(table.Query{Where: where("name", "Aviator")})
				if err == nil && len(rows) != 1 {
					err = fmt.Errorf("found %d Aviators", len(rows))
				}
				if err == nil {
					_, err = inv.Count(table.Query{Where: where("quantity_in_stock", map[string]any{"$gte": 0})})
				}
				if err == nil {
					_, _, err = inv.Get("SG001")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 30 {
		v := s.Stage()
		update(t, v, "SG001", table.Row{"quantity_in_stock": i})
		_, err := tbl(t, v, "transactions").Insert(txnRow(fmt.Sprintf("TXN%03d", i+2), 1))
		require.NoError(t, err)
		require.NoError(t, v.Apply(bg))
	}
	close(done)
	for range 3 {
		require.NoError(t, <-errs)
	}
}
