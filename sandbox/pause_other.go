//go:build !linux

package sandbox

import "time"

// pauseLocksThread says whether the watchdog's loop keeps its OS thread for itself (pause).
const pauseLocksThread = false

// pause sleeps for d (see pause_linux.go for why Linux sleeps otherwise).
func pause(d time.Duration) { time.Sleep(d) }
