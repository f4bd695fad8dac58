package table

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// usersSchema has maps: payment methods by id (objects), credit by currency (floats) and a map
// of maps.
func usersSchema() *Schema {
	return &Schema{
		Name: "users",
		Key:  "user_id",
		Fields: []Field{
			{Name: "user_id", Type: TypeString, Required: true},
			{Name: "payment_methods", Type: TypeMap, Values: &Field{Type: TypeObject, Fields: []Field{
				{Name: "source", Type: TypeString}, {Name: "balance", Type: TypeFloat},
				{Name: "refunds", Type: TypeList, Items: &Field{Type: TypeFloat}},
			}}},
			{Name: "credit", Type: TypeMap, Values: &Field{Type: TypeFloat}},
			{Name: "limits", Type: TypeMap, Values: &Field{Type: TypeMap, Values: &Field{Type: TypeInt}}},
		},
	}
}

func usersRows() []Row {
	return []Row{
		{"user_id": "U1", "payment_methods": map[string]any{
			"gc_1": map[string]any{"source": "gift_card", "balance": 57.0, "refunds": []any{10.0}},
			"cc_1": map[string]any{"source": "credit_card"},
		}, "credit": map[string]any{"USD": 5.0}, "limits": map[string]any{"daily": map[string]any{"USD": int64(100)}}},
		{"user_id": "U2", "payment_methods": map[string]any{"pp_1": map[string]any{"source": "paypal", "balance": 3.0}}},
		{"user_id": "U3", "payment_methods": map[string]any{}},
		{"user_id": "U4", "payment_methods": "not a dict"},
		{"user_id": "U5"},
	}
}

func matchingUsers(t *testing.T, where map[string]any) []string {
	t.Helper()
	m, err := Compile(usersSchema(), where)
	require.NoError(t, err)
	ids := []string{}
	for _, r := range usersRows() {
		if m.Match(r) {
			ids = append(ids, r["user_id"].(string))
		}
	}
	return ids
}

func TestCompileMapMatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		where map[string]any
		want  []string
	}{
		{"any entry", map[string]any{"payment_methods.*.source": "gift_card"}, []string{"U1"}},
		{"any entry, operators on one entry", map[string]any{"payment_methods.*.balance": map[string]any{"$gt": 2, "$lt": 4}}, []string{"U2"}},
		{"every operator holds at the same entry", map[string]any{"payment_methods.*.balance": map[string]any{"$gt": 50, "$lt": 4}}, []string{}},
		{"$in over entries", map[string]any{"payment_methods.*.source": map[string]any{"$in": []any{"paypal", "credit_card"}}}, []string{"U1", "U2"}},
		{"$ne: some entry differs", map[string]any{"payment_methods.*.source": map[string]any{"$ne": "paypal"}}, []string{"U1"}},
		{"None: an entry without the key", map[string]any{"payment_methods.*.balance": nil}, []string{"U1"}},
		{"no entries match nothing", map[string]any{"payment_methods.*.source": map[string]any{"$nin": []any{"x"}}}, []string{"U1", "U2"}},
		{"$contains inside entries", map[string]any{"payment_methods.*.refunds": map[string]any{"$contains": 10}}, []string{"U1"}},
		{"one entry by key", map[string]any{"payment_methods.gc_1.balance": 57}, []string{"U1"}},
		{"a missing key is None", map[string]any{"payment_methods.gc_1": nil}, []string{"U2", "U3", "U4", "U5"}},
		{"a scalar map", map[string]any{"credit.USD": map[string]any{"$gte": 5}}, []string{"U1"}},
		{"any of a scalar map", map[string]any{"credit.*": 5.0}, []string{"U1"}},
		{"a map of maps", map[string]any{"limits.*.*": map[string]any{"$gt": 99}}, []string{"U1"}},
		{"whole map", map[string]any{"credit": map[string]any{"USD": 5}}, []string{"U1"}},
		{"in $or", map[string]any{"$or": []any{map[string]any{"payment_methods.*.source": "paypal"}, map[string]any{"user_id": "U3"}}}, []string{"U2", "U3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, matchingUsers(t, tc.where))
		})
	}
}

func TestCompileMapErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		where      map[string]any
		msg        string
		suggestion string
	}{
		{"unknown key inside entries", map[string]any{"payment_methods.*.sorce": "x"}, `"sorce" is not among the keys of payment_methods.*; they are source, balance, refunds`, "source"},
		{"* on an object", map[string]any{"payment_methods.*.*": "x"}, "payment_methods.* is an object: * stands for any entry of a map field only", ""},
		{"* on a scalar", map[string]any{"user_id.*": "x"}, "user_id is a string: * stands for any entry of a map field only", ""},
		{"value kind", map[string]any{"payment_methods.*.balance": "57"}, `field "payment_methods.*.balance" is a float, so $eq needs a number`, ""},
		{"no order", map[string]any{"credit": map[string]any{"$lt": 1}}, `field "credit" is a map and has no order`, ""},
		{"list for a map", map[string]any{"credit": []any{}}, `field "credit" is a map`, ""},
		{"into a scalar value", map[string]any{"credit.USD.x": 1}, "credit.USD is a float and has no keys", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(usersSchema(), tc.where)
			var qe *QueryError
			require.ErrorAs(t, err, &qe)
			assert.Contains(t, qe.Message, tc.msg)
			assert.Equal(t, tc.suggestion, qe.Suggestion)
		})
	}
	m, err := Compile(usersSchema(), map[string]any{"payment_methods.*.source": "x", "user_id": "U1"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"user_id": "U1"}, m.Equalities(), "a path is never answered from an index")
}

