package bolt

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// killState is the system document every apply of the kill test writes in the same transaction
// as its rows: how many applies committed, and the newest transaction they left.
type killState struct {
	Applies int    `json:"applies"`
	Newest  string `json:"newest"`
}

// runApplyLoop is the child of TestKillDuringApply: it applies multi-table changes until it is
// killed. Each apply sells 1-5 units (stock down, one sale transaction each, in both tables),
// or takes back the newest sale (its transaction deleted, the stock restored), or returns one
// unit (stock up, a negative transaction). Every apply keeps two invariants that only hold for
// whole applies: stock + sales - returns is constant, and each transaction's balance is the
// previous one's plus its amount.
func runApplyLoop(dir string) {
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	out.WriteString("ready\n")
	out.Flush()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	var st killState
	if _, err := s.GetSys("kill", "state", &st); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	for {
		v := s.Stage()
		inv, tx := mustTable(v, "inventory"), mustTable(v, "transactions")
		last := mustFind(tx, table.Query{Reverse: true, Limit: 1})[0]
		balance := last["balance_after_transaction"].(float64)
		switch r := rng.IntN(10); {
		case r < 6: // sell
			for range 1 + rng.IntN(5) {
				items := mustFind(inv, table.Query{Where: map[string]any{"quantity_in_stock": map[string]any{"$gt": 0}}})
				if len(items) == 0 {
					break
				}
				it := items[rng.IntN(len(items))]
				must1(inv.Update(table.Row{"quantity_in_stock": it["quantity_in_stock"].(int64) - 1}, table.Query{Where: map[string]any{"item_id": it["item_id"]}}))
				balance += it["price"].(float64)
				must1(tx.Insert(table.Row{"customer_name": "kill", "transaction_summary": "sale of " + it["item_id"].(string),
					"transaction_amount": it["price"], "balance_after_transaction": balance, "timestamp": "2025-01-02T10:00:00"}))
			}
		case r < 8: // take back the newest sale
			if last["transaction_amount"].(float64) <= 0 || last["customer_name"] != "kill" {
				continue
			}
			id := last["transaction_summary"].(string)[len("sale of "):]
			it, _, err := inv.Get(id)
			if err != nil || it == nil {
				panic(fmt.Sprint("sold item ", id, " missing: ", err))
			}
			must1(inv.Update(table.Row{"quantity_in_stock": it["quantity_in_stock"].(int64) + 1}, table.Query{Where: map[string]any{"item_id": id}}))
			must1(tx.Remove(table.Query{Where: map[string]any{"transaction_id": last["transaction_id"]}}))
		default: // a return
			items := mustFind(inv, table.Query{})
			it := items[rng.IntN(len(items))]
			must1(inv.Update(table.Row{"quantity_in_stock": it["quantity_in_stock"].(int64) + 1}, table.Query{Where: map[string]any{"item_id": it["item_id"]}}))
			price := it["price"].(float64)
			must1(tx.Insert(table.Row{"customer_name": "kill", "transaction_summary": "return of " + it["item_id"].(string),
				"transaction_amount": -price, "balance_after_transaction": balance - price, "timestamp": "2025-01-02T10:00:00"}))
		}
		newest := mustFind(tx, table.Query{Reverse: true, Limit: 1})[0]["transaction_id"].(string)
		next := killState{Applies: st.Applies + 1, Newest: newest}
		if err := v.Apply(bg, store.SysDoc{Collection: "kill", ID: "state", Value: next}); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		st = next
		out.WriteString(".")
		out.Flush()
	}
}

func mustTable(v table.View, name string) table.Table {
	t, ok := v.Table(name)
	if !ok {
		panic("no table " + name)
	}
	return t
}

func mustFind(t table.Table, q table.Query) []table.Row {
	rows, err := t.Find(q)
	if err != nil {
		panic(err)
	}
	return rows
}

func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestKillDuringApply SIGKILLs a process that applies multi-table changes in a loop, at random
// points, and after every kill reopens the store and checks invariants that a partial apply
// would break. bbolt's copy-on-write pages and its meta-page switch, with every clover call of an
// apply in one transaction, are what this proves.
func TestKillDuringApply(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	kills := testtier.Size(20, 200)
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	want := invariant(t, s)
	require.NoError(t, s.Close())

	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	applies, midLoop := 0, 0
	for i := range kills {
		cmd := helperCmd(t, "apply", dir)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		r := bufio.NewReader(stdout)
		line, err := r.ReadString('\n')
		require.NoError(t, err, "kill %d: child output %q", i, line)
		require.Equal(t, "ready\n", line)
		// Wait for the child's first committed apply, however slow the machine: every kill then
		// lands inside its loop, during an apply or between two, at a random point.
		first, err := r.ReadByte()
		require.NoError(t, err, "kill %d: the child ended before its first apply", i)
		require.Equal(t, byte('.'), first, "kill %d: the child's first apply failed", i)
		time.Sleep(time.Duration(rng.IntN(12000)) * time.Microsecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		rest := make([]byte, 0, 64)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			rest = append(rest, buf[:n]...)
			if err != nil {
				break
			}
		}
		werr := cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "kill %d: child ended by itself (%v): %s", i, werr, rest)
		midLoop += len(rest) // applies committed after the first, before the kill

		s, err := Open(dir, Options{})
		require.NoError(t, err, "kill %d: the store must open cleanly", i)
		got := invariant(t, s)
		require.Equal(t, want, got, "kill %d: stock + sales - returns changed: a partial apply", i)
		var st killState
		_, err = s.GetSys("kill", "state", &st)
		require.NoError(t, err)
		if st.Applies > 0 {
			newest := find(t, tbl(t, s.Stage(), "transactions"), table.Query{Reverse: true, Limit: 1})[0]
			require.Equal(t, st.Newest, newest["transaction_id"], "kill %d: the system document and the rows disagree", i)
		}
		applies = st.Applies
		require.NoError(t, s.Close())
	}
	t.Logf("%d kills, each after its child's first apply; %d more applies before the kills, %d committed in all", kills, midLoop, applies)
	assert.GreaterOrEqual(t, applies, kills, "every child committed an apply before it was killed")
}

// invariant checks the balance chain and returns stock + sales - returns.
func invariant(t *testing.T, s *Store) int64 {
	t.Helper()
	v := s.Stage()
	var total int64
	for _, it := range find(t, tbl(t, v, "inventory"), table.Query{}) {
		total += it["quantity_in_stock"].(int64)
	}
	txns := find(t, tbl(t, v, "transactions"), table.Query{})
	for i, tx := range txns {
		amount := tx["transaction_amount"].(float64)
		if i > 0 {
			prev := txns[i-1]["balance_after_transaction"].(float64)
			require.InDelta(t, prev+amount, tx["balance_after_transaction"].(float64), 1e-6, "balance chain broken at %v", tx["transaction_id"])
			if amount > 0 {
				total++
			} else {
				total--
			}
		}
	}
	return total
}
