// Package testtier says which tier of the test suite is running. The normal tier is what
// `go test -race ./...` and CI (.ci/run) run: every guarantee, the scale tests at a reduced size.
// The long tier (STARPLAN_LONG=1 in the environment) runs the same tests with the scale ones at
// full size; no test is skipped for its tier. Only tests import it; it imports nothing but the
// standard library.
package testtier

import "os"

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
