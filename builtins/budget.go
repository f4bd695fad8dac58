package builtins

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync/atomic"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/table"
)

// budgetKey is the thread-local key under which the sandbox stores a run's *Budget.
const budgetKey = "starplan.budget"

// CheckThreshold is the smallest estimated result, in bytes, for which Charge consults the heap.
// Smaller results are always allowed: checking them would cost more than they can do harm, and
// the sandbox's heap watchdog bounds what many small values add up to.
const CheckThreshold = 1 << 20

// MidCharge is the smallest result, in bytes, that Charge adds up: at every CheckThreshold of
// results from MidCharge to CheckThreshold, the run's heap is looked at (Budget.collectIfOver).
// A loop that makes each step a value of some KiB and drops the last (x = x << 500) makes
// garbage faster than the heap watchdog samples a busy machine, and than its collector runs:
// 416 MiB of dead integers under a 16 MiB budget, with the watchdog held up. The look forces the
// collection on the run's own thread, so the garbage is bounded by the budget and
// CheckThreshold, whatever the machine's speed.
const MidCharge = 4 << 10

// Budget is one run's memory allowance. Guarded operations (repetition, concatenation, join,
// replace, materialising ranges, big pow results, ...) estimate the bytes of their result before
// doing the work and ask Charge, which refuses a result that would not fit between the heap the
// run has grown so far and its limit.
//
// The heap is the process's: Go cannot attribute allocations to a goroutine. A run's usage is
// the growth of the live heap since the run began, so concurrent runs see each other's
// allocations. That errs on the side of stopping; the sandbox's heap watchdog judges runs
// over their budget by what their own values hold, but Charge does not; the isolated worker
// gives each run its own process and a hard bound.
type Budget struct {
	Limit int64 // bytes the run's heap may grow by
	// baseline is the lowest heap seen since the run began: the heap at its start may hold
	// earlier runs' garbage, which a collection frees and which must not become allowance.
	baseline atomic.Int64
	// shared is table.Shared() when the run began: memory the process took since for every run
	// (a table read into memory) is not the run's.
	shared int64
	// mid adds up the results Charge lets pass for their size (MidCharge up to CheckThreshold):
	// at every CheckThreshold of them it looks at the heap (collectIfOver). collected is the
	// run's growth after the last collection that forced.
	mid, collected atomic.Int64
}

// collectIfOver forces a collection, on the run's thread, when the heap has grown past the
// budget and by a budget more since the last one it forced: garbage made fast is bounded by the
// run's own steps, not by the watchdog's and the collector's pace. It refuses nothing: what the
// run holds is the watchdog's to judge (by the run's own values when several runs share the
// heap), and a heap another run's values keep over the budget costs a collection per budget of
// growth, not one per call. The mark follows the heap down: values that held it up at the last
// forced collection, freed since by another's (the others' run ended), must not let this run's
// garbage grow by what they held before its next.
func (b *Budget) collectIfOver() {
	inUse := b.InUse()
	if c := b.collected.Load(); inUse < c {
		b.collected.CompareAndSwap(c, inUse)
	}
	if inUse <= b.Limit || inUse <= b.collected.Load()+b.Limit {
		return
	}
	runtime.GC()
	b.collected.Store(b.InUse())
}

// NewBudget returns a budget of limit bytes measured from the heap in use now.
func NewBudget(limit int64) *Budget {
	b := &Budget{Limit: limit, shared: table.Shared()}
	b.baseline.Store(HeapInUse())
	return b
}

// InUse is how far the heap has grown since the budget was made, in bytes (never negative).
func (b *Budget) InUse() int64 { return b.Growth(HeapInUse()) }

// Growth is how far a heap of the given size is above the lowest heap seen since the budget was
// made, less what the process took for every run since (table.Shared). A heap below that lowers
// it.
func (b *Budget) Growth(heap int64) int64 {
	heap -= table.Shared() - b.shared
	for {
		base := b.baseline.Load()
		if heap >= base {
			return heap - base
		}
		if b.baseline.CompareAndSwap(base, heap) {
			return 0
		}
	}
}

// MemoryError is returned by a guarded operation that would exceed the run's budget. The sandbox
// reports it as a memory limit, not as a runtime error.
type MemoryError struct {
	Op    string // the operation: "string repeat", "list(range)", "str.join", ...
	Bytes int64  // the estimated size of the result
	Limit int64
	Rule  string // what Limit is, when not the run's budget: "the cap on integer size"
	InUse int64  // what the run already held when it asked (0: not measured)
}

func (e *MemoryError) Error() string {
	rule := e.Rule
	if rule == "" {
		rule = "the run's memory budget"
	}
	if e.InUse > 0 {
		return fmt.Sprintf("memory limit: %s would create about %s on top of the %s the run already holds, more than %s (%s) allows",
			e.Op, FormatBytes(e.Bytes), FormatBytes(e.InUse), rule, FormatBytes(e.Limit))
	}
	return fmt.Sprintf("memory limit: %s would create about %s, more than %s (%s) allows",
		e.Op, FormatBytes(e.Bytes), rule, FormatBytes(e.Limit))
}

// SetBudget installs b as the thread's budget.
func SetBudget(thread *starlark.Thread, b *Budget) { thread.SetLocal(budgetKey, b) }

// BudgetOf returns the thread's budget, or nil when the thread has none.
func BudgetOf(thread *starlark.Thread) *Budget {
	b, _ := thread.Local(budgetKey).(*Budget)
	return b
}

// NoBudgetCap is the largest result a guarded operation creates on a thread without a budget
// (tests and tools that run builtins directly), in bytes.
const NoBudgetCap = 64 << 20

// Charge asks whether op may create a value of about n bytes on thread, and returns a
// *MemoryError if not. Results under CheckThreshold are always allowed (those from MidCharge up
// are added up, and may force a collection: MidCharge); larger ones must fit between the heap
// the run already uses and its limit (a garbage collection is forced once before refusing, so
// dead values do not count against the run).
func Charge(thread *starlark.Thread, op string, n int64) error {
	if n < MidCharge { // below NoBudgetCap too: nearly every guarded call takes this path
		return nil
	}
	b := BudgetOf(thread)
	if n < CheckThreshold {
		if b != nil && b.mid.Add(n) >= CheckThreshold {
			b.mid.Store(0)
			b.collectIfOver()
		}
		return nil
	}
	if b == nil {
		if n > NoBudgetCap {
			return &MemoryError{Op: op, Bytes: n, Limit: NoBudgetCap}
		}
		return nil
	}
	if n > b.Limit {
		return &MemoryError{Op: op, Bytes: n, Limit: b.Limit}
	}
	if b.InUse()+n <= b.Limit {
		return nil
	}
	runtime.GC()
	inUse := b.InUse()
	if inUse+n <= b.Limit {
		return nil
	}
	return &MemoryError{Op: op, Bytes: n, Limit: b.Limit, InUse: inUse}
}

var heapMetric = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

// HeapInUse returns the bytes of heap objects, live or not yet swept, in the whole process.
func HeapInUse() int64 {
	s := []metrics.Sample{{Name: heapMetric[0].Name}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// FormatBytes renders n as a short human size: 512 B, 3.0 KiB, 256.0 MiB.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
