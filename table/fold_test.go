package table

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two strings have one FoldKey exactly when strings.EqualFold calls them equal, so an index keyed
// by it finds every row an $ieq matches.
func TestFoldKeyIsEqualFold(t *testing.T) {
	for _, pair := range [][2]string{
		{"Aviator", "aVIATOR"},
		{"classic", "CLASSIC"},
		{"s", "ſ"},             // LATIN SMALL LETTER LONG S folds to s
		{"k", "\u212a"},        // KELVIN SIGN folds to k
		{"Σίσυφος", "ΣΊΣΥΦΟΣ"}, // Greek, with final sigma
		{"\xff", "\xfe"},       // invalid bytes both read as U+FFFD
		{"straße", "STRASSE"},  // not equal: EqualFold does not expand ß
		{"a", "b"},
		{"", ""},
	} {
		a, b := pair[0], pair[1]
		assert.Equal(t, strings.EqualFold(a, b), FoldKey(a) == FoldKey(b), "%q %q", a, b)
	}
	assert.Equal(t, "AVIATOR 3", FoldKey("Aviator 3"))
	plain := "NO LOWER CASE"
	assert.Equal(t, plain, FoldKey(plain))
}

func FuzzFoldKey(f *testing.F) {
	for _, s := range []string{"Aviator", "ſ", "\u212a", "Σίσυφος", "\xff", "ǅ"} {
		f.Add(s, strings.ToUpper(s))
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		// Random pairs are rarely equal ignoring case; a's own upper and lower case often are.
		for _, other := range []string{b, strings.ToUpper(a), strings.ToLower(a), strings.ToTitle(b)} {
			if strings.EqualFold(a, other) != (FoldKey(a) == FoldKey(other)) {
				t.Fatalf("EqualFold(%q, %q) = %v, keys %q %q", a, other, strings.EqualFold(a, other), FoldKey(a), FoldKey(other))
			}
		}
		if FoldKey(FoldKey(a)) != FoldKey(a) {
			t.Fatalf("FoldKey(%q) is not a fixed point", a)
		}
	})
}

// $ieq constraints every match satisfies are offered to an index; those under $or or on a path
// are not.
func TestFoldEqualities(t *testing.T) {
	s := &Schema{Name: "t", Key: "id", Fields: []Field{
		{Name: "id", Type: TypeString}, {Name: "name", Type: TypeString}, {Name: "city", Type: TypeString},
		{Name: "address", Type: TypeObject, Additional: true},
	}}
	for _, tc := range []struct {
		where map[string]any
		want  map[string]string
	}{
		{map[string]any{"name": map[string]any{"$ieq": "Aviator"}}, map[string]string{"name": "Aviator"}},
		{map[string]any{"$and": []any{map[string]any{"city": map[string]any{"$ieq": "oslo"}}}}, map[string]string{"city": "oslo"}},
		{map[string]any{"$or": []any{map[string]any{"name": map[string]any{"$ieq": "a"}}, map[string]any{"city": "b"}}}, nil},
		{map[string]any{"address.city": map[string]any{"$ieq": "oslo"}}, nil},
		{map[string]any{"name": "Aviator"}, nil},
	} {
		m, err := Compile(s, tc.where)
		require.NoError(t, err)
		assert.Equal(t, tc.want, m.FoldEqualities(), "%v", tc.where)
	}
}
