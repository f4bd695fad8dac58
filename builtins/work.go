package builtins

import (
	"errors"
	"fmt"
	"math"

	"go.starlark.net/starlark"
)

// Work inside a builtin is invisible to the interpreter: it counts no steps, and a cancelled
// run (time limit, watchdog) stops only at its next step. Most builtins do work linear in what
// the plan already built, which the step and memory limits bound. Big-integer arithmetic and
// conversions do not: math.gcd of two 1 MB integers took 76 s, int() of a 4 MB string of digits
// 43 s, in one step. So before such work a builtin estimates it, in steps, from its operands'
// sizes (the models below, measured on math/big), and charges it with ChargeWork:
//
//   - one call may do at most MaxCallSteps of work, whatever the run's limits: beyond that it
//     is refused with a *WorkError before it starts;
//   - the work is added to the thread's step count, so a plan that repeats an expensive call is
//     stopped by its step limit, not by a clock: the same plan stops at the same place on any
//     machine.
//
// Integers that fit in 64 bits are never charged, so ordinary plans count the steps they always
// did.

// StepNanos is the work one step stands for: about 10 ns on a current x86 core, where the
// interpreter's own steps take 5 to 40 ns.
const StepNanos = 10

// MaxCallSteps is the most work one builtin call may do, in steps: 10 M steps, about 0.1 s.
// A larger call cannot be interrupted by the run's time limit, so it is refused.
const MaxCallSteps = 10_000_000

// MaxIntStrDigits is the longest string of digits int() converts in a base that is not a power
// of two, as CPython's default sys.int_max_str_digits: such a conversion takes time that grows
// with the square of the length (4 M digits took 43 s). Power-of-two bases convert in linear
// time and are bounded by MaxIntResultBytes instead.
const MaxIntStrDigits = 4300

// pollSteps is the smallest charge after which ChargeWork checks the step limit at once;
// smaller charges are seen at the interpreter's next step.
const pollSteps = 1000

// WorkError is returned when one call of a builtin would do more than MaxCallSteps of work.
// The sandbox reports it as the step limit.
type WorkError struct {
	Op    string // "math.gcd", "str() of an integer", ...
	Steps uint64 // the estimated work
	Limit uint64 // MaxCallSteps
}

func (e *WorkError) Error() string {
	return fmt.Sprintf("step limit: %s would take about %s steps of work, more than the %s one call may take: use smaller integers",
		e.Op, shortCount(e.Steps), shortCount(e.Limit))
}

// shortCount renders n as 950, 12 k, 3.4 M, 7.6 G.
func shortCount(n uint64) string {
	switch {
	case n < 10_000:
		return fmt.Sprint(n)
	case n < 10_000_000:
		return fmt.Sprintf("%d k", n/1000)
	case n < 10_000_000_000:
		return fmt.Sprintf("%.1f M", float64(n)/1e6)
	case n < 10_000_000_000_000:
		return fmt.Sprintf("%.1f G", float64(n)/1e9)
	}
	return fmt.Sprintf("%.0f T", float64(n)/1e12)
}

// isLimit reports whether err is a limit a builtin enforces (*MemoryError, *WorkError): the
// sandbox classifies those by type, so they are returned as they are, not wrapped in a message.
func isLimit(err error) bool {
	var me *MemoryError
	var we *WorkError
	return errors.As(err, &me) || errors.As(err, &we)
}

// ChargeWork charges steps of work that op is about to do on thread (which may be nil: then
// only MaxCallSteps applies). It returns a *WorkError when the work is over MaxCallSteps, and
// the thread's cancellation error when the charge reaches the run's step limit or the run was
// cancelled; either way the work must not be done.
func ChargeWork(thread *starlark.Thread, op string, steps uint64) error {
	if steps > MaxCallSteps {
		return &WorkError{Op: op, Steps: steps, Limit: MaxCallSteps}
	}
	if thread == nil || steps == 0 {
		return nil
	}
	thread.Steps += steps
	if steps >= pollSteps {
		return poll(thread)
	}
	return nil
}

