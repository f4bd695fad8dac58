package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reopener closes st, a store whose UpgradeDomain returned nil, and opens the same store again
// with the definition it recorded (as a command does), closing it when the test ends.
type Reopener func(t testing.TB, st store.Store) store.Store

// Defined is dom with its definition files (domain.json: dom as JSON), as a domain read from a
// directory has them, so that a store records it and opens again with it. The seed is kept.
func Defined(t testing.TB, dom *store.Domain) *store.Domain {
	t.Helper()
	raw, err := json.Marshal(dom)
	require.NoError(t, err)
	d, err := store.DomainFromDefinition(map[string]string{store.DomainFile: string(raw)})
	require.NoError(t, err)
	d.Seed = dom.Seed
	return d
}

// upgraded is Domain() changed by edit (its items table given), with its definition files.
func upgraded(t testing.TB, edit func(d *store.Domain, items *table.Schema)) *store.Domain {
	t.Helper()
	d := Domain()
	edit(d, d.Tables[0])
	return Defined(t, d)
}

// RunUpgrade runs the conformance suite's part for store.DomainUpgrader against the stores
// open makes (of Defined(Domain())), reopened after an upgrade by reopen.
func RunUpgrade(t *testing.T, open Opener, reopen Reopener) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, st store.Store, reopen Reopener)
	}{
		{"AddsFieldTableIndex", testUpgradeAdds},
		{"RefusesOffendersWritesNothing", testUpgradeRefusesRows},
		{"RefusesTableAndKeyChangesUnderRows", testUpgradeRefusesTables},
		{"RefusesTypeChangeUnderRows", testUpgradeRefusesTypeChange},
		{"RefusesAnotherDomain", testUpgradeOtherDomain},
		{"DropsAndRemakesEmptyOnes", testUpgradeDropsEmpty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t, Defined(t, Domain()))
			_, ok := st.(store.DomainUpgrader)
			require.True(t, ok, "the store is no store.DomainUpgrader")
			tc.fn(t, st, reopen)
		})
	}
}

func upgrade(st store.Store, dom *store.Domain, extra ...store.SysDoc) error {
	return st.(store.DomainUpgrader).UpgradeDomain(bg, dom, extra...)
}

// withNoteAndBins adds to items an optional note (at most 20 characters, indexed) and an
// optional bin (an int >= 0), and a table bins keyed by a string id.
func withNoteAndBins(d *store.Domain, it *table.Schema) {
	zero := 0.0
	it.Fields = append(it.Fields,
		table.Field{Name: "note", Type: table.TypeString, MaxLen: 20},
		table.Field{Name: "bin", Type: table.TypeInt, Min: &zero})
	it.Indexes = append(it.Indexes, "note")
	d.Tables = append(d.Tables, &table.Schema{Name: "bins", Key: "id", Fields: []table.Field{
		{Name: "id", Type: table.TypeString, Required: true},
		{Name: "cap", Type: table.TypeInt},
	}})
}

// An upgrade that adds optional fields, an index and a table keeps every row, records the
// definition and the extra documents; the store opened again writes and reads the new fields
// (by the new index too) and the new table, and holds the rows to the new schemas.
func testUpgradeAdds(t *testing.T, st store.Store, reopen Reopener) {
	dom := upgraded(t, withNoteAndBins)
	require.NoError(t, upgrade(st, dom, store.SysDoc{Collection: "upgrades", ID: "u1", Value: map[string]any{"n": 1}}))
	st = reopen(t, st)
	assert.Equal(t, []string{"bins", Items}, st.Names())
	sc, ok := st.Schema(Items)
	require.True(t, ok)
	assert.NotNil(t, sc.Field("note"))
	assert.Equal(t, dom.Definition, st.Domain().Definition)
	var doc map[string]any
	found, err := st.GetSys("upgrades", "u1", &doc)
	require.NoError(t, err)
	assert.True(t, found, "the extra document was written with the upgrade")
	assert.Equal(t, int64(3), qty(t, st, "b1"), "the rows are kept")

	sg := stage(st)
	n, err := items(t, sg).Update(table.Row{"note": "top shelf", "bin": int64(7)}, where("sku", "a2"))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	bins, ok := sg.Table("bins")
	require.True(t, ok)
	_, err = bins.Insert(table.Row{"id": "B1", "cap": int64(10)})
	require.NoError(t, err)
	require.NoError(t, apply(st, sg))

	rows, err := items(t, stage(st)).Find(where("note", "top shelf"))
	require.NoError(t, err)
	assert.Equal(t, []any{"a2"}, skus(rows))
	assert.Equal(t, int64(7), rows[0]["bin"])
	row, ok, err := mustTable(t, stage(st), "bins").Get("B1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(10), row["cap"])

	_, err = items(t, stage(st)).Update(table.Row{"bin": int64(-1)}, where("sku", "a1"))
	assert.Error(t, err, "the new field's bound holds")
}

func mustTable(t testing.TB, v table.View, name string) table.Table {
	t.Helper()
	tb, ok := v.Table(name)
	require.True(t, ok, "no table %s", name)
	return tb
}

// problemKeys lists the keys (table/key/field) of an *UpgradeError's problems.
func problemKeys(t testing.TB, err error) []string {
	t.Helper()
	var ue *store.UpgradeError
	require.True(t, errors.As(err, &ue), "want an *UpgradeError, got %v", err)
	var out []string
	for _, p := range ue.Problems {
		out = append(out, p.Table+"/"+p.Key+"/"+p.Field)
	}
	slices.Sort(out)
	return out
}

// Rows that do not fit the new definition refuse it, each named with its key and field; nothing
// changes: the store keeps its definition and serves on.
func testUpgradeRefusesRows(t *testing.T, st store.Store, _ Reopener) {
	before := st.Domain().Definition
	two := 2.0
	err := upgrade(st, upgraded(t, func(_ *store.Domain, it *table.Schema) {
		it.Fields[2].Max = &two // qty <= 2: b1 (3) and b2 (4) do not fit
	}))
	assert.Equal(t, []string{"items/b1/qty", "items/b2/qty"}, problemKeys(t, err))
	assert.ErrorContains(t, err, "nothing was changed")

	err = upgrade(st, upgraded(t, func(_ *store.Domain, it *table.Schema) {
		it.Fields = slices.Delete(it.Fields, 1, 2) // category, which every row holds
		it.Indexes = nil
	}))
	assert.Len(t, problemKeys(t, err), 4, "every row holds the dropped field")

	assert.Equal(t, before, st.Domain().Definition)
	sg := stage(st)
	_, err = items(t, sg).Update(table.Row{"qty": int64(9)}, where("sku", "b2"))
	require.NoError(t, err)
	require.NoError(t, apply(st, sg), "the store serves on under its definition")
	assert.Equal(t, int64(9), qty(t, st, "b2"))
}

// A table that holds rows can neither disappear nor change its key.
func testUpgradeRefusesTables(t *testing.T, st store.Store, _ Reopener) {
	err := upgrade(st, upgraded(t, func(d *store.Domain, it *table.Schema) {
		it.Key, it.Indexes = "category", nil
	}))
	assert.Equal(t, []string{"items//category"}, problemKeys(t, err))
	assert.ErrorContains(t, err, "the key changes from sku to category")

	err = upgrade(st, upgraded(t, func(d *store.Domain, _ *table.Schema) {
		d.Tables = []*table.Schema{{Name: "other", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeString, Required: true}}}}
		d.Seed = nil
	}))
	assert.Equal(t, []string{"items//"}, problemKeys(t, err))
	assert.ErrorContains(t, err, "holds 4 rows, and the new definition does not declare the table")
	assert.Equal(t, int64(1), qty(t, st, "a1"))
}

