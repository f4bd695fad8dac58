package isolate

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/starplan/starplan/table"
)

// The wire format. Every message is one frame: a 4-byte little-endian payload length, then the
// payload, whose first byte is the message type. Inside a payload, values are written with a
// type tag so that table.Row values keep their Go kinds (int64 stays int64, unlike JSON):
//
//	tagNil | tagFalse | tagTrue
//	tagInt    zigzag varint
//	tagFloat  8 bytes, IEEE 754, little-endian
//	tagString uvarint length, bytes
//	tagList   uvarint count, values
//	tagMap    uvarint count, (key, value) pairs
//
// A map key is a uvarint: 0 is followed by a new string (uvarint length, bytes) that joins the
// frame's key table; n > 0 refers to the n-th key of that table. Rows of one table repeat the
// same field names, so a frame of 100,000 rows names each field once.
const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagInt
	tagFloat
	tagString
	tagList
	tagMap
)

// maxKeys bounds a frame's key table; further new keys are written inline every time.
const maxKeys = 1 << 12

// encoder builds one frame's payload.
type encoder struct {
	buf  []byte
	keys map[string]int // key → its 1-based index in the frame's key table
	// held is what the worker's heap holds for the values written since rows last reset it,
	// when it keeps them (see held.go).
	held int64
}

// reset starts a new frame of message type typ, keeping the buffer's capacity.
func (e *encoder) reset(typ byte) {
	e.buf = append(e.buf[:0], 0, 0, 0, 0, typ)
	clear(e.keys)
}

// frame returns the finished frame, its length prefix filled in.
func (e *encoder) frame() []byte {
	binary.LittleEndian.PutUint32(e.buf, uint32(len(e.buf)-4))
	return e.buf
}

func (e *encoder) byte(b byte)      { e.buf = append(e.buf, b) }
func (e *encoder) uvarint(u uint64) { e.buf = binary.AppendUvarint(e.buf, u) }
func (e *encoder) varint(i int64)   { e.buf = binary.AppendVarint(e.buf, i) }
func (e *encoder) bool(b bool) {
	if b {
		e.byte(1)
	} else {
		e.byte(0)
	}
}
func (e *encoder) string(s string) {
	e.uvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) key(k string) {
	if i, ok := e.keys[k]; ok {
		e.uvarint(uint64(i))
		return
	}
	e.byte(0)
	e.string(k)
	if e.keys == nil {
		e.keys = make(map[string]int)
	}
	if len(e.keys) < maxKeys {
		e.keys[k] = len(e.keys) + 1
	}
}

// value writes a plain Go value: nil, bool, int64, float64, string, []any, map[string]any (and,
// for convenience, int, int32 and float32, which arrive as int64 and float64).
func (e *encoder) value(v any) error {
	switch v := v.(type) {
	case nil:
		e.byte(tagNil)
	case bool:
		if v {
			e.byte(tagTrue)
		} else {
			e.byte(tagFalse)
		}
	case int64:
		e.int(v)
	case int:
		e.int(int64(v))
	case int32:
		e.int(int64(v))
	case float64:
		e.float(v)
	case float32:
		e.float(float64(v))
	case string:
		e.held += stringCost(len(v))
		e.byte(tagString)
		e.string(v)
	case []any:
		e.held += listCost(len(v))
		e.byte(tagList)
		e.uvarint(uint64(len(v)))
		for _, x := range v {
			if err := e.value(x); err != nil {
				return err
			}
		}
	case map[string]any:
		return e.row(v)
	default:
		return fmt.Errorf("a value of Go type %T cannot cross to the sandbox worker", v)
	}
	return nil
}

func (e *encoder) int(v int64) {
	e.held += wordCost(uint64(v))
	e.byte(tagInt)
	e.varint(v)
}

func (e *encoder) float(v float64) {
	b := math.Float64bits(v)
	e.held += wordCost(b)
	e.byte(tagFloat)
	e.buf = binary.LittleEndian.AppendUint64(e.buf, b)
}

