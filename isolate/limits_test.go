//go:build linux

package isolate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store/bolt"
)

// allocate256MiB asks for 256 MiB in one block and touches every page, printing what it got:
// a helper whose data limit holds dies before it prints.
func allocate256MiB() int {
	b := make([]byte, 256<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	fmt.Println("allocated", len(b))
	return 0
}

// helperMain is the body of the helper processes that check one OS limit each, outside any
// pool: what they print and their exit code are the evidence.
func helperMain(mode string) int {
	switch mode {
	case "rlimit-data":
		// Allowed 64 MiB over its data segment, the process asks for 256 MiB in one block.
		if err := setRunLimits(vmData()+64<<20, 60); err != nil {
			fmt.Println("setRunLimits:", err)
			return 1
		}
		return allocate256MiB()
	case "rlimit-data-again":
		// The worker's limits as a worker sets them run after run: a first run with room, then
		// one allowed 64 MiB over the data segment, which asks for 256 MiB.
		var l runLimits
		for _, data := range []int64{1 << 40, 1 << 40, vmData() + 64<<20} {
			if err := l.apply(data, 60); err != nil {
				fmt.Println("runLimits.apply:", err)
				return 1
			}
		}
		return allocate256MiB()
	case "memory-watch":
		// A watch that has stopped never fires; a watch started again does, at its new ceiling.
		// The process computes while it waits: the watch counts processor time where it can.
		var w memoryWatch
		w.start(1 << 50)
		w.stop()
		w.start(goTotal() + 16<<20)
		w.stop()
		held := make([][]byte, 0, 64)
		for range 64 {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			held = append(held, b)
		}
		compute(50 * memoryWatchInterval)
		fmt.Println("a stopped watch let the process be")
		w.start(goTotal() - 8<<20)
		compute(20 * time.Second)
		fmt.Println("not stopped", len(held))
		return 0
	case "rlimit-cpu":
		exitOnCPULimit()
		if err := setRunLimits(1<<40, 1); err != nil {
			fmt.Println("setRunLimits:", err)
			return 1
		}
		computeCPU(20 * time.Second)
		fmt.Println("spun for 20 s of processor time")
		return 0
	case "seccomp":
		return seccompProbe()
	case "unprivileged-pool":
		return unprivilegedPool()
	case "no-seccomp-worker":
		// A worker started under a filter that denies seccomp itself: it cannot add its own.
		// (The filter survives the worker's re-execution, which must not install it twice.)
		if os.Getenv(confinedEnv) == "" {
			if err := denySyscalls(unix.SYS_SECCOMP); err != nil {
				fmt.Fprintln(os.Stderr, "denySyscalls:", err)
				return 1
			}
		}
		return WorkerMain(os.Stdin, os.Stdout)
	}
	fmt.Println("unknown mode", mode)
	return 2
}

// seccompProbe installs the worker's filter and makes the calls it must deny and the calls a
// worker needs, from several threads. It prints "denied" when every call went as it must.
func seccompProbe() int {
	if w := confine(); len(w) > 0 { // as a worker does: this re-executes the probe once
		fmt.Println("confine:", w)
		return 1
	}
	// Before the filter: what the probe needs later.
	status, err := os.Open("/proc/self/status")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if err := installWorkerFilter(); err != nil {
		fmt.Println("installWorkerFilter:", err)
		return 1
	}
	failed := false
	denied := func(what string, err error) {
		if !errors.Is(err, syscall.EPERM) {
			fmt.Printf("%s: %v, want EPERM\n", what, err)
			failed = true
		}
	}
	// Every thread is filtered, not only the one that installed the filter, and new threads
	// still start (each goroutine below locks one).
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			runtime.LockOSThread()
			fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
			if err == nil {
				syscall.Close(fd)
			}
			errs <- err
		}()
	}
	for range 8 {
		denied("socket on a thread", <-errs)
	}
	if _, err := net.DialTimeout("tcp", "127.0.0.1:9", time.Second); err == nil || !strings.Contains(err.Error(), "operation not permitted") {
		fmt.Println("dial:", err)
		failed = true
	}
	_, err = syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	denied("socketpair", err)
	_, err = os.Open("/proc/self/status")
	denied("open", err)
	_, err = os.Stat("/")
	denied("stat", err)
	_, err = os.ReadDir(".")
	denied("reading the working directory", err)
	err = syscall.Exec("/proc/self/exe", []string{"x"}, nil)
	denied("execve", err)
	_, err = syscall.ForkExec("/proc/self/exe", []string{"x"}, nil)
	if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.ENOSYS) {
		fmt.Println("fork:", err)
		failed = true
	}
	_, err = unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON)
	denied("executable mmap", err)
	m, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		fmt.Println("mmap:", err)
		return 1
	}
	denied("mprotect to executable", unix.Mprotect(m, unix.PROT_READ|unix.PROT_EXEC))
	var lim unix.Rlimit
	denied("prlimit of another process", unix.Prlimit(1, unix.RLIMIT_NOFILE, nil, &lim))
	denied("kill", syscall.Kill(1, 0))
	denied("tgkill of another process", unix.Tgkill(1, 1, 0))
	denied("setuid", syscall.Setuid(0))
	denied("ptrace", syscall.PtraceAttach(1))
	_, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)
	denied("io_uring_setup", errno)
	_, _, errno = unix.Syscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
	denied("unshare", errno)
	// What a worker does between runs still works.
	if err := setRunLimits(1<<40, 60); err != nil {
		fmt.Println("setRunLimits:", err)
		failed = true
	}
	b := make([]byte, 1<<10)
	if n, err := status.ReadAt(b, 0); n == 0 {
		fmt.Println("reading an open file:", err)
		failed = true
	}
	time.Sleep(time.Millisecond)
	if failed {
		return 1
	}
	fmt.Println("denied")
	return 0
}

