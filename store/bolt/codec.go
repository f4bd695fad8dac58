package bolt

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/starplan/starplan/store"

	d "github.com/ostafen/clover/v2/document"
	"github.com/starplan/starplan/table"
	"go.etcd.io/bbolt"
)

// Fields starplan adds to every stored document. Schema field names cannot start with "_".
const (
	idField      = d.ObjectIdField // clover's document id: a UUID (see rowDocID)
	versionField = "_v"            // the commit sequence number that last wrote the row
)

// idNamespace is the namespace of the name-based (version 5) UUIDs of system documents.
var idNamespace = [16]byte{0x5c, 0x1a, 0x7e, 0x02, 0x9b, 0x44, 0x4f, 0x0d, 0x8a, 0x6e, 0x33, 0x52, 0x10, 0xc4, 0x77, 0xe9}

// sysDocID is the clover document id of a system document: the version-5 UUID of the collection
// and the document's id, so it can be found without an index.
func sysDocID(collection string, id string) string {
	h := sha1.New()
	h.Write(idNamespace[:])
	h.Write([]byte(collection))
	h.Write([]byte{0})
	h.Write([]byte(id))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return formatUUID(u)
}

// sysDocKeys returns the clover id under which a new system document id of collection is
// stored (key), and where a starplan before 2026-11-29 stored it when that differs (legacy; ""
// when it does not). A numbered id (numberedID: the audit chain's entries, "%016d") is stored
// under numberedDocID: entries numbered in order are then stored in order, and bbolt appends
// each batch of them to its tree instead of rewriting a page at a random place of it for each
// (issue 32: that rewriting was a seventh of the audit write). Such an id was stored under
// sysDocID before, which every lookup tries second; any other id is stored under sysDocID, as
// it always was. Both are functions of the id alone, so db check still knows where each
// document must be (check.go).
func sysDocKeys(collection, id string) (key, legacy string) {
	n, ok := numberedID(id)
	if !ok {
		return sysDocID(collection, id), ""
	}
	return numberedDocID(n, len(id)), sysDocID(collection, id)
}

// numberedID reports whether id is numbered (sysDocKeys) and its number: 1 to 20 decimal
// digits, of a value below 2^48.
func numberedID(id string) (uint64, bool) {
	if id == "" || len(id) > 20 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(id[i]-'0')
		if n >= 1<<48 {
			return 0, false
		}
	}
	return n, true
}

// numberedDocID is the clover id of a numbered system document: a version-8 (custom) UUID of
// its number (48 bits, big-endian, first, so ids of one length sort by number) and its length
// (so "7" and "007" differ), marked apart from a row's (rowDocID) in its eighth byte. A
// system document's other ids are version 5 (sysDocID): the two never meet.
func numberedDocID(n uint64, length int) string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[0:8], n<<16) // 48 bits of n
	u[6] = 0x80                               // version 8
	u[7] = byte(length)
	u[8], u[9] = 0x80, 0x5d // RFC 4122 variant; a numbered system document
	return formatUUID(u)
}

// sequencedDocID is the clover id of the n-th document of an indexed system collection (the
// audit log's records) stored since its index was made: a version-8 (custom) UUID of n (48 bits,
// big-endian, first, so documents stored later sort later), marked apart from a row's and a
// numbered document's in its tenth byte. A document so stored is found through its entry in the
// collection's index (sysEntry.Key): a batch of records is appended to bbolt's tree, instead of
// each rewriting a page of records at a random place of it (issue 32: the largest part of the
// audit write's commit).
func sequencedDocID(n uint64) string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[0:8], n<<16) // 48 bits of n
	u[6] = 0x80                               // version 8
	u[8], u[9] = 0x80, 0x5e                   // RFC 4122 variant; a sequenced system document
	return formatUUID(u)
}

// sequencedNumber is the n of sequencedDocID(n), and whether uuid is one.
func sequencedNumber(uuid string) (uint64, bool) {
	if len(uuid) != 36 || uuid[14:18] != "8000" || uuid[19:23] != "805e" || uuid[24:] != "000000000000" {
		return 0, false
	}
	var u [8]byte
	if _, err := hex.Decode(u[0:4], []byte(uuid[0:8])); err != nil {
		return 0, false
	}
	if _, err := hex.Decode(u[4:6], []byte(uuid[9:13])); err != nil {
		return 0, false
	}
	n := binary.BigEndian.Uint64(u[:]) >> 16
	return n, sequencedDocID(n) == uuid
}