// row writes a map value (a table.Row or any other map[string]any).
func (e *encoder) row(m map[string]any) error {
	e.held += mapCost(len(m))
	e.byte(tagMap)
	e.uvarint(uint64(len(m)))
	for k, x := range m {
		e.held += allocSize(int64(len(k))) // a kept map owns its keys
		e.key(k)
		if err := e.value(x); err != nil {
			return err
		}
	}
	return nil
}

// maxShape is the most fields a row shape has (one bit each in a row's presence mask).
const maxShape = 64

// rows writes a list of rows of one table. The fields of shape (the schema's, in order) are
// written once; then each row is a mask of the shape's fields it has, their values in order,
// and any other fields as (key, value) pairs. A table's rows never look up a key by name here.
//
// With a cache (the pool's record of the worker's row cache), a row the worker already holds is
// written as its number in that cache, and a new row is added to it while the cache has room;
// without one, every row is written whole. A row's identity is its map: the view's rows are
// shared and never modified, so the same map always holds the same values. The rows added are
// the frame's until the frame is sent: when it is not (an error replaces it), the caller undoes
// them with rowCache.rollback.
func (e *encoder) rows(rs []map[string]any, shape []string, cache *rowCache) error {
	if len(shape) > maxShape {
		shape = shape[:maxShape]
	}
	e.uvarint(uint64(len(rs)))
	e.uvarint(uint64(len(shape)))
	for _, k := range shape {
		e.string(k)
	}
	if len(rs) > 0 {
		e.buf = slices.Grow(e.buf, len(rs)*(len(shape)*8+2))
	}
	var vals [maxShape]any
	// The worker copies the shape's names once a frame, for the first row it keeps: that row
	// pays for them.
	var names int64
	for _, k := range shape {
		names += allocSize(int64(len(k)))
	}
	for _, r := range rs {
		id, known := cache.lookup(r)
		if known {
			e.uvarint(id + refCached)
			continue
		}
		at := len(e.buf)
		e.held = mapCost(len(r)) + cacheSlot + names
		e.byte(refNew)
		mask, n := uint64(0), 0
		for i, k := range shape {
			v, ok := r[k]
			if ok {
				mask |= 1 << i
				vals[n] = v
				n++
			}
		}
		e.uvarint(mask)
		for _, v := range vals[:n] {
			if err := e.value(v); err != nil {
				return err
			}
		}
		e.uvarint(uint64(len(r) - n))
		if n != len(r) {
			for k, v := range r {
				if slices.Contains(shape, k) {
					continue
				}
				e.held += allocSize(int64(len(k)))
				e.key(k)
				if err := e.value(v); err != nil {
					return err
				}
			}
		}
		if cache.add(r, heldCost(e.held)) {
			e.buf[at] = refNewCached
			names = 0
		}
	}
	return nil
}

// How a row of a rows list starts: a new row, a new row the worker keeps in its cache, or
// refCached plus the number of a row in that cache.
const (
	refNew = iota
	refNewCached
	refCached
)

// DefaultRowCache is the memory the workers of a pool may keep received rows in between runs,
// all together, in bytes, as rowCache.allowance counts it (Options.RowCache): enough for the
// 321,219 rows that issue 15's report over a million inventory rows matches (165 MiB by the
// estimate of held.go), which then cross as numbers on every later run. The pool's records take
// about 40 bytes a row, and keep the parent's maps of the rows alive: the store's own, for a
// table it holds in memory; at worst, as much again in rows the store has let go (a table read
// from the file decodes new rows on every read, which the cache never matches: it fills, and
// its worker is then replaced, see rowCache.startRun).
const DefaultRowCache = 256 << 20

// staleRuns is how many runs a full cache is given before it may be judged stale: a cache that
// a large read has just filled has not been asked again yet.
const staleRuns = 3

// rowBudget is the bound of all the workers' row caches of a pool together: the pool's records
// keep the parent's maps of the rows alive, so the parent's memory grows with their total.
type rowBudget struct {
	limit int64
	used  atomic.Int64
}