// compute computes for d of wall-clock time.
func compute(d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
	}
}

// computeCPU spins until the process has used d of processor time: how long that takes on the
// clock depends on the machine's load, what a processor-time limit counts does not.
func computeCPU(d time.Duration) {
	for {
		for range 1 << 16 {
		}
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil ||
			time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= d {
			return
		}
	}
}

// helper runs the test binary in a helper mode and returns its output and exit code.
func helper(t *testing.T, mode string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = []string{modeEnv + "=" + mode}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &ee, out.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// TestDataLimitIsHard: past RLIMIT_DATA the kernel refuses memory and the Go runtime dies with
// the error the pool reads as the memory limit.
func TestDataLimitIsHard(t *testing.T) {
	t.Parallel() // waits for another process (main_test.go: which tests overlap)
	out, code := helper(t, "rlimit-data")
	assert.NotEqual(t, 0, code, out)
	assert.NotContains(t, out, "allocated")
	assert.True(t, outOfMemory(out), "the pool would read this as the memory limit: %.300s", out)
}

// TestDataLimitIsHardRunAfterRun: a worker's later run whose data limit differs from the one
// before it gets its own limit (the worker calls the kernel only when a limit changes).
func TestDataLimitIsHardRunAfterRun(t *testing.T) {
	t.Parallel() // waits for another process (main_test.go: which tests overlap)
	out, code := helper(t, "rlimit-data-again")
	assert.NotEqual(t, 0, code, out)
	assert.NotContains(t, out, "allocated")
	assert.True(t, outOfMemory(out), "the pool would read this as the memory limit: %.300s", out)
}

// TestMemoryWatch: a run's memory watch stops the process with exitMemory once the runtime's
// memory passes the run's ceiling, and a watch that has stopped (the run ended) does not.
func TestMemoryWatch(t *testing.T) {
	out, code := helper(t, "memory-watch")
	assert.Equal(t, exitMemory, code, out)
	assert.Contains(t, out, "a stopped watch let the process be")
	assert.Contains(t, out, "over the run's ceiling")
	assert.NotContains(t, out, "not stopped")
}

// TestCPULimit: past the soft RLIMIT_CPU the kernel sends SIGXCPU, and the process exits with
// the code the pool reads as the time limit.
// The helper spins for 20 s of processor time unless the 1 s limit stops it, so the exit code
// alone says which happened, however loaded the machine (a bound on the clock did not: a busy
// machine gives the helper a sliver of a processor).
func TestCPULimit(t *testing.T) {
	t.Parallel() // waits for another process (main_test.go: which tests overlap)
	out, code := helper(t, "rlimit-cpu")
	assert.Equal(t, exitCPU, code, out)
}

// TestSyscallsDenied: after the worker's seccomp filter no thread of the process can create a
// socket, open or stat a file, exec, fork, map executable memory, or reach another process; new
// threads, timers, its own limits and its open descriptors still work.
func TestSyscallsDenied(t *testing.T) {
	t.Parallel() // waits for another process (main_test.go: which tests overlap)
	out, code := helper(t, "seccomp")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "denied")
}

