package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"

	"github.com/starplan/starplan/store"
)

// guard runs fn, which reads the bbolt file, and turns a panic into a *DamagedError naming path.
// bbolt panics when a page it follows is not what its parent says it is, and a read through its
// memory map past the end of a truncated file faults; debug.SetPanicOnFault makes that fault a
// panic of this goroutine instead of a crash of the process. Every transaction fn opens must
// roll back as the panic unwinds (clover and bbolt's View defer it; runGroup does it itself).
func guard(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &store.DamagedError{Path: path, Problem: fmt.Sprintf("reading it failed: %v", r)}
		}
	}()
	return fn()
}

// The layout of a bbolt meta page (go.etcd.io/bbolt internal/common): a 16-byte page header,
// then magic, version, page size, flags (4 bytes each), the root bucket (page id, sequence), the
// freelist page id, the high-water mark (the number of pages in use), the transaction id and an
// FNV-64a checksum of everything from magic up to the checksum (8 bytes each). bbolt writes the
// meta of transaction t to page t % 2, so the two pages hold the last two commits.
const (
	metaOffset    = 16
	metaSize      = 64
	boltMagic     = 0xED0CDAED
	boltVersion   = 2
	minMetaReadSz = metaOffset + metaSize
)

// boltMeta is one decoded meta page.
type boltMeta struct {
	page     int // 0 or 1
	valid    bool
	pageSize int64
	pgid     int64 // the high-water mark: pages [0, pgid) are in use
	txid     uint64
	root     uint64 // the root bucket's page
	freelist uint64 // the freelist's page
}

func readMeta(b []byte, page int) boltMeta {
	m := boltMeta{page: page}
	if len(b) < minMetaReadSz {
		return m
	}
	le := binary.LittleEndian // bbolt writes native order; starplan's platforms are little-endian
	mb := b[metaOffset : metaOffset+metaSize]
	h := fnv.New64a()
	h.Write(mb[:56])
	m.valid = le.Uint32(mb[0:]) == boltMagic && le.Uint32(mb[4:]) == boltVersion && le.Uint64(mb[56:]) == h.Sum64()
	m.pageSize = int64(le.Uint32(mb[8:]))
	m.pgid = int64(le.Uint64(mb[40:]))
	m.txid = le.Uint64(mb[48:])
	m.root = le.Uint64(mb[16:])
	m.freelist = le.Uint64(mb[32:])
	return m
}

// fileState is what inspectFile learned about a data.db.
type fileState struct {
	size int64
	cur  boltMeta // the meta bbolt will use
	// olderDamaged is set when the older of the two meta pages is damaged: nothing is lost (the
	// next commit rewrites it), but db check reports it.
	olderDamaged bool
	// rollback is set when the newer meta page is damaged. It is kept apart from inspectFile's
	// error because, read without the file lock, a meta page being written looks damaged.
	rollback *store.DamagedError
}

// inspectFile reads the two meta pages of the bbolt file f and refuses what bbolt would open
// wrongly or crash on: an empty file (bbolt would make a new database of it), a file that is not
// bbolt, one shorter than the pages its meta says are in use (bbolt would fault reading them),
// and a damaged newer meta page, which bbolt silently skips, going back one commit. The newer
// page is told by its transaction id when that survived; when the damaged page's id is not
// plausibly older (on the wrong page for its parity, or higher), it is taken as the newer one.
// That finding is returned as fileState.rollback, to be trusted only when f is locked against
// writers; the others cannot be caused by a writer (bbolt grows the file before it writes a meta
// page that reaches further).
func inspectFile(f *os.File) (fileState, error) {
	path := f.Name()
	fi, err := f.Stat()
	if err != nil {
		return fileState{}, err
	}
	st := fileState{size: fi.Size()}
	if st.size == 0 {
		return st, &store.DamagedError{Path: path, Problem: "it is empty (0 bytes), so it holds no store; starplan does not create one over an existing file (remove it if you know it held nothing)"}
	}
	buf := make([]byte, minMetaReadSz)
	read := func(off int64) []byte {
		n, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil
		}
		return append([]byte(nil), buf[:n]...)
	}
	m0 := readMeta(read(0), 0)
	pageSize := m0.pageSize
	if !m0.valid || pageSize < 512 || pageSize > 1<<20 {
		pageSize = int64(os.Getpagesize())
	}
	m1 := readMeta(read(pageSize), 1)
	if !m0.valid && !m1.valid {
		return st, &store.DamagedError{Path: path, Problem: "neither of its two bbolt meta pages is valid: it is not a starplan store, or its header is damaged"}
	}
	cur, other := m0, m1
	if !m0.valid || (m1.valid && m1.txid > m0.txid) {
		cur, other = m1, m0
	}
	st.cur = cur
	if !other.valid {
		if other.txid > cur.txid || other.txid%2 != uint64(other.page) {
			st.rollback = &store.DamagedError{Path: path, Problem: fmt.Sprintf(
				"its newer meta page (page %d) is damaged; opening it would silently go back to bbolt transaction %d and lose what was committed after it",
				other.page, cur.txid)}
		} else {
			st.olderDamaged = true
		}
	}
	if need := cur.pgid * cur.pageSize; need > st.size {
		return st, &store.DamagedError{Path: path, Problem: fmt.Sprintf("it is truncated: it is %d bytes, but its pages reach %d bytes", st.size, need)}
	}
	return st, nil
}
