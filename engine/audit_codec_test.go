package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// fullRecord is a record with every field set, rows of every kind a row holds (nested ones,
// strings JSON escapes, floats at both ends of encoding/json's formats), and writes of each kind:
// an update, an insert and a delete as in the change set, and one that differs from it.
func fullRecord() *RunRecord {
	at := fixedNow.Add(1500 * time.Millisecond)
	hostile := "<a href=\"x\">&amp;</a>\\ \x00\x01\x1f\b\f\n\r\t \u2028\u2029 é 日本 \xff\xfe end"
	before := table.Row{"item_id": "SG001", "name": hostile, "price": 80.0, "quantity_in_stock": int64(23),
		"tags": []any{"a", int64(1), 2.5, nil, true, map[string]any{"z": 1e-7, "a": 1e21, "m": math.Copysign(0, -1)}},
		"meta": map[string]any{"k": []any{}, "e": map[string]any{}, "n": nil}}
	after := table.Row{"item_id": "SG001", "name": hostile, "price": 80.5, "quantity_in_stock": int64(22),
		"tags": []any{"a"}, "meta": map[string]any{"k": []any{1.0, 123456789012.0}, "big": 1.5e300, "small": -2.5e-10}}
	ins := table.Row{"item_id": "SG100", "name": "New", "price": 1.0, "quantity_in_stock": int64(0)}
	del := table.Row{"item_id": "SG007", "name": "Gone", "price": 0.000001, "quantity_in_stock": int64(-5)}
	other := table.Row{"item_id": "SG008", "name": "Other", "price": 3.0, "quantity_in_stock": int64(1)}
	return &RunRecord{
		ID: "r_00000000aa", Time: fixedNow, Origin: "serve:http", Request: "buy " + hostile, Subject: "alice", TraceID: "0af7651916cd43dd8448eb211c80319c",
		Reply: "x = 1\n", ReplyBytes: 6, ReplySHA256: "abc", Program: "x = 2\n",
		Rewrites:    []pycompat.Rewrite{{Line: 1, Rule: "f-string", Before: "f\"{a}\"", After: "\"{}\".format(a)"}},
		Diagnostics: diag.List{{Stage: "run", Code: "c", Line: 1, Col: 2, Message: hostile, Hint: "h"}},
		Stdout:      "out <>", StdoutTruncated: true, AnswerText: "done & dusted", Status: "success",
		Changes: table.ChangeSet{
			"inventory": {Key: "item_id", Inserted: []table.Row{ins},
				Updated: []table.Update{{Key: "SG001", Before: before, After: after, Fields: []string{"meta", "price"}, Paths: []string{"meta.k"}}},
				Deleted: []table.Row{del}, Via: map[string]string{"SG100": "restock", "SG001": "sell"}},
			"transactions": {Key: "transaction_id", Inserted: []table.Row{}, Updated: nil, Deleted: []table.Row{}},
		},
		ChangedRows: 3, Outcome: OutcomeOK, Limit: sandbox.LimitSteps, Steps: 1<<63 + 5, DurationMS: 0.25,
		Pending: true, Applied: true, AppliedAt: &at, ApplyError: "moved", ConflictAt: &at, ApplyOrigin: "apply",
		Model:  &ModelCall{Model: "m", Attempt: 2, PromptTokens: 3, CompletionTokens: 4, LatencyMS: 5.5, ParentRunID: "r_1", Replan: 1},
		Limits: &sandbox.Limits{MaxSteps: 10, Timeout: time.Second},
		Writes: &store.Pending{Domain: "inventory",
			Writes: []store.PendingWrite{
				{Table: "inventory", Key: "SG001", Base: 1, Before: before, Row: after},
				{Table: "inventory", Key: "SG100", Base: 0, Row: ins},
				{Table: "inventory", Key: "SG007", Base: 4, Before: del},
				{Table: "inventory", Key: "SG008", Base: 2, Before: other, Row: other},                // not in the change set
				{Table: "inventory", Key: "SG001", Base: 1, Before: before, Row: table.Row{"x": 1.0}}, // differs from it
			},
			Reads: []store.PendingRead{{Table: "inventory", Key: "SG001", Version: 1}, {Table: "inventory", All: true, Version: 3, Pred: "rows", Where: json.RawMessage("{\"a\": \"<b>& \u2028\u2029\\u2028 x\",\n\t \"c\": [1, 2.50, {\"d\" : null}]}"), From: "SG001", To: "SG009", N: 2, Digest: "d"}},
		},
		Truncated: []string{"reply"},
		Who:       Who{ProposedBy: "bob", ApprovedBy: []string{"carol"}, RejectedBy: "dave", AutoApprovedByRule: "small", ApprovalsNeeded: 2},
		Scans:     []store.Scan{{Table: "inventory", Fields: []string{"name"}, Calls: 1, Rows: 7}},
	}
}