// rowDocID is the clover document id of a row inserted by commit seq as its n-th insert: a
// version-8 (custom) UUID holding seq and n big-endian, so ids increase with every insert. bbolt
// keeps documents in id order, which makes them insertion order: new rows are appended to the
// B+tree instead of splitting it at random places, and rows with generated keys (TXN001,
// TXN002, ...) load already in key order, so sorting them at Open is a linear check and their
// maps are allocated in the order a scan visits them.
func rowDocID(seq int64, n int) string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[0:8], uint64(seq)<<16) // 48 bits of seq
	u[6] = 0x80                                         // version 8
	u[8] = 0x80                                         // RFC 4122 variant
	binary.BigEndian.PutUint64(u[8:16], uint64(n)&(1<<48-1))
	u[8], u[9] = 0x80, 0
	return formatUUID(u)
}

// rowDocIDVersionLen is how many characters of a rowDocID its version (and the UUID version)
// fill: every id of a commit's rows starts with the same ones.
const rowDocIDVersionLen = len("00000000-0000-8000")

// formatUUID writes u as 8-4-4-4-12 lowercase hex (by hand: an import formats a million ids,
// and fmt took 2 % of its time).
func formatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	hex.Encode(b[9:13], u[4:6])
	hex.Encode(b[14:18], u[6:8])
	hex.Encode(b[19:23], u[8:10])
	hex.Encode(b[24:36], u[10:16])
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	return string(b[:])
}

// encodeDoc builds the clover document stored for a row.
func encodeDoc(id string, row table.Row, version int64) *d.Document {
	doc := d.NewDocument()
	for k, v := range row {
		doc.Set(k, v)
	}
	doc.Set(idField, id)
	doc.Set(versionField, version)
	return doc
}

// appendDoc appends to dst the stored document of row, with its id and version: a msgpack map
// of the kinds clover writes and reads (clover's Decode and decodeRow read it as they read
// clover's own), encoded here rather than through clover's reflection, which took a third of a
// large import's writing. ok is false when a value is not of a kind a row holds (table.Row).
func appendDoc(dst []byte, id string, row table.Row, version int64) (out []byte, ok bool) {
	dst = appendMPLen(dst, 0x80, 0xde, 0xdf, len(row)+2)
	for k, v := range row {
		dst = appendMPStr(dst, k)
		if dst, ok = appendMP(dst, v); !ok {
			return dst, false
		}
	}
	dst = appendMPStr(appendMPStr(dst, idField), id)
	return appendMPInt(appendMPStr(dst, versionField), version), true
}

// appendMP appends one value of a row (see table.Row) in msgpack; ok is false for another kind.
// Validation bounds the nesting of the values it passes (table.MaxNesting).
func appendMP(dst []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(dst, 0xc0), true
	case bool:
		if v {
			return append(dst, 0xc3), true
		}
		return append(dst, 0xc2), true
	case int64:
		return appendMPInt(dst, v), true
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(v)), true
	case string:
		return appendMPStr(dst, v), true
	case []any:
		dst = appendMPLen(dst, 0x90, 0xdc, 0xdd, len(v))
		for _, e := range v {
			var ok bool
			if dst, ok = appendMP(dst, e); !ok {
				return dst, false
			}
		}
		return dst, true
	case map[string]any:
		dst = appendMPLen(dst, 0x80, 0xde, 0xdf, len(v))
		for k, e := range v {
			var ok bool
			if dst, ok = appendMP(appendMPStr(dst, k), e); !ok {
				return dst, false
			}
		}
		return dst, true
	}
	return dst, false
}

// appendMPLen appends the header of a map or array of n elements: fix is the code of the
// 4-bit form (fixmap 0x80, fixarray 0x90), c16 and c32 those of the 16- and 32-bit ones.
func appendMPLen(dst []byte, fix, c16, c32 byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, fix|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, c16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, c32), uint32(n))
}

