package builtins

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/syntax"
)

func parseCall(t *testing.T, src string) *syntax.CallExpr {
	t.Helper()
	e, err := (&syntax.FileOptions{}).ParseExpr("call.star", src, 0)
	require.NoError(t, err)
	call, ok := e.(*syntax.CallExpr)
	require.True(t, ok)
	return call
}

// *args and **kwargs hide how many arguments a call passes, never the keywords it names or the
// positionals it spells out.
func TestBindWithSpreadArguments(t *testing.T) {
	ps := Params{{Name: "tbl"}, {Name: "prefix", Default: `"TXN"`}}
	tests := []struct {
		src   string
		codes int
		bound []string
	}{
		{"f(*a)", 0, nil},
		{"f(**k)", 0, nil},
		{"f(1, **k)", 0, []string{"tbl"}},
		{"f(*a, prefx=1)", 1, nil},
		{"f(1, 2, 3, *a)", 1, []string{"tbl", "prefix"}},
		{"f(x, prefix=1)", 0, []string{"tbl", "prefix"}},
		{"f(prefix=1)", 1, []string{"prefix"}},
	}
	for _, tt := range tests {
		var names []string
		ds := ps.Bind("f", "f(tbl, prefix=\"TXN\")", parseCall(t, tt.src), func(i int, _ syntax.Expr) { names = append(names, ps[i].Name) })
		assert.Len(t, ds, tt.codes, "%s: %s", tt.src, ds)
		for _, d := range ds {
			assert.Equal(t, CodeWrongArguments, d.Code)
		}
		assert.Equal(t, tt.bound, names, tt.src)
	}
}

func TestParamsString(t *testing.T) {
	assert.Equal(t, "", Params(nil).String())
	assert.Equal(t, `fields, where=None, prefix="TXN"`, Params{{Name: "fields"}, {Name: "where", Default: "None"}, {Name: "prefix", Default: `"TXN"`}}.String())
}

func TestBindMessages(t *testing.T) {
	one := Params{{Name: "where"}}
	ds := one.Bind("tbl.get", "tbl.get(where)", parseCall(t, "f(1, 2)"), func(int, syntax.Expr) {})
	require.Len(t, ds, 1)
	assert.Equal(t, "tbl.get takes at most 1 argument (where); got more", ds[0].Message)
	ds = Params{{Name: "a"}, {Name: "b"}}.Bind("f", "f(a, b)", parseCall(t, "f(1, 2, 3)"), func(int, syntax.Expr) {})
	require.Len(t, ds, 1)
	assert.Equal(t, "f takes at most 2 arguments (a, b); got more", ds[0].Message)
	assert.Equal(t, 1, ds[0].Line)
	assert.Equal(t, 9, ds[0].Col)
}