// The record encoder writes the bytes encoding/json writes for the stored form, whatever the
// record holds: every field set (a field added to RunRecord without it fails here), rows of
// every kind, and with the fields at their zero values.
func TestRecordEncoderIsEncodingJSON(t *testing.T) {
	full := fullRecord()
	v := reflect.ValueOf(*full)
	for i := 0; i < v.NumField(); i++ {
		if f := v.Type().Field(i); f.IsExported() {
			require.False(t, v.Field(i).IsZero(), "fullRecord leaves %s zero: set it, and write it in storedRecord.encode", f.Name)
		}
	}
	who := reflect.ValueOf(full.Who)
	for i := 0; i < who.NumField(); i++ {
		require.False(t, who.Field(i).IsZero(), "fullRecord leaves Who.%s zero", who.Type().Field(i).Name)
	}
	bare := fullRecord()
	bare.Program = bare.Reply
	var batch recordEncoder // one encoder for several records, as a batch's (auditLog.encode)
	for range 2 {
		for name, r := range map[string]*RunRecord{"full": full, "zero": {}, "bare program": bare, "befores in the program": rewrittenRecord(), "afters as fields": fieldsRecord(),
			"a nil table": {Changes: table.ChangeSet{"nothing": nil}},
			"empty lists": {Rewrites: []pycompat.Rewrite{}, Diagnostics: diag.List{}, Changes: table.ChangeSet{}, Truncated: []string{}, Writes: &store.Pending{Writes: []store.PendingWrite{}}}} {
			s := r.stored()
			want, err := json.Marshal(s.cut())
			require.NoError(t, err, name)
			got, err := s.encode()
			require.NoError(t, err, name)
			require.Equal(t, string(want), string(got), name)
			got, err = batch.record([]byte("room"), s)
			require.NoError(t, err, name)
			require.Equal(t, "room"+string(want), string(got), name+", by a batch's encoder")
		}
	}
	nan := fullRecord()
	nan.DurationMS = math.NaN()
	_, err := nan.encodeStored()
	require.Error(t, err, "a value encoding/json refuses is refused")
	badWhere := fullRecord()
	badWhere.Writes.Reads[1].Where = json.RawMessage(`{"a": `)
	_, err = badWhere.encodeStored()
	require.Error(t, err, "a predicate that is not JSON is refused, as encoding/json refuses it")
}

// rewrittenRecord is fullRecord with rewrites whose befores are lines of its program, the
// last one without a line end.
func rewrittenRecord() *RunRecord {
	r := fullRecord()
	r.Reply = "if a is None:\r\n    s = f\"{a}\"\n\n" + `t = f"{b}"`
	r.Program = r.Reply
	r.Rewrites = []pycompat.Rewrite{{Line: 1, Rule: "is-none", Before: "if a is None:\r", After: "if a == None:\r"},
		{Line: 2, Rule: "f-string", Before: `    s = f"{a}"`, After: `    s = "{}".format(a)`}, {Line: 4, Rule: "f-string", Before: `t = f"{b}"`, After: `t = "{}".format(b)`}}
	return r
}

