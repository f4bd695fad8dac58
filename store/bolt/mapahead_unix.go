//go:build unix

package bolt

import (
	"errors"
	"math"
	"os"
	"syscall"
)

// mapAheadMin is the smallest file mapAhead maps ahead of: bbolt's AllocSize (16 MiB). bbolt
// grows a file whose map is larger than that by AllocSize at a time, and a smaller one only
// to what it needs; mapping a small file far ahead would make it grow in 16 MiB steps.
const mapAheadMin = 16 << 20

// mapAheadRoom is how far past the file's end mapAhead maps (1 GiB, bbolt's largest step).
const mapAheadRoom = 1 << 30

// mapAhead is the size bbolt is to map the file at path at Open (bbolt.Options.InitialMmapSize):
// the file's size and mapAheadRoom more, when the file is at least mapAheadMin on a 64-bit
// system; 0 (bbolt's own choice, the file's size rounded up) otherwise.
//
// A commit that outgrows the map remaps the file under bbolt's mmap lock, and so waits for every
// open read transaction (a read of a table into memory: seconds at a million rows), while no new
// one begins: every reader of the store stalls behind it. Mapped far ahead, a store's commits
// remap about once per GiB written instead of each time the file doubles. The room is address
// space, not memory or disk: pages past the file's end are never touched (bbolt grows the file
// before it writes there), and on unix mapping past a file's end does not grow it. On Windows
// bbolt grows the file to the size it maps, so there (mapahead_other.go) it maps nothing ahead;
// on a 32-bit system there is no address space to spare. A process whose address space is
// limited (RLIMIT_AS: ulimit -v, systemd's LimitAS=) may have none to spare either: when the map
// ahead is refused (mapAheadRefused), Open maps the file as bbolt does, no larger than it needs.
func mapAhead(path string) int {
	if math.MaxInt < math.MaxInt64 {
		return 0
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() < mapAheadMin {
		return 0 // bbolt.Open reports the error
	}
	return int(st.Size()) + mapAheadRoom
}

// mapAheadRefused reports whether bbolt.Open failed because the map ahead did not fit the
// process's address space (mmap's ENOMEM), so that Open tries again without it.
func mapAheadRefused(err error) bool { return errors.Is(err, syscall.ENOMEM) }