// TestWorkerConfinement reads what the kernel says about a live worker: its limits, its
// seccomp filter and its network namespace.
func TestWorkerConfinement(t *testing.T) {
	p := newPool(t, Options{Warm: 1, MaxWorkers: 1})
	assert.Empty(t, p.Warnings(), "every limit applies on this machine")
	st := openStore(t)
	j, _ := job(st, `n = len(inventory_tbl)`, sandbox.Limits{MaxMemory: 32 << 20, Timeout: 3 * time.Second})
	require.Equal(t, sandbox.OutcomeOK, p.Run(bg, j).Outcome)

	w := onlyWorker(t, p)
	pid := w.cmd.Process.Pid
	limits := procLimits(t, pid)
	assert.Equal(t, [2]string{"32", "32"}, limits["Max open files"])
	assert.Equal(t, [2]string{"0", "0"}, limits["Max file size"])
	assert.Equal(t, [2]string{"0", "0"}, limits["Max core file size"])
	wantData := w.vmData0 + 2*(32<<20) + DefaultOverhead
	assert.Equal(t, strconv.FormatInt(wantData, 10), limits["Max data size"][0], "the last run's memory limit")
	cpu, err := strconv.Atoi(limits["Max cpu time"][0])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, cpu, 2*3+2, "the last run's processor time")

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^Seccomp:\s+2$`, string(status), "a seccomp filter")
	assert.Regexp(t, `(?m)^NoNewPrivs:\s+1$`, string(status))

	mine, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	require.NoError(t, err)
	assert.NotEqual(t, mine, theirs, "the worker has its own network namespace")

	shared := newPool(t, Options{Warm: 1, MaxWorkers: 1, NoNetworkNamespace: true})
	theirs, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/net", onlyWorker(t, shared).cmd.Process.Pid))
	require.NoError(t, err)
	assert.Equal(t, mine, theirs, "NoNetworkNamespace keeps the parent's")
}

// TestWarningsReportWhatCouldNotApply: a worker that cannot install its seccomp filter says so
// once, at start-up, and still runs plans.
func TestWarningsReportWhatCouldNotApply(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	p, err := NewPool(Options{Command: []string{exe}, Env: []string{modeEnv + "=no-seccomp-worker"}})
	require.NoError(t, err)
	defer p.Close()
	warnings := p.Warnings()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "no seccomp filter")
	assert.Contains(t, warnings[0], "operation not permitted")

	st := openStore(t)
	j, _ := job(st, `n = len(inventory_tbl)`, sandbox.Limits{})
	res := p.Run(bg, j)
	assert.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, warnings, p.Warnings(), "reported once, not per worker or run")
}

// onlyWorker returns the pool's single live worker.
func onlyWorker(t *testing.T, p *Pool) *proc {
	t.Helper()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.live) == 1 && p.starting == 0
	}, 10*time.Second, 5*time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.live {
		return w
	}
	return nil
}

// procLimits parses /proc/<pid>/limits: limit name → soft, hard.
func procLimits(t *testing.T, pid int) map[string][2]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	require.NoError(t, err)
	out := map[string][2]string{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if len(line) < 26 {
			continue
		}
		f := strings.Fields(line[25:])
		if len(f) >= 2 {
			out[strings.TrimSpace(line[:25])] = [2]string{f[0], f[1]}
		}
	}
	return out
}

// unprivilegedPool is a helper run as an unprivileged user: its pool gives workers a network
// namespace inside a user namespace, and a plan runs.
func unprivilegedPool() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	p, err := NewPool(Options{Command: []string{exe}, Env: []string{workerEnv + "=1"}, Warm: 1, MaxWorkers: 1})
	if err != nil {
		fmt.Println("NewPool:", err)
		return 1
	}
	defer p.Close()
	fmt.Printf("uid %d, warnings %q\n", os.Geteuid(), p.Warnings())
	var w *proc
	p.mu.Lock()
	for x := range p.live {
		w = x
	}
	p.mu.Unlock()
	mine, err1 := os.Readlink("/proc/self/ns/net")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", w.cmd.Process.Pid))
	if err1 != nil || err2 != nil || mine == theirs {
		fmt.Println("network namespace:", mine, theirs, err1, err2)
		return 1
	}
	// Root of its user namespace, the worker cleared its bounding set before it dropped its
	// capabilities.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.cmd.Process.Pid))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for _, set := range []string{"CapPrm", "CapEff", "CapBnd"} {
		if !regexp.MustCompile(`(?m)^` + set + `:\s+0+$`).Match(status) {
			fmt.Printf("%s is not empty:\n%s", set, status)
			return 1
		}
	}
	dir, err := os.MkdirTemp("", "starplan-isolate-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(dir)
	st, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer st.Close()
	j, _ := job(st, `n = len(inventory_tbl)`, sandbox.Limits{})
	res := p.Run(bg, j)
	if res.Outcome != sandbox.OutcomeOK || res.Globals["n"] != int64(6) {
		fmt.Println("run:", res.Outcome, res.Diagnostics, res.Globals)
		return 1
	}
	fmt.Println("isolated as", os.Geteuid())
	return 0
}

// TestUnprivilegedPool: a pool started by an unprivileged user still gives its workers their
// own network namespace (inside a user namespace) and no capability, even in their bounding
// set, and runs plans, or says why not.
func TestUnprivilegedPool(t *testing.T) {
	t.Parallel() // waits for another process (main_test.go: which tests overlap)
	if os.Geteuid() != 0 {
		t.Skip("the other tests already run unprivileged; switching users needs root")
	}
	// The test binary lives in a directory only root may enter: copy it where nobody may run it.
	exe, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "starplan-isolate-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin, err := os.ReadFile(exe)
	require.NoError(t, err)
	copied := filepath.Join(dir, "isolate.test")
	require.NoError(t, os.WriteFile(copied, bin, 0o755))

	cmd := exec.Command(copied)
	cmd.Env = []string{modeEnv + "=unprivileged-pool", "TMPDIR=/tmp"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), "network: no network namespace") {
		t.Skipf("this kernel refuses unprivileged user namespaces: %s", out)
	}
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "isolated as 65534")
	assert.Contains(t, string(out), "warnings []")
}

// denySyscalls installs a seccomp filter that makes the given system calls fail with EPERM and
// allows the rest. Tests use it to start a worker that cannot install its own filter.
func denySyscalls(nrs ...uint32) error {
	arch, err := filterArch()
	if err != nil {
		return err
	}
	p := newProgram()
	p.load(offArch)
	p.jump(bpfJeq, arch, labelNext, "deny")
	p.load(offNr)
	for _, nr := range nrs {
		p.jump(bpfJeq, nr, "deny", labelNext)
	}
	p.ret(retAllow)
	p.label("deny")
	p.ret(retDeny)
	prog, err := p.assemble()
	if err != nil {
		return err
	}
	return installFilter(prog)
}
