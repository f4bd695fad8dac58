// Package benchhook holds the switches a benchmark in this module flips to measure what a safety
// mechanism costs. Being internal, it is out of reach of every program outside the module; only
// benchmarks set it.
package benchhook

import "sync/atomic"

var unguarded atomic.Bool

// Unguarded reports whether sandbox environments made now go without their memory guards (the
// guard rewrite and the heap watchdog).
func Unguarded() bool { return unguarded.Load() }

// WithoutGuards makes the sandbox environments created until restore is called go without
// their memory guards, so a benchmark can compare a guarded run with an unguarded one. An
// environment keeps what it was created with.
func WithoutGuards() (restore func()) {
	unguarded.Store(true)
	return func() { unguarded.Store(false) }
}
