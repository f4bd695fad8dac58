// Package storetest is the conformance suite every store backend must pass: Run(t, open) runs it
// against the stores open makes, through the store.Store and store.Stage interfaces alone (the
// shape of litestream's RunWithReplicaClient). It covers reads, staged writes, conflicts on rows
// and on predicate reads (a phantom insert that a dry run's filter would now return), the policy
// re-check at apply, atomicity (a failed apply writes nothing), a pending change read back from
// JSON (the audit log's round trip) and the system documents. What only some backends have (a
// file that can be damaged, import formats) is tested by those backends.
//
// It must not import a backend: a backend's test imports it.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Opener makes a fresh, empty store of dom for one test, seeded with dom.Seed, and closes it when
// the test ends (t.Cleanup).
type Opener func(t testing.TB, dom *store.Domain) store.Store

// Items is the table of the suite's domain.
const Items = "items"

// Domain is the suite's domain: one table, items, keyed by sku, with an indexed category and a
// non-negative quantity, seeded with four rows (a1, a2 in category "a"; b1, b2 in "b").
func Domain() *store.Domain {
	zero := 0.0
	return &store.Domain{
		Name: "conformance",
		Tables: []*table.Schema{{
			Name: Items, Key: "sku", Indexes: []string{"category"},
			Fields: []table.Field{
				{Name: "sku", Type: table.TypeString, Required: true},
				{Name: "category", Type: table.TypeString, Required: true},
				{Name: "qty", Type: table.TypeInt, Required: true, Min: &zero},
			},
		}},
		Seed: map[string][]table.Row{Items: {
			{"sku": "a1", "category": "a", "qty": int64(1)},
			{"sku": "a2", "category": "a", "qty": int64(2)},
			{"sku": "b1", "category": "b", "qty": int64(3)},
			{"sku": "b2", "category": "b", "qty": int64(4)},
		}},
	}
}

// Wallets is the table of MapDomain.
const Wallets = "wallets"

// MapDomain is the suite's domain of typed maps: one table, wallets, keyed by id, whose methods
// map payment method ids (gc_1, cc_1) to objects holding a float balance and a list of floats,
// whose rates map currency codes to floats and whose history is a list of such maps. It is seeded
// with w1, whose whole-number floats (57.0, and 100 given as an int) must come back as floats.
// (A backend of typed columns stores a map field as a document, such as PostgreSQL's jsonb, and
// gives the numbers their declared kinds back as the schema says: table.RestoreKinds.)
func MapDomain() *store.Domain {
	zero := 0.0
	methods := table.Field{Type: table.TypeObject, Fields: []table.Field{
		{Name: "source", Type: table.TypeString, Required: true, Enum: []string{"gift_card", "credit_card", "paypal"}},
		{Name: "balance", Type: table.TypeFloat, Min: &zero},
		{Name: "refunds", Type: table.TypeList, Items: &table.Field{Type: table.TypeFloat}},
	}}
	floats := table.Field{Type: table.TypeFloat}
	return &store.Domain{
		Name: "conformance_maps",
		Tables: []*table.Schema{{
			Name: Wallets, Key: "id",
			Fields: []table.Field{
				{Name: "id", Type: table.TypeString, Required: true},
				{Name: "methods", Type: table.TypeMap, Required: true, Values: &methods, Keys: &table.KeyRule{Pattern: "(gc|cc|pp)_[0-9]+"}},
				{Name: "rates", Type: table.TypeMap, Values: &floats},
				{Name: "history", Type: table.TypeList, Items: &table.Field{Type: table.TypeMap, Values: &floats}},
			},
		}},
		Seed: map[string][]table.Row{Wallets: {{
			"id": "w1",
			"methods": map[string]any{
				"gc_1": map[string]any{"source": "gift_card", "balance": 57.0, "refunds": []any{10.0, 2.5}},
				"cc_1": map[string]any{"source": "credit_card"},
			},
			"rates":   map[string]any{"EUR": 1.0, "GBP": 0.5},
			"history": []any{map[string]any{"EUR": 2.0}, map[string]any{}},
		}}},
	}
}

// Run runs the conformance suite against the stores open makes.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, st store.Store)
	}{
		{"Reads", testReads},
		{"StagedWrites", testStagedWrites},
		{"RowConflict", testRowConflict},
		{"PhantomInsertConflicts", testPhantomInsertConflicts},
		{"StageMoved", testStageMoved},
		{"VerifyAtApply", testVerifyAtApply},
		{"ApplySteps", testApplySteps},
		{"FailedApplyWritesNothing", testFailedApplyWritesNothing},
		{"InvalidRowRefused", testInvalidRow},
		{"PendingJSONRoundTrip", testPendingJSON},
		{"SystemDocuments", testSystemDocuments},
		{"SystemIndex", testSystemIndex},
		{"PruneOldest", testPruneOldest},
		{"Limits", testLimits},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t, Domain())) })
	}
	t.Run("MapValues", func(t *testing.T) { testMaps(t, open(t, MapDomain())) })
}

var bg = context.Background()

func stage(st store.Store) store.Stage { return st.StageFor(bg, store.RunLimits{}) }

