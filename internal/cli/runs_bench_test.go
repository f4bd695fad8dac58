//go:build unix

package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/bolt"
)

// BenchmarkColdRunsLimit1 is issue 26's target through the CLI: a cold `starplan runs --limit 1`
// (a new process that opens the store and lists the newest run) on an audit log of 20,000 runs
// within 2x of its time on a log of one. The runs are dry runs of the examples (a question, a
// purchase left pending, a plan that fails), made in process when the benchmark runs. It reports
// the child's peak RSS as maxrss-MiB:
//
//	go test ./internal/cli -run '^$' -bench ColdRunsLimit1 -benchtime 20x
func BenchmarkColdRunsLimit1(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "starplan")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/starplan/starplan/cmd/starplan").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, n := range []int{1, 20_000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			// Made by a child: a child's peak RSS counts the pages of the process it was forked
			// from, so this one must stay small.
			db := filepath.Join(b.TempDir(), "store")
			helper := exec.Command(os.Args[0], "-test.run=^TestHelperStoreWithRuns$", "-test.count=1")
			helper.Env = append(os.Environ(), "STARPLAN_BENCH_STORE="+db, fmt.Sprint("STARPLAN_BENCH_RUNS=", n))
			if out, err := helper.CombinedOutput(); err != nil {
				b.Fatalf("making the store: %v\n%.2000s", err, out)
			}
			for _, args := range [][]string{{"runs", "--limit", "1", "--json"}, {"runs", "--state", "pending", "--limit", "20", "--json"}} {
				b.Run(args[1]+"="+args[2], func(b *testing.B) {
					var peak int64
					for b.Loop() {
						cmd := exec.Command(bin, append([]string{"--db", db}, args...)...)
						if out, err := cmd.CombinedOutput(); err != nil {
							b.Fatalf("runs: %v\n%.2000s", err, out)
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

// TestHelperStoreWithRuns is BenchmarkColdRunsLimit1's child: it makes a store whose audit log
// holds $STARPLAN_BENCH_RUNS dry runs of the examples, a second apart, in $STARPLAN_BENCH_STORE.
func TestHelperStoreWithRuns(t *testing.T) {
	t.Parallel()
	db := os.Getenv("STARPLAN_BENCH_STORE")
	if db == "" {
		t.Skip("helper process only")
	}
	n, err := strconv.Atoi(os.Getenv("STARPLAN_BENCH_RUNS"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(db, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e, err := engine.New(st, engine.Options{Now: func() time.Time { at = at.Add(time.Second); return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var plans []string
	for _, name := range []string{"01_round_under_100.star", "02_purchase_wayfarer.star", "03_two_item_order.star"} {
		src, err := os.ReadFile(example(name))
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, string(src))
	}
	plans = append(plans, "answer_text = undefined_name")
	for i := range n {
		if _, err := e.Run(context.Background(), engine.Request{Reply: plans[i%len(plans)], UserRequest: fmt.Sprintf("request %d", i), Origin: "bench"}); err != nil {
			t.Fatal(err)
		}
	}
}