// take reserves n bytes when they fit under the limit, and reports whether they did.
func (b *rowBudget) take(n int64) bool {
	if b == nil {
		return true
	}
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *rowBudget) give(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// rowCache is the pool's record of the rows a worker keeps between calls and runs, so that a
// search of rows the worker already holds sends only their numbers. Its bound is memory, not a
// row count: a worker keeps rows while their allowance (which the pool adds to the worker's
// memory limits) stays within limit and the pool's budget has room, so a large read is held
// whole when memory allows, and beyond it the rows already held keep crossing as numbers while
// the rest cross whole. A full cache that recent runs used few rows of is stale (it holds older
// versions of rows, or a question no longer asked): the pool then replaces the worker, which
// starts with none (see startRun).
//
// The record always matches what the worker holds, so the limits computed from allowance
// always cover it.
//
// It keeps the rows' maps alive (a map's address is its identity), so an address is never
// reused for other values while it is in the cache. A nil *rowCache caches nothing.
type rowCache struct {
	ids    map[unsafe.Pointer]uint64
	order  []unsafe.Pointer // the rows by number
	cost   int64            // the estimated memory the worker spends on the rows it holds
	limit  int64            // the most allowance() may reach
	budget *rowBudget       // the pool's, shared by its workers' records; nil: none

	full     bool // a row was not kept for want of room
	fullRuns int  // runs started since it was full
	// wrote: the run has written, so the rows it reads from now on may be its own staged
	// versions, which no later run sees: they are not kept (those held still cross as numbers).
	wrote  bool
	hits   int // rows sent as numbers during this run
	recent int // hits of recent runs, each run's halved at the next (see startRun)

	// The state at the start of the frame being built (see mark and rollback).
	markN    int
	markCost int64
	markFull bool
}

func newRowCache(limit int64, budget *rowBudget) *rowCache {
	return &rowCache{ids: map[unsafe.Pointer]uint64{}, limit: limit, budget: budget}
}

// lookup returns r's number in the cache when the worker holds it.
func (c *rowCache) lookup(r map[string]any) (id uint64, known bool) {
	if c == nil || r == nil {
		return 0, false
	}
	id, known = c.ids[reflect.ValueOf(r).UnsafePointer()]
	if known {
		c.hits++
	}
	return id, known
}

// add records that the worker keeps r, whose keeping costs it cost bytes (see held.go), when the
// cache and the pool's budget have room for it, and reports whether they do.
func (c *rowCache) add(r map[string]any, cost int64) bool {
	if c == nil || r == nil || c.wrote {
		return false
	}
	if c.cost+cost > c.limit || !c.budget.take(cost) {
		c.full = true
		return false
	}
	p := reflect.ValueOf(r).UnsafePointer()
	c.ids[p] = uint64(len(c.order))
	c.order = append(c.order, p)
	c.cost += cost
	return true
}

// startRun is called before each run on the worker, and reports whether the cache is stale: full
// for a few runs, and recent runs used fewer than a quarter of its rows. The pool does not run on a worker
// whose cache is stale but replaces it: the worker would hold the old rows until a rows list
// told it to drop them, outside the limits of a run that never searches, and the Go runtime
// keeps the memory they took anyway.
func (c *rowCache) startRun() (stale bool) {
	if c == nil {
		return false
	}
	c.recent = c.recent/2 + c.hits
	c.hits, c.wrote = 0, false
	if c.full {
		c.fullRuns++
	}
	return c.fullRuns > staleRuns && c.recent < len(c.order)/4
}

// drop returns the record's share of the pool's budget, when its worker is gone.
func (c *rowCache) drop() {
	if c == nil {
		return
	}
	c.budget.give(c.cost)
	c.ids, c.order, c.cost = map[unsafe.Pointer]uint64{}, nil, 0
}

// mark records the cache's state before a frame is built.
func (c *rowCache) mark() {
	if c != nil {
		c.markN, c.markCost, c.markFull = len(c.order), c.cost, c.full
	}
}

// rollback undoes what the frame built since mark recorded, when that frame is never sent: the
// worker must hold exactly the rows the pool numbers, or a number would name another row.
func (c *rowCache) rollback() {
	if c == nil {
		return
	}
	for _, p := range c.order[c.markN:] {
		delete(c.ids, p)
	}
	clear(c.order[c.markN:])
	c.order = c.order[:c.markN]
	c.budget.give(c.cost - c.markCost)
	c.cost, c.full = c.markCost, c.markFull
}

// allowance is the memory, in bytes, the worker's cache may take beyond a run's limits: the
// estimated cost of the rows it holds (see held.go).
func (c *rowCache) allowance() int64 {
	if c == nil {
		return 0
	}
	return c.cost
}

// errMalformed is any payload that does not decode: a defect or a corrupted stream.
var errMalformed = errors.New("malformed message from the other side of the sandbox pipe")

// decoder reads one frame's payload. Strings it returns share the payload's memory, so the
// payload must never be written after decoding starts (frames are read into fresh buffers).
type decoder struct {
	s    string // the payload
	i    int
	keys []string
	err  error
	own  bool // strings are copied out of the payload (a row the worker keeps)
}

func newDecoder(payload []byte) *decoder {
	d := &decoder{}
	d.reset(payload)
	return d
}

// reset makes d a decoder of payload, keeping the room of its key table. The keys of the frame
// before are dropped, so that they do not keep that frame's memory alive.
func (d *decoder) reset(payload []byte) {
	clear(d.keys)
	*d = decoder{keys: d.keys[:0]}
	if len(payload) > 0 {
		d.s = unsafe.String(&payload[0], len(payload))
	}
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errMalformed
	}
	d.i = len(d.s)
}