func items(t testing.TB, v table.View) table.Table {
	t.Helper()
	tb, ok := v.Table(Items)
	require.True(t, ok, "the stage has no table %s", Items)
	return tb
}

func qty(t testing.TB, st store.Store, sku string) any {
	t.Helper()
	row, ok, err := items(t, stage(st)).Get(sku)
	require.NoError(t, err)
	if !ok {
		return nil
	}
	return row["qty"]
}

func where(kv ...any) table.Query {
	w := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		w[kv[i].(string)] = kv[i+1]
	}
	return table.Query{Where: w}
}

func skus(rows []table.Row) []any {
	out := []any{}
	for _, r := range rows {
		out = append(out, r["sku"])
	}
	return out
}

func apply(st store.Store, sg store.Stage, extra ...store.SysDoc) error {
	return st.ApplyPending(bg, sg.Pending(), nil, extra...)
}

func testReads(t *testing.T, st store.Store) {
	assert.Equal(t, "conformance", st.Domain().Name)
	assert.Equal(t, []string{Items}, st.Names())
	sc, ok := st.Schema(Items)
	require.True(t, ok)
	assert.Equal(t, "sku", sc.Key)
	_, ok = st.Schema("nope")
	assert.False(t, ok)

	v := stage(st)
	assert.Zero(t, v.RowsRead(), "a new stage has read nothing")
	assert.Equal(t, []string{Items}, v.Names())
	_, ok = v.Table("nope")
	assert.False(t, ok)
	tb := items(t, v)
	assert.Equal(t, 4, tb.Len())
	row, ok, err := tb.Get("b1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "b", row["category"])
	assert.EqualValues(t, 3, row["qty"])
	_, ok, err = tb.Get("zz")
	require.NoError(t, err)
	assert.False(t, ok)

	rows, err := tb.Find(table.Query{})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, v.RowsRead(), 4, "RowsRead counts the rows the stage's reads took")
	assert.Equal(t, []any{"a1", "a2", "b1", "b2"}, skus(rows), "rows in key order")
	rows, err = tb.Find(table.Query{Reverse: true, Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []any{"b2", "b1"}, skus(rows))
	rows, err = tb.Find(where("category", "a"))
	require.NoError(t, err)
	assert.Equal(t, []any{"a1", "a2"}, skus(rows))
	n, err := tb.Count(where("qty", map[string]any{"$gte": 2}))
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	last, ok, err := v.LastRow(Items)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "b2", last["sku"])
	assert.Empty(t, v.ChangeSet())
	assert.False(t, v.Moved())
	assert.Nil(t, v.Exceeded())
}

