package sandbox

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/sandbox/pycompat"
)

// The check gathers the guard rewrite's numeric names on its own walk of the tree
// (builtins.GuardTreeSeen); a check must compile exactly what the rewrite with its own walk
// (builtins.GuardTree) compiles. Were the check's walk to skip a subtree, a name rebound there
// (a loop variable, a parameter) could pass for a number and lose its guard.
func TestCheckWalkGuardsAsGuardTree(t *testing.T) {
	two, err := os.ReadFile("../testdata/examples/03_two_item_order.star")
	require.NoError(t, err)
	env := twoItemEnv(true)
	for _, src := range []string{
		string(two),
		// total is a number at top level, but a loop in a function rebinds it to anything.
		"total = 0\ndef f(xs):\n    for total in xs:\n        pass\n    return total\nlines = [f([[1]]), total + total]\n",
		// n is bound by a comprehension deep inside a call's keyword argument and a lambda.
		"n = 1\nm = n + n\nk = sorted([1], key = lambda n: [n for n in [n]])\ns = n * n\nn += 2\n",
		"a, b = 1, 2\nc = a + b\nd = [1] * 3\ne = \"x\".join([\"a\"]) + str(c % 2)\n",
	} {
		src := pycompat.Translate(src, pycompat.Options{Modules: env.modules}).Source
		_, prog, ds := env.compile(planFile, src)
		require.Empty(t, ds, src)
		f, err := fileOptions.Parse(planFile, src, 0)
		require.NoError(t, err)
		builtins.GuardTree(f)
		want, err := starlark.FileProgram(f, env.isPredeclared)
		require.NoError(t, err)
		var got, exp bytes.Buffer
		require.NoError(t, prog.Write(&got))
		require.NoError(t, want.Write(&exp))
		require.Equal(t, exp.Bytes(), got.Bytes(), "the check's guard rewrite differs from GuardTree's on:\n%s", src)
	}
}
