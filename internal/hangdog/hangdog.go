// Package hangdog turns a hang in a stress test into a readable failure: each worker marks the
// operation it is in (Busy), and when one has been in the same operation for longer than the
// dog's limit, every goroutine's stack (pprof's goroutine profile, debug=2) goes to stderr and to
// a file, and the process ends with exit status 3. A stuck test would otherwise end only at go
// test's timeout, with less said.
package hangdog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DefaultHang is how long one operation may take before a dog calls it a hang: far more than
// any operation of the stress tests takes on a loaded machine, far less than go test's timeout.
const DefaultHang = 60 * time.Second

// Dog watches the operations its workers mark.
type Dog struct {
	name  string
	hang  time.Duration
	mu    sync.Mutex
	since map[string]time.Time // worker → when its operation began
	what  map[string]string    // worker → the operation
	ops   atomic.Int64
	stop  chan struct{}
	done  chan struct{}
	exit  func(stuck string, stacks []byte) // tests of the dog replace it
}

// New starts a dog for t that calls an operation longer than hang (0: DefaultHang) a hang; it
// stops when t ends.
func New(t testing.TB, hang time.Duration) *Dog {
	if hang <= 0 {
		hang = DefaultHang
	}
	d := &Dog{name: t.Name(), hang: hang, since: map[string]time.Time{}, what: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	d.exit = d.die
	go d.watch()
	t.Cleanup(func() { close(d.stop); <-d.done })
	return d
}

// Busy marks worker as in op until the returned func is called.
func (d *Dog) Busy(worker, op string) func() {
	d.mu.Lock()
	d.since[worker], d.what[worker] = time.Now(), op
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		delete(d.since, worker)
		d.mu.Unlock()
		d.ops.Add(1)
	}
}

// Ops is how many operations have ended.
func (d *Dog) Ops() int64 { return d.ops.Load() }

func (d *Dog) watch() {
	defer close(d.done)
	tick := time.NewTicker(min(time.Second, d.hang/4+1))
	defer tick.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-tick.C:
		}
		d.mu.Lock()
		var stuck []string
		for w, at := range d.since {
			if time.Since(at) > d.hang {
				stuck = append(stuck, fmt.Sprintf("%s in %s for %s", w, d.what[w], time.Since(at).Round(time.Millisecond)))
			}
		}
		d.mu.Unlock()
		if len(stuck) > 0 {
			var b bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&b, 2)
			d.exit(strings.Join(stuck, "; "), b.Bytes())
			return
		}
	}
}

func (d *Dog) die(stuck string, stacks []byte) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("hang-%d.txt", os.Getpid()))
	os.WriteFile(path, stacks, 0o644)
	fmt.Fprintf(os.Stderr, "\n%s: HANG: %s (after %d operations); every goroutine (also in %s):\n\n%s\n", d.name, stuck, d.ops.Load(), path, stacks)
	os.Exit(3)
}
