package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// edited is the shipped library domain with domain.json changed by edit.
func edited(t *testing.T, edit func(d map[string]any)) *store.Domain {
	t.Helper()
	lib := shippedLibrary(t)
	var d map[string]any
	require.NoError(t, json.Unmarshal([]byte(lib.Definition[store.DomainFile]), &d))
	edit(d)
	b, err := json.Marshal(d)
	require.NoError(t, err)
	def := map[string]string{}
	for k, v := range lib.Definition {
		def[k] = v
	}
	def[store.DomainFile] = string(b)
	next, err := store.DomainFromDefinition(def)
	require.NoError(t, err)
	return next
}

func tableOf(d map[string]any, name string) map[string]any {
	for _, t := range d["tables"].([]any) {
		if t := t.(map[string]any); t["name"] == name {
			return t
		}
	}
	return nil
}

// An upgrade refuses a table that holds rows disappearing or changing its key, naming each;
// it adds a new table, empty, and the store reopens with it and writes to it.
func TestUpgradeDomainTables(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{Domain: shippedLibrary(t)})
	require.NoError(t, err)
	defer s.Close()

	gone := edited(t, func(d map[string]any) {
		var keep []any
		for _, t := range d["tables"].([]any) {
			if t.(map[string]any)["name"] != "fines" {
				keep = append(keep, t)
			}
		}
		d["tables"] = keep
		tableOf(d, "loans")["key"] = "member_id"
		delete(tableOf(d, "loans"), "indexes")
	})
	err = s.UpgradeDomain(ctx, gone)
	var ue *store.UpgradeError
	require.True(t, errors.As(err, &ue), "%v", err)
	var got []string
	for _, p := range ue.Problems {
		got = append(got, p.String())
	}
	assert.Contains(t, got[0], "fines: holds")
	assert.Contains(t, got[1], "loans field member_id: the key changes from loan_id to member_id")

	added := edited(t, func(d map[string]any) {
		d["tables"] = append(d["tables"].([]any), map[string]any{"name": "rooms", "key": "room_id",
			"fields": []any{map[string]any{"name": "room_id", "type": "string", "required": true}}})
	})
	require.NoError(t, s.UpgradeDomain(ctx, added))
	r := reopen(t, s)
	assert.Contains(t, r.Names(), "rooms")
	require.NoError(t, r.Close())
	w, err := Open(r.Dir(), Options{})
	require.NoError(t, err)
	st := w.Stage()
	_, err = tbl(t, st, "rooms").Insert(map[string]any{"room_id": "R1"})
	require.NoError(t, err)
	require.NoError(t, w.ApplyPending(ctx, st.Pending(), nil))
	require.NoError(t, w.Close())
	rep, err := Check(r.Dir(), store.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep)
}

// A field whose type changes under rows that hold it is refused, naming a row: the new schema
// would take 2.0 as the int 2 by converting it, but the row would keep its float on disk, read
// back as a float from an int field, with nothing to find it (review). A type change over
// values that are absent is fine.
func TestUpgradeRefusesATypeChangeUnderRows(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{Domain: shippedLibrary(t)})
	require.NoError(t, err)
	defer s.Close()

	toInt := edited(t, func(d map[string]any) {
		for _, f := range tableOf(d, "fines")["fields"].([]any) {
			if f := f.(map[string]any); f["name"] == "amount" {
				f["type"] = "int"
			}
		}
	})
	err = s.UpgradeDomain(ctx, toInt)
	var ue *store.UpgradeError
	require.True(t, errors.As(err, &ue), "%v", err)
	require.NotEmpty(t, ue.Problems)
	p := ue.Problems[0]
	assert.Equal(t, "fines", p.Table)
	assert.Equal(t, "amount", p.Field)
	assert.Contains(t, p.Problem, "is stored as float, and the new definition stores int there")
	assert.Contains(t, p.Problem, "a field's type cannot change under rows that hold it")
	sc, _ := s.Schema("fines")
	assert.Equal(t, "float", sc.Field("amount").Type, "nothing changed")
}
