package sandbox

import "time"

// Defaults for Limits. Each applies when the corresponding field is zero.
const (
	// DefaultMaxSteps is the number of Starlark interpreter steps a run may take.
	DefaultMaxSteps = 10_000_000
	// DefaultTimeout is the wall-clock time a run may take.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxOutput is the number of bytes of print output kept; the rest is cut with a marker.
	DefaultMaxOutput = 64 << 10
	// DefaultMaxMemory is the memory budget of a run, in bytes.
	DefaultMaxMemory = 256 << 20
	// DefaultMaxProgram is the largest program accepted, in bytes.
	DefaultMaxProgram = 64 << 10
	// DefaultMaxNesting is the deepest nesting of brackets and indented blocks accepted.
	DefaultMaxNesting = 64
)

// Limits bounds one run. The zero value means the safe defaults above; a negative value is
// treated as zero (the default), never as "unlimited".
type Limits struct {
	MaxSteps   uint64        // interpreter steps
	Timeout    time.Duration // wall-clock time, from the start of the run
	MaxOutput  int           // bytes of captured print output
	MaxMemory  int64         // bytes the run may allocate (guards and heap watchdog)
	MaxProgram int           // bytes of program text
	MaxNesting int           // depth of nested brackets and blocks
}

// Effective returns the limits a run asked for with l is held to, where defaults are its
// runner's own (an engine's Options.Limits; Limits{} for none): each positive field of l, else
// that of defaults when positive, else the package default (DefaultMaxSteps, ...). It is the one
// place limits are merged; every runner calls it, so a run's limits are the same in process and
// in a worker.
func (l Limits) Effective(defaults Limits) Limits {
	l.MaxSteps = or(l.MaxSteps, defaults.MaxSteps, DefaultMaxSteps)
	l.Timeout = or(l.Timeout, defaults.Timeout, DefaultTimeout)
	l.MaxOutput = or(l.MaxOutput, defaults.MaxOutput, DefaultMaxOutput)
	l.MaxMemory = or(l.MaxMemory, defaults.MaxMemory, DefaultMaxMemory)
	l.MaxProgram = or(l.MaxProgram, defaults.MaxProgram, DefaultMaxProgram)
	l.MaxNesting = or(l.MaxNesting, defaults.MaxNesting, DefaultMaxNesting)
	return l
}

// or returns own when it is set (positive), else def when it is, else fallback.
func or[T int | int64 | uint64 | time.Duration](own, def, fallback T) T {
	switch {
	case own > 0:
		return own
	case def > 0:
		return def
	}
	return fallback
}
