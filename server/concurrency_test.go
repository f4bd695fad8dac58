package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/table"
)

// TestConcurrentClientsApplyEachRunAtMostOnce has 16 clients dry-run purchases against one server
// and apply each run twice at once. Every pair of purchases competes for the ledger's next row,
// so most applies conflict. Whatever the interleaving: both applies of a run get the same answer,
// every applied run is in the data exactly once, every other one is reported as a conflict, the
// ledger's balance chain holds, and the event stream has one applied or failed event per run.
func TestConcurrentClientsApplyEachRunAtMostOnce(t *testing.T) {
	t.Parallel()
	const clients, rounds = 16, 2
	f := newFixture(t, Options{})
	ctx := testContext(t)
	events := f.subscribe(ctx, nil)
	events.untilSubscribed()
	stock := f.committed("inventory", "SG001")["quantity_in_stock"].(int64)
	ledger := f.count("transactions")

	type outcome struct {
		run      RunDocument
		statuses [2]int
		bodies   [2]string
	}
	results := make([][]outcome, clients)
	errs := make(chan error, clients*rounds*3)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				var o outcome
				resp, err := f.try(testToken, "POST", "/v1/runs", RunRequest{Program: purchase("Aviator", 1, fmt.Sprintf("client %d", c)), Request: "one Aviator"})
				if err == nil && resp.status != http.StatusOK {
					err = fmt.Errorf("dry run: status %d: %s", resp.status, resp.body)
				}
				if err == nil {
					err = json.Unmarshal(resp.body, &o.run)
				}
				if err != nil {
					errs <- err
					return
				}
				if o.run.State == StatePending {
					var both sync.WaitGroup
					for i := range 2 {
						both.Add(1)
						go func() {
							defer both.Done()
							resp, err := f.try(testToken, "POST", "/v1/runs/"+o.run.RunID+"/apply", ApplyRequest{Digest: o.run.Digest})
							if err != nil {
								errs <- err
							}
							o.statuses[i], o.bodies[i] = resp.status, string(resp.body)
						}()
					}
					both.Wait()
				}
				results[c] = append(results[c], o)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.False(t, t.Failed())

	applied, conflicts := map[string]bool{}, map[string]bool{}
	midRun := 0
	for _, rs := range results {
		for _, o := range rs {
			switch o.run.State {
			case StatePending:
			case StateDone: // the stock ran out: the plan answered without changes
				assert.Equal(t, "insufficient_stock", o.run.Status)
				continue
			case StateFailed:
				// A dry run's staged view reads committed rows as of each call, not as of the
				// run's start, so an apply that lands mid-run can make a correct plan fail
				// (ledger-unmatched, balance-chain, a duplicate key). Such a run is refused,
				// never applied; the apply-time checks keep the data right either way.
				assert.Contains(t, []engine.Outcome{engine.OutcomeContractViolation, engine.OutcomeRuntimeError}, o.run.Outcome, "%v", o.run.Diagnostics)
				midRun++
				continue
			default:
				t.Errorf("dry run %s: state %s: %v", o.run.RunID, o.run.State, o.run.Diagnostics)
				continue
			}
			assert.Equal(t, o.statuses[0], o.statuses[1], "both applies of %s get the same answer", o.run.RunID)
			assert.JSONEq(t, o.bodies[0], o.bodies[1])
			var doc RunDocument
			response{body: []byte(o.bodies[0])}.decode(t, &doc)
			switch o.statuses[0] {
			case http.StatusOK:
				assert.Equal(t, StateApplied, doc.State)
				applied[o.run.RunID] = true
			case http.StatusConflict:
				assert.Equal(t, StateConflict, doc.State)
				assert.Equal(t, engine.OutcomeConflict, doc.Outcome)
				require.NotEmpty(t, doc.Diagnostics)
				conflicts[o.run.RunID] = true
			default:
				t.Errorf("apply of %s: status %d: %s", o.run.RunID, o.statuses[0], o.bodies[0])
			}
		}
	}
	require.NotEmpty(t, applied, "the first apply to reach the store cannot conflict")
	t.Logf("%d runs applied, %d conflicts, %d dry runs refused after data moved mid-run", len(applied), len(conflicts), midRun)

	// The data holds exactly the applied runs, once each.
	assert.Equal(t, stock-int64(len(applied)), f.committed("inventory", "SG001")["quantity_in_stock"])
	assert.Equal(t, ledger+len(applied), f.count("transactions"))
	tb, _ := f.st.Stage().Table("transactions")
	rows, err := tb.Find(table.Query{})
	require.NoError(t, err)
	sort.Slice(rows, func(i, j int) bool {
		return table.CompareKeys(rows[i]["transaction_id"], rows[j]["transaction_id"]) < 0
	})
	for i := 1; i < len(rows); i++ {
		prev := rows[i-1]["balance_after_transaction"].(float64)
		want := prev + rows[i]["transaction_amount"].(float64)
		assert.LessOrEqual(t, math.Abs(want-rows[i]["balance_after_transaction"].(float64)), 0.005, "balance chain at %v", rows[i]["transaction_id"])
	}

	// The audit log agrees.
	r := f.call("GET", fmt.Sprintf("/v1/runs?state=applied&limit=%d", MaxListLimit), nil)
	var list RunList
	r.decode(t, &list)
	assert.Len(t, list.Runs, len(applied))

	// One applied or failed event per run that was applied or conflicted; none twice. A last run
	// marks the end of the stream for this test.
	end := f.run(example(t, "01_round_under_100.star"), "end")
	seenApplied, seenFailed := map[string]int{}, map[string]int{}
	for {
		ev, ok := events.next()
		require.True(t, ok, "the stream ended early")
		if ev.Type == EventApplied {
			seenApplied[ev.RunID]++
		}
		if ev.Type == EventFailed {
			seenFailed[ev.RunID]++
		}
		if ev.Type == EventFinished && ev.RunID == end.RunID {
			break
		}
	}
	assert.Len(t, seenApplied, len(applied))
	for id, n := range seenApplied {
		assert.True(t, applied[id], id)
		assert.Equal(t, 1, n, "one applied event for %s", id)
	}
	assert.Len(t, seenFailed, len(conflicts))
	for id, n := range seenFailed {
		assert.True(t, conflicts[id], id)
		assert.Equal(t, 1, n, "one failed event for %s", id)
	}
}
