package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// A 5 MB reply leaves a record of a few KiB: an excerpt, the whole reply's length and hash.
func TestAuditKeepsABoundedReplyAndItsHash(t *testing.T) {
	e, _ := newEngine(t)
	reply := "Here is the plan.\n" + strings.Repeat("thinking é… ", 5<<20/14) +
		"\n<execute_python>\nSTATUS = \"success\"\nanswer_text = \"ok\"\n</execute_python>\n"
	require.Greater(t, len(reply), 5<<20)
	res, err := e.Run(context.Background(), Request{Reply: reply})
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())

	runs, err := e.Runs()
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Less(t, runs[0].Bytes, 2*MaxReplyExcerpt, "the record does not keep the whole reply")

	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(reply))
	assert.Equal(t, hex.EncodeToString(sum[:]), rec.ReplySHA256)
	assert.Equal(t, len(reply), rec.ReplyBytes)
	assert.LessOrEqual(t, len(rec.Reply), MaxReplyExcerpt)
	assert.True(t, strings.HasPrefix(rec.Reply, "Here is the plan.\nthinking é"))
	assert.True(t, utf8.ValidString(rec.Reply), "cut at a UTF-8 boundary")
	assert.Contains(t, rec.Reply, fmt.Sprintf("[cut: %d bytes in all]", len(reply)))
	assert.Contains(t, rec.Truncated, "reply")
	assert.Contains(t, rec.Result().Truncated, "reply", "the result read back from the log says so too")
	assert.Contains(t, rec.Program, `answer_text = "ok"`, "the program run is kept whole")

	// A small reply is kept whole, with its hash.
	small := "STATUS = \"success\"\nanswer_text = \"ok\"\n"
	res, err = e.Run(context.Background(), Request{Reply: small})
	require.NoError(t, err)
	rec, err = e.Record(res.RunID)
	require.NoError(t, err)
	assert.Equal(t, small, rec.Reply)
	assert.Empty(t, rec.Truncated)
	sum = sha256.Sum256([]byte(small))
	assert.Equal(t, hex.EncodeToString(sum[:]), rec.ReplySHA256)
}

// hostile is text that JSON escapes six bytes for each byte, so a bound counted in raw bytes
// would be crossed six times over.
func hostile(n int) string { return strings.Repeat("<\x00", n/2) }

// Whatever each field holds, a record's JSON without Changes and Writes stays within MaxRecord,
// names every field it cut, and leaves the run's result as it was.
func TestAuditRecordIsBoundedWhateverItHolds(t *testing.T) {
	// One hostile mebibyte, shared by every field (strings are immutable): each field holds it
	// whole, and the test allocates it once, not thousands of times (it took minutes under -race
	// on a loaded machine).
	big := 1 << 20
	h := hostile(big)
	var ds diag.List
	for i := 0; i < 3*MaxDiagnostics; i++ {
		ds = append(ds, diag.Diagnostic{Stage: diag.Stage(h), Code: h, Message: h, Hint: h})
	}
	var rws []pycompat.Rewrite
	for i := 0; i < 10*MaxRecordRewrites; i++ {
		rws = append(rws, pycompat.Rewrite{Line: i, Rule: h, Before: h, After: h})
	}
	res := &Result{
		RunID: "r_0123456789", Outcome: OutcomeRuntimeError, Status: h, AnswerText: h,
		Stdout: h, Diagnostics: ds, Rewrites: rws, Program: h, Truncated: []string{"program"},
	}
	req := Request{Reply: hostile(5 << 20), UserRequest: h, Origin: h,
		Model: &ModelCall{Model: h, ParentRunID: h}}
	rec := newRecord(res, req, fixedNow, nil)
	rec.ApplyError = h
	rec.bound()

	b, err := json.Marshal(rec)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), MaxRecord)
	for _, what := range []string{"reply", "request", "origin", "program", "answer_text", "status", "apply_error",
		"stdout", "model", "diagnostics", "diagnostic messages", "rewrites"} {
		assert.Contains(t, rec.Truncated, what)
	}
	assert.True(t, rec.StdoutTruncated)
	assert.Len(t, rec.Diagnostics, MaxDiagnostics)
	assert.Len(t, rec.Rewrites, MaxRecordRewrites)

	// bound is stable: a record read back and bounded again (as a conflict does) is unchanged.
	again := *rec
	again.Truncated = append([]string(nil), rec.Truncated...)
	again.bound()
	assert.Equal(t, rec, &again)

	// The run's own result is not cut by its record.
	assert.Len(t, res.Diagnostics, 3*MaxDiagnostics)
	assert.Equal(t, h, res.Diagnostics[0].Message)
	assert.Len(t, res.Rewrites, 10*MaxRecordRewrites)
	assert.Equal(t, []string{"program"}, res.Truncated)
	assert.Equal(t, h, req.Model.Model)
}

func TestClipJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		max  int
		cut  bool
	}{
		{"short", "hello", 100, false},
		{"exactly", strings.Repeat("a", 100), 100, false},
		{"plain", strings.Repeat("a", 101), 100, true},
		{"escapes", strings.Repeat("<", 50), 100, true},
		{"multibyte", strings.Repeat("é", 200), 100, true},
		{"invalid", strings.Repeat("\xff", 100), 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := clipJSON(tc.s, tc.max)
			assert.Equal(t, tc.cut, cut)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(b)-2, tc.max)
			assert.Equal(t, len(b)-2, jsonLen(got), "jsonLen counts as encoding/json writes")
			if cut {
				assert.True(t, strings.HasSuffix(got, fmt.Sprintf("… [cut: %d bytes in all]", len(tc.s))))
			}
			if utf8.ValidString(tc.s) {
				assert.True(t, utf8.ValidString(got))
			}
		})
	}
}

// bigChanges is a change set of n inserted rows of about 1 KiB each.
func bigChanges(n int) table.ChangeSet {
	tc := &table.TableChanges{Key: "item_id"}
	for i := 0; i < n; i++ {
		tc.Inserted = append(tc.Inserted, table.Row{"item_id": fmt.Sprintf("X%05d", i), "description": strings.Repeat("d", 1000)})
	}
	return table.ChangeSet{"inventory": tc}
}

// The changes of a run that can never be applied are only shown, and are cut; those of a run
// that may be applied are what its digest covers, and are kept whole.
func TestAuditCutsOnlyTheChangesOfRunsThatCannotApply(t *testing.T) {
	cs := bigChanges(1000)
	res := &Result{RunID: "r_0000000001", Outcome: OutcomeContractViolation, Changes: cs}
	rec := newRecord(res, Request{}, fixedNow, nil)
	b, err := json.Marshal(rec.Changes)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), MaxRecordChanges)
	kept := rec.Changes["inventory"].Inserted
	require.NotEmpty(t, kept)
	assert.Less(t, len(kept), 1000)
	assert.Equal(t, cs["inventory"].Inserted[:len(kept)], kept, "whole rows, in key order")
	assert.Equal(t, 1000, rec.ChangedRows)
	assert.Contains(t, rec.Truncated, "changes")
	assert.Len(t, res.Changes["inventory"].Inserted, 1000, "the result keeps them all")

	res = &Result{RunID: "r_0000000002", Outcome: OutcomeOK, Changes: cs, Pending: true}
	rec = newRecord(res, Request{}, fixedNow, &store.Pending{})
	assert.Len(t, rec.Changes["inventory"].Inserted, 1000)
	assert.NotContains(t, rec.Truncated, "changes")
}

// An applied run's record keeps what it changed but no longer the writes it needed.
func TestApplyDropsTheWritesFromTheRecord(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star")})
	require.NoError(t, err)
	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	require.NotNil(t, rec.Writes, "a pending run keeps its writes")

	_, err = e.Apply(ctx, res.RunID)
	require.NoError(t, err)
	rec, err = e.Record(res.RunID)
	require.NoError(t, err)
	assert.True(t, rec.Applied)
	assert.Nil(t, rec.Writes)
	assert.Equal(t, 2, rec.Changes.Rows())
}

// A conflict lists one diagnostic per moved row; its record and result keep MaxDiagnostics.
func TestAConflictOfManyRowsIsBounded(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	var items strings.Builder
	items.WriteString("[")
	for i := 0; i < 100; i++ {
		if i > 0 {
			items.WriteString(",")
		}
		fmt.Fprintf(&items, `{"item_id": "X%03d", "name": "Bulk %03d", "description": "d", "quantity_in_stock": 10, "price": 1.5}`, i, i)
	}
	items.WriteString("]")
	_, err := e.Store().(*bolt.Store).Import(ctx, "inventory", strings.NewReader(items.String()), bolt.JSON, bolt.Upsert)
	require.NoError(t, err)
	plan := `
balance = get_current_balance(transactions_tbl)
for item in inventory_tbl.search({}):
    if not item["item_id"].startswith("X"):
        continue
    inventory_tbl.update({"quantity_in_stock": item["quantity_in_stock"] - 1}, {"item_id": item["item_id"]})
    balance += item["price"]
    transactions_tbl.insert({
        "transaction_id": next_transaction_id(transactions_tbl),
        "customer_name": "Bulk",
        "transaction_summary": "Purchase of 1 x " + item["name"] + " (" + item["item_id"] + ")",
        "transaction_amount": item["price"],
        "balance_after_transaction": balance,
        "timestamp": now(),
    })
STATUS = "success"
answer_text = "Done."
`
	first, err := e.Run(ctx, Request{Reply: plan})
	require.NoError(t, err)
	require.True(t, first.Pending, first.Diagnostics.String())
	second, err := e.Run(ctx, Request{Reply: plan, Apply: true})
	require.NoError(t, err)
	require.True(t, second.Applied, second.Diagnostics.String())

	res, err := e.Apply(ctx, first.RunID)
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, res.Outcome)
	require.Len(t, res.Diagnostics, MaxDiagnostics)
	assert.Equal(t, CodeMoreDiagnostics, res.Diagnostics[MaxDiagnostics-1].Code)
	assert.Contains(t, res.Truncated, "diagnostics")

	rec, err := e.Record(first.RunID)
	require.NoError(t, err)
	assert.Len(t, rec.Diagnostics, MaxDiagnostics)
	assert.Contains(t, rec.Truncated, "diagnostics")
	assert.LessOrEqual(t, len(rec.ApplyError), MaxMessage+64)
	assert.Nil(t, rec.Writes, "a conflict can never be applied")
}
