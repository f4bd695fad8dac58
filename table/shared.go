package table

import "sync/atomic"

// sharedBytes is the memory the trusted process holds for every run, not for one: a store's
// tables read into memory while runs are under way (see store/disk.go). loads counts the loads
// under way, during which it holds an estimate.
var (
	sharedBytes atomic.Int64
	loads       atomic.Int32
)

// AddShared records that the process took n more bytes (n < 0: let them go) for every run. A
// run's memory budget measures how far the heap grew since the run began less how far this
// figure grew, so a run whose walk made the store read a table into memory is not charged for
// the table, which every later run shares.
func AddShared(n int64) { sharedBytes.Add(n) }

// BeginShared records a load of about estimate bytes for every run, under way; the returned
// function ends it with the bytes it actually took. While a load is under way the estimate
// stands in for it, generously, and budgets do not take a lower heap for their starting point
// (SharedLoading).
func BeginShared(estimate int64) (end func(actual int64)) {
	loads.Add(1)
	sharedBytes.Add(estimate)
	return func(actual int64) {
		sharedBytes.Add(actual - estimate)
		loads.Add(-1)
	}
}

// Shared returns the bytes the process holds for every run.
func Shared() int64 { return sharedBytes.Load() }

// SharedLoading reports whether a load is under way, its size an estimate.
func SharedLoading() bool { return loads.Load() > 0 }
