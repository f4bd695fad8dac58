package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/isolate"
	"github.com/starplan/starplan/store/bolt"
)

// The new-plan benchmarks: a model writes a new plan every time, so these give every iteration
// a distinct text (a varying literal, not a comment), which no cache of checked programs
// answers. Their floor is CPython's bare compile() + exec() of the same text over the same rows
// (testdata/bench/newplan_floor.py), measured in the same run, paired iteration by iteration:
//
//	go test ./engine -run '^$' -bench 'BenchmarkNewPlan$' -benchtime 2000x -count 6 | tee new.txt
//	benchstat new.txt
//
// go-µs is starplan's dry run of the plan (evaluate: extract, rewrite, check, compile, run,
// contract, diff; no audit record), cpython-µs the floor's, x-floor their ratio (of means);
// cpu-µs/op (in process) is this process's processor time per iteration; calls/op (isolated)
// the plan's table calls per run, each a round trip over the worker's pipe.
// Targets (issue 32): in process ≤ 1.0× the floor, isolated ≤ 2.0×.

// newPlanRows is the inventory's size in the new-plan benchmarks: the demo's six styles and
// generated ones.
const newPlanRows = 100

// newPlanEngine returns an engine over a demo store grown to newPlanRows inventory rows, with
// runner (nil: in process).
func newPlanEngine(b *testing.B, runner func() *isolate.Pool) *Engine {
	b.Helper()
	st := openStore(b, b.TempDir())
	var rows []string
	for i := 7; i <= newPlanRows; i++ {
		rows = append(rows, fmt.Sprintf(`{"item_id": "SG%03d", "name": "Style %d", "description": "Generated frames for the benchmark.", "quantity_in_stock": %d, "price": %d.0}`, i, i, i%40, 20+i%180))
	}
	_, err := st.Import(context.Background(), "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), bolt.JSON, bolt.Upsert)
	require.NoError(b, err)
	opts := Options{Now: func() time.Time { return fixedNow }}
	if runner != nil {
		opts.Runner = runner()
	}
	e, err := New(st, opts)
	require.NoError(b, err)
	b.Cleanup(func() {
		require.NoError(b, e.Close())
		require.NoError(b, st.Close())
	})
	return e
}

// newPlanText is the two-item order with literal n in a string the plan writes: a new program.
func newPlanText(b *testing.B, n int) string {
	if twoItemText == "" {
		twoItemText = example(b, "03_two_item_order.star") // read once: the loop measures the process's CPU
	}
	return strings.Replace(twoItemText, `"Walk-in customer"`, `"Walk-in customer `+strconv.Itoa(n)+`"`, 1)
}

var twoItemText string

// cpythonFloor is a python3 process running testdata/bench/newplan_floor.py over st's rows.
type cpythonFloor struct {
	cmd *exec.Cmd
	in  *bufio.Writer
	out *bufio.Scanner
}

func startFloor(b *testing.B, st *bolt.Store) *cpythonFloor {
	b.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("python3 is not installed: the CPython floor cannot be measured")
	}
	cmd := exec.Command(python, "../testdata/bench/newplan_floor.py")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	f := &cpythonFloor{cmd: cmd, in: bufio.NewWriter(stdin), out: bufio.NewScanner(stdout)}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	var inv, txn bytes.Buffer
	require.NoError(b, st.Export(&inv, "inventory", bolt.JSON))
	require.NoError(b, st.Export(&txn, "transactions", bolt.JSON))
	var head bytes.Buffer // one line
	require.NoError(b, json.Compact(&head, []byte(`{"inventory": `+inv.String()+`, "transactions": `+txn.String()+`}`)))
	head.WriteByte('\n')
	f.in.Write(head.Bytes())
	return f
}

// run has CPython compile and execute text once and returns the time it took by its own clock.
func (f *cpythonFloor) run(b *testing.B, text string) time.Duration {
	line, _ := json.Marshal(text)
	f.in.Write(line)
	f.in.WriteByte('\n')
	if err := f.in.Flush(); err != nil {
		b.Fatal(err)
	}
	if !f.out.Scan() {
		b.Fatalf("the CPython floor stopped: %v", f.out.Err())
	}
	ns, err := strconv.ParseInt(f.out.Text(), 10, 64)
	if err != nil {
		b.Fatalf("the CPython floor: %s", f.out.Text())
	}
	return time.Duration(ns)
}

// BenchmarkNewPlan: a new plan of the two-item order at 100 inventory rows, dry run, in process
// and isolated (a warm pool of one worker), beside CPython's floor (see above). Each iteration
// runs a new text through starplan and another through CPython, alternating which goes first.
func BenchmarkNewPlan(b *testing.B) {
	for _, mode := range []string{"in_process", "isolated"} {
		b.Run(mode, func(b *testing.B) {
			var pool func() *isolate.Pool
			var started *isolate.Pool
			if mode == "isolated" {
				pool = func() *isolate.Pool {
					p, err := isolate.NewSelfPool(isolate.Options{Warm: 1, MaxWorkers: 1})
					require.NoError(b, err)
					b.Cleanup(func() { p.Close() })
					started = p
					return p
				}
			}
			e := newPlanEngine(b, pool)
			floor := startFloor(b, e.Store().(*bolt.Store))
			ctx := context.Background()
			req := Request{UserRequest: "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses."}
			// The first run of each side warms what every plan shares (and checks the plan works).
			req.Reply = newPlanText(b, -1)
			res, _, err := e.evaluate(ctx, req, fixedNow)
			require.NoError(b, err)
			require.True(b, res.Pending, res.Diagnostics.String())
			floor.run(b, req.Reply)
			var goTime, pyTime time.Duration
			n := 0
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			var calls0 uint64
			if started != nil {
				calls0 = started.Stats().Calls
			}
			for b.Loop() {
				req.Reply = newPlanText(b, n)
				for j := range 2 {
					if (n+j)%2 == 0 {
						start := time.Now()
						if _, _, err := e.evaluate(ctx, req, fixedNow); err != nil {
							b.Fatal(err)
						}
						goTime += time.Since(start)
					} else {
						pyTime += floor.run(b, req.Reply)
					}
				}
				n++
			}
			if cpu1, ok := processCPU(); ok && cpuOK && mode == "in_process" {
				// This process's CPU (the runs, their collections, driving the floor), steadier
				// than wall-clock time on a shared machine; isolated runs' workers are not in it.
				b.ReportMetric(float64(cpu1-cpu0)/1e3/float64(n), "cpu-µs/op")
			}
			if started != nil {
				// The plan's table calls, each a round trip to the worker: most of what
				// isolation adds to the run.
				b.ReportMetric(float64(started.Stats().Calls-calls0)/float64(n), "calls/op")
			}
			g, p := float64(goTime)/float64(n), float64(pyTime)/float64(n)
			b.ReportMetric(g/1e3, "go-µs")
			b.ReportMetric(p/1e3, "cpython-µs")
			b.ReportMetric(g/p, "x-floor")
		})
	}
}
