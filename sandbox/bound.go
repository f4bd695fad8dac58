package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
)

// bounds hold one thread of Starlark to its limits: a plan's run, a domain file's top level
// (LoadModule) and a call of one of its functions (Call) alike. The step limit is checked at
// every checkpoint, the memory budget by the guards and by the heap watchdog (which measures the
// thread's own values when several threads run at once), and the time limit by the clock.
type bounds struct {
	reason    stopReason
	watch     *watched    // nil when the heap is not watched (an unguarded Env)
	clock     *time.Timer // the time limit
	stopAfter func() bool // stops watching the caller's context; nil when it cannot end
}

// bind holds thread to limits (with their defaults applied) until end. shared returns the values
// the thread's memory measure leaves out: those it did not make and shares with other threads.
// The heap is watched as in mode: not at all (only the guards bound memory: benchmarks of an
// unguarded Env), by the heap with measures when asked (a plan's run), or with the thread's own
// measure at every checkpoint too (a domain's code; see watched.selfMeasure).
func bind(ctx context.Context, thread *starlark.Thread, limits Limits, shared func() map[any]struct{}, mode watchMode) *bounds {
	b := &bounds{}
	began := time.Now() // before the budget's baseline is read (watched.began)
	budget := builtins.NewBudget(limits.MaxMemory)
	builtins.SetBudget(thread, budget)
	if mode != watchNone {
		b.watch = &watched{budget: budget, began: began, shared: shared, selfMeasure: mode == watchSelf, cancel: func() {
			b.reason.set(LimitMemory)
			thread.Cancel(fmt.Sprintf("memory limit of %s exceeded", builtins.FormatBytes(limits.MaxMemory)))
		}}
	}
	// The interpreter calls OnMaxSteps at the next checkpoint, not only at the step limit: there
	// the thread can measure its memory when the watchdog asks (watched.checkpoint).
	thread.SetMaxExecutionSteps(nextCheckpoint(0, limits.MaxSteps))
	watch := b.watch
	thread.OnMaxSteps = func(t *starlark.Thread) {
		// ChargeWork may have pushed Steps past the limit, and past a checkpoint, in one jump.
		if t.Steps >= limits.MaxSteps {
			b.reason.set(LimitSteps)
			t.Cancel(fmt.Sprintf("step limit of %d exceeded", limits.MaxSteps))
			return
		}
		t.SetMaxExecutionSteps(nextCheckpoint(t.Steps, limits.MaxSteps))
		if watch != nil {
			watch.checkpoint(t)
		}
	}
	// The time limit is a timer of its own, and the caller's context is watched only when it can
	// end: what a context derived with the limit as its timeout did, without deriving one (a
	// deadline of the caller's that passes first is the time limit too, as it was there).
	timeUp := func() {
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return // the caller cancelled the run first (the derived context ended for good)
		}
		b.reason.set(LimitTime)
		thread.Cancel(fmt.Sprintf("time limit of %s exceeded", limits.Timeout))
	}
	b.clock = time.AfterFunc(limits.Timeout, timeUp)
	if ctx.Done() != nil {
		b.stopAfter = context.AfterFunc(ctx, func() {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				timeUp()
				return
			}
			thread.Cancel("the run was cancelled")
		})
	}
	if watch != nil {
		heapWatchdog.watch(watch)
	}
	return b
}

// watchMode is how bind watches a thread's heap.
type watchMode int

const (
	watchNone watchMode = iota // the guards only
	watchHeap                  // the heap watchdog, with measures when it asks
	watchSelf                  // and the thread's own measure at every checkpoint
)

// end releases the thread from its bounds once its program or call has returned; globals are
// what it leaves behind (a program's globals; nil for a call), for the watchdog's account.
func (b *bounds) end(globals starlark.StringDict) {
	if b.watch != nil {
		b.watch.finished(globals)
		heapWatchdog.unwatch(b.watch)
	}
	b.clock.Stop()
	if b.stopAfter != nil {
		b.stopAfter()
	}
}

// LimitError is the error of a domain file's code (LoadModule's top level, a Call) stopped by
// one of its limits. Err is the interpreter's error.
type LimitError struct {
	Limit Limit
	Err   error
}

func (e *LimitError) Error() string { return e.Err.Error() }
func (e *LimitError) Unwrap() error { return e.Err }

// limitError wraps err as a *LimitError when a limit stopped the thread (reason, or a guard's
// refusal); other errors are returned as they are.
func limitError(err error, reason Limit) error {
	if err == nil {
		return nil
	}
	if outcome, limit := classify(err, reason); outcome == OutcomeLimitExceeded {
		return &LimitError{Limit: limit, Err: err}
	}
	return err
}
