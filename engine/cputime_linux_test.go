package engine

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time (user and system) the calling OS thread has used; ok is false where
// it cannot be read. It reads the thread's CPU clock, which the kernel brings up to date when
// asked, to the nanosecond: getrusage(RUSAGE_THREAD) answers a running thread from its last
// scheduler update (a tick or a switch), so a window of a few microseconds that neither
// crosses read the same value at both ends and counted nothing (the audit writer is measured
// in windows that short, once per record it encodes).
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// processCPU is the CPU time the process has used.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
