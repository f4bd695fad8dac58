//go:build linux

package isolate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxOpenFiles is the worker's RLIMIT_NOFILE: its pipes, /proc/self/status and the few files
// the Go runtime opens at start.
const maxOpenFiles = 32

// applyStaticLimits applies the limits that do not depend on the run, once, before the worker
// reads any program: open files, file size, core dumps, and the seccomp filter that denies
// creating sockets. It returns a warning per limit it could not apply.
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
	if err := denySockets(); err != nil {
		warnings = append(warnings, fmt.Sprintf("no seccomp filter against sockets: %v", err))
	}
	return warnings
}

// setRunLimits sets the soft limits of one run: the data segment (RLIMIT_DATA, which bounds
// every heap and stack mapping of the Go runtime; RLIMIT_AS cannot be used, because the runtime
// reserves more than a gigabyte of address space at start), and the processor time the run may
// add (RLIMIT_CPU, whose SIGXCPU the worker turns into exitCPU). Hard limits stay as they were,
// so a later run may be given more.
func setRunLimits(dataBytes, cpuSeconds int64) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_DATA, &lim); err != nil {
		return fmt.Errorf("memory (RLIMIT_DATA) could not be limited: %v", err)
	}
	lim.Cur = min(uint64(max(dataBytes, 0)), lim.Max)
	if err := unix.Setrlimit(unix.RLIMIT_DATA, &lim); err != nil {
		return fmt.Errorf("memory (RLIMIT_DATA) could not be limited: %v", err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_CPU, &lim); err != nil {
		return fmt.Errorf("processor time (RLIMIT_CPU) could not be limited: %v", err)
	}
	lim.Cur = min(uint64(cpuUsed()+max(cpuSeconds, 1)), lim.Max)
	if err := unix.Setrlimit(unix.RLIMIT_CPU, &lim); err != nil {
		return fmt.Errorf("processor time (RLIMIT_CPU) could not be limited: %v", err)
	}
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

// vmData is the process's data segment as RLIMIT_DATA counts it (VmData), in bytes; 0 when it
// cannot be read.
func vmData() int64 { return statusField("/proc/self/status", "VmData:") }

// statusField reads one "Name:   123 kB" line of a /proc status file, in bytes.
func statusField(path, name string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
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

// seccomp_data offsets.
const (
	offNr   = 0
	offArch = 4
)

// denySockets installs a seccomp filter on every thread of the process that makes socket,
// socketpair and io_uring_setup fail with EPERM. Without a socket the worker has no network,
// whatever namespace it runs in.
func denySockets() error {
	return denySyscalls(unix.SYS_SOCKET, unix.SYS_SOCKETPAIR, unix.SYS_IO_URING_SETUP)
}

// denySyscalls installs a seccomp filter on every thread of the process that makes the given
// system calls fail with EPERM. Calls of a foreign ABI (i386, x32) are denied too, since their
// numbers differ. Filters stack: a later one cannot allow what an earlier one denies.
func denySyscalls(nrs ...uint32) error {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return fmt.Errorf("no filter is written for %s", runtime.GOARCH)
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		deny = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	// Layout: 0 load arch, 1 arch check, 2 load nr, 3 x32 check, then one jump per denied call,
	// allow, deny. Jump offsets count from the next instruction.
	n := uint8(len(nrs))
	prog := []unix.SockFilter{
		{Code: ld, K: offArch},
		{Code: jeq, K: arch, Jt: 0, Jf: n + 3}, // foreign ABI: deny
		{Code: ld, K: offNr},
		{Code: jge, K: 0x40000000, Jt: n + 1, Jf: 0}, // x32 ABI on amd64: deny
	}
	for i, nr := range nrs {
		prog = append(prog, unix.SockFilter{Code: jeq, K: nr, Jt: n - uint8(i), Jf: 0})
	}
	prog = append(prog,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: deny},
	)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// TSYNC applies the filter to every thread the Go runtime has started, not only this one.
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}
	return nil
}

// spawnAttr returns the process attributes of a worker: its own process group (a terminal's
// Ctrl-C reaches the parent, which cancels the run, not the worker directly) and, when netns is
// set, a new network namespace with no interface but a loopback that is down. A process without
// CAP_SYS_ADMIN gets it inside a new user namespace that maps its own user and group.
func spawnAttr(netns bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if !netns {
		return attr
	}
	attr.Cloneflags = syscall.CLONE_NEWNET
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
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
