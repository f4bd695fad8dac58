package bolt

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/starplan/starplan/store"
)

// bbolt's page layout (go.etcd.io/bbolt internal/common): a 16-byte header (id, flags, count,
// overflow), then count elements of 16 bytes each; a branch element is (pos, ksize, child page
// id), a leaf element (flags, pos, ksize, vsize), pos counting from the element itself. A leaf
// element flagged as a bucket holds the bucket's header (root page id, sequence), followed, when
// the root is 0, by the bucket's own leaf page inline. A freelist page lists page ids (a count of
// 0xFFFF means the first id is the real count).
const (
	pageHeaderSize   = 16
	pageElemSize     = 16
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	metaPageFlag     = 0x04
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01
	bucketHeaderSize = 16
	noFreelist       = ^uint64(0)
	maxTreeDepth     = 64
)

// pageWalker reads every page bbolt's tx.Check will read, from the file, and checks that each is
// what its parent says it is and that every element lies inside its page. tx.Check runs on a
// goroutine of its own, where a panic on a bad page header (or a fault reading past a page)
// cannot be recovered and ends the process; so Check runs it only when the walker found
// nothing.
type pageWalker struct {
	f        *os.File
	pageSize int64
	hwm      int64 // pages [0, hwm) are in use
	seen     map[int64]bool
	problems []string
}

func (w *pageWalker) problem(format string, args ...any) {
	if len(w.problems) < store.MaxProblemsPerCheck {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

// checkPages walks the file that st describes: both meta pages' headers, the freelist page and
// every page of every bucket from the root. It returns what is wrong, in words.
func checkPages(f *os.File, st fileState) []string {
	w := &pageWalker{f: f, pageSize: st.cur.pageSize, hwm: st.cur.pgid, seen: map[int64]bool{}}
	if w.pageSize < 512 || w.hwm < 2 {
		return []string{fmt.Sprintf("its meta page gives an impossible page size %d or page count %d", w.pageSize, w.hwm)}
	}
	for id := int64(0); id < 2; id++ {
		h, err := w.header(id)
		if err != nil {
			w.problem("meta page %d does not read: %v", id, err)
			continue
		}
		if h.id != uint64(id) || h.flags != metaPageFlag {
			w.problem("meta page %d has a damaged page header (it says page %d, flags %#x)", id, h.id, h.flags)
		}
		w.seen[id] = true
	}
	if fl := st.cur.freelist; fl != noFreelist {
		if b := w.page(int64(fl), freelistPageFlag, "the freelist"); b != nil {
			n, ids := uint64(binary.LittleEndian.Uint16(b[10:])), b[pageHeaderSize:]
			if n == 0xFFFF && len(ids) >= 8 {
				n, ids = binary.LittleEndian.Uint64(ids), ids[8:]
			}
			if n > uint64(len(ids)/8) {
				w.problem("the freelist page %d lists %d pages but has room for %d", fl, n, len(ids)/8)
			}
		}
	}
	w.tree(int64(st.cur.root), "the root bucket", 0)
	return w.problems
}

type pageHeader struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint32
}

func (w *pageWalker) header(id int64) (pageHeader, error) {
	var b [pageHeaderSize]byte
	if _, err := w.f.ReadAt(b[:], id*w.pageSize); err != nil {
		return pageHeader{}, err
	}
	le := binary.LittleEndian
	return pageHeader{id: le.Uint64(b[0:]), flags: le.Uint16(b[8:]), count: le.Uint16(b[10:]), overflow: le.Uint32(b[12:])}, nil
}

// page reads page id, with its overflow pages, when its header says it is page id of the kind
// flags (one flag, or branch|leaf for either) and it lies below the high-water mark; else it
// reports why not and returns nil. what names the page for the report.
func (w *pageWalker) page(id int64, flags uint16, what string) []byte {
	if id < 2 || id >= w.hwm {
		w.problem("%s points at page %d, outside the pages in use (2 to %d)", what, id, w.hwm-1)
		return nil
	}
	if w.seen[id] {
		w.problem("%s points at page %d, which is already in use elsewhere", what, id)
		return nil
	}
	h, err := w.header(id)
	if err != nil {
		w.problem("page %d (%s) does not read: %v", id, what, err)
		return nil
	}
	switch {
	case h.id != uint64(id):
		w.problem("page %d (%s) says it is page %d", id, what, h.id)
		return nil
	case h.flags&flags == 0 || h.flags&^flags != 0 || (h.flags == branchPageFlag|leafPageFlag):
		w.problem("page %d (%s) has unexpected type flags %#x", id, what, h.flags)
		return nil
	case id+int64(h.overflow) >= w.hwm:
		w.problem("page %d (%s) runs %d pages past the pages in use", id, what, id+int64(h.overflow)-w.hwm+1)
		return nil
	}
	for i := id; i <= id+int64(h.overflow); i++ {
		w.seen[i] = true
	}
	b := make([]byte, (int64(h.overflow)+1)*w.pageSize)
	if _, err := w.f.ReadAt(b, id*w.pageSize); err != nil {
		w.problem("page %d (%s) does not read: %v", id, what, err)
		return nil
	}
	return b
}

// tree checks the B+tree page id and every page below it.
func (w *pageWalker) tree(id int64, what string, depth int) {
	if depth > maxTreeDepth {
		w.problem("page %d (%s) is more than %d levels deep: its tree loops", id, what, maxTreeDepth)
		return
	}
	if b := w.page(id, branchPageFlag|leafPageFlag, what); b != nil {
		w.elements(id, b, what, depth)
	}
}

// elements checks the elements of the branch or leaf page p (page id, or 0 for a bucket's inline
// page) and follows them.
func (w *pageWalker) elements(id int64, p []byte, what string, depth int) {
	le := binary.LittleEndian
	if len(p) < pageHeaderSize {
		w.problem("%s: an inline page of %d bytes", what, len(p))
		return
	}
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	where := fmt.Sprintf("page %d (%s)", id, what)
	if id == 0 {
		where = "the inline page of " + what
		if flags != leafPageFlag {
			w.problem("%s has unexpected type flags %#x", where, flags)
			return
		}
	}
	if pageHeaderSize+count*pageElemSize > len(p) {
		w.problem("%s holds %d elements, more than fit in it", where, count)
		return
	}
	for i := range count {
		off := pageHeaderSize + i*pageElemSize
		e := p[off : off+pageElemSize]
		if flags == branchPageFlag {
			pos, ksize := int64(le.Uint32(e[0:])), int64(le.Uint32(e[4:]))
			if int64(off)+pos+ksize > int64(len(p)) {
				w.problem("%s: element %d's key lies outside the page", where, i)
				continue
			}
			w.tree(int64(le.Uint64(e[8:])), what, depth+1)
			continue
		}
		eflags, pos, ksize, vsize := le.Uint32(e[0:]), int64(le.Uint32(e[4:])), int64(le.Uint32(e[8:])), int64(le.Uint32(e[12:]))
		start := int64(off) + pos
		if start+ksize+vsize > int64(len(p)) {
			w.problem("%s: element %d's key or value lies outside the page", where, i)
			continue
		}
		if eflags&bucketLeafFlag == 0 {
			continue
		}
		v := p[start+ksize : start+ksize+vsize]
		name := fmt.Sprintf("bucket %q", p[start:start+ksize])
		if len(v) < bucketHeaderSize {
			w.problem("%s: %s has a header of %d bytes", where, name, len(v))
			continue
		}
		if root := le.Uint64(v); root == 0 {
			w.elements(0, v[bucketHeaderSize:], name, depth+1)
		} else {
			w.tree(int64(root), name, depth+1)
		}
	}
}
