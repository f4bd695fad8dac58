//go:build linux

package isolate

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The worker's seccomp filter is an allow-list (allowedSyscalls, in syscalls_linux_$GOARCH.go):
// the system calls the Go runtime (with or without cgo and the race detector) makes while a
// worker serves runs, found by tracing the isolate tests' workers under strace, and nothing else.
// To check it again, run the tests with workers started under "strace -f" and look for EPERM
// after the seccomp call. Any other call fails with EPERM, so a call the list missed fails soft
// (the runtime and the standard library treat EPERM as an ordinary error) rather than killing a
// run. A few calls are allowed only with safe arguments:
//
//   - clone only for a thread (CLONE_THREAD, no namespace flag): no new process;
//   - clone3 fails with ENOSYS, whose flags a filter cannot read, so glibc falls back to clone;
//   - mmap and mprotect only without PROT_EXEC: no new executable memory;
//   - prlimit64 only on the worker itself, tgkill only on its own threads: the pool's other
//     workers may run as the same user.
//
// Files (open, stat, ...), sockets, execve, fork, ptrace, kill, namespaces, mounts, io_uring,
// bpf and every other call are denied.

// seccomp_data offsets (struct seccomp_data, little-endian).
const (
	offNr   = 0
	offArch = 4
	offArgs = 16 // args[i] at offArgs+8*i, low half first
)

// filterArch is the AUDIT_ARCH_* of the filter's system call numbers; calls of any other ABI
// (i386 on amd64, x32) are denied.
func filterArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("no filter is written for %s", runtime.GOARCH)
}

// program is a classic BPF program under construction, whose jumps name labels.
type program struct {
	insns  []unix.SockFilter
	jumps  map[int][2]string // instruction → labels of its true and false targets ("" = next)
	labels map[string]int
}

const (
	bpfLd   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRet  = unix.BPF_RET | unix.BPF_K

	retAllow  = unix.SECCOMP_RET_ALLOW
	retDeny   = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNoSys  = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	labelNext = ""
)

func newProgram() *program {
	return &program{jumps: map[int][2]string{}, labels: map[string]int{}}
}

func (p *program) load(off uint32) { p.insns = append(p.insns, unix.SockFilter{Code: bpfLd, K: off}) }

func (p *program) ret(k uint32) { p.insns = append(p.insns, unix.SockFilter{Code: bpfRet, K: k}) }

func (p *program) jump(code uint16, k uint32, yes, no string) {
	p.jumps[len(p.insns)] = [2]string{yes, no}
	p.insns = append(p.insns, unix.SockFilter{Code: code, K: k})
}

func (p *program) label(name string) { p.labels[name] = len(p.insns) }

// assemble resolves the labels into offsets.
func (p *program) assemble() ([]unix.SockFilter, error) {
	for i, to := range p.jumps {
		for j, name := range to {
			if name == labelNext {
				continue
			}
			at, ok := p.labels[name]
			if !ok {
				return nil, fmt.Errorf("seccomp filter: no label %q", name)
			}
			off := at - (i + 1)
			if off < 0 || off > 255 {
				return nil, fmt.Errorf("seccomp filter: jump to %q out of range", name)
			}
			if j == 0 {
				p.insns[i].Jt = uint8(off)
			} else {
				p.insns[i].Jf = uint8(off)
			}
		}
	}
	return p.insns, nil
}

// namespaceFlags are clone's flags that create namespaces.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// workerFilter is the worker's allow-list for the process pid.
func workerFilter(pid int) ([]unix.SockFilter, error) {
	arch, err := filterArch()
	if err != nil {
		return nil, err
	}
	p := newProgram()
	p.load(offArch)
	p.jump(bpfJeq, arch, labelNext, "deny")
	p.load(offNr)
	p.jump(bpfJge, 0x40000000, "deny", labelNext) // the x32 ABI on amd64
	for _, nr := range allowedSyscalls {
		p.jump(bpfJeq, nr, "allow", labelNext)
	}
	p.jump(bpfJeq, unix.SYS_CLONE, "clone", labelNext)
	p.jump(bpfJeq, unix.SYS_CLONE3, "nosys", labelNext)
	p.jump(bpfJeq, unix.SYS_MMAP, "noexec", labelNext)
	p.jump(bpfJeq, unix.SYS_MPROTECT, "noexec", labelNext)
	p.jump(bpfJeq, unix.SYS_PRLIMIT64, "self", labelNext)
	p.jump(bpfJeq, unix.SYS_TGKILL, "ownpid", labelNext)
	p.ret(retDeny)

	p.label("clone") // flags are args[0]; the kernel reads them as 64 bits, the flags we test are low
	p.load(offArgs + 4)
	p.jump(bpfJeq, 0, labelNext, "deny")
	p.load(offArgs)
	p.jump(bpfJset, namespaceFlags, "deny", labelNext)
	p.jump(bpfJset, unix.CLONE_THREAD, "allow", "deny")

	p.label("noexec") // prot is args[2] of both
	p.load(offArgs + 2*8)
	p.jump(bpfJset, unix.PROT_EXEC, "deny", "allow")

	p.label("self") // prlimit64(0, ...): pid 0 is the caller
	p.load(offArgs)
	p.jump(bpfJeq, 0, labelNext, "deny")
	p.load(offArgs + 4)
	p.jump(bpfJeq, 0, "allow", "deny")

	p.label("ownpid") // tgkill(tgid, tid, sig)
	p.load(offArgs)
	p.jump(bpfJeq, uint32(pid), labelNext, "deny")
	p.load(offArgs + 4)
	p.jump(bpfJeq, 0, "allow", "deny")

	p.label("deny") // classic BPF jumps only forward: every return is at the end
	p.ret(retDeny)
	p.label("nosys")
	p.ret(retNoSys)
	p.label("allow")
	p.ret(retAllow)
	return p.assemble()
}

// installWorkerFilter installs the worker's allow-list on every thread of the process. It sets
// no_new_privs first, which the kernel requires of a process without CAP_SYS_ADMIN.
func installWorkerFilter() error {
	prog, err := workerFilter(os.Getpid())
	if err != nil {
		return err
	}
	return installFilter(prog)
}

// installFilter sets no_new_privs and installs prog on every thread of the process. Filters
// stack: a later one cannot allow what an earlier one denies.
func installFilter(prog []unix.SockFilter) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if len(prog) == 0 || len(prog) > 0xffff {
		return errors.New("seccomp filter: bad length")
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// TSYNC applies the filter to every thread the Go runtime has started, not only this one.
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}
	if tid != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): thread %d could not be synchronised", tid)
	}
	return nil
}
