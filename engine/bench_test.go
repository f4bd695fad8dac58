package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store/bolt"
)

// bigStore opens a store whose inventory has n generated rows (the demo's six, then more).
func bigStore(b *testing.B, n int) *bolt.Store {
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
	_, err := st.Import(context.Background(), "inventory", &buf, bolt.JSON, bolt.Upsert)
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
	runner := env
	plan := `rows = inventory_tbl.search({"price": {"$lt": 100}, "quantity_in_stock": {"$gt": 10}})
total = sum([r["price"] for r in rows])
answer_text = "We have %d styles worth $%d." % (len(rows), total)
STATUS = "success"
`
	ctx := context.Background()
	job := sandbox.Request{Reply: plan, Globals: []string{"answer_text"}}
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

// BenchmarkSellAtSize: a sale (02_purchase_wayfarer.star of the table's last style: a lookup by
// name ignoring case, an update, a ledger insert with the next key and the balance) as a dry run
// in process, on stores of 100 to 1,000,000 inventory rows. Target (issue 15): ≤ 0.3 ms at every size, flat.
//
//	go test ./engine -run '^$' -bench SellAtSize -count 5
func BenchmarkSellAtSize(b *testing.B) {
	for _, n := range []int{100, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			e, err := New(bigStore(b, n), Options{})
			require.NoError(b, err)
			b.Cleanup(func() { e.Close() })
			// The style sold is the table's last, in lower case: a walk would pass every row.
			plan := strings.ReplaceAll(example(b, "02_purchase_wayfarer.star"), "Wayfarer", fmt.Sprintf("style %d", n))
			req := Request{Reply: plan}
			ctx := context.Background()
			res, _, err := e.evaluate(ctx, req, fixedNow)
			require.NoError(b, err)
			require.Equal(b, OutcomeOK, res.Outcome, res.Diagnostics.String())
			require.NotEqual(b, "no_match", res.Status)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := e.evaluate(ctx, req, fixedNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
