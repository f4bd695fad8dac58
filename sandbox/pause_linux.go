package sandbox

import (
	"syscall"
	"time"
)

// pauseLocksThread says whether the watchdog's loop keeps its OS thread for itself (pause).
const pauseLocksThread = true

// pause sleeps for d in the kernel, on the OS thread the watchdog's loop has locked. A Go timer
// would do the same, but each time it fires the scheduler wakes an idle processor to run the
// loop: on a 2-core machine that cost a process of short runs about 6% of its time at one wake
// every 20 ms (a goroutine that only ticks, measured against none), where a thread asleep in
// nanosleep costs nothing measurable.
func pause(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR { // a signal: sleep what is left
	}
}