// appendMPStr appends s as a msgpack string.
func appendMPStr[S string | []byte](dst []byte, s S) []byte {
	switch n := len(s); {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}

// appendMPInt appends i as clover writes an int64, in 8 bytes whatever its size (msgpack
// decoders give a shorter form back as a shorter integer).
func appendMPInt(dst []byte, i int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(i))
}

// docPrefix is the bbolt key prefix under which clover stores a collection's documents
// (db.go, getDocumentKeyPrefix). Reading them directly is how Open stays fast: see the package
// documentation.
func docPrefix(collection string) []byte { return []byte("c:" + collection + ";d:") }

// docPrefixLen is len(docPrefix(collection)), without making it.
func docPrefixLen(collection string) int { return len("c:;d:") + len(collection) }

// loadDocs decodes every document of a collection straight from the bbolt values clover wrote
// (msgpack maps), in id order, into records. Field names are interned through the schema and
// numbers converted to the field's kind as they are read (int64 for int fields, float64 for
// float fields), so a row costs one map and its string and float values. What the records keep
// is recorded as shared memory (table.AddShared) as they are made.
//
// The cursor walks in this goroutine and hands the documents, loadChunk at a time, to decoders,
// one per processor (at most 4): decoding is most of the time of reading a large table into
// memory, which a plan's first report over it pays. Each decoder reads the memory map under its
// own guard (path names the file). A document that does not decode is the error, the first in id
// order, whatever the order the decoders found them in. Any of stops closed ends the read with
// errStopped, between chunks.
func loadDocs(tx *bbolt.Tx, path string, s *store.Schema, stops ...<-chan struct{}) ([]*rec, error) {
	b := tx.Bucket([]byte(rootBucket))
	if b == nil {
		return nil, nil
	}
	prefix := docPrefix(s.Name)
	type part struct {
		i          int64    // its place among the chunks
		keys, docs [][]byte // the chunk's bbolt keys and values, until decoded
		recs       []*rec
		err        error
	}
	var (
		parts []*part
		work  = make(chan *part)
		wg    sync.WaitGroup
		// failed is the first chunk found bad so far: later ones are not decoded (nor sent),
		// earlier ones still are, so the error is the first bad document's whatever the order.
		failed atomic.Int64
	)
	failed.Store(math.MaxInt64)
	for range min(runtime.GOMAXPROCS(0), 4) {
		wg.Go(func() {
			for p := range work {
				if p.i > failed.Load() {
					p.keys, p.docs = nil, nil
					continue
				}
				p.err = guard(path, func() error {
					var kept int64
					defer func() { table.AddShared(kept) }()
					p.recs = make([]*rec, 0, len(p.docs))
					for i, v := range p.docs {
						id := p.keys[i][len(prefix):]
						row, version, err := decodeRow(s, v)
						if err != nil {
							return fmt.Errorf("%s: document %s: %w", s.Name, id, err)
						}
						r := &rec{key: row[s.Key], row: row, ver: version, id: string(id)}
						p.recs = append(p.recs, r)
						kept += recHeap(row, r.id)
					}
					return nil
				})
				var de *store.DamagedError
				if errors.As(p.err, &de) { // a fault: the callers say that the file is damaged
					p.err = fmt.Errorf("%s: documents from %s: %s", s.Name, p.keys[0][len(prefix):], de.Problem)
				}
				for f := failed.Load(); p.err != nil && p.i < f && !failed.CompareAndSwap(f, p.i); f = failed.Load() {
				}
				p.keys, p.docs = nil, nil
			}
		})
	}
	stopped := false
	func() {
		defer wg.Wait()   // second: no decoder reads the map once this returns, even on a panic
		defer close(work) // first
		c := b.Cursor()
		p := &part{}
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			p.keys, p.docs = append(p.keys, k), append(p.docs, v)
			if len(p.docs) == loadChunk {
				if failed.Load() != math.MaxInt64 {
					return // a document is bad: the rest would not be kept
				}
				for _, stop := range stops {
					select {
					case <-stop:
						stopped = true
						return
					default:
					}
				}
				parts = append(parts, p)
				work <- p
				p = &part{i: int64(len(parts))}
			}
		}
		if len(p.docs) > 0 {
			parts = append(parts, p)
			work <- p
		}
	}()
	if stopped {
		return nil, errStopped
	}
	n := 0
	for _, p := range parts {
		if p.err != nil {
			return nil, p.err
		}
		n += len(p.recs)
	}
	recs := make([]*rec, 0, n)
	for _, p := range parts {
		recs = append(recs, p.recs...)
	}
	return recs, nil
}

