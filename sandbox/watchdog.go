package sandbox

import (
	"runtime"
	"sync"
	"time"

	"github.com/starplan/starplan/builtins"
)

// watchInterval is how often the heap watchdog samples the heap while runs are active.
const watchInterval = 2 * time.Millisecond

// watchdog cancels runs whose heap growth passes their budget through allocations that no guard
// sees (large comprehensions, many medium values). One goroutine serves every run in the
// process; it runs only while some run is active.
//
// The heap it reads counts dead values until they are swept, so a run that is just over its
// budget is blamed only if it is still over after a collection that ended after it went over
// (the collection runs in the background, so the plan cannot outrun a blocked watchdog). A run
// over one and a half times its budget is stopped at once: with the default GOGC, garbage can
// explain that only for a run that keeps three quarters of its budget live, which no plan in
// this domain needs. A run's heap therefore grows by about 1.5 times its budget before it is
// stopped, plus what it allocates in the moment it takes to notice.
type watchdog struct {
	mu        sync.Mutex
	runs      map[*watched]struct{}
	running   bool
	gcRunning bool
	lastGCEnd time.Time
}

// watched is one active run.
type watched struct {
	budget    *builtins.Budget
	cancel    func()    // stops the run with the memory limit as its reason
	overSince time.Time // when the run was first seen over its budget; zero while within it
}

var heapWatchdog = &watchdog{runs: map[*watched]struct{}{}}

// watch starts watching a run; the returned function stops it.
func (w *watchdog) watch(r *watched) (stop func()) {
	w.mu.Lock()
	w.runs[r] = struct{}{}
	if !w.running {
		w.running = true
		go w.loop()
	}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.runs, r)
		w.mu.Unlock()
	}
}

func (w *watchdog) loop() {
	ticker := time.NewTicker(watchInterval)
	defer ticker.Stop()
	idle := 0
	for range ticker.C {
		w.mu.Lock()
		if len(w.runs) == 0 {
			if idle++; idle > 100 {
				w.running = false
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			continue
		}
		idle = 0
		stop := w.sweep(time.Now(), builtins.HeapInUse())
		w.mu.Unlock()
		for _, r := range stop {
			r.cancel()
		}
	}
}

// sweep decides, for a heap reading, which runs to stop, and starts a background collection when
// a run is over its budget for the first time. w.mu is held.
func (w *watchdog) sweep(now time.Time, heap int64) []*watched {
	var stop []*watched
	needGC := false
	for r := range w.runs {
		used := r.budget.Growth(heap)
		switch {
		case used <= r.budget.Limit:
			r.overSince = time.Time{}
		case used > r.budget.Limit+r.budget.Limit/2:
			stop = append(stop, r)
		case r.overSince.IsZero():
			r.overSince, needGC = now, true
		case w.lastGCEnd.After(r.overSince):
			stop = append(stop, r)
		default:
			needGC = true
		}
	}
	if needGC && !w.gcRunning {
		w.gcRunning = true
		go func() {
			runtime.GC()
			w.mu.Lock()
			w.gcRunning, w.lastGCEnd = false, time.Now()
			w.mu.Unlock()
		}()
	}
	return stop
}
