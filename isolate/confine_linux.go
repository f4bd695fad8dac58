//go:build linux

package isolate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// unprivilegedID is the user and group a worker started as root switches to (nobody, nogroup
// on most distributions). It owns no file a worker could use, and the seccomp filter denies the
// calls that would reach another process of the same user.
const unprivilegedID = 65534

// confine takes from the worker process everything it inherited and does not need, before it
// reads a program: every capability (effective, permitted, inheritable, ambient and the
// bounding set), root (for the unprivileged user when it starts as root), every descriptor but
// its standard input, output and error, and its working directory (for an empty directory that
// no longer exists, in which nothing can be created). It sets no_new_privs. The worker's
// seccomp filter is installed later, by installWorkerFilter, once the process is ready to serve.
//
// The first start does the work and re-executes the binary (/proc/self/exe): the bounding set
// and the inheritable set are per thread and the Go runtime has started several threads, so
// only an exec gives every thread of the worker empty sets; it also closes the descriptors, now
// all close-on-exec (the runtime's own ones cannot be told from inherited ones by number). The
// second start returns at once. confine returns a warning per confinement it could not apply;
// when the exec fails the worker goes on in its first start, without those two.
func confine() []string {
	// The mark is the process's id, which the exec keeps: an environment that merely contains
	// the variable does not skip the first start.
	if os.Getenv(confinedEnv) == strconv.Itoa(os.Getpid()) {
		os.Unsetenv(confinedEnv)
		return checkConfined()
	}
	runtime.LockOSThread() // the thread that sheds the per-thread sets must be the one that execs
	var warnings []string
	if err := emptyWorkdir(); err != nil {
		warnings = append(warnings, fmt.Sprintf("working directory: the worker keeps the pool's (%v)", err))
	}
	if err := dropBoundingSet(); err != nil {
		warnings = append(warnings, fmt.Sprintf("capabilities: the bounding set could not be cleared (%v)", err))
	}
	if err := dropRoot(); err != nil {
		warnings = append(warnings, fmt.Sprintf("user: the worker runs as root (%v)", err))
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		warnings = append(warnings, fmt.Sprintf("no_new_privs could not be set (%v)", err))
	}
	if err := dropCapabilities(); err != nil {
		warnings = append(warnings, fmt.Sprintf("capabilities: %v", err))
	}
	err := closeOnExec()
	if err == nil {
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, confinedEnv+"=") })
		env = append(env, fmt.Sprintf("%s=%d", confinedEnv, os.Getpid()))
		err = unix.Exec("/proc/self/exe", os.Args, env)
	}
	runtime.UnlockOSThread()
	return append(warnings, fmt.Sprintf("the worker could not re-execute itself (%v): descriptors it inherited stay open, and threads it had started keep their capability bounding set", err))
}

// checkConfined is the second start's part of confine: it clears this thread's capabilities
// again (a no-op after the exec) and reports what the process still holds.
func checkConfined() []string {
	var warnings []string
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		warnings = append(warnings, fmt.Sprintf("no_new_privs could not be set (%v)", err))
	}
	if err := dropCapabilities(); err != nil {
		warnings = append(warnings, fmt.Sprintf("capabilities: %v", err))
	}
	if os.Geteuid() == 0 && hostRoot() {
		warnings = append(warnings, "user: the worker still runs as root")
	}
	return warnings
}

// emptyWorkdir makes the working directory a new directory that it then removes: empty, and
// nothing can be created in a removed directory. The pool's working directory (a store's
// directory, say) is no longer at hand by a relative path.
func emptyWorkdir() error {
	dir, err := os.MkdirTemp("", "starplan-worker-")
	if err != nil {
		return err
	}
	if err := os.Chdir(dir); err != nil {
		os.Remove(dir)
		return err
	}
	return os.Remove(dir)
}

// dropBoundingSet removes every capability from this thread's bounding set, so that an exec
// grants none, even to root. Without CAP_SETPCAP it leaves the set as it is: such a process has
// no capability to begin with, and no_new_privs keeps an exec from granting any.
func dropBoundingSet() error {
	for c := 0; ; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			return nil // past the kernel's last capability
		}
		if err != nil {
			return fmt.Errorf("prctl(PR_CAPBSET_READ): %w", err)
		}
		if in == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EPERM) {
				return nil // no CAP_SETPCAP
			}
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
}

// dropRoot switches every thread of a process running as root to unprivilegedID, with no
// supplementary groups, when its user namespace maps that id. A root whose namespace does not
// map it is the pool's own user namespace, where root is the pool's unprivileged user.
func dropRoot() error {
	if os.Geteuid() != 0 {
		return nil
	}
	if !idMapped("/proc/self/uid_map", unprivilegedID) || !idMapped("/proc/self/gid_map", unprivilegedID) {
		if hostRoot() {
			return fmt.Errorf("id %d is not mapped", unprivilegedID)
		}
		return nil
	}
	// The syscall package's calls change every thread of the process, not only this one.
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(unprivilegedID, unprivilegedID, unprivilegedID); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(unprivilegedID, unprivilegedID, unprivilegedID); err != nil {
		return fmt.Errorf("setresuid: %w", err)
	}
	return nil
}

// dropCapabilities empties this thread's effective, permitted, inheritable and ambient sets.
// (A switch from root to another user already empties the effective and permitted sets of every
// thread; with empty inheritable, ambient and bounding sets, the exec grants no thread any.)
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err) // EINVAL: a kernel before ambient sets
	}
	return nil
}

// closeOnExec marks every descriptor but 0, 1 and 2 close-on-exec.
func closeOnExec() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil || !(errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL)) {
		return err
	}
	// Before Linux 5.11: one by one.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return err // EBADF: the directory's own descriptor, closed by now
		}
	}
	return nil
}

// idMapped reports whether id has a mapping in a /proc/self/{uid,gid}_map file.
func idMapped(path string, id uint64) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		inside, err1 := strconv.ParseUint(f[0], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 == nil && err2 == nil && id >= inside && id < inside+count {
			return true
		}
	}
	return false
}

// hostRoot reports whether uid 0 of the process's user namespace is the host's root.
func hostRoot() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true // assume the worst
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) == 3 && string(f[0]) == "0" {
			return string(f[1]) == "0"
		}
	}
	return false
}