// loadChunk is how many documents loadDocs hands a decoder at a time.
const loadChunk = 4096

// decodeRow decodes one stored document into a row of s and its version.
func decodeRow(s *store.Schema, data []byte) (table.Row, int64, error) {
	r := mpReader{b: data}
	n, err := r.mapLen()
	if err != nil {
		return nil, 0, err
	}
	row := make(table.Row, len(s.Fields))
	var version int64
	for range n {
		name, err := r.str()
		if err != nil {
			return nil, 0, err
		}
		f := s.FieldsByName[string(name)]
		if f == nil {
			switch string(name) {
			case idField:
				if err := r.skip(); err != nil {
					return nil, 0, err
				}
				continue
			case versionField:
				v, err := r.value()
				if err != nil {
					return nil, 0, err
				}
				version, _ = store.ToInt(v)
				continue
			}
			return nil, 0, fmt.Errorf("stored field %q is not in the schema", name)
		}
		v, err := r.value()
		if err != nil {
			return nil, 0, fmt.Errorf("field %s: %w", f.Name, err)
		}
		switch f.Type {
		case table.TypeInt:
			if i, ok := store.ToInt(v); ok {
				v = i
			}
		case table.TypeFloat:
			if i, ok := store.ToInt(v); ok {
				v = float64(i)
			}
		case table.TypeList, table.TypeObject, table.TypeMap:
			v = table.RestoreKinds(f.Field, v)
		}
		row[f.Name] = v // f.Name, not name: the key shares the schema's string
	}
	if len(row) < len(s.Fields) {
		for i := range s.Fields {
			if _, ok := row[s.Fields[i].Name]; !ok {
				row[s.Fields[i].Name] = nil
			}
		}
	}
	switch row[s.Key].(type) {
	case string:
		if s.KeyField.Type == table.TypeString {
			return row, version, nil
		}
	case int64:
		if s.KeyField.Type == table.TypeInt {
			return row, version, nil
		}
	}
	return nil, 0, fmt.Errorf("stored key %s is not a %s", table.FormatValue(row[s.Key]), s.KeyField.Type)
}

// mpReader decodes the msgpack subset that clover writes for starplan documents: maps with
// string keys, arrays, strings, binaries, nil, booleans, integers and floats.
type mpReader struct {
	b []byte
	i int
}

var errShort = errors.New("truncated msgpack value")

func (r *mpReader) byte1() (byte, error) {
	if r.i >= len(r.b) {
		return 0, errShort
	}
	c := r.b[r.i]
	r.i++
	return c, nil
}

func (r *mpReader) take(n int) ([]byte, error) {
	if n < 0 || r.i+n > len(r.b) {
		return nil, errShort
	}
	p := r.b[r.i : r.i+n]
	r.i += n
	return p, nil
}

// uint reads an n-byte big-endian unsigned integer.
func (r *mpReader) uint(n int) (uint64, error) {
	p, err := r.take(n)
	if err != nil {
		return 0, err
	}
	var u uint64
	for _, c := range p {
		u = u<<8 | uint64(c)
	}
	return u, nil
}

func (r *mpReader) mapLen() (int, error) {
	c, err := r.byte1()
	if err != nil {
		return 0, err
	}
	switch {
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f), nil
	case c == 0xde:
		n, err := r.uint(2)
		return int(n), err
	case c == 0xdf:
		n, err := r.uint(4)
		return int(n), err
	}
	return 0, fmt.Errorf("want a msgpack map, found code 0x%02x", c)
}

// str reads a string or binary; the bytes alias the input.
func (r *mpReader) str() ([]byte, error) {
	c, err := r.byte1()
	if err != nil {
		return nil, err
	}
	return r.strBody(c)
}