func (d *decoder) byte() byte {
	if d.i >= len(d.s) {
		d.fail()
		return 0
	}
	b := d.s[d.i]
	d.i++
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.i < len(d.s) && d.s[d.i] < 0x80 { // most lengths, counts and tags: one byte
		b := d.s[d.i]
		d.i++
		return uint64(b)
	}
	return d.uvarintLong()
}

func (d *decoder) uvarintLong() uint64 {
	var x uint64
	var shift uint
	for n := 0; n < binary.MaxVarintLen64; n++ {
		if d.i >= len(d.s) {
			break
		}
		b := d.s[d.i]
		d.i++
		if b < 0x80 {
			return x | uint64(b)<<shift
		}
		x |= uint64(b&0x7f) << shift
		shift += 7
	}
	d.fail()
	return 0
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) bool() bool { return d.byte() != 0 }

// count reads a length and checks that at least min bytes per element remain, so a corrupt or
// hostile length never makes the reader allocate more than the frame could describe.
func (d *decoder) count(min int) int {
	n, left := d.uvarint(), uint64(len(d.s)-d.i)
	if n > left || min > 1 && n > left/uint64(min) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.count(1)
	s := d.s[d.i : d.i+n]
	d.i += n
	if d.own {
		return strings.Clone(s)
	}
	return s
}

func (d *decoder) key() string {
	i := d.uvarint()
	if i == 0 {
		k := d.string()
		if len(d.keys) < maxKeys {
			d.keys = append(d.keys, k)
		}
		return k
	}
	if i > uint64(len(d.keys)) {
		d.fail()
		return ""
	}
	if d.own {
		return strings.Clone(d.keys[i-1])
	}
	return d.keys[i-1]
}

// maxDepth bounds the nesting of decoded values (the sandbox's own bound is 100).
const maxDepth = 128

func (d *decoder) value() any { return d.valueAt(0) }

func (d *decoder) valueAt(depth int) any {
	if depth > maxDepth {
		d.fail()
		return nil
	}
	switch d.byte() {
	case tagNil:
		return nil
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagInt:
		return d.varint()
	case tagFloat:
		u := d.fixed64()
		if d.err != nil {
			return nil
		}
		return math.Float64frombits(u)
	case tagString:
		return d.string()
	case tagList:
		n := d.count(1)
		out := make([]any, n)
		for i := range out {
			out[i] = d.valueAt(depth + 1)
		}
		return out
	case tagMap:
		return d.mapBody(depth)
	}
	d.fail()
	return nil
}

