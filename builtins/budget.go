package builtins

import (
	"fmt"

	"go.starlark.net/starlark"
)

// budgetKey is the thread-local key under which the sandbox stores a run's *Budget.
const budgetKey = "starplan.budget"

// Budget is one run's memory allowance for values that the amplifying operations create
// (repetition, concatenation, join, replace, materialising ranges, ...). It is not a precise
// heap account: each guarded operation estimates the bytes of its result before doing the work
// and refuses it when the estimate exceeds what is left. Values that the program drops are not
// given back, so a run that builds and discards many large values runs out early: that errs on
// the side of stopping.
type Budget struct {
	Limit int64 // bytes a run may create through guarded operations
	Used  int64 // bytes charged so far
}

// MemoryError is returned by a guarded operation that would exceed the run's budget. The sandbox
// reports it as a memory limit, not as a runtime error.
type MemoryError struct {
	Op    string // the operation: "string repeat", "list(range)", "str.join", ...
	Bytes int64  // the estimated size of the result
	Limit int64
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("memory limit: %s would create about %s, over the run's budget of %s",
		e.Op, FormatBytes(e.Bytes), FormatBytes(e.Limit))
}

// SetBudget installs b as the thread's budget.
func SetBudget(thread *starlark.Thread, b *Budget) { thread.SetLocal(budgetKey, b) }

// BudgetOf returns the thread's budget, or nil when the thread has none (no limit).
func BudgetOf(thread *starlark.Thread) *Budget {
	b, _ := thread.Local(budgetKey).(*Budget)
	return b
}

// Charge records that op is about to create a value of about n bytes on thread, or returns a
// *MemoryError if that would exceed the budget. A thread without a budget is never refused.
func Charge(thread *starlark.Thread, op string, n int64) error {
	b := BudgetOf(thread)
	if b == nil || n <= 0 {
		return nil
	}
	if n > b.Limit-b.Used {
		return &MemoryError{Op: op, Bytes: n, Limit: b.Limit}
	}
	b.Used += n
	return nil
}

// FormatBytes renders n as a short human size: 512 B, 3.0 KiB, 256 MiB.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
