// Package testtier says which tier of the test suite is running. The normal tier is what
// `go test -race ./...` runs and CI runs (.ci/run): every guarantee, scale tests at a reduced
// size. The long tier (STARPLAN_LONG=1 in the environment) runs the scale tests at full size and
// the tests that only make sense at scale. Only tests import it; it must not import anything but
// the standard library.
package testtier

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Env is the environment variable that selects the long tier when it is set to 1.
const Env = "STARPLAN_LONG"

// Long reports whether the long tier runs (STARPLAN_LONG=1).
func Long() bool { return os.Getenv(Env) == "1" }

// Size returns normal in the normal tier and long in the long tier: the size of a scale test
// (kills, rows, blocks, rounds) in each.
func Size[T any](normal, long T) T {
	if Long() {
		return long
	}
	return normal
}

// LongOnly skips t outside the long tier, saying why it is long and the command that runs it.
// A test that calls it must leave a reduced form of its guarantee in the normal tier (another
// test, or the same at a smaller Size), or say in why where that lives.
func LongOnly(t testing.TB, why string) {
	t.Helper()
	if !Long() {
		t.Skip(Hint(t, why))
	}
}

// Hint is the sentence a test of the long tier logs or skips with in the normal tier: why, and
// the command that runs t in the long tier.
func Hint(t testing.TB, why string) string {
	return fmt.Sprintf("long tier (%s): run it with %s=1 go test -race ./%s -run '^%s$'", why, Env, pkgDir(), t.Name())
}

// pkgDir is the test's package directory relative to the module root (go test runs a test in
// its package's directory), or "..." when the module root is not found.
func pkgDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "..."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return ""
			}
			return filepath.ToSlash(rel) + "/"
		}
		if filepath.Dir(dir) == dir {
			return "..."
		}
	}
}
