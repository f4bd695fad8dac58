package builtins

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/syntax"
)

// guardedLines rewrites src and returns, per line, the guards its rewrite calls there. It
// rewrites src a second time as a check does (GuardTreeSeen after the check's walk) and fails
// unless both rewrites call the same guards.
func guardedLines(t *testing.T, src string) map[int][]string {
	t.Helper()
	f, err := (&syntax.FileOptions{}).Parse("plan.star", src, 0)
	require.NoError(t, err)
	GuardTree(f)
	got := guardCalls(f)
	f, err = (&syntax.FileOptions{}).Parse("plan.star", src, 0)
	require.NoError(t, err)
	var seen NumericNames
	syntax.Walk(f, func(n syntax.Node) bool {
		seen.Visit(n)
		return true
	})
	GuardTreeSeen(f, &seen)
	require.Equal(t, got, guardCalls(f), "GuardTreeSeen and GuardTree differ on %q", src)
	return got
}

// guardCalls returns, per line, the guards f calls there.
func guardCalls(f *syntax.File) map[int][]string {
	got := map[int][]string{}
	syntax.Walk(f, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok {
			if id, ok := c.Fn.(*syntax.Ident); ok && len(id.Name) > len(GuardPrefix) && id.Name[:len(GuardPrefix)] == GuardPrefix {
				got[int(id.NamePos.Line)] = append(got[int(id.NamePos.Line)], id.Name)
			}
		}
		return true
	})
	return got
}

// A name that only ever holds numbers needs no guard where it decides the operation; any other
// binding of the name, in any scope, keeps every guard.
func TestGuardTreeSkipsOperationsOnNumbers(t *testing.T) {
	for _, tc := range []struct {
		src     string
		line    int
		guarded bool
	}{
		// An accumulator: 0.0, then += anything.
		{"total = 0.0\nfor x in xs:\n    total += x\n", 3, false},
		{"total = 0\ntotal -= 1\ny = total + x\n", 3, false},
		{"n = -1\nm = n * 2\nz = m + x\n", 3, false},
		{"n = 7 / x\ny = n + x\n", 2, false},
		{"n = len(x)\ny = n + x\n", 2, true}, // a call is not known: len could be rebound
		{"y = x + 1\n", 1, false},
		{"n = 1\nm = n + s\nm += x\n", 3, false}, // n + s is a number or fails
		// Bound to something else somewhere: guarded everywhere.
		{"total = 0\ntotal = 'a'\ns = total + x\n", 3, true},
		{"n = 0\nfor n in xs:\n    pass\ny = n + x\n", 4, true},
		{"n = 1\ndef f(n):\n    return n + x\n", 3, true},
		{"n = 1\nf = lambda n: n + x\n", 2, true},
		{"n = 1\nys = [n + x for n in xs]\n", 2, true},
		{"n = 1\nn, m = 'a', 'b'\ny = n + x\n", 3, true},
		{"n = 1\nn *= x\ny = n + x\n", 3, true},
		{"n = 1\ndef n():\n    pass\ny = n + x\n", 4, true},
		// * and % of numbers charge big-integer work: only literals go without.
		{"k = 2\ns = k * x\n", 2, true},
		{"k = 2\ns = k * k\n", 2, true},
		{"s = 2 * 3.5\n", 1, false},
		{"k = 2\ns = k % x\n", 2, true},
		{"s = 7 % 3\n", 1, false},
		// % and // may divide floats, which the guards do as Python: only int literals go without.
		{"s = 7 % x\n", 1, true},
		{"s = 7.5 % 2\n", 1, true},
		{"s = 7 // 2\n", 1, false},
		{"s = 1 // 0.1\n", 1, true},
		{"s = x // y\n", 1, true},
		{"n = 5\nn //= y\n", 2, true},
		{"n = 5\nn %= y\n", 2, true},
		{"xs[f()] //= 2.0\n", 1, true},
	} {
		t.Run(fmt.Sprintf("%q", tc.src), func(t *testing.T) {
			guards := guardedLines(t, tc.src)[tc.line]
			if tc.guarded {
				assert.NotEmpty(t, guards)
			} else {
				assert.Empty(t, guards)
			}
		})
	}
}

// n % 2 and n // 2 of a number are numbers, guarded or not: a + with one on a side needs no guard.
func TestGuardTreeKeepsModAndFloorDivNumeric(t *testing.T) {
	got := guardedLines(t, "n = 1.5\ny = n % 2 + x\nz = n // 2 + x\nw = s % 2 + x\n")
	assert.Equal(t, []string{nameMod}, got[2])
	assert.Equal(t, []string{nameFloorDiv}, got[3])
	assert.ElementsMatch(t, []string{nameAdd, nameMod}, got[4], "s is not known to be a number")
}
