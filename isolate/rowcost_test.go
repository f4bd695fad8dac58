package isolate

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/table"
)

func heapInUse() uint64 { return heapStats().HeapAlloc }

// heapStats collects twice, then reads the heap's figures.
func heapStats() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

// rowCase is a kind of row TestRowCostEstimate sends, perFrame a frame (0: findPart). largest:
// the rows hold maps of several tables, counted at their largest (no bound above).
type rowCase struct {
	name     string
	n        int
	shape    []string
	row      func(i int) table.Row
	perFrame int
	largest  bool
}

// TestRowCostEstimate: what the pool counts for the rows a worker keeps (allowance) is at or
// above what they take on the worker's heap, and within an eighth of it, for narrow, wide and
// nested rows; and a kept row does not keep its frame alive (the frames here are mostly rows
// that are not kept).
func TestRowCostEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	wide := func(w int) ([]string, func(i int) table.Row) {
		shape := make([]string, w)
		for j := range shape {
			shape[j] = fmt.Sprintf("f%02d", j)
		}
		return shape, func(i int) table.Row {
			r := table.Row{}
			for j, k := range shape {
				r[k] = float64(i*w+j) + 0.5
			}
			return r
		}
	}
	cases := []rowCase{
		{"inventory", 20_000, []string{"item_id", "name", "description", "quantity_in_stock", "price"}, func(i int) table.Row {
			return table.Row{"item_id": fmt.Sprintf("SG%06d", i), "name": fmt.Sprintf("Style %d", i),
				"description": "Generated frames for the benchmark.", "quantity_in_stock": int64(i % 40), "price": float64(20 + i%180)}
		}, 0, false},
		{"ints", 20_000, []string{"id", "n"}, func(i int) table.Row { return table.Row{"id": int64(i + 1000), "n": int64(i * 7)} }, 0, false},
		{"list", 500, []string{"id", "lines"}, func(i int) table.Row {
			l := make([]any, 1000)
			for j := range l {
				l[j] = int64(1000 + j)
			}
			return table.Row{"id": fmt.Sprint(i), "lines": l}
		}, 0, false},
		{"list48", 5000, []string{"id", "lines"}, func(i int) table.Row {
			l := make([]any, 48) // 768 bytes of elements: the allocator's header takes it to 896
			for j := range l {
				l[j] = j%2 == 0
			}
			return table.Row{"id": fmt.Sprint(i), "lines": l}
		}, 0, false},
		{"extras", 10_000, []string{"id", "n"}, func(i int) table.Row { // fields beyond the shape
			r := table.Row{"id": int64(i + 1000), "n": 1.5}
			for j := range 12 {
				r[fmt.Sprintf("extra_field_%d", j)] = int64(i*j + 300)
			}
			return r
		}, 0, false},
		{"strings", 2000, []string{"id", "tags"}, func(i int) table.Row {
			l := make([]any, 100)
			for j := range l {
				l[j] = fmt.Sprintf("tag-%d-%d", i, j)
			}
			return table.Row{"id": fmt.Sprint(i), "tags": l}
		}, 0, false},
		{"nested", 2000, []string{"id", "lines"}, func(i int) table.Row {
			l := make([]any, 20)
			for j := range l {
				l[j] = map[string]any{"sku": fmt.Sprintf("S%d", j), "qty": int64(j + 300), "price": 1.5}
			}
			return table.Row{"id": fmt.Sprint(i), "lines": l, "extra": map[string]any{"a": true}}
		}, 0, false},
	}
	for _, w := range []int{9, 16, 64} {
		shape, row := wide(w)
		cases = append(cases, rowCase{fmt.Sprintf("wide%d", w), 20_000, shape, row, 0, false})
	}
	// One row a frame (a plan that looks rows up one by one): each kept row pays for the
	// shape's names, which the worker copies once a frame.
	inv := cases[0]
	inv.name, inv.n, inv.perFrame = "inv1", 5000, 1
	cases = append(cases, inv)
	// Maps of more than one table (found by review: one table grows or splits).
	for _, keys := range []int{800, 897, 1792} {
		cases = append(cases, rowCase{fmt.Sprintf("map%d", keys), 60, []string{"id", "m"}, func(i int) table.Row {
			m := make(map[string]any, keys)
			for j := range keys {
				m[fmt.Sprintf("k%d", j)] = true
			}
			return table.Row{"id": int64(i + 1000), "m": m}
		}, 0, keys*8/7 > tableSlots})
	}
	for _, c := range cases {
		// A quarter of the rows in the normal tier (every case still averages over 60 rows or more:
		// the figures per row are the same to the byte or two at either size).
		c.n = testtier.Size(max(c.n/4, min(c.n, 60)), c.n)
		rs := make([]table.Row, c.n)
		for i := range rs {
			rs[i] = c.row(i)
		}
		// The pool's record of the rows (its own memory, not the worker's) is measured alone
		// first, and taken out of what the worker's rows and the record take together.
		per := c.perFrame
		if per == 0 {
			per = findPart
		}
		encode := func(sent *rowCache, each func(frame []byte)) {
			for part := 0; part < c.n; part += per {
				var e encoder
				e.reset(msgReply)
				require.NoError(t, e.rows(rs[part:min(c.n, part+per)], c.shape, sent))
				each(e.buf[5:])
			}
		}
		// grew is how far the heap's objects (HeapAlloc) and its spans in use (HeapInuse, as
		// the worker's limits count the runtime's memory) grow across fn.
		grew := func(fn func()) (objects, spans int64) {
			before := heapStats()
			fn()
			after := heapStats()
			return int64(after.HeapAlloc - before.HeapAlloc), int64(after.HeapInuse) - int64(before.HeapInuse)
		}
		record := newRowCache(1<<40, nil)
		recObjects, recSpans := grew(func() { encode(record, func([]byte) {}) })
		runtime.KeepAlive(record)
		record = nil

		var held []table.Row
		sent := newRowCache(1<<40, nil)
		objects, spans := grew(func() {
			encode(sent, func(frame []byte) {
				d := newDecoder(bytes.Clone(frame))
				d.rows(&held)
				require.NoError(t, d.err)
			})
		})
		objects, spans = objects-recObjects, spans-recSpans
		require.Len(t, held, c.n)
		counted := sent.allowance()
		n := int64(c.n)
		t.Logf("%-9s counted %6d B/row; heap objects %6d, spans %6d B/row (the pool's record %d B/row)", c.name, counted/n, objects/n, spans/n, recObjects/n)
		assert.GreaterOrEqual(t, counted, spans, "%s: the worker's spans grow past the estimate", c.name)
		if !c.largest {
			assert.LessOrEqual(t, counted, objects+objects/4, "%s: the estimate is close: a worker keeps as many rows as its memory allows", c.name)
		}
		runtime.KeepAlive(rs)
		runtime.KeepAlive(held)
		runtime.KeepAlive(sent)
	}

	// Frames whose rows are mostly not kept (no room): the kept ones must not pin them.
	shape := []string{"item_id", "description"}
	sent := newRowCache(1<<20, nil)
	var held []table.Row
	big := strings.Repeat("b", 60_000)
	before := heapInUse()
	for f := range 40 {
		rs := make([]table.Row, 0, 40)
		for i := range 39 {
			rs = append(rs, table.Row{"item_id": fmt.Sprintf("B%d-%d", f, i), "description": big})
		}
		rs = append(rs, table.Row{"item_id": fmt.Sprintf("T%d", f)}) // small: kept while room remains
		var e encoder
		e.reset(msgReply)
		require.NoError(t, e.rows(rs, shape, sent))
		d := newDecoder(bytes.Clone(e.buf[5:]))
		d.rows(&held)
		require.NoError(t, d.err)
	}
	used := int64(heapInUse() - before)
	t.Logf("pinned: counted %d KiB, heap %d KiB", sent.allowance()>>10, used>>10)
	assert.Less(t, used, 2*sent.allowance(), "kept rows do not keep their frames (40 of about 2.3 MiB each)")
	runtime.KeepAlive(held)
}
