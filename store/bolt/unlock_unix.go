//go:build unix

package bolt

import (
	"os"
	"syscall"
)

// unlockFile releases bbolt's flock on f. Closing f alone does not when bbolt panicked inside
// Open after mapping the file: the mapping keeps the open file, and with it the lock, alive.
func unlockFile(f *os.File) {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