func testStagedWrites(t *testing.T, st store.Store) {
	sg := stage(st)
	tb := items(t, sg)
	_, err := tb.Insert(table.Row{"sku": "c1", "category": "c", "qty": int64(5)})
	require.NoError(t, err)
	n, err := tb.Update(table.Row{"qty": int64(10)}, where("sku", "a1"))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	n, err = tb.Remove(where("sku", "b2"))
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	// The stage sees its own writes; the store and other stages do not, until the apply.
	assert.Equal(t, 4, tb.Len())
	row, ok, err := tb.Get("a1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.EqualValues(t, 10, row["qty"])
	assert.EqualValues(t, 1, qty(t, st, "a1"))
	assert.Nil(t, qty(t, st, "c1"))
	assert.EqualValues(t, 4, qty(t, st, "b2"))

	cs := sg.ChangeSet()
	require.Contains(t, cs, Items)
	assert.Equal(t, []any{"c1"}, skus(cs[Items].Inserted))
	assert.Equal(t, []any{"b2"}, skus(cs[Items].Deleted))
	require.Len(t, cs[Items].Updated, 1)
	p := sg.Pending()
	assert.False(t, p.Empty())
	assert.Equal(t, "conformance", p.Domain)

	require.NoError(t, apply(st, sg))
	assert.EqualValues(t, 10, qty(t, st, "a1"))
	assert.EqualValues(t, 5, qty(t, st, "c1"))
	assert.Nil(t, qty(t, st, "b2"))
	assert.Equal(t, 4, items(t, stage(st)).Len())
	// The same pending change applied twice conflicts: every row it wrote has moved.
	assert.ErrorIs(t, st.ApplyPending(bg, p, nil), store.ErrConflict)
}

func testRowConflict(t *testing.T, st store.Store) {
	first, second := stage(st), stage(st)
	_, err := items(t, first).Update(table.Row{"qty": int64(7)}, where("sku", "a1"))
	require.NoError(t, err)
	// second only reads a1 and writes another row: its read of a1 must still hold at apply.
	_, _, err = items(t, second).Get("a1")
	require.NoError(t, err)
	_, err = items(t, second).Update(table.Row{"qty": int64(8)}, where("sku", "b1"))
	require.NoError(t, err)

	require.NoError(t, apply(st, first))
	err = apply(st, second)
	require.ErrorIs(t, err, store.ErrConflict)
	var ce *store.ConflictError
	require.True(t, errors.As(err, &ce), "%T", err)
	assert.NotEmpty(t, ce.Conflicts)
	assert.EqualValues(t, 3, qty(t, st, "b1"), "the conflicting apply wrote nothing")
	assert.EqualValues(t, 7, qty(t, st, "a1"))
}

// A dry run that read "every item of category c" (none) and wrote from it conflicts when another
// run inserted an item of category c meanwhile: the row it did not see is a phantom.
func testPhantomInsertConflicts(t *testing.T, st store.Store) {
	for _, q := range []table.Query{
		where("category", "c"),                              // an indexed equality
		where("qty", map[string]any{"$gte": 100}),           // a walk
		{Where: map[string]any{"category": "c"}, Limit: 10}, // with a limit
	} {
		t.Run(fmt.Sprint(q.Where), func(t *testing.T) {
			dry := stage(st)
			rows, err := items(t, dry).Find(q)
			require.NoError(t, err)
			require.Empty(t, rows)
			_, err = items(t, dry).Update(table.Row{"qty": int64(0)}, where("sku", "a2"))
			require.NoError(t, err)

			other := stage(st)
			_, err = items(t, other).Insert(table.Row{"sku": fmt.Sprintf("p%d", len(q.Where)+q.Limit), "category": "c", "qty": int64(100)})
			require.NoError(t, err)
			require.NoError(t, apply(st, other))

			assert.ErrorIs(t, apply(st, dry), store.ErrConflict)
			assert.EqualValues(t, 2, qty(t, st, "a2"), "nothing of the dry run was written")
			// Clean up for the next case: remove the phantom.
			rm := stage(st)
			_, err = items(t, rm).Remove(where("category", "c"))
			require.NoError(t, err)
			require.NoError(t, apply(st, rm))
		})
	}
	// An insert that the filter would not return is no conflict.
	dry := stage(st)
	_, err := items(t, dry).Find(where("category", "a"))
	require.NoError(t, err)
	_, err = items(t, dry).Update(table.Row{"qty": int64(9)}, where("sku", "a2"))
	require.NoError(t, err)
	other := stage(st)
	_, err = items(t, other).Insert(table.Row{"sku": "z9", "category": "z", "qty": int64(1)})
	require.NoError(t, err)
	require.NoError(t, apply(st, other))
	require.NoError(t, apply(st, dry))
	assert.EqualValues(t, 9, qty(t, st, "a2"))
}

func testStageMoved(t *testing.T, st store.Store) {
	late := stage(st)
	other := stage(st)
	_, err := items(t, other).Insert(table.Row{"sku": "m1", "category": "m", "qty": int64(1)})
	require.NoError(t, err)
	require.NoError(t, apply(st, other))
	_, err = items(t, late).Find(table.Query{})
	require.NoError(t, err)
	assert.True(t, late.Moved(), "a read after a commit that landed since the stage started")
	fresh := stage(st)
	_, err = items(t, fresh).Find(table.Query{})
	require.NoError(t, err)
	assert.False(t, fresh.Moved())
}

// The policy's check runs inside the apply, sees the changes and the committed state, and its
// refusal writes nothing, the documents that came with the apply included.
func testVerifyAtApply(t *testing.T, st store.Store) {
	sg := stage(st)
	_, err := items(t, sg).Insert(table.Row{"sku": "v1", "category": "v", "qty": int64(1)})
	require.NoError(t, err)
	refused := errors.New("refused by policy")
	var saw []string
	verify := func(cs table.ChangeSet, c store.Committed) error {
		saw = append(saw, fmt.Sprint(skus(cs[Items].Inserted)))
		last, ok, err := c.LastRow(Items)
		if err != nil || !ok {
			return fmt.Errorf("LastRow: %v %v", ok, err)
		}
		saw = append(saw, fmt.Sprint(last["sku"]))
		return refused
	}
	doc := store.SysDoc{Collection: "audit", ID: "r1", Value: map[string]any{"applied": true}}
	err = st.ApplyPending(bg, sg.Pending(), verify, doc)
	assert.ErrorIs(t, err, refused)
	require.NotEmpty(t, saw)
	assert.Equal(t, "[v1]", saw[0])
	assert.Equal(t, "b2", saw[1], "the committed state, without the staged insert")
	assert.Nil(t, qty(t, st, "v1"))
	found, err := st.GetSys("audit", "r1", new(map[string]any))
	require.NoError(t, err)
	assert.False(t, found, "the audit document of a refused apply is not written")

	// A state the policy refuses is refused again at apply when a commit made it so meanwhile.
	budget := func(cs table.ChangeSet, c store.Committed) error {
		last, _, err := c.LastRow(Items)
		if err != nil {
			return err
		}
		if last["sku"] == "zz" {
			return refused
		}
		return nil
	}
	dry := stage(st)
	_, err = items(t, dry).Update(table.Row{"qty": int64(5)}, where("sku", "a1"))
	require.NoError(t, err)
	require.NoError(t, budget(dry.ChangeSet(), dry), "fine at the dry run")
	other := stage(st)
	_, err = items(t, other).Insert(table.Row{"sku": "zz", "category": "z", "qty": int64(1)})
	require.NoError(t, err)
	require.NoError(t, apply(st, other))
	assert.ErrorIs(t, st.ApplyPending(bg, dry.Pending(), budget), refused)
	assert.EqualValues(t, 1, qty(t, st, "a1"))

	require.NoError(t, st.ApplyPending(bg, sg.Pending(), nil, doc))
	assert.EqualValues(t, 1, qty(t, st, "v1"))
	found, err = st.GetSys("audit", "r1", new(map[string]any))
	require.NoError(t, err)
	assert.True(t, found, "the audit document is written with the changes")
}

// An apply given store.ApplySteps in its context reports its steps in order, each ended before
// the next began: checks, verify, the commit last; a conflict ends at a check with the
// *ConflictError, a refusal at verify with its error, and neither commits. Without one, nothing
// is timed (every other test).
func testApplySteps(t *testing.T, st store.Store) {
	names := func(steps []store.ApplyStep) (out []string) {
		for _, s := range steps {
			out = append(out, s.Step)
		}
		return out
	}
	inOrder := func(t *testing.T, steps []store.ApplyStep) {
		t.Helper()
		for i, s := range steps {
			assert.False(t, s.Start.IsZero(), "step %d (%s) has its start", i, s.Step)
			assert.False(t, s.End.Before(s.Start), "step %d (%s) ends after it starts", i, s.Step)
			if i > 0 {
				assert.False(t, s.Start.Before(steps[i-1].End), "step %d (%s) starts after step %d ended", i, s.Step, i-1)
			}
		}
	}
	applyTimed := func(sg store.Stage, verify store.Verify) ([]store.ApplyStep, error) {
		var steps store.ApplySteps
		err := st.ApplyPending(store.WithApplySteps(bg, &steps), sg.Pending(), verify)
		return steps.Steps, err
	}
	pass := func(table.ChangeSet, store.Committed) error { return nil }

	t.Run("applied", func(t *testing.T) {
		sg := stage(st)
		_, err := items(t, sg).Update(table.Row{"qty": int64(11)}, where("sku", "a1"))
		require.NoError(t, err)
		steps, err := applyTimed(sg, pass)
		require.NoError(t, err)
		require.NotEmpty(t, steps)
		inOrder(t, steps)
		got := names(steps)
		assert.Equal(t, store.StepCheck, got[0], "%v: the check first", got)
		assert.Equal(t, store.StepCommit, got[len(got)-1], "%v: the commit last", got)
		assert.Contains(t, got, store.StepVerify, "%v", got)
		assert.Less(t, slices.Index(got, store.StepCheck), slices.Index(got, store.StepVerify), "%v", got)
		for _, s := range steps {
			assert.NoError(t, s.Err, s.Step)
		}
		assert.EqualValues(t, 11, qty(t, st, "a1"))

		// No verify: checks, then the commit.
		sg = stage(st)
		_, err = items(t, sg).Update(table.Row{"qty": int64(12)}, where("sku", "a1"))
		require.NoError(t, err)
		steps, err = applyTimed(sg, nil)
		require.NoError(t, err)
		inOrder(t, steps)
		got = names(steps)
		assert.NotContains(t, got, store.StepVerify)
		assert.Equal(t, store.StepCommit, got[len(got)-1], "%v", got)
		assert.Equal(t, 1, count(got, store.StepCommit), "%v", got)
	})
	t.Run("conflict", func(t *testing.T) {
		dry, other := stage(st), stage(st)
		_, err := items(t, dry).Update(table.Row{"qty": int64(21)}, where("sku", "b1"))
		require.NoError(t, err)
		_, err = items(t, other).Update(table.Row{"qty": int64(22)}, where("sku", "b1"))
		require.NoError(t, err)
		require.NoError(t, apply(st, other))
		steps, err := applyTimed(dry, pass)
		require.ErrorIs(t, err, store.ErrConflict)
		require.NotEmpty(t, steps)
		inOrder(t, steps)
		last := steps[len(steps)-1]
		assert.Equal(t, store.StepCheck, last.Step, "%v: the check found it", names(steps))
		assert.ErrorIs(t, last.Err, store.ErrConflict)
		assert.NotContains(t, names(steps), store.StepCommit)
		assert.NotContains(t, names(steps), store.StepVerify, "a conflict is found before verify")
	})
	t.Run("refused", func(t *testing.T) {
		sg := stage(st)
		_, err := items(t, sg).Update(table.Row{"qty": int64(31)}, where("sku", "b2"))
		require.NoError(t, err)
		refused := errors.New("refused by policy")
		steps, err := applyTimed(sg, func(table.ChangeSet, store.Committed) error { return refused })
		require.ErrorIs(t, err, refused)
		inOrder(t, steps)
		assert.NotContains(t, names(steps), store.StepCommit)
		var found bool
		for _, s := range steps {
			if s.Step == store.StepVerify {
				found = true
				assert.ErrorIs(t, s.Err, refused)
			}
		}
		assert.True(t, found, "%v: verify's step carries its refusal", names(steps))
	})
}

func count(xs []string, x string) (n int) {
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// An apply with several writes of which one conflicts writes none of them, nor its documents.
func testFailedApplyWritesNothing(t *testing.T, st store.Store) {
	sg := stage(st)
	tb := items(t, sg)
	_, err := tb.Insert(table.Row{"sku": "n1", "category": "n", "qty": int64(1)})
	require.NoError(t, err)
	_, err = tb.Update(table.Row{"qty": int64(40)}, where("sku", "a1"))
	require.NoError(t, err)
	_, err = tb.Update(table.Row{"qty": int64(41)}, where("sku", "b2"))
	require.NoError(t, err)

	other := stage(st)
	_, err = items(t, other).Update(table.Row{"qty": int64(99)}, where("sku", "b2"))
	require.NoError(t, err)
	require.NoError(t, apply(st, other))

	err = apply(st, sg, store.SysDoc{Collection: "audit", ID: "x", Value: 1})
	require.ErrorIs(t, err, store.ErrConflict)
	assert.Nil(t, qty(t, st, "n1"))
	assert.EqualValues(t, 1, qty(t, st, "a1"))
	assert.EqualValues(t, 99, qty(t, st, "b2"))
	found, err := st.GetSys("audit", "x", new(int))
	require.NoError(t, err)
	assert.False(t, found)
	assert.Equal(t, 4, items(t, stage(st)).Len())
}

// A pending change whose row does not fit the schema (as one read back from a tampered log) is
// refused and writes nothing.
func testInvalidRow(t *testing.T, st store.Store) {
	sg := stage(st)
	_, err := items(t, sg).Insert(table.Row{"sku": "w1", "category": "w", "qty": int64(-1)})
	require.Error(t, err, "the stage validates rows as they are written")
	_, err = items(t, sg).Insert(table.Row{"sku": "w1", "category": "w", "qty": int64(1)})
	require.NoError(t, err)
	p := sg.Pending()
	p.Writes[0].Row = table.Row{"sku": "w1", "category": "w", "qty": int64(-1)}
	assert.ErrorContains(t, st.ApplyPending(bg, p, nil), "qty")
	assert.Nil(t, qty(t, st, "w1"))
}

// A pending change survives JSON (the audit log keeps it so) and applies the same afterwards;
// its recorded predicate reads still catch a phantom.
func testPendingJSON(t *testing.T, st store.Store) {
	sg := stage(st)
	_, err := items(t, sg).Find(where("category", "j"))
	require.NoError(t, err)
	_, err = items(t, sg).Insert(table.Row{"sku": "j1", "category": "k", "qty": int64(3)})
	require.NoError(t, err)
	_, err = items(t, sg).Update(table.Row{"qty": int64(12)}, where("sku", "a1"))
	require.NoError(t, err)
	b, err := json.Marshal(sg.Pending())
	require.NoError(t, err)
	var back store.Pending
	require.NoError(t, json.Unmarshal(b, &back))

	// A phantom for its predicate read: the decoded change conflicts too.
	other := stage(st)
	_, err = items(t, other).Insert(table.Row{"sku": "j0", "category": "j", "qty": int64(1)})
	require.NoError(t, err)
	require.NoError(t, apply(st, other))
	assert.ErrorIs(t, st.ApplyPending(bg, &back, nil), store.ErrConflict)

	// Without the phantom it applies.
	sg = stage(st)
	_, err = items(t, sg).Find(where("category", "q"))
	require.NoError(t, err)
	_, err = items(t, sg).Update(table.Row{"qty": int64(12)}, where("sku", "a1"))
	require.NoError(t, err)
	b, err = json.Marshal(sg.Pending())
	require.NoError(t, err)
	back = store.Pending{}
	require.NoError(t, json.Unmarshal(b, &back))
	require.NoError(t, st.ApplyPending(bg, &back, nil))
	assert.EqualValues(t, 12, qty(t, st, "a1"))
}

func testSystemDocuments(t *testing.T, st store.Store) {
	type doc struct {
		N int `json:"n"`
	}
	require.NoError(t, st.PutSys(bg, "notes", "b", doc{2}))
	require.NoError(t, st.PutSysDocs(bg,
		store.SysDoc{Collection: "notes", ID: "a", Value: doc{1}},
		store.SysDoc{Collection: "other", ID: "a", Value: doc{9}}))
	var got doc
	found, err := st.GetSys("notes", "a", &got)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, 1, got.N)
	found, err = st.GetSys("notes", "missing", &got)
	require.NoError(t, err)
	assert.False(t, found)
	list, err := st.ListSys("notes")
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, "a", list[0].ID, "sorted by id")
	assert.JSONEq(t, `{"n":2}`, string(list[1].JSON))
	require.NoError(t, st.PutSys(bg, "notes", "a", doc{5}), "a put replaces")
	_, err = st.GetSys("notes", "a", &got)
	require.NoError(t, err)
	assert.Equal(t, 5, got.N)
	assert.Error(t, st.PutSys(bg, "_bad", "a", doc{1}), "a system collection name is a plain name")

	// A document written with Create goes only where its id is free: else the whole write fails
	// with ErrSysExists and writes nothing, in a collection never written too.
	require.NoError(t, st.PutSysDocs(bg, store.SysDoc{Collection: "seqs", ID: "1", Value: doc{1}, Create: true}))
	err = st.PutSysDocs(bg, store.SysDoc{Collection: "notes", ID: "c", Value: doc{7}},
		store.SysDoc{Collection: "seqs", ID: "1", Value: doc{2}, Create: true})
	require.ErrorIs(t, err, store.ErrSysExists)
	found, err = st.GetSys("notes", "c", &got)
	require.NoError(t, err)
	assert.False(t, found, "a refused write writes nothing")
	_, err = st.GetSys("seqs", "1", &got)
	require.NoError(t, err)
	assert.Equal(t, 1, got.N, "the document is not replaced")
	require.NoError(t, st.PutSysDocs(bg, store.SysDoc{Collection: "seqs", ID: "2", Value: doc{2}, Create: true}))
	_, err = st.PruneSys(bg, "seqs", func(store.SysRecord) (bool, error) { return true, nil })
	require.NoError(t, err)

	// Prune takes the companion documents of the same id with it; an error from drop removes
	// nothing.
	_, err = st.PruneSys(bg, "notes", func(r store.SysRecord) (bool, error) { return false, errors.New("no") }, "other")
	require.Error(t, err)
	pruned, err := st.PruneSys(bg, "notes", func(r store.SysRecord) (bool, error) { return r.ID == "a", nil }, "other")
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, pruned.IDs)
	list, err = st.ListSys("notes")
	require.NoError(t, err)
	assert.Len(t, list, 1)
	list, err = st.ListSys("other")
	require.NoError(t, err)
	assert.Empty(t, list)
	// Plans never see system collections.
	assert.Equal(t, []string{Items}, stage(st).Names())
}

