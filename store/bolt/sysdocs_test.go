package bolt

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
)

func TestPutSysDocsWritesAllOrNothing(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	require.NoError(t, s.PutSysDocs(ctx,
		store.SysDoc{Collection: "runs", ID: "r1", Value: map[string]any{"n": 1}},
		store.SysDoc{Collection: "runs", ID: "r2", Value: map[string]any{"n": 2}},
	))
	recs, err := s.ListSys("runs")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.JSONEq(t, `{"n": 2}`, string(recs[1].JSON))

	// A batch with one bad document writes none of them, the good ones included.
	err = s.PutSysDocs(ctx,
		store.SysDoc{Collection: "runs", ID: "r3", Value: map[string]any{"n": 3}},
		store.SysDoc{Collection: "no such name!", ID: "x", Value: 1},
	)
	require.Error(t, err)
	recs, err = s.ListSys("runs")
	require.NoError(t, err)
	assert.Len(t, recs, 2)
}

// jsonRows returns n inventory rows as a JSON array, one row per line after the first.
func jsonRows(n int) string {
	var b strings.Builder
	b.WriteString("[\n")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"item_id": "X%06d", "name": "n", "description": "d", "quantity_in_stock": 1, "price": 2.5}`, i)
	}
	b.WriteString("\n]\n")
	return b.String()
}

// Line numbers in import errors stay exact deep into a large file (they are counted on from the
// previous record; counting from the start each time made 100k rows take seconds).
func TestImportJSONLineNumbersAfterManyRows(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	s := openTemp(t)
	n := testtier.Size(5_000, 100_000)
	rows := jsonRows(n)
	res, err := s.Import(context.Background(), "inventory", strings.NewReader(rows), JSON, Upsert)
	require.NoError(t, err)
	assert.Equal(t, n, res.Inserted)

	// Error positions are still exact after many records.
	bad := strings.Replace(rows, fmt.Sprintf(`"X%06d", "name": "n", "description": "d", "quantity_in_stock": 1`, n/2), fmt.Sprintf(`"X%06d", "name": "n", "description": "d", "quantity_in_stock": -1`, n/2), 1)
	require.NotEqual(t, rows, bad)
	_, err = s.Import(context.Background(), "inventory", strings.NewReader(bad), JSON, Upsert)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("line %d", n/2+2))
}

// BenchmarkImportJSON10k imports 10,000 rows; its cost per row must not grow with the file.
func BenchmarkImportJSON10k(b *testing.B) {
	rows := jsonRows(10_000)
	for b.Loop() {
		b.StopTimer()
		s := openTemp(b)
		b.StartTimer()
		if _, err := s.Import(context.Background(), "inventory", strings.NewReader(rows), JSON, Upsert); err != nil {
			b.Fatal(err)
		}
	}
}

// PutSysDocs inserts a batch's new documents together: a document written twice in one batch
// (a run's record queued, then written again by its apply) is stored as its last version, once,
// and counted once by the collection's digest; a second Create of one id in a batch is refused.
func TestPutSysDocsKeepsTheLastVersionInABatch(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	require.NoError(t, s.PutSysDocs(ctx,
		store.SysDoc{Collection: "runs", ID: "r1", Value: map[string]any{"v": 1}},
		store.SysDoc{Collection: "chain", ID: "c1", Value: 1, Create: true},
		store.SysDoc{Collection: "runs", ID: "r1", Value: map[string]any{"v": 2}},
		store.SysDoc{Collection: "runs", ID: "r0", Value: map[string]any{"v": 0}},
	))
	recs, err := s.ListSys("runs") // checks the digests too
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.JSONEq(t, `{"v": 2}`, string(recs[1].JSON))
	err = s.PutSysDocs(ctx,
		store.SysDoc{Collection: "chain", ID: "c2", Value: 2, Create: true},
		store.SysDoc{Collection: "chain", ID: "c2", Value: 3, Create: true},
	)
	require.ErrorIs(t, err, store.ErrSysExists)
	err = s.PutSysDocs(ctx, store.SysDoc{Collection: "chain", ID: "c1", Value: 4, Create: true})
	require.ErrorIs(t, err, store.ErrSysExists)
	recs, err = s.ListSys("chain")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.JSONEq(t, `1`, string(recs[0].JSON))
}