// A rewrite's before is stored once, in the program, only when every rewrite's is a whole line
// of it; a stored before that the program does not hold is damage, named.
func TestRewriteBeforesAreStoredOnce(t *testing.T) {
	r := rewrittenRecord()
	raw, err := r.encodeStored()
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"rewrites_before_in_program":true`)
	assert.NotContains(t, string(raw), `s = f\"{a}\"\",\"after`)
	assert.Equal(t, 3, strings.Count(string(raw), `"before":""`))
	for name, change := range map[string]func(*RunRecord){
		"part of a line": func(r *RunRecord) { r.Rewrites[1].Before = `s = f"{a}"` },
		"no such line":   func(r *RunRecord) { r.Rewrites[2].Line = 5 },
		"line 0":         func(r *RunRecord) { r.Rewrites[0].Line = 0 },
		"an empty before": func(r *RunRecord) {
			r.Reply += "\n"
			r.Program = r.Reply
			r.Rewrites[2].Line, r.Rewrites[2].Before = 5, ""
		},
		"two lines": func(r *RunRecord) { r.Rewrites[0].Before = "if a is None:\r\n    s = f\"{a}\"" },
	} {
		r := rewrittenRecord()
		change(r)
		raw, err := r.encodeStored()
		require.NoError(t, err)
		assert.NotContains(t, string(raw), `rewrites_before_in_program`, name)
		back, err := decodeStored(raw)
		require.NoError(t, err)
		got, err := back.restore()
		require.NoError(t, err)
		assert.Equal(t, r.Rewrites, got.Rewrites, name)
	}
	bad := strings.Replace(string(raw), `"line":4`, `"line":9`, 1)
	require.NotEqual(t, string(raw), bad)
	require.ErrorContains(t, CheckRecord([]byte(bad)), "rewrite 3 (line 9) is stored with its before in the program, which has no line 9")
	bad = strings.Replace(string(raw), `"before":""`, `"before":"x"`, 1)
	require.ErrorContains(t, CheckRecord([]byte(bad)), "rewrite 1 (line 1) is stored with its before in the program")
}

// fieldsRecord is fullRecord with its update's Fields naming every field its after changed, and
// a second update.
func fieldsRecord() *RunRecord {
	r := fullRecord()
	inv := r.Changes["inventory"]
	inv.Updated[0].Fields = []string{"meta", "price", "quantity_in_stock", "tags"}
	inv.Updated = append(inv.Updated, table.Update{Key: "SG002", Before: table.Row{"item_id": "SG002", "price": 1.0}, After: table.Row{"item_id": "SG002", "price": 2.0}, Fields: []string{"price"}})
	return r
}