func TestMatchMapDoesNotAllocate(t *testing.T) {
	skipUnderRace(t)
	rows := usersRows()
	m, err := Compile(usersSchema(), map[string]any{"payment_methods.*.balance": map[string]any{"$gt": 2}, "limits.*.*": 100})
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		for _, r := range rows {
			m.Match(r)
		}
	}))
}

func TestRestoreKindsInMaps(t *testing.T) {
	s := usersSchema()
	v := map[string]any{"gc_1": map[string]any{"balance": int64(57), "refunds": []any{int64(10), 2.5}, "source": "gift_card"}}
	assert.Equal(t, map[string]any{"gc_1": map[string]any{"balance": 57.0, "refunds": []any{10.0, 2.5}, "source": "gift_card"}},
		RestoreKinds(s.Field("payment_methods"), v))
	assert.Equal(t, map[string]any{"daily": map[string]any{"USD": int64(100)}},
		RestoreKinds(s.Field("limits"), map[string]any{"daily": map[string]any{"USD": 100.0}}))
	assert.Equal(t, map[string]any{"USD": 5.0}, RestoreKinds(s.Field("credit"), map[string]any{"USD": int64(5)}))
}

// A map is diffed by key: an entry added or removed is one change with its whole value, a
// changed entry shows the paths inside it that changed, floats keep their kind.
func TestChangedPathsOfAMap(t *testing.T) {
	before := map[string]any{
		"gc_1": map[string]any{"source": "gift_card", "balance": 57.0, "refunds": []any{10.0}},
		"cc_1": map[string]any{"source": "credit_card", "last4": "4242"},
	}
	after := map[string]any{
		"gc_1": map[string]any{"source": "gift_card", "balance": 67.0, "refunds": []any{10.0, 10.0}},
		"gc_3": map[string]any{"source": "gift_card", "balance": 25.0},
		"x y":  map[string]any{},
	}
	assert.Equal(t, []PathChange{
		{Path: "pm.cc_1", Before: before["cc_1"], HadBefore: true},
		{Path: "pm.gc_1.balance", Before: 57.0, After: 67.0, HadBefore: true, HasAfter: true},
		{Path: "pm.gc_1.refunds[1]", After: 10.0, HasAfter: true},
		{Path: "pm.gc_3", After: after["gc_3"], HasAfter: true},
		{Path: `pm["x y"]`, After: map[string]any{}, HasAfter: true},
	}, ChangedPaths("pm", before, after))
	assert.Equal(t, []PathChange{{Path: "c.USD", Before: 57.0, After: int64(57), HadBefore: true, HasAfter: true}},
		ChangedPaths("c", map[string]any{"USD": 57.0}, map[string]any{"USD": int64(57)}), "57.0 and 57 differ")

	// Past MaxPathLeaves the rest of a map is one part, holding the entries as they are.
	big, bigger := map[string]any{}, map[string]any{}
	for i := range 2 * MaxPathLeaves {
		k := string(rune('a'+i/26%26)) + string(rune('a'+i%26)) + string(rune('a'+i/676))
		big[k] = map[string]any{"n": int64(i)}
		bigger[k] = map[string]any{"n": int64(i)}
	}
	bigger["zzz"] = map[string]any{"n": int64(1)}
	got := ChangedPaths("m", big, bigger)
	require.Len(t, got, 1)
	assert.Equal(t, "m{…}", got[0].Path)
	assert.Equal(t, map[string]any{"n": int64(1)}, got[0].After.(map[string]any)["zzz"], "the whole entry, as it is")
}

// FuzzCompileMaps compiles arbitrary JSON filters against a schema of maps and matches them
// against rows of every shape (maps, empty maps, None, a value that is not a dict): Compile
// fails only with a *QueryError, Match never panics, and a "*" condition matches a row exactly
// when the same condition on one of the row's keys does.
func FuzzCompileMaps(f *testing.F) {
	for _, seed := range []string{
		`{"payment_methods.*.source": "gift_card"}`, `{"payment_methods.*.balance": {"$gt": 2, "$lt": 60}}`,
		`{"limits.*.*": {"$in": [100, null]}}`, `{"credit.*": {"$ne": 5}}`, `{"payment_methods.*.refunds": {"$contains": 10}}`,
		`{"$or": [{"credit.*": null}, {"payment_methods.gc_1": null}]}`, `{"payment_methods.*": {"source": "paypal", "balance": 3}}`,
	} {
		f.Add([]byte(seed))
	}
	schema := usersSchema()
	rows := append(usersRows(), Row{"user_id": "U6", "credit": map[string]any{"a": "x"}, "limits": map[string]any{"d": nil}})
	f.Fuzz(func(t *testing.T, data []byte) {
		var where map[string]any
		if json.Unmarshal(data, &where) != nil {
			return
		}
		m, err := Compile(schema, where)
		if err != nil {
			var qe *QueryError
			require.ErrorAs(t, err, &qe)
			return
		}
		for _, r := range rows {
			got := m.Match(r)
			// One top-level "field.*" condition: the same as some key's condition.
			if len(where) != 1 {
				continue
			}
			for key, cond := range where {
				field, rest, ok := strings.Cut(key, ".*")
				if !ok || strings.Contains(rest, "*") {
					continue
				}
				entries, _ := r[field].(map[string]any)
				want := false
				for k := range entries {
					if strings.Contains(k, ".") || k == Wildcard {
						continue
					}
					one, err := Compile(schema, map[string]any{field + "." + k + rest: cond})
					require.NoError(t, err)
					want = want || one.Match(r)
				}
				require.Equal(t, want, got, "%s on %v", data, r)
			}
		}
	})
}
