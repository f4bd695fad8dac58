package engine

import (
	"os"
	"testing"

	"github.com/starplan/starplan/isolate"
)

// TestMain lets the test binary serve as the sandbox worker of the isolated benchmarks
// (BenchmarkNewPlan/isolated starts its pool with isolate.NewSelfPool), as the CLI does.
func TestMain(m *testing.M) {
	isolate.ServeWorkerIfAsked()
	os.Exit(m.Run())
}