// workSteps converts an estimate in nanoseconds to steps, rounding up and saturating.
func workSteps(ns float64) uint64 {
	if !(ns < math.MaxUint64/2) { // also NaN
		return math.MaxUint64 / 2
	}
	return uint64(ns/StepNanos) + 1
}

// words is the number of 64-bit words of an integer of the given bits.
func words(bits int) float64 { return float64(bits+63) / 64 }

// bitLen is the size of i in bits, 0 for an integer that fits in 64 bits: such integers are
// never charged.
func bitLen(i starlark.Int) int {
	if _, ok := i.Int64(); ok {
		return 0
	}
	return i.BigInt().BitLen()
}

// The models, in nanoseconds, for operands of a and b bits (a word is 64 bits). They were fitted
// to math/big on a 2025 x86 core from 16 to 16,384 words and err on the high side.

// mulNanos: Karatsuba, about 4·n·m^0.6 for n ≥ m words.
func mulNanos(a, b int) float64 {
	n, m := words(max(a, b)), words(min(a, b))
	return 4 * n * math.Pow(m, 0.6)
}

// divNanos: dividing an a-bit integer by a b-bit one, about twice the multiplication of the
// quotient by the divisor.
func divNanos(a, b int) float64 {
	if a <= b {
		return 4 * words(a)
	}
	return 2 * mulNanos(a-b+1, b)
}

// textNanos: converting an integer to decimal text (or back, the 4300 digits that int() takes):
// math/big divides recursively, about 50·n^1.4.
func textNanos(bits int) float64 { return 50 * math.Pow(words(bits), 1.4) }

// parseNanos: converting decimal text to an integer of the given bits, quadratic: about 6·n².
func parseNanos(bits int) float64 {
	n := words(bits)
	return 6*n*n + 20*n
}

// gcdNanos: Lehmer's algorithm, quadratic: about 8·n·m.
func gcdNanos(a, b int) float64 { return 8*words(a)*words(b) + 20*words(max(a, b)) }

// sqrtNanos: Newton's method over recursive division, about 2·n² + 2000·n.
func sqrtNanos(bits int) float64 {
	n := words(bits)
	return 2*n*n + 2000*n
}

// powModNanos: square and multiply, one modular product per exponent bit, about 20 + 2·m² each.
func powModNanos(expBits, modBits int) float64 {
	m := words(modBits)
	return float64(max(expBits, 1)) * (20 + 2*m*m)
}

// productNanos: building an integer of the given bits by repeated squaring or a product tree
// (pow, math.factorial, math.comb, math.perm): about twice the last multiplication, times the
// depth of the tree for a product of many factors.
func productNanos(bits int, factors float64) float64 {
	half := max(bits/2, 1)
	depth := 2.0
	if factors > 2 {
		depth = max(math.Log2(factors), 2)
	}
	return depth * mulNanos(half, half)
}

// chargeIntText charges the work of converting i to decimal text.
func chargeIntText(thread *starlark.Thread, op string, i starlark.Int) error {
	if bits := bitLen(i); bits > 0 {
		return ChargeWork(thread, op+" of a big integer", workSteps(textNanos(bits)))
	}
	return nil
}

// callWork charges, piece by piece, the work of one call that meets its big integers as it
// goes (json.dumps), holding the whole call to MaxCallSteps.
type callWork struct {
	op string
	ns float64 // charged so far
}

// intText charges the work of converting i to decimal text.
func (w *callWork) intText(thread *starlark.Thread, i starlark.Int) error {
	bits := bitLen(i)
	if bits == 0 {
		return nil
	}
	ns := textNanos(bits)
	w.ns += ns
	if total := workSteps(w.ns); total > MaxCallSteps {
		return &WorkError{Op: w.op, Steps: total, Limit: MaxCallSteps}
	}
	return ChargeWork(thread, w.op, workSteps(ns))
}
