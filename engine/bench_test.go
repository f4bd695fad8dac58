package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// bigStore opens a store whose inventory has n generated rows (the demo's six, then more).
func bigStore(b *testing.B, n int) *store.Store {
	b.Helper()
	st := openStore(b, b.TempDir())
	b.Cleanup(func() { st.Close() })
	rng := rand.New(rand.NewSource(1))
	rows := make([]map[string]any, 0, n)
	for i := 7; i <= n; i++ {
		rows = append(rows, map[string]any{
			"item_id":           fmt.Sprintf("SG%06d", i),
			"name":              fmt.Sprintf("Style %d", i),
			"description":       "Generated frames for the benchmark.",
			"quantity_in_stock": rng.Intn(40),
			"price":             float64(20 + rng.Intn(180)),
		})
	}
	var buf bytes.Buffer
	require.NoError(b, json.NewEncoder(&buf).Encode(rows))
	_, err := st.Import(context.Background(), "inventory", &buf, store.JSON, store.Upsert)
	require.NoError(b, err)
	return st
}

// BenchmarkSearchSum100k: search with a dict filter plus a Starlark sum over the matches, on a
// 100,000-row store, through the sandbox and the table helpers (in process, no audit).
// Target: ≤ 15 ms.
func BenchmarkSearchSum100k(b *testing.B) {
	st := bigStore(b, 100_000)
	env, err := EnvOf(st)
	require.NoError(b, err)
	runner := InProcess(env)
	plan := `rows = inventory_tbl.search({"price": {"$lt": 100}, "quantity_in_stock": {"$gt": 10}})
total = sum([r["price"] for r in rows])
answer_text = "We have %d styles worth $%d." % (len(rows), total)
STATUS = "success"
`
	ctx := context.Background()
	job := Job{Reply: plan, Globals: []string{"answer_text"}}
	job.View = st.Stage()
	res := runner.Run(ctx, job)
	require.Equal(b, OutcomeOK, Outcome(res.Outcome), res.Diagnostics.String())
	b.Log(res.Globals["answer_text"])
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		job.View = st.Stage()
		runner.Run(ctx, job)
	}
}
