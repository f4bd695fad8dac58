package isolate

import (
	"context"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store/bolt"
)

// workerEnv makes the test binary a sandbox worker: TestMain runs WorkerMain instead of the
// tests, as the CLI's hidden worker command does.
const workerEnv = "STARPLAN_ISOLATE_TEST_WORKER"

// profileEnv, when set in a test worker's environment, names a named pipe for its CPU profile
// (newPool passes ISOLATE_WORKER_CPUPROFILE on; profile one worker at a time).
const profileEnv = "STARPLAN_ISOLATE_TEST_CPUPROFILE"

// profiled runs WorkerMain under the CPU profiler. A worker may not write files (RLIMIT_FSIZE
// is 0), so path should be a named pipe that something copies to a file. Only the worker's
// second start profiles (the first re-executes itself at once), as user 65534 when the tests
// run as root: that user must be able to open the pipe for writing.
func profiled(path string) int {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 1
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return 1
	}
	defer pprof.StopCPUProfile()
	return WorkerMain(os.Stdin, os.Stdout)
}

// modeEnv makes the test binary one of the helper processes of the OS-limit tests (see
// helperMain).
const modeEnv = "STARPLAN_ISOLATE_TEST_MODE"

func TestMain(m *testing.M) {
	ServeWorkerIfAsked() // as an embedder's main does (TestSelfPool)
	if os.Getenv(workerEnv) == "1" {
		if path := os.Getenv(profileEnv); path != "" && os.Getenv(confinedEnv) != "" {
			os.Exit(profiled(path))
		}
		os.Exit(WorkerMain(os.Stdin, os.Stdout))
	}
	if mode := os.Getenv(modeEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

// testOptions start workers from the test binary itself.
func testOptions(t testing.TB) Options {
	exe, err := os.Executable()
	require.NoError(t, err)
	return Options{Command: []string{exe}, Env: []string{workerEnv + "=1"}}
}

// newPool starts a pool that the test closes.
func newPool(t testing.TB, opts Options) *Pool {
	t.Helper()
	base := testOptions(t)
	opts.Command, opts.Env = base.Command, append(base.Env, opts.Env...)
	if path := os.Getenv("ISOLATE_WORKER_CPUPROFILE"); path != "" {
		opts.Env = append(opts.Env, profileEnv+"="+path)
	}
	p, err := NewPool(opts)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// openStore opens a store with the inventory demo data in a temporary directory.
func openStore(t testing.TB) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(t.TempDir(), bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

var fixedNow = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// job is a run of src over a fresh stage of st.
func job(st *bolt.Store, src string, limits sandbox.Limits) (sandbox.Request, *bolt.Stage) {
	stage := st.Stage()
	return sandbox.Request{
		Reply:   src,
		Inputs:  map[string]any{"user_request": "test"},
		Limits:  limits,
		View:    stage,
		Now:     fixedNow,
		Helpers: st.Domain().Definition[sandbox.HelpersFile],
	}, stage
}

var bg = context.Background()

type storeT = *bolt.Store

// resetPeakRSS resets the process's peak resident set (VmHWM) to its current resident set and
// returns it, in bytes.
func resetPeakRSS(t testing.TB) int64 {
	t.Helper()
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0), "resetting VmHWM needs Linux ≥ 4.0")
	return peakRSS(t)
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS(t testing.TB) int64 {
	t.Helper()
	n := statusField("/proc/self/status", "VmHWM:")
	require.Positive(t, n)
	return n
}

// statusField reads one "Name:   123 kB" line of a /proc status file, in bytes.
func statusField(path, name string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return parseStatusField(b, name)
}

// Which tests overlap: those marked t.Parallel() spend most of their time waiting for another
// process (a helper spinning into its processor limit, a stopped worker, a kill's grace
// period, a copy of the binary run as another user) and measure nothing of this one. The tests
// that read this process's heap, allocations or peak resident set (TestRowCostEstimate,
// TestAdversarial, the decoder's claim test) stay sequential: Go starts the parallel tests only
// after every sequential one has ended, so nothing runs beside those.