// An update's after is stored as its fields alone only when every update's after is its before
// but for its fields; an after so stored that holds other fields, or lacks one, is damage, named.
func TestUpdateAftersAreStoredOnce(t *testing.T) {
	r := fieldsRecord()
	raw, err := r.encodeStored()
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"updates_after_fields":true`)
	assert.Contains(t, string(raw), `"after":{"price":2},"fields":["price"]`)
	assert.Equal(t, table.Row{"item_id": "SG002", "price": 2.0}, r.Changes["inventory"].Updated[1].After, "the record's own changes are left whole")
	for name, change := range map[string]func(u *table.Update){
		"a changed field not named":  func(u *table.Update) { u.After["item_id"] = "X" },
		"a field added":              func(u *table.Update) { u.After["new"] = 1.0; u.Fields = []string{"new", "price"} },
		"a field dropped":            func(u *table.Update) { delete(u.After, "price") },
		"fields out of order":        func(u *table.Update) { u.Fields = []string{"price", "item_id"}; u.After["item_id"] = "X" },
		"a field twice":              func(u *table.Update) { u.Fields = []string{"price", "price"} },
		"no fields":                  func(u *table.Update) { u.Fields = nil; u.After["price"] = 1.0 },
		"a field named, not changed": func(u *table.Update) { u.Fields = []string{"item_id", "price"} },
		"nil before":                 func(u *table.Update) { u.Before = nil },
		"a field in neither row":     func(u *table.Update) { u.Fields = []string{"price", "zzz"} },
		"a field only the before holds, one only the after": func(u *table.Update) {
			u.Before["a"], u.After["b"] = 1.0, 1.0
			u.Fields = []string{"a", "b", "price"}
		},
		"a name the after lacks only": func(u *table.Update) {
			u.After["x"] = 1.0
			delete(u.After, "item_id")
			u.Fields = []string{"price", "x"}
		},
	} {
		r := fieldsRecord()
		change(&r.Changes["inventory"].Updated[1])
		raw, err := r.encodeStored()
		require.NoError(t, err)
		back, err := decodeStored(raw)
		require.NoError(t, err)
		got, err := back.restore()
		require.NoError(t, err)
		if name == "a field named, not changed" { // still its before but for its fields
			assert.Contains(t, string(raw), `updates_after_fields`, name)
		} else {
			assert.NotContains(t, string(raw), `updates_after_fields`, name)
		}
		assert.Equal(t, fmt.Sprint(r.Changes["inventory"].Updated[1]), fmt.Sprint(got.Changes["inventory"].Updated[1]), name)
	}
	for what, bad := range map[string]string{
		"more":  strings.Replace(string(raw), `"after":{"price":2}`, `"after":{"price":2,"x":1}`, 1),
		"fewer": strings.Replace(string(raw), `"after":{"price":2}`, `"after":{"x":2}`, 1),
	} {
		require.NotEqual(t, string(raw), bad)
		require.ErrorContains(t, CheckRecord([]byte(bad)), "update 2 of inventory (key SG002) is stored with its after as its fields, which it does not hold alone", what)
	}
}

// A record reads back as the RunRecord that was written, from its stored form as from the form
// records had before it (json.Marshal of the RunRecord): rows and program said once are the
// same rows and program again, kinds included, and the writes do not share the change set's maps.
func TestStoredRecordReadsBackAsWritten(t *testing.T) {
	e, _ := newEngine(t)
	for name, r := range map[string]*RunRecord{"full": fullRecord(), "bare program": func() *RunRecord { r := fullRecord(); r.Program = r.Reply; return r }(), "befores in the program": rewrittenRecord(), "afters as fields": fieldsRecord()} {
		old, err := json.Marshal(r) // how every record was stored before
		require.NoError(t, err)
		raw, err := r.encodeStored()
		require.NoError(t, err)
		assert.Less(t, len(raw), len(old), name)
		fromOld, err := e.decodeRecord(old)
		require.NoError(t, err, name)
		fromNew, err := e.decodeRecord(raw)
		require.NoError(t, err, name)
		require.Equal(t, fromOld, fromNew, name)
		require.NoError(t, CheckRecord(raw))
		require.NoError(t, CheckRecord(old))
		w := fromNew.Writes.Writes[0]
		w.Row["quantity_in_stock"] = int64(-1)
		assert.Equal(t, int64(22), fromNew.Changes["inventory"].Updated[0].After["quantity_in_stock"], "%s: a write's row is its own copy", name)
	}
	// A write that names rows the changes do not hold is damage, named.
	r := fullRecord()
	raw, err := r.encodeStored()
	require.NoError(t, err)
	bad := strings.Replace(string(raw), `"SG100","name"`, `"SG101","name"`, 1)
	require.NotEqual(t, string(raw), bad)
	err = CheckRecord([]byte(bad))
	require.ErrorContains(t, err, "key SG100) names its rows in the record's changes, which have no change of that row")

	// Writes that name their rows in Changes stored under "writes", which an older starplan
	// applies as they read (rowless: deletes), or writes stored under both names: refused.
	require.Contains(t, string(raw), `"apply_writes":`)
	underWrites := strings.Replace(string(raw), `"apply_writes":`, `"writes":`, 1)
	require.ErrorContains(t, CheckRecord([]byte(underWrites)), "is stored as writes, which an older starplan applies without them")
	_, err = e.decodeRecord([]byte(underWrites))
	require.ErrorContains(t, err, "is stored as writes")
	both := strings.Replace(string(raw), `"apply_writes":`, `"writes":{"domain":"inventory","writes":[],"reads":[]},"apply_writes":`, 1)
	require.ErrorContains(t, CheckRecord([]byte(both)), "has its writes twice")
}

// Runs recorded by an older starplan (the whole record, as json.Marshal wrote it) and by this one
// sit in one log: both read back as they were written, every reader's document is the same, and
// the hash chain verifies over both. The old record is written through the chain with the old
// encoder's bytes.
func TestOldAndNewRecordsInOneLog(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	plan := example(t, "03_two_item_order.star")
	fresh, err := e.Run(ctx, Request{UserRequest: "two items", Reply: plan})
	require.NoError(t, err)
	require.True(t, fresh.Pending, fresh.Diagnostics.String())
	older, err := e.Run(ctx, Request{UserRequest: "two items again", Reply: plan})
	require.NoError(t, err)
	require.True(t, older.Pending)

	want, err := e.Record(older.RunID)
	require.NoError(t, err)
	require.NotNil(t, want.Writes)
	require.Equal(t, want.Reply, want.Program, "a bare program")
	oldBytes, err := json.Marshal(want) // the old encoder
	require.NoError(t, err)
	require.NoError(t, e.chain.write(e.opts.Now(), func(docs []store.SysDoc) error { return e.st.PutSysDocs(ctx, docs...) },
		link{doc: store.SysDoc{Collection: auditCollection, ID: want.ID, Value: json.RawMessage(oldBytes), Index: recordIndex(want, false)}, event: ChainRecorded, read: rvReadSum(t, e, want.ID)}))

	var stored json.RawMessage
	_, err = e.st.GetSys(auditCollection, older.RunID, &stored)
	require.NoError(t, err)
	require.JSONEq(t, string(oldBytes), string(stored), "the old record is in the store as the old encoder wrote it")
	require.NotContains(t, string(stored), "in_changes")
	_, err = e.st.GetSys(auditCollection, fresh.RunID, &stored)
	require.NoError(t, err)
	require.Contains(t, string(stored), `"in_changes":true`, "the new record says its rows once")
	require.Contains(t, string(stored), `"program_is_reply":true`)
	// An older starplan reads the record as a RunRecord: it finds no writes (they are under a
	// name it does not know) and refuses to apply the run, rather than applying writes whose rows
	// it cannot see (a write without its row is a delete).
	var asOld RunRecord
	require.NoError(t, json.Unmarshal(stored, &asOld))
	require.Nil(t, asOld.Writes)
	require.ErrorContains(t, settled(&asOld), "has nothing to apply")

	got, err := e.Record(older.RunID)
	require.NoError(t, err)
	assert.Equal(t, want, got, "an old record reads back as it was written")
	newRec, err := e.Record(fresh.RunID)
	require.NoError(t, err)
	// The two runs differ in id, request and duration only: every document a reader prints of one
	// is the other's but for those.
	same := func(r *RunRecord) *RunRecord {
		c := *r
		c.ID, c.Request, c.DurationMS = "", "", 0
		return &c
	}
	docs := func(r *RunRecord) string {
		res := r.Result()
		res.RunID, res.DurationMS = "", 0
		b, err := json.Marshal(struct {
			Record *RunRecord
			Result *Result
		}{same(r), res})
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, docs(got), docs(newRec))
	for _, r := range []*RunRecord{got, newRec} { // the writes hold their rows, read from either form
		require.Len(t, r.Writes.Writes, 4)
		inv, txn := r.Changes["inventory"], r.Changes["transactions"]
		assert.Equal(t, inv.Updated[0].Before, r.Writes.Writes[0].Before)
		assert.Equal(t, inv.Updated[0].After, r.Writes.Writes[0].Row)
		assert.Equal(t, inv.Updated[1].After, r.Writes.Writes[1].Row)
		assert.Nil(t, r.Writes.Writes[2].Before)
		assert.Equal(t, txn.Inserted[0], r.Writes.Writes[2].Row)
		assert.Equal(t, txn.Inserted[1], r.Writes.Writes[3].Row)
	}
	assert.Equal(t, fresh.Changes, newRec.Changes)
	assert.Equal(t, plan, newRec.Program)

	rep, err := e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep.Problems)
	assert.Equal(t, 2, rep.Records)

	// Both apply: the old record's writes, read back, are what the store needs (the second
	// conflicts, as it read the rows the first changed).
	_, err = e.Apply(ctx, older.RunID)
	require.NoError(t, err)
	res, err := e.Apply(ctx, fresh.RunID)
	if err == nil {
		assert.Equal(t, OutcomeConflict, res.Outcome)
	}
	rep, err = e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep.Problems)
}

// A chain entry is encoded once, by hand, into the bytes and hash that seal and json.Marshal give
// (VerifyChain checks entries with those): every field set, and the fields a proposal leaves empty.
func TestChainEntryEncoderIsEncodingJSON(t *testing.T) {
	since := fixedNow.Add(-time.Hour)
	full := ChainEntry{Seq: 7, Time: fixedNow.Add(123456789), RunID: "r_1<>", Event: ChainCheckpoint, By: "a&b \u2028",
		Record: "r", Read: "rd", PrunedThrough: 5, PrunedSHA256: "p", PrunedRuns: 3, PrunedRunsSHA256: "pr", Since: &since, Definition: "d", Form: chainForm, Prev: "prev", Hash: "stale",
		Records: []ChainRecord{{RunID: "r_2\u2029", Event: ChainProposed, By: "<c>", Record: "s2"}, {RunID: "r_3", Event: ChainRecorded, Record: "s3", Read: "s2"}}}
	v := reflect.ValueOf(full)
	for i := 0; i < v.NumField(); i++ {
		require.False(t, v.Field(i).IsZero(), "the test leaves ChainEntry.%s zero: set it, and write it in sealed", v.Type().Field(i).Name)
	}
	batch := ChainEntry{Seq: 9, Time: fixedNow, Event: ChainBatch, Prev: "p", Records: []ChainRecord{{RunID: "r_4", Event: ChainProposed, By: "b", Record: "s"}}}
	for _, c := range []ChainEntry{full, {Seq: 1, Time: fixedNow, Event: ChainProposed}, batch} {
		want := c
		want.seal()
		wantJSON, err := json.Marshal(want)
		require.NoError(t, err)
		got, err := c.sealed()
		require.NoError(t, err)
		assert.Equal(t, string(wantJSON), string(got))
		assert.Equal(t, want.Hash, c.Hash)
	}

	// A name that is not valid UTF-8 is stored as it reads back, so its entry verifies.
	odd := ChainEntry{Seq: 2, Time: fixedNow, RunID: "r\xfe", Event: ChainApproved, By: "bob\xff", Prev: "p"}
	raw, err := odd.sealed()
	require.NoError(t, err)
	var back ChainEntry
	require.NoError(t, json.Unmarshal(raw, &back))
	stored := back.Hash
	back.seal()
	assert.Equal(t, stored, back.Hash, "an entry whose name held an invalid byte does not verify")
	assert.Equal(t, "bob\uFFFD", back.By)

	// So is one in a batch entry's record writes.
	odd = ChainEntry{Seq: 3, Time: fixedNow, Event: ChainBatch, Prev: "p", Records: []ChainRecord{{RunID: "r\xfe", Event: ChainProposed, By: "b\xff", Record: "s"}}}
	raw, err = odd.sealed()
	require.NoError(t, err)
	back = ChainEntry{}
	require.NoError(t, json.Unmarshal(raw, &back))
	stored = back.Hash
	back.seal()
	assert.Equal(t, stored, back.Hash, "a batch entry whose name held an invalid byte does not verify")
	assert.Equal(t, "b\uFFFD", back.Records[0].By)
}

// A write's change found by a walk of a small change set is the one rowChanges' index finds.
func TestRowChangesOfIsRowChanges(t *testing.T) {
	for _, r := range []*RunRecord{fullRecord(), fieldsRecord(), {Changes: table.ChangeSet{"t": {Key: "k",
		Inserted: []table.Row{{"k": int64(1)}, {"k": "1"}},
		Updated:  []table.Update{{Key: 1.0, Before: table.Row{"k": int64(1)}, After: table.Row{"k": int64(1), "v": 2}}},
		Deleted:  []table.Row{{"k": "1"}}}}}} {
		index := rowChanges(r.Changes)
		walk := rowChangesOf(r.Changes, 1)
		require.NotEmpty(t, index)
		for ref, want := range index {
			got, ok := walk.find(ref)
			require.True(t, ok, "%v", ref)
			require.Equal(t, want, got, "%v", ref)
		}
		_, ok := walk.find(rowRef{"t", "none"})
		require.False(t, ok)
		_, ok = walk.find(rowRef{"no table", "1"})
		require.False(t, ok)
		for ref, want := range index { // again, each after a table with no changes
			_, ok = walk.find(rowRef{"no table", "1"})
			require.False(t, ok)
			got, ok := walk.find(ref)
			require.True(t, ok, "%v", ref)
			require.Equal(t, want, got, "%v", ref)
		}
	}
}

// A raw filter is written as encoding/json writes a json.RawMessage, by the fast path (compact
// ASCII) and the slow one alike; invalid JSON is encoding/json's error.
func TestRawJSONIsEncodingJSON(t *testing.T) {
	for _, raw := range []string{`{"a":1}`, `{"name":{"$ieq":"Classic"}}`, `{ "a" : [1, 2] }`, `{"a":"<b>&"}`,
		`{"a":"x\u2028y"}`, "{\"a\":\"\u2028\"}", `["é"]`, `{"a":1`, `{"a":1}}`, `nul`, `"x"`, `1e5`, `{"a":"b c"}`} {
		want, wantErr := json.Marshal(json.RawMessage(raw))
		var e recordEncoder
		got := e.rawJSON([]byte("x"), json.RawMessage(raw))
		if wantErr != nil {
			assert.Error(t, e.err, raw)
			continue
		}
		require.NoError(t, e.err, raw)
		assert.Equal(t, "x"+string(want), string(got), raw)
	}
}

// beforesInProgram's walk of the lines says what programLines' index of them says.
func TestBeforesInProgramIsLineIndex(t *testing.T) {
	byIndex := func(rw []pycompat.Rewrite, program string) bool {
		if len(rw) == 0 {
			return false
		}
		lines := programLines(program, rw)
		for _, w := range rw {
			if line, ok := lines.at(w.Line); !ok || w.Before == "" || line != w.Before {
				return false
			}
		}
		return true
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	programs := []string{"", "a", "a\n", "a\nb", "a\nb\n", "\n\n", "x = 1\ny = 2\n\nz = 3", "a\r\nb"}
	befores := []string{"", "a", "b", "x = 1", "y = 2", "z = 3", "a\r"}
	for range 5000 {
		p := programs[rnd.IntN(len(programs))]
		rw := make([]pycompat.Rewrite, rnd.IntN(4))
		for i := range rw {
			rw[i] = pycompat.Rewrite{Line: rnd.IntN(6) - 1, Before: befores[rnd.IntN(len(befores))]}
		}
		require.Equal(t, byIndex(rw, p), beforesInProgram(rw, p), "%q %+v", p, rw)
	}
}

// Objects written in the order of a shape (the sorted names of an earlier object) are what
// encoding/json writes, whether the names match, half match (written again from the start), or
// a value's own objects change the shapes on the way.
func TestRecordEncoderShapes(t *testing.T) {
	var e recordEncoder
	objects := []map[string]any{
		{"b": 1, "a": "x"}, {"a": 2, "b": nil}, {"a": 3, "c": 4}, {"c": 5, "a": 6},
		{"a": map[string]any{"a": 1, "c": 2}, "b": map[string]any{"z": 1, "y": 2}},
		{"a": map[string]any{"b": 1, "a": 2}, "c": []any{map[string]any{"c": 1, "a": 2}}},
		{"only": 1}, {"x": 1, "y": 2, "z": 3}, {"x": 1, "y": 2, "w": 3}, {"b": "<&>", "a": 1.5},
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		m := objects[rnd.IntN(len(objects))]
		want, err := json.Marshal(m)
		require.NoError(t, err)
		got := e.object([]byte("["), m)
		require.NoError(t, e.err)
		require.Equal(t, "["+string(want), string(got))
	}
	assert.Positive(t, e.nshape)
}

// plainValid never calls JSON valid that json.Valid refuses (rawJSON would store it unchecked):
// random values of plain pieces, cut, spliced and with bytes changed; and it does call valid
// the filters a run records (store.AppendMarshal's form), which is what it is for.
func TestPlainValidIsSure(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 10))
	pieces := []string{`"a"`, `""`, `"$ieq"`, `0`, `-0`, `01`, `1.5`, `1.`, `.5`, `-`, `1e5`, `1E+5`, `1e-`, `2e`, `-12.50e-3`,
		`true`, `tru`, `false`, `null`, `nul`, `"x\"y"`, `"\\"`, `{}`, `[]`, `{`, `]`, `,`, `:`, `"`}
	var gen func(depth int) string
	gen = func(depth int) string {
		switch k := rnd.IntN(5); {
		case k == 0 && depth < 40:
			var parts []string
			for range rnd.IntN(3) {
				parts = append(parts, pieces[rnd.IntN(3)]+":"+gen(depth+1))
			}
			return "{" + strings.Join(parts, ",") + "}"
		case k == 1 && depth < 40:
			var parts []string
			for range rnd.IntN(3) {
				parts = append(parts, gen(depth+1))
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		return pieces[rnd.IntN(len(pieces))]
	}
	plain := 0
	for range 200_000 {
		raw := []byte(gen(0))
		switch rnd.IntN(4) {
		case 0:
			raw = raw[:rnd.IntN(len(raw)+1)]
		case 1:
			if len(raw) > 0 {
				raw[rnd.IntN(len(raw))] = "{}[],:\"0-.eE+tfn1a\\"[rnd.IntN(19)]
			}
		case 2:
			raw = append(raw, gen(0)...)
		}
		if !compactASCII(raw) {
			continue
		}
		if plainValid(raw) {
			plain++
			require.True(t, json.Valid(raw), "plainValid calls %q valid", raw)
		}
	}
	require.Greater(t, plain, 10_000)
	for _, v := range []any{map[string]any{"name": map[string]any{"$ieq": "Classic"}}, map[string]any{"item_id": "SG005"},
		map[string]any{"transaction_id": map[string]any{"$regex": "^TXN[0-9]+$"}}, map[string]any{"$or": []any{map[string]any{"a": -1.5e-7}, map[string]any{"b": nil, "c": true}}}} {
		raw, err := store.AppendMarshal(nil, v)
		require.NoError(t, err)
		require.True(t, plainValid(raw), "%s", raw)
	}
}

// afterIsBeforeButFields' one walk of the before says what a check of each part of its rule
// says (each field in both rows, every other name of the after in the before with the same
// value), over random small updates: rows of a few names, some shared, values that differ in
// kind only, fields in and out of order, twice, in one row or neither.
func TestAfterIsBeforeButFieldsIsItsRule(t *testing.T) {
	byRule := func(u table.Update) bool {
		if u.Before == nil || u.After == nil || len(u.After) != len(u.Before) || len(u.Fields) == 0 {
			return false
		}
		for i, f := range u.Fields {
			if i > 0 && u.Fields[i-1] >= f {
				return false
			}
			if _, ok := u.Before[f]; !ok {
				return false
			}
			if _, ok := u.After[f]; !ok {
				return false
			}
		}
		for k, av := range u.After {
			if slices.Contains(u.Fields, k) {
				continue
			}
			bv, ok := u.Before[k]
			if !ok || !sameValue(av, bv) {
				return false
			}
		}
		return true
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	names := []string{"a", "b", "c", "d"}
	values := []any{int64(1), 1.0, "1", nil, true, map[string]any{"x": 1.0}, []any{1.0}}
	row := func() table.Row {
		r := table.Row{}
		for _, k := range names {
			if rnd.IntN(3) > 0 {
				r[k] = values[rnd.IntN(len(values))]
			}
		}
		return r
	}
	agree, fieldsTrue := 0, 0
	for range 20000 {
		u := table.Update{Before: row()}
		u.After = maps.Clone(u.Before)
		for range rnd.IntN(3) { // changes, of values and of names
			k := names[rnd.IntN(len(names))]
			switch rnd.IntN(3) {
			case 0:
				delete(u.After, k)
			default:
				u.After[k] = values[rnd.IntN(len(values))]
			}
		}
		for range rnd.IntN(4) {
			u.Fields = append(u.Fields, names[rnd.IntN(len(names))])
		}
		if rnd.IntN(2) == 0 {
			slices.Sort(u.Fields)
		}
		if rnd.IntN(20) == 0 {
			u.Before = nil
		}
		want := byRule(u)
		require.Equal(t, want, afterIsBeforeButFields(u), "%+v", u)
		agree++
		if want {
			fieldsTrue++
		}
	}
	require.Greater(t, fieldsTrue, agree/20, "the random updates hardly ever fit the rule")
}
