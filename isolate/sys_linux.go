//go:build linux

package isolate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxOpenFiles is the worker's RLIMIT_NOFILE: its pipes, /proc/self/status and the few files
// the Go runtime opens at start.
const maxOpenFiles = 32

// applyStaticLimits applies the limits that do not depend on the run, once, before the worker
// reads any program: open files, file size and core dumps. It returns a warning per limit it
// could not apply.
func applyStaticLimits() []string {
	var warnings []string
	set := func(name string, res int, v uint64) {
		var lim unix.Rlimit
		err := unix.Getrlimit(res, &lim)
		if err == nil {
			v = min(v, lim.Max) // a stricter hard limit stays
			err = unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v})
		}
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s could not be limited: %v", name, err))
		}
	}
	set("open files (RLIMIT_NOFILE)", unix.RLIMIT_NOFILE, maxOpenFiles)
	set("file size (RLIMIT_FSIZE)", unix.RLIMIT_FSIZE, 0)
	set("core dumps (RLIMIT_CORE)", unix.RLIMIT_CORE, 0)
	// The per-run limits are set before each run; probe now that the kernel takes them (at
	// their current values), so a failure is reported at start-up, not as every run's error.
	for _, r := range []struct {
		name string
		res  int
	}{{"memory (RLIMIT_DATA)", unix.RLIMIT_DATA}, {"processor time (RLIMIT_CPU)", unix.RLIMIT_CPU}} {
		var lim unix.Rlimit
		err := unix.Getrlimit(r.res, &lim)
		if err == nil {
			err = unix.Setrlimit(r.res, &lim)
		}
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s could not be limited: %v", r.name, err))
		}
	}
	return warnings
}

// setRunLimits sets the soft limits of one run: the data segment (RLIMIT_DATA, which bounds
// every heap and stack mapping of the Go runtime; RLIMIT_AS cannot be used, because the runtime
// reserves more than a gigabyte of address space at start), and the processor time the run may
// add (RLIMIT_CPU, whose SIGXCPU the worker turns into exitCPU). Hard limits stay as they were,
// so a later run may be given more.
func setRunLimits(dataBytes, cpuSeconds int64) error {
	var l runLimits
	return l.apply(dataBytes, cpuSeconds)
}

// runLimits are the soft limits a worker last set, and the hard limits above them, so that a
// run whose limits are already in force costs no system call to set them again (a worker's
// runs usually share their limits; only the processor time's moves, by whole seconds). Nothing
// else in a worker changes these limits: the Go runtime does not, a plan has no system call,
// and no other process may (the seccomp filter allows prlimit64 on the worker itself only).
type runLimits struct {
	known           bool   // the hard limits have been read and the soft ones set once
	dataMax, cpuMax uint64 // hard limits
	dataCur, cpuCur uint64 // soft limits in force
}

// apply sets the soft limits of one run (see setRunLimits), calling the kernel only for those
// that differ from what is in force.
func (l *runLimits) apply(dataBytes, cpuSeconds int64) error {
	if !l.known {
		var lim unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_DATA, &lim); err != nil {
			return fmt.Errorf("memory (RLIMIT_DATA) could not be limited: %v", err)
		}
		l.dataMax, l.dataCur = lim.Max, lim.Cur
		if err := unix.Getrlimit(unix.RLIMIT_CPU, &lim); err != nil {
			return fmt.Errorf("processor time (RLIMIT_CPU) could not be limited: %v", err)
		}
		l.cpuMax, l.cpuCur = lim.Max, lim.Cur
	}
	data := min(uint64(max(dataBytes, 0)), l.dataMax)
	if !l.known || data != l.dataCur {
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: data, Max: l.dataMax}); err != nil {
			l.known = false
			return fmt.Errorf("memory (RLIMIT_DATA) could not be limited: %v", err)
		}
		l.dataCur = data
	}
	cpu := min(uint64(cpuUsed()+max(cpuSeconds, 1)), l.cpuMax)
	if !l.known || cpu != l.cpuCur {
		if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: cpu, Max: l.cpuMax}); err != nil {
			l.known = false
			return fmt.Errorf("processor time (RLIMIT_CPU) could not be limited: %v", err)
		}
		l.cpuCur = cpu
	}
	l.known = true
	return nil
}

// cpuUsed is the processor time the process has used, in whole seconds rounded up.
func cpuUsed() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	us := (ru.Utime.Sec+ru.Stime.Sec)*1e6 + int64(ru.Utime.Usec+ru.Stime.Usec)
	return (us + 999_999) / 1_000_000
}

// selfStatus is /proc/self/status, opened once and read again from its start: the worker's
// seccomp filter denies opening files.
var selfStatus struct {
	once sync.Once
	f    *os.File
}

// vmData is the process's data segment as RLIMIT_DATA counts it (VmData), in bytes; 0 when it
// cannot be read.
func vmData() int64 {
	selfStatus.once.Do(func() { selfStatus.f, _ = os.Open("/proc/self/status") })
	if selfStatus.f == nil {
		return 0
	}
	b := make([]byte, 8<<10)
	n, err := selfStatus.f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0
	}
	return parseStatusField(b[:n], "VmData:")
}

// parseStatusField reads one "Name:   123 kB" line of a /proc status file's text, in bytes.
func parseStatusField(b []byte, name string) int64 {
	i := bytes.Index(b, []byte(name))
	if i < 0 {
		return 0
	}
	line := b[i+len(name):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line)
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}

// spawnAttr returns the process attributes of a worker: its own process group (a terminal's
// Ctrl-C reaches the parent, which cancels the run, not the worker directly) and, when netns is
// set, a new network namespace with no interface but a loopback that is down. A process without
// CAP_SYS_ADMIN gets it inside a new user namespace in which its own user and group are root:
// that root holds capabilities only over the worker's own namespaces, and the worker uses them
// once, to clear its capability bounding set (see confine), before it drops them all.
func spawnAttr(netns bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if !netns {
		return attr
	}
	attr.Cloneflags = syscall.CLONE_NEWNET
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return attr
}

// namespaceRefused reports whether a failed start is the kernel refusing the namespace (so a
// start without one may succeed).
func namespaceRefused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)
}

// netnsSupported says whether spawnAttr can give a worker its own network namespace.
const netnsSupported = true

// pipe returns a pipe whose ends are in blocking mode. A read then waits in the kernel and wakes
// the reading thread directly, without the runtime's poller: a table call's round trip is
// several wake-ups shorter. The worker inherits its ends in blocking mode too.
func pipe() (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// processorTicks calls f in a goroutine at every interval of the process's user processor time
// (ITIMER_VIRTUAL, whose SIGVTALRM the process takes), for the rest of its life, and reports
// whether it could arm the timer. An idle process receives no signal. Interval timers survive
// an exec, so only the process that serves runs may arm it.
func processorTicks(interval time.Duration, f func()) bool {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGVTALRM)
	tv := unix.NsecToTimeval(interval.Nanoseconds())
	if _, err := unix.Setitimer(unix.ItimerVirtual, unix.Itimerval{Interval: tv, Value: tv}); err != nil {
		signal.Stop(sig)
		return false
	}
	go func() {
		for range sig {
			f()
		}
	}()
	return true
}