func (r *mpReader) strBody(c byte) ([]byte, error) {
	var n uint64
	var err error
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n, err = r.uint(1)
	case c == 0xda || c == 0xc5:
		n, err = r.uint(2)
	case c == 0xdb || c == 0xc6:
		n, err = r.uint(4)
	default:
		return nil, fmt.Errorf("want a msgpack string, found code 0x%02x", c)
	}
	if err != nil {
		return nil, err
	}
	return r.take(int(n))
}

// maxDecodeDepth bounds the nesting of a decoded value: validation keeps stored values within
// table.MaxNesting, so anything deeper is damage, and must not exhaust the stack.
const maxDecodeDepth = 4 * table.MaxNesting

// value reads any value: nil, bool, int64 (uint64 above MaxInt64), float64, string, []any or
// map[string]any.
func (r *mpReader) value() (any, error) { return r.valueAt(0) }

func (r *mpReader) valueAt(depth int) (any, error) {
	if depth > maxDecodeDepth {
		return nil, fmt.Errorf("value nested more than %d deep", maxDecodeDepth)
	}
	c, err := r.byte1()
	if err != nil {
		return nil, err
	}
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c >= 0xa0 && c <= 0xbf, c == 0xd9, c == 0xda, c == 0xdb, c == 0xc4, c == 0xc5, c == 0xc6:
		p, err := r.strBody(c)
		return string(p), err
	case c >= 0x80 && c <= 0x8f, c == 0xde, c == 0xdf:
		r.i--
		n, err := r.mapLen()
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, n)
		for range n {
			k, err := r.str()
			if err != nil {
				return nil, err
			}
			if m[string(k)], err = r.valueAt(depth + 1); err != nil {
				return nil, err
			}
		}
		return m, nil
	case c >= 0x90 && c <= 0x9f, c == 0xdc, c == 0xdd:
		var n uint64
		switch c {
		case 0xdc:
			n, err = r.uint(2)
		case 0xdd:
			n, err = r.uint(4)
		default:
			n = uint64(c & 0x0f)
		}
		if err != nil {
			return nil, err
		}
		if n > uint64(len(r.b)) {
			return nil, errShort
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = r.valueAt(depth + 1); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xca:
		u, err := r.uint(4)
		return float64(math.Float32frombits(uint32(u))), err
	case 0xcb:
		u, err := r.uint(8)
		return math.Float64frombits(u), err
	case 0xcc, 0xcd, 0xce, 0xcf:
		u, err := r.uint(1 << (c - 0xcc))
		if u > math.MaxInt64 {
			return u, err
		}
		return int64(u), err
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (c - 0xd0)
		u, err := r.uint(n)
		shift := 64 - 8*n
		return int64(u<<shift) >> shift, err // sign-extend
	}
	return nil, fmt.Errorf("unsupported msgpack code 0x%02x", c)
}

func (r *mpReader) skip() error {
	_, err := r.value()
	return err
}

type cloverDoc = d.Document

func newCloverDoc() *cloverDoc { return d.NewDocument() }

// sysDocCarries reports whether v, the stored system document under clover id uuid, is the
// document of id: at once when it starts as appendSysDoc or clover writes one, else by decoding
// it. A document is found through its index entry's key (sysDocAt), which, unlike a key
// computed from the id, can name another document when the file is damaged.
func sysDocCarries(v []byte, uuid, id string) bool {
	var buf [128]byte
	head := appendMPStr(appendMPStr(appendMPStr(appendMPStr(appendMPLen(buf[:0], 0x80, 0xde, 0xdf, 3), idField), uuid), "id"), id)
	if bytes.HasPrefix(v, head) {
		return true
	}
	// As clover writes one (a document rewritten where it is): "id" first.
	if head = appendMPStr(appendMPStr(appendMPLen(buf[:0], 0x80, 0xde, 0xdf, 3), "id"), id); bytes.HasPrefix(v, head) {
		return true
	}
	doc, err := d.Decode(v)
	if err != nil {
		return false
	}
	got, _ := doc.Get("id").(string)
	return got == id
}
