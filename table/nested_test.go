package table

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ordersSchema() *Schema {
	return &Schema{
		Name: "orders",
		Key:  "order_id",
		Fields: []Field{
			{Name: "order_id", Type: TypeString, Required: true},
			{Name: "address", Type: TypeObject, Fields: []Field{
				{Name: "city", Type: TypeString},
				{Name: "geo", Type: TypeObject, Fields: []Field{{Name: "lat", Type: TypeFloat}}},
			}},
			{Name: "lines", Type: TypeList, Items: &Field{Type: TypeObject, Fields: []Field{
				{Name: "sku", Type: TypeString}, {Name: "qty", Type: TypeInt},
			}}},
			{Name: "tags", Type: TypeList, Items: &Field{Type: TypeString}},
			{Name: "any", Type: TypeList},
			{Name: "options", Type: TypeObject, Additional: true},
		},
	}
}

func ordersRows() []Row {
	return []Row{
		{"order_id": "O1", "address": map[string]any{"city": "Oslo", "geo": map[string]any{"lat": 59.9}},
			"lines": []any{map[string]any{"sku": "A", "qty": int64(2)}}, "tags": []any{"gift", "rush"},
			"any": []any{int64(1), "x"}, "options": map[string]any{"wrap": true}},
		{"order_id": "O2", "address": map[string]any{"city": "Bergen"}, "tags": []any{"Gift"},
			"lines": []any{map[string]any{"sku": "A", "qty": int64(3)}, map[string]any{"sku": "B", "qty": int64(1)}}},
		{"order_id": "O3", "address": "not a dict", "tags": []any{}},
		{"order_id": "O4"},
	}
}

func matchingOrders(t *testing.T, where map[string]any) []string {
	t.Helper()
	m, err := Compile(ordersSchema(), where)
	require.NoError(t, err)
	ids := []string{}
	for _, r := range ordersRows() {
		if m.Match(r) {
			ids = append(ids, r["order_id"].(string))
		}
	}
	return ids
}

func TestCompileNestedMatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		where map[string]any
		want  []string
	}{
		{"whole list", map[string]any{"tags": []any{"gift", "rush"}}, []string{"O1"}},
		{"whole list in order", map[string]any{"tags": []any{"rush", "gift"}}, []string{}},
		{"empty list", map[string]any{"tags": []any{}}, []string{"O3"}},
		{"whole object as a value", map[string]any{"address": map[string]any{"city": "Bergen"}}, []string{"O2"}},
		{"whole object by $eq", map[string]any{"address": map[string]any{"$eq": map[string]any{"city": "Bergen"}}}, []string{"O2"}},
		{"whole object $ne", map[string]any{"address": map[string]any{"$ne": map[string]any{"city": "Bergen"}}}, []string{"O1", "O3", "O4"}},
		{"numbers across kinds", map[string]any{"lines": []any{map[string]any{"sku": "A", "qty": 2.0}}}, []string{"O1"}},
		{"$in of lists", map[string]any{"tags": map[string]any{"$in": []any{[]any{"Gift"}, []any{}}}}, []string{"O2", "O3"}},
		{"$contains element", map[string]any{"tags": map[string]any{"$contains": "gift"}}, []string{"O1"}},
		{"$contains object element", map[string]any{"lines": map[string]any{"$contains": map[string]any{"sku": "B", "qty": 1}}}, []string{"O2"}},
		{"$contains untyped", map[string]any{"any": map[string]any{"$contains": 1}}, []string{"O1"}},
		{"$icontains element", map[string]any{"tags": map[string]any{"$icontains": "GIFT"}}, []string{"O1", "O2"}},
		{"path", map[string]any{"address.city": "Oslo"}, []string{"O1"}},
		{"path operator", map[string]any{"address.city": map[string]any{"$startswith": "B"}}, []string{"O2"}},
		{"deep path", map[string]any{"address.geo.lat": map[string]any{"$gt": 50}}, []string{"O1"}},
		{"path missing is None", map[string]any{"address.city": nil}, []string{"O3", "O4"}},
		{"additional key path", map[string]any{"options.wrap": true}, []string{"O1"}},
		{"in $or", map[string]any{"$or": []any{map[string]any{"address.city": "Oslo"}, map[string]any{"tags": []any{}}}}, []string{"O1", "O3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, matchingOrders(t, tc.where))
		})
	}
}

func TestCompileNestedErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		where      map[string]any
		msg        string
		suggestion string
	}{
		{"unknown key", map[string]any{"address.cty": "Oslo"}, `"cty" is not among the keys of address; they are city, geo`, "city"},
		{"unknown deep key", map[string]any{"address.geo.latt": 1}, `"latt" is not among the keys of address.geo`, "lat"},
		{"unknown field of a path", map[string]any{"adress.city": "Oslo"}, `unknown field "adress"`, "address"},
		{"into a list", map[string]any{"lines.qty": 1}, "lines is a list: a path cannot go into its elements", ""},
		{"into a scalar", map[string]any{"address.city.x": 1}, "address.city is a string and has no keys", ""},
		{"scalar for a list", map[string]any{"tags": "gift"}, `for an element use {"tags": {"$contains": ...}}`, ""},
		{"list for an object", map[string]any{"address": []any{"Oslo"}}, `field "address" is an object`, ""},
		{"element kind", map[string]any{"tags": map[string]any{"$contains": 1}}, `field "tags[]" is a string, so $contains needs a string`, ""},
		{"no order", map[string]any{"tags": map[string]any{"$lt": []any{}}}, `field "tags" is a list and has no order`, ""},
		{"mixed operator dict", map[string]any{"address": map[string]any{"$eq": map[string]any{}, "city": "Oslo"}}, `unknown operator "city"`, ""},
		{"path type", map[string]any{"address.city": 5}, `field "address.city" is a string, so $eq needs a string`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(ordersSchema(), tc.where)
			var qe *QueryError
			require.ErrorAs(t, err, &qe)
			assert.Contains(t, qe.Message, tc.msg)
			assert.Equal(t, tc.suggestion, qe.Suggestion)
		})
	}
}

// A path's equality is not offered to indexes: they hold whole field values, and an index of
// "address.city" would find no row.
func TestEqualitiesLeavePathsOut(t *testing.T) {
	m, err := Compile(ordersSchema(), map[string]any{"address.city": "Oslo", "order_id": "O1"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"order_id": "O1"}, m.Equalities())
}

func TestRestoreKinds(t *testing.T) {
	s := &Field{Name: "lines", Type: TypeList, Items: &Field{Type: TypeObject, Additional: true, Fields: []Field{
		{Name: "qty", Type: TypeInt}, {Name: "price", Type: TypeFloat},
	}}}
	v := []any{map[string]any{"qty": 2.0, "price": int64(3), "note": int64(1)}, nil}
	assert.Equal(t, []any{map[string]any{"qty": int64(2), "price": 3.0, "note": int64(1)}, nil}, RestoreKinds(s, v))
	assert.Equal(t, "x", RestoreKinds(s, "x"), "a value of another kind is left to validation")
}

func TestPathKey(t *testing.T) {
	assert.Equal(t, ".city", PathKey("city"))
	assert.Equal(t, `["two words"]`, PathKey("two words"))
	assert.Equal(t, `["1a"]`, PathKey("1a"))
	assert.Equal(t, `[""]`, PathKey(""))
	assert.Equal(t, "[3]", PathIndex(3))
}

func TestLeavesQuotePathKeysThatAreNotNames(t *testing.T) {
	got := map[string]any{}
	for _, l := range Leaves("m", map[string]any{"two words": int64(1), "ok_1": []any{}, "1x": map[string]any{"a": true}}) {
		got[l.Path] = l.Value
	}
	assert.Equal(t, map[string]any{`m["1x"].a`: true, "m.ok_1": []any{}, `m["two words"]`: int64(1)}, got)
}

func TestLeavesSplitAHugeValueAtMostMaxPathLeavesTimes(t *testing.T) {
	big := make([]any, 5*MaxPathLeaves)
	for i := range big {
		big[i] = int64(i)
	}
	ls := Leaves("xs", big)
	require.Equal(t, MaxPathLeaves+1, len(ls), "the rest of the value is one leaf")
	assert.Equal(t, "xs[200:]", ls[MaxPathLeaves].Path)
	assert.Equal(t, big[MaxPathLeaves:], ls[MaxPathLeaves].Value)
}

func TestChangedPaths(t *testing.T) {
	before := map[string]any{"city": "Oslo", "geo": []any{1.5, int64(2)}}
	after := map[string]any{"city": "Bergen", "geo": []any{1.5, 2.0, nil}}
	assert.Equal(t, []PathChange{
		{Path: "a.city", Before: "Oslo", After: "Bergen", HadBefore: true, HasAfter: true},
		{Path: "a.geo[1]", Before: int64(2), After: 2.0, HadBefore: true, HasAfter: true},
		{Path: "a.geo[2]", After: nil, HasAfter: true},
	}, ChangedPaths("a", before, after), "a kind change is a change; a new element is only after")
	assert.Empty(t, ChangedPaths("a", before, before))

	b := Row{"id": "x", "n": int64(1), "a": before}
	a := Row{"id": "x", "n": int64(2), "a": after}
	assert.Equal(t, []string{"a.city", "a.geo[1]", "a.geo[2]", "n"}, UpdatePaths(b, a, []string{"a", "n"}))
	assert.Nil(t, UpdatePaths(b, Row{"id": "x", "n": int64(2), "a": before}, []string{"n"}), "no nested change: no paths")
	u := NewUpdate("x", b, a, []string{"a", "n"})
	assert.Equal(t, UpdatePaths(b, a, []string{"a", "n"}), u.Paths)
}