// A field's type cannot change under rows that hold it, even where validation would convert the
// value (an int qty made a float one).
func testUpgradeRefusesTypeChange(t *testing.T, st store.Store, _ Reopener) {
	err := upgrade(st, upgraded(t, func(_ *store.Domain, it *table.Schema) {
		it.Fields[2].Type = table.TypeFloat
	}))
	assert.Len(t, problemKeys(t, err), 4)
	assert.ErrorContains(t, err, "a field's type cannot change under rows that hold it")
}

// An upgrade is a new version of the same domain.
func testUpgradeOtherDomain(t *testing.T, st store.Store, _ Reopener) {
	err := upgrade(st, Defined(t, MapDomain()))
	var de *store.DomainError
	assert.True(t, errors.As(err, &de), "%v", err)
}

// Tables that hold nothing may go, and come back in another shape: a table dropped empty comes
// back with another key type; a field that no row holds a value in changes its type (and its
// index goes); bounds tighten over rows that fit them. (Dropping a field no row holds a value in
// is a backend's own: store/bolt keeps a None for it in the rows written since it was added, and
// refuses.)
func testUpgradeDropsEmpty(t *testing.T, st store.Store, reopen Reopener) {
	require.NoError(t, upgrade(st, upgraded(t, withNoteAndBins)))
	st = reopen(t, st)

	ten := 10.0
	require.NoError(t, upgrade(st, upgraded(t, func(d *store.Domain, it *table.Schema) {
		it.Fields[2].Max = &ten // every qty is at most 4
		it.Fields = append(it.Fields, table.Field{Name: "note", Type: table.TypeString, MaxLen: 20},
			table.Field{Name: "bin", Type: table.TypeString, Enum: []string{"top", "low"}})
		it.Indexes = append(it.Indexes, "bin")
	})))
	st = reopen(t, st)
	assert.Equal(t, []string{Items}, st.Names(), "bins, empty, is gone")
	sg := stage(st)
	_, err := items(t, sg).Update(table.Row{"bin": "top"}, where("sku", "a1"))
	require.NoError(t, err)
	require.NoError(t, apply(st, sg))
	rows, err := items(t, stage(st)).Find(where("bin", "top"))
	require.NoError(t, err)
	assert.Equal(t, []any{"a1"}, skus(rows))
	_, err = items(t, stage(st)).Update(table.Row{"qty": int64(11)}, where("sku", "a1"))
	assert.Error(t, err, "the tightened bound holds")

	require.NoError(t, upgrade(st, upgraded(t, func(d *store.Domain, it *table.Schema) {
		it.Fields[2].Max = &ten
		it.Fields = append(it.Fields, table.Field{Name: "note", Type: table.TypeString, MaxLen: 20},
			table.Field{Name: "bin", Type: table.TypeString, Enum: []string{"top", "low"}})
		d.Tables = append(d.Tables, &table.Schema{Name: "bins", Key: "n", Fields: []table.Field{
			{Name: "n", Type: table.TypeInt, Required: true},
		}})
	})))
	st = reopen(t, st)
	sg = stage(st)
	_, err = mustTable(t, sg, "bins").Insert(table.Row{"n": int64(5)})
	require.NoError(t, err)
	require.NoError(t, apply(st, sg))
	_, ok, err := mustTable(t, stage(st), "bins").Get(int64(5))
	require.NoError(t, err)
	assert.True(t, ok, "bins came back keyed by an int")
}
