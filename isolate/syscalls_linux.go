//go:build linux && (amd64 || arm64)

package isolate

import "golang.org/x/sys/unix"

// allowedSyscalls are the system calls a worker may make with any arguments (see
// seccomp_linux.go): the Go runtime's memory, threads, signals, timers and poller, glibc's
// thread start-up (cgo and race builds), reading and writing the descriptors it holds, and its
// own limits and usage; archSyscalls adds what only some architectures have.
var allowedSyscalls = append([]uint32{
	unix.SYS_READ, unix.SYS_WRITE, unix.SYS_PREAD64, unix.SYS_CLOSE,
	unix.SYS_MUNMAP, unix.SYS_MADVISE, unix.SYS_BRK, unix.SYS_MREMAP,
	unix.SYS_FUTEX, unix.SYS_SET_ROBUST_LIST, unix.SYS_RSEQ, unix.SYS_GETTID, unix.SYS_GETPID,
	unix.SYS_SCHED_YIELD, unix.SYS_SCHED_GETAFFINITY, unix.SYS_EXIT, unix.SYS_EXIT_GROUP,
	unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGRETURN, unix.SYS_SIGALTSTACK,
	unix.SYS_RESTART_SYSCALL,
	unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP, unix.SYS_CLOCK_GETTIME, unix.SYS_GETTIMEOFDAY,
	unix.SYS_TIMER_CREATE, unix.SYS_TIMER_SETTIME, unix.SYS_TIMER_DELETE, unix.SYS_SETITIMER,
	unix.SYS_EPOLL_CTL, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2,
	unix.SYS_GETRLIMIT, unix.SYS_GETRUSAGE, unix.SYS_GETRANDOM,
}, archSyscalls...)