func (d *decoder) mapBody(depth int) map[string]any {
	n := d.count(2)
	m := make(map[string]any, n)
	for range n {
		k := d.key()
		m[k] = d.valueAt(depth + 1)
	}
	return m
}

// row reads a map value; nil when the value is not a map.
func (d *decoder) row() map[string]any {
	if d.byte() != tagMap {
		d.fail()
		return nil
	}
	return d.mapBody(0)
}

// rows reads a list of rows; cache is the worker's row cache (nil: no cache).
func (d *decoder) rows(cache *[]map[string]any) []map[string]any {
	n := d.count(1)
	width := d.uvarint()
	if width > maxShape {
		d.fail()
		return nil
	}
	shape := make([]string, width)
	for i := range shape {
		shape[i] = d.string()
	}
	if n == 0 || d.err != nil {
		return nil
	}
	out := make([]map[string]any, n)
	var owned []string // shape, copied out of the frame for the rows kept
	for i := range out {
		ref := d.uvarint()
		if ref >= refCached {
			if cache == nil || ref-refCached >= uint64(len(*cache)) {
				d.fail()
				return nil
			}
			out[i] = (*cache)[ref-refCached]
			continue
		}
		mask := d.uvarint()
		if d.err != nil || mask>>width != 0 {
			d.fail()
			return nil
		}
		// A row the worker keeps owns its strings: sharing the frame's would keep the whole
		// frame alive, beyond what the pool counts for the row.
		keys := shape
		d.own = ref == refNewCached && cache != nil
		if d.own {
			if owned == nil {
				owned = make([]string, len(shape))
				for j, k := range shape {
					owned[j] = strings.Clone(k)
				}
			}
			keys = owned
		}
		m := make(map[string]any, bits.OnesCount64(mask))
		for j, k := range keys {
			if mask&(1<<j) != 0 {
				m[k] = d.valueAt(1)
			}
		}
		for extra := d.count(2); extra > 0; extra-- {
			k := d.key()
			m[k] = d.valueAt(1)
		}
		out[i] = m
		if d.own {
			*cache = append(*cache, m)
			d.own = false
		}
	}
	return out
}

// conn is one end of the pipe between the pool and a worker.
type conn struct {
	r   *bufio.Reader
	w   io.Writer
	enc encoder
	// max is the largest payload read accepts, in bytes.
	max int
	// sent is the pool's record of the worker's row cache (pool side); rows is that cache
	// (worker side). Each lives as long as its worker.
	sent *rowCache
	rows []map[string]any
	// dec is the decoder of the frame recv read last; each recv reuses it.
	dec decoder
	// shapes are the row shapes of the schemas this connection's runs read (pool side).
	shapes map[*table.Schema][]string
}

func newConn(r io.Reader, w io.Writer, max int) *conn {
	return &conn{r: bufio.NewReaderSize(r, 64<<10), w: w, max: max}
}

// errTooLarge is a frame over the reader's size limit.
type errTooLarge struct{ size, max int }

func (e *errTooLarge) Error() string {
	return fmt.Sprintf("a message of %d bytes is over the limit of %d bytes", e.size, e.max)
}

// send writes the frame built in c.enc.
func (c *conn) send() error {
	_, err := c.w.Write(c.enc.frame())
	if cap(c.enc.buf) > 1<<20 {
		c.enc.buf = nil // do not keep a large buffer between frames
	}
	return err
}

// recv reads one frame and returns its type and a decoder over the rest of its payload.
func (c *conn) recv() (byte, *decoder, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[:]))
	if n < 1 {
		return 0, nil, errMalformed
	}
	if n > c.max {
		return 0, nil, &errTooLarge{size: n, max: c.max}
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c.r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	d := &c.dec
	d.reset(payload[1:])
	return payload[0], d, nil
}
