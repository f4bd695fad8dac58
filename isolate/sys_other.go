//go:build !linux

package isolate

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"time"
)

var errNotLinux = errors.New("OS limits for sandbox workers are implemented for Linux only, not " + runtime.GOOS)

func applyStaticLimits() []string {
	return []string{"open files, file size, memory, processor time, network, capabilities, user and system calls are not limited: " + errNotLinux.Error()}
}

func confine() []string { return nil }

func installWorkerFilter() error { return nil } // applyStaticLimits has said that nothing applies

func setRunLimits(dataBytes, cpuSeconds int64) error { return nil }

type runLimits struct{}

func (*runLimits) apply(dataBytes, cpuSeconds int64) error { return nil }

func vmData() int64 { return 0 }

func processorTicks(interval time.Duration, f func()) bool { return false }

func spawnAttr(netns bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func namespaceRefused(err error) bool { return true }

// netnsSupported says whether spawnAttr can give a worker its own network namespace.
const netnsSupported = false

func pipe() (r, w *os.File, err error) { return os.Pipe() }
