package cli

import (
	"os"
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
	code := pgtest.Main(m) // m.Run, then the throw-away PostgreSQL stopped
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binDir is the directory of the starplan binary the package's tests share ("" until built).
var binDir string
