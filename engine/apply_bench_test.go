package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store/bolt"
)

// BenchmarkRunAndApply is what a sale costs a user end to end: a new plan's dry run (a different
// style each time, so no check is cached) recorded in the audit log, then its apply: the
// re-checks of what it read, the domain's rules, the commit with its audit record and fsync.
// Stock is large enough never to run out.
func BenchmarkRunAndApply(b *testing.B) {
	e, _ := newEngine(b)
	const styles = 50
	var rows []string
	for i := range styles {
		rows = append(rows, fmt.Sprintf(`{"item_id": "SB%03d", "name": "Bench %d", "description": "d", "quantity_in_stock": 1000000000, "price": 10.0}`, i, i))
	}
	_, err := e.Store().(*bolt.Store).Import(context.Background(), "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), bolt.JSON, bolt.Upsert)
	require.NoError(b, err)
	plan := example(b, "02_purchase_wayfarer.star")
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		reply := strings.ReplaceAll(plan, "Wayfarer", fmt.Sprintf("Bench %d", i%styles))
		reply = strings.Replace(reply, "qty = 3", fmt.Sprintf("qty = %d", 1+i%3), 1)
		// A literal of its own: 150 texts would repeat within the check cache's 256 entries.
		reply = strings.Replace(reply, `"customer_name": "Alice"`, fmt.Sprintf(`"customer_name": "Alice %d"`, i), 1)
		res, err := e.Run(ctx, Request{Reply: reply})
		if err != nil || !res.Pending {
			b.Fatalf("%v %+v", err, res)
		}
		if _, err := e.Apply(ctx, res.RunID); err != nil {
			b.Fatal(err)
		}
	}
}
