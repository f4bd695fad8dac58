//go:build !linux

package sandbox

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
