package cli

import (
	"flag"
	"os"
	"os/exec"
	"testing"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/isolate"
)

// TestMain lets this test binary serve as the sandbox worker: commands under test start workers
// by re-executing their own executable with the hidden worker command, which here is the test
// binary. It removes the starplan binary the tests built (starplanBinary) when they are done.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == workerCommand {
		os.Exit(isolate.WorkerMain(os.Stdin, os.Stdout))
	}
	flag.Parse()
	if prebuild() {
		built.dir, _ = os.Getwd() // before any test runs
		// The whole package runs: build the binary its tests share now, beside the tests that
		// need none, instead of holding up the first one that does (and the tests waiting
		// behind it) for the build.
		go built.once.Do(buildStarplan)
	}
	code := pgtest.Main(m)   // m.Run, then the throw-away PostgreSQL stopped
	built.once.Do(func() {}) // waits for a build still under way
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// prebuild reports whether TestMain starts building the starplan binary before the tests ask
// for it: when every test runs (no -run, no -short) and there is a go command to build it with.
func prebuild() bool {
	if testing.Short() || flag.Lookup("test.run").Value.String() != "" {
		return false
	}
	_, err := exec.LookPath("go")
	return err == nil
}

// binDir is the directory of the starplan binary the package's tests share ("" until built).
var binDir string
