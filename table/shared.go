package table

import "sync/atomic"

// sharedBytes is the memory the trusted process took for every run, not for one: a store's
// tables, indexes and columns read into memory (see store/disk.go). It only grows: memory let go
// lowers the heap, and so the starting point of every budget, by itself.
var sharedBytes atomic.Int64

// AddShared records that the process took n more bytes for every run (n < 0 is ignored). A run's
// memory budget measures how far the heap grew since the run began less how far this figure
// grew, so a run whose walk made the store read a table into memory is not charged for the
// table, which every later run shares. The figure is counted from what is kept (an estimate per
// row, as it is read), never measured from the process's heap, which other runs' values share.
func AddShared(n int64) {
	if n > 0 {
		sharedBytes.Add(n)
	}
}

// Shared returns the bytes AddShared recorded.
func Shared() int64 { return sharedBytes.Load() }
