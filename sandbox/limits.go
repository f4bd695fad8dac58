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

// withDefaults returns l with every zero or negative field replaced by its default.
func (l Limits) withDefaults() Limits {
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	if l.MaxMemory <= 0 {
		l.MaxMemory = DefaultMaxMemory
	}
	if l.MaxProgram <= 0 {
		l.MaxProgram = DefaultMaxProgram
	}
	if l.MaxNesting <= 0 {
		l.MaxNesting = DefaultMaxNesting
	}
	return l
}
