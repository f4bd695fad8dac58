package sandbox

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system, every thread, the collector's too) the process
// has used; ok is false where it cannot be read. On a shared machine it is steadier than wall
// time.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
