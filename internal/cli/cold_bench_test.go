//go:build unix

package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkColdExec is issue 15's first target: a cold `starplan exec` of the two-item order (a
// new process that opens the store, runs the plan and prints its dry run) on a store of N
// inventory rows and N/10 transactions, isolated (the default) and --in-process. It reports the
// child's peak RSS as maxrss-MiB. Stores are built by `db import` of generated JSON when the
// benchmark runs, never by tests:
//
//	go test ./internal/cli -run '^$' -bench 'ColdExec/rows=100$' -benchtime 10x
//	go test ./internal/cli -run '^$' -bench 'ColdExec/rows=1000000$' -benchtime 3x -timeout 30m
func BenchmarkColdExec(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "starplan")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/starplan/starplan/cmd/starplan").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	planFile, err := filepath.Abs("../../testdata/examples/03_two_item_order.star")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{100, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			db := largeStore(b, bin, n)
			for _, mode := range []string{"isolated", "in-process"} {
				b.Run("mode="+mode, func(b *testing.B) {
					args := []string{"--db", db, "exec", "--json", planFile}
					if mode == "in-process" {
						args = append([]string{"--in-process"}, args...)
					}
					var peak int64
					for b.Loop() {
						cmd := exec.Command(bin, args...)
						if out, err := cmd.CombinedOutput(); err != nil {
							b.Fatalf("exec: %v\n%.2000s", err, out)
						}
						if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
							peak = max(peak, ru.Maxrss) // KiB on Linux
						}
					}
					b.ReportMetric(float64(peak)/1024, "maxrss-MiB")
				})
			}
		})
	}
}

// largeStore builds a store of n inventory rows (the demo's six first, then generated ones with
// unique names) and n/10 transactions whose balances chain, through db init --empty and
// db import, in a directory that lasts for the benchmark.
func largeStore(b *testing.B, bin string, n int) string {
	b.Helper()
	tmp := b.TempDir()
	db := filepath.Join(tmp, "store")
	run := func(args ...string) {
		if out, err := exec.Command(bin, append([]string{"--db", db}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("starplan %v: %v\n%.2000s", args, err, out)
		}
	}
	run("db", "init", "--empty")
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	inv := filepath.Join(tmp, "inventory.json")
	writeJSONRows(b, inv, n, func(i int) map[string]any {
		demo := []string{"Aviator", "Wayfarer", "Mystique", "Sport", "Classic", "Moon"}
		name := fmt.Sprintf("Style %d", i)
		if i <= len(demo) {
			name = demo[i-1]
		}
		return map[string]any{
			"item_id": fmt.Sprintf("SG%03d", i), "name": name,
			"description":       fmt.Sprintf("Frames number %d, polarised lenses; light, sturdy and made for long summer days.", i),
			"quantity_in_stock": 5 + rng.IntN(46), "price": float64(2000+rng.IntN(28001)) / 100,
		}
	})
	run("db", "import", "inventory", inv)
	txs := filepath.Join(tmp, "transactions.json")
	balance := 0.0
	writeJSONRows(b, txs, max(n/10, 1), func(i int) map[string]any {
		amount := 500.0
		if i > 1 {
			amount = float64(1000+rng.IntN(20000)) / 100
		}
		balance += amount
		return map[string]any{
			"transaction_id": fmt.Sprintf("TXN%03d", i), "customer_name": fmt.Sprintf("Customer %d", i%977),
			"transaction_summary": "Purchase", "transaction_amount": amount, "balance_after_transaction": balance,
			"timestamp": "2025-01-01T09:00:00",
		}
	})
	run("db", "import", "transactions", txs)
	return db
}

// writeJSONRows writes a JSON array of n rows made by row(1..n).
func writeJSONRows(b *testing.B, path string, n int, row func(i int) map[string]any) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	w.WriteString("[")
	for i := 1; i <= n; i++ {
		if i > 1 {
			w.WriteString(",")
		}
		if err := enc.Encode(row(i)); err != nil {
			b.Fatal(err)
		}
	}
	w.WriteString("]")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