func testSystemIndex(t *testing.T, st store.Store) {
	ready, err := st.SysIndexReady("runs")
	require.NoError(t, err)
	assert.False(t, ready)
	_, err = st.SysStats("runs")
	assert.ErrorIs(t, err, store.ErrNoSysIndex)
	put := func(id, order, group string) store.SysDoc {
		return store.SysDoc{Collection: "runs", ID: id, Value: map[string]string{"group": group},
			Index: &store.SysIndex{Order: order, Group: group}}
	}
	require.NoError(t, st.PutSysDocs(bg, put("r1", "2025-01-01", "done"), put("r2", "2025-01-03", "pending")))
	// The index may be built with the first indexed write or by a rebuild; after a rebuild it is
	// current either way.
	n, err := st.RebuildSysIndex(bg, "runs", func(r store.SysRecord) (store.SysIndex, error) {
		var v map[string]string
		if err := json.Unmarshal(r.JSON, &v); err != nil {
			return store.SysIndex{}, err
		}
		order := map[string]string{"r1": "2025-01-01", "r2": "2025-01-03"}[r.ID]
		return store.SysIndex{Order: order, Group: v["group"]}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	ready, err = st.SysIndexReady("runs")
	require.NoError(t, err)
	assert.True(t, ready)
	require.NoError(t, st.PutSysDocs(bg, put("r3", "2025-01-02", "done")))

	stats, err := st.SysStats("runs")
	require.NoError(t, err)
	assert.Equal(t, 2, stats["done"].Count)
	assert.Equal(t, 1, stats["pending"].Count)

	ids := func(opts store.SysScan) []string {
		t.Helper()
		var out []string
		if opts.Next == nil {
			opts.Next = func(store.SysEntry) (bool, bool) { return true, true }
		}
		entries, err := st.ScanSys("runs", opts)
		require.NoError(t, err)
		for _, e := range entries {
			out = append(out, e.ID)
		}
		return out
	}
	assert.Equal(t, []string{"r1", "r3", "r2"}, ids(store.SysScan{}), "in order")
	assert.Equal(t, []string{"r2", "r3", "r1"}, ids(store.SysScan{Reverse: true}))
	assert.Equal(t, []string{"r1", "r3"}, ids(store.SysScan{Group: "done"}))

	pruned, err := st.PruneSysOldest(bg, store.SysPrune{Coll: "runs", Before: "2025-01-03", Drop: func(store.SysRecord) (bool, error) { return true, nil }})
	require.NoError(t, err)
	assert.Equal(t, []string{"r1", "r3"}, pruned.IDs, "only the documents ordered before")
	assert.Equal(t, []string{"r2"}, ids(store.SysScan{}))
}

// PruneSysOldest offers the oldest documents in order, stops at Max removals and goes on
// after its cursor, and commits Then's writes with its removals, or nothing at all.
func testPruneOldest(t *testing.T, st store.Store) {
	put := func(id, order string, pending bool) store.SysDoc {
		return store.SysDoc{Collection: "runs", ID: id, Value: map[string]bool{"pending": pending},
			Index: &store.SysIndex{Order: order, Group: "g"}}
	}
	// r1..r7, in order by day; r2 and r5 are pending; r7 is not old enough.
	var docs []store.SysDoc
	for i := 1; i <= 7; i++ {
		docs = append(docs, put(fmt.Sprintf("r%d", i), fmt.Sprintf("2025-01-0%d", i), i == 2 || i == 5),
			store.SysDoc{Collection: "notes", ID: fmt.Sprintf("r%d", i), Value: map[string]int{"n": i}})
	}
	require.NoError(t, st.PutSysDocs(bg, docs...))
	var offered []string
	drop := func(r store.SysRecord) (bool, error) {
		offered = append(offered, r.ID)
		var v map[string]bool
		if err := json.Unmarshal(r.JSON, &v); err != nil {
			return false, err
		}
		return !v["pending"], nil
	}
	left := func(coll string) []string {
		t.Helper()
		list, err := st.ListSys(coll)
		require.NoError(t, err)
		var ids []string
		for _, r := range list {
			ids = append(ids, r.ID)
		}
		return ids
	}
	p := store.SysPrune{Coll: "runs", Before: "2025-01-07", Max: 2, Drop: drop, With: []string{"notes"}}

	// Then's error, or a write of its that fails, removes nothing.
	p.Then = func([]string) (store.SysAfter, error) { return store.SysAfter{}, errors.New("disk full") }
	_, err := st.PruneSysOldest(bg, p)
	require.ErrorContains(t, err, "disk full")
	require.NoError(t, st.PutSysDocs(bg, store.SysDoc{Collection: "marks", ID: "taken", Value: 1}))
	p.Then = func([]string) (store.SysAfter, error) {
		return store.SysAfter{Put: []store.SysDoc{{Collection: "marks", ID: "taken", Value: 2, Create: true}}}, nil
	}
	_, err = st.PruneSysOldest(bg, p)
	require.ErrorIs(t, err, store.ErrSysExists)
	assert.Len(t, left("runs"), 7, "a failed prune removes nothing")
	assert.Len(t, left("notes"), 7)

	// Max bounds one prune; the next goes on after its cursor, and Then's writes and removals
	// are committed with each.
	var got [][]string
	p.Then = func(removed []string) (store.SysAfter, error) {
		got = append(got, removed)
		return store.SysAfter{Remove: []store.SysKey{{Collection: "marks", ID: "taken"}},
			Put: []store.SysDoc{{Collection: "marks", ID: strings.Join(removed, "+"), Value: len(removed), Create: true}}}, nil
	}
	offered = nil
	pruned, err := st.PruneSysOldest(bg, p)
	require.NoError(t, err)
	assert.Equal(t, []string{"r1", "r3"}, pruned.IDs, "two removed, the pending one kept")
	assert.Equal(t, []string{"r1", "r2", "r3"}, offered)
	assert.True(t, pruned.More)
	assert.Equal(t, []string{"r1+r3"}, left("marks"), "Then's writes and removals committed with the prune")
	offered = nil
	p.After = pruned.Cursor
	pruned, err = st.PruneSysOldest(bg, p)
	require.NoError(t, err)
	assert.Equal(t, []string{"r4", "r6"}, pruned.IDs)
	assert.Equal(t, []string{"r4", "r5", "r6"}, offered, "after the cursor: r2 is not offered again")
	offered = nil
	p.After = pruned.Cursor
	pruned, err = st.PruneSysOldest(bg, p)
	require.NoError(t, err)
	assert.Empty(t, pruned.IDs)
	assert.False(t, pruned.More)
	assert.Empty(t, offered, "r7 is not old enough")
	assert.Equal(t, [][]string{{"r1", "r3"}, {"r4", "r6"}}, got, "Then is called only when a prune removes something")
	assert.Equal(t, []string{"r2", "r5", "r7"}, left("runs"))
	assert.Equal(t, []string{"r2", "r5", "r7"}, left("notes"), "the companions went with them")
	assert.Equal(t, []string{"r1+r3", "r4+r6"}, left("marks"))
	stats, err := st.SysStats("runs")
	require.NoError(t, err)
	assert.Equal(t, 3, stats["g"].Count, "the index follows")
}

// A stage holds its run to its limits and says which it crossed.
func testLimits(t *testing.T, st store.Store) {
	sg := st.StageFor(bg, store.RunLimits{RowsWritten: 1})
	tb := items(t, sg)
	_, err := tb.Insert(table.Row{"sku": "l1", "category": "l", "qty": int64(1)})
	require.NoError(t, err)
	_, err = tb.Insert(table.Row{"sku": "l2", "category": "l", "qty": int64(1)})
	require.Error(t, err)
	require.NotNil(t, sg.Exceeded())
	assert.Equal(t, store.LimitRowsWritten, sg.Exceeded().Limit)

	ctx, cancel := context.WithCancel(bg)
	cancel()
	sg = st.StageFor(ctx, store.RunLimits{})
	_, err = items(t, sg).Find(where("qty", map[string]any{"$gte": 0}))
	assert.ErrorIs(t, err, context.Canceled, "a stage's reads stop with its context")
}

func wallets(t testing.TB, v table.View) table.Table {
	t.Helper()
	tb, ok := v.Table(Wallets)
	require.True(t, ok, "the stage has no table %s", Wallets)
	return tb
}

func wallet(t testing.TB, st store.Store, id string) table.Row {
	t.Helper()
	row, ok, err := wallets(t, stage(st)).Get(id)
	require.NoError(t, err)
	require.True(t, ok, "no wallet %s", id)
	return row
}

// Typed maps keep their kinds at every depth (a whole float is a float64, never an int64) through
// the seed, a staged write, an apply, a pending change read back from JSON and every read; where
// paths reach into them (an entry by key, any entry with *), also as recorded predicate reads.
func testMaps(t *testing.T, st store.Store) {
	assert.Equal(t, table.Row{
		"id": "w1",
		"methods": map[string]any{
			"gc_1": map[string]any{"source": "gift_card", "balance": 57.0, "refunds": []any{10.0, 2.5}},
			"cc_1": map[string]any{"source": "credit_card"},
		},
		"rates":   map[string]any{"EUR": 1.0, "GBP": 0.5},
		"history": []any{map[string]any{"EUR": 2.0}, map[string]any{}},
	}, wallet(t, st, "w1"), "the seed's maps with their kinds")

	// Writes are validated inside the map, and the error names the entry's path.
	sg := stage(st)
	_, err := wallets(t, sg).Insert(table.Row{"id": "w9", "methods": map[string]any{"gc_1": map[string]any{"source": "gift_card", "balance": "57"}}})
	var fe *table.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "methods.gc_1.balance", fe.Field)
	_, err = wallets(t, sg).Insert(table.Row{"id": "w9", "methods": map[string]any{"card": map[string]any{"source": "gift_card"}}})
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "methods.card", fe.Field, "a key that breaks the key pattern")

	// Ints given for floats are stored as floats; the change survives JSON with its kinds.
	_, err = wallets(t, sg).Insert(table.Row{"id": "w2",
		"methods": map[string]any{"pp_7": map[string]any{"source": "paypal", "balance": int64(100), "refunds": []any{int64(3)}}},
		"rates":   map[string]any{"EUR": int64(2)}, "history": []any{map[string]any{"GBP": int64(1)}}})
	require.NoError(t, err)
	_, err = wallets(t, sg).Update(table.Row{"methods": map[string]any{
		"gc_1": map[string]any{"source": "gift_card", "balance": 50.0},
		"gc_2": map[string]any{"source": "gift_card", "balance": int64(7)},
	}}, where("id", "w1"))
	require.NoError(t, err)
	b, err := json.Marshal(sg.Pending())
	require.NoError(t, err)
	var back store.Pending
	require.NoError(t, json.Unmarshal(b, &back))
	require.NoError(t, st.ApplyPending(bg, &back, nil))
	assert.Equal(t, table.Row{"id": "w2",
		"methods": map[string]any{"pp_7": map[string]any{"source": "paypal", "balance": 100.0, "refunds": []any{3.0}}},
		"rates":   map[string]any{"EUR": 2.0}, "history": []any{map[string]any{"GBP": 1.0}}}, wallet(t, st, "w2"))
	assert.Equal(t, map[string]any{
		"gc_1": map[string]any{"source": "gift_card", "balance": 50.0},
		"gc_2": map[string]any{"source": "gift_card", "balance": 7.0},
	}, wallet(t, st, "w1")["methods"])

	// Where paths into maps.
	for _, tc := range []struct {
		where table.Query
		want  []any
	}{
		{where("methods.*.source", "paypal"), []any{"w2"}},
		{where("methods.*.balance", map[string]any{"$gte": 7, "$lt": 8}), []any{"w1"}},
		{where("methods.gc_1.balance", 50), []any{"w1"}},
		{where("methods.*.refunds", map[string]any{"$contains": 3}), []any{"w2"}},
		{where("rates.EUR", 2.0), []any{"w2"}},
		{where("methods.*.source", "credit_card"), []any{}},
	} {
		rows, err := wallets(t, stage(st)).Find(tc.where)
		require.NoError(t, err)
		ids := []any{}
		for _, r := range rows {
			ids = append(ids, r["id"])
		}
		assert.Equal(t, tc.want, ids, "%v", tc.where.Where)
	}

	// A predicate read through * is re-checked at apply: a wallet that gains a credit card
	// meanwhile is a phantom.
	dry := stage(st)
	rows, err := wallets(t, dry).Find(where("methods.*.source", "credit_card"))
	require.NoError(t, err)
	require.Empty(t, rows)
	_, err = wallets(t, dry).Update(table.Row{"rates": map[string]any{"EUR": 3.0}}, where("id", "w1"))
	require.NoError(t, err)
	other := stage(st)
	_, err = wallets(t, other).Update(table.Row{"methods": map[string]any{"cc_3": map[string]any{"source": "credit_card"}}}, where("id", "w2"))
	require.NoError(t, err)
	require.NoError(t, apply(st, other))
	assert.ErrorIs(t, apply(st, dry), store.ErrConflict)
	assert.Equal(t, map[string]any{"EUR": 1.0, "GBP": 0.5}, wallet(t, st, "w1")["rates"], "nothing of the dry run was written")
}
