package engine

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store/bolt"
)

// killDirEnv makes the test binary the child of TestKillDuringRunsAndApplies.
const killDirEnv = "STARPLAN_AUDIT_KILL_DIR"

// killPlan is a purchase of one of the kill test's well-stocked styles, with a literal of its own.
func killPlan(t testing.TB, i int) string {
	plan := strings.ReplaceAll(example(t, "02_purchase_wayfarer.star"), "Wayfarer", fmt.Sprintf("Kill %d", i%5))
	return strings.Replace(plan, `"customer_name": "Alice"`, fmt.Sprintf(`"customer_name": "Alice %d"`, i), 1)
}

// runKillLoop is the child: dry runs, and every third run one applied at once (exec's path), each
// printed once it returned ("D id", "A id"), until it is killed.
func runKillLoop(t *testing.T, dir string) {
	st, err := bolt.Open(dir, bolt.Options{})
	require.NoError(t, err)
	e, err := New(st, Options{})
	require.NoError(t, err)
	out := bufio.NewWriter(os.Stdout)
	ctx := context.Background()
	for i := 0; ; i++ {
		apply := i%3 == 2
		res, err := e.Run(ctx, Request{Reply: killPlan(t, i), UserRequest: "buy", Apply: apply})
		require.NoError(t, err)
		switch {
		case apply && res.Applied:
			fmt.Fprintf(out, "A %s\n", res.RunID)
		case apply:
			t.Fatalf("run %s was not applied: %s %v", res.RunID, res.Outcome, res.Diagnostics)
		default:
			fmt.Fprintf(out, "D %s\n", res.RunID)
		}
		out.Flush()
	}
}

// A process killed (SIGKILL) amid dry runs and applies loses at most the dry runs' records of
// its last moments (the audit log's queue, auditLinger): the store opens, the hash chain
// verifies, and every apply that returned is in the log, applied, with its data.
func TestKillDuringRunsAndApplies(t *testing.T) {
	if dir := os.Getenv(killDirEnv); dir != "" {
		runKillLoop(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("builds no binary, but runs the test binary again: not with -short")
	}
	dir := t.TempDir()
	st := openStore(t, dir)
	var rows []string
	for i := range 5 {
		rows = append(rows, fmt.Sprintf(`{"item_id": "SK%03d", "name": "Kill %d", "description": "d", "quantity_in_stock": 1000000000, "price": 10.0}`, i, i))
	}
	_, err := st.Import(context.Background(), "inventory", strings.NewReader("["+strings.Join(rows, ",")+"]"), bolt.JSON, bolt.Upsert)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringRunsAndApplies$", "-test.count=1")
		cmd.Env = append(os.Environ(), killDirEnv+"="+dir, "GORACE=atexit_sleep_ms=0")
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		var applied, dry []string
		sc := bufio.NewScanner(stdout)
		for len(applied) < 4+round*3 && sc.Scan() { // killed at a different point each round
			kind, id, _ := strings.Cut(sc.Text(), " ")
			if kind == "A" {
				applied = append(applied, id)
			} else if kind == "D" {
				dry = append(dry, id)
			}
		}
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		require.NotEmpty(t, applied, "the child printed no apply: %v", sc.Err())

		st, err := bolt.Open(dir, bolt.Options{})
		require.NoError(t, err, "the store opens after the kill")
		e, err := New(st, Options{})
		require.NoError(t, err)
		rep, err := e.VerifyChain()
		require.NoError(t, err)
		assert.True(t, rep.OK(), "the chain verifies after the kill: %+v", rep.Problems)
		for _, id := range applied {
			rec, err := e.Record(id)
			if assert.NoError(t, err, "apply %s returned before the kill", id) {
				assert.True(t, rec.Applied, "run %s", id)
				ins := rec.Changes["transactions"].Inserted
				if assert.Len(t, ins, 1, "run %s", id) {
					got := row(t, st, "transactions", ins[0]["transaction_id"])
					assert.Equal(t, ins[0]["customer_name"], got["customer_name"], "run %s's sale is in the store", id)
				}
			}
		}
		kept := 0
		for _, id := range dry {
			if _, err := e.Record(id); err == nil {
				kept++
			}
		}
		t.Logf("round %d: %d applies, all kept; %d of %d dry runs' records kept", round, len(applied), kept, len(dry))
		require.NoError(t, e.Close())
		require.NoError(t, st.Close())
	}
}
