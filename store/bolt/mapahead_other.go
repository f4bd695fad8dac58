//go:build !unix

package bolt

// mapAhead maps nothing ahead of the file (see mapahead_unix.go): on Windows bbolt grows the
// file to the size it maps.
func mapAhead(string) int { return 0 }

// mapAheadRefused is never asked: nothing is mapped ahead.
func mapAheadRefused(error) bool { return false }
