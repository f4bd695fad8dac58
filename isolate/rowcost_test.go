package isolate

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
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
	cases := []struct {
		name  string
		n     int
		shape []string
		row   func(i int) table.Row
	}{
		{"inventory", 20_000, []string{"item_id", "name", "description", "quantity_in_stock", "price"}, func(i int) table.Row {
			return table.Row{"item_id": fmt.Sprintf("SG%06d", i), "name": fmt.Sprintf("Style %d", i),
				"description": "Generated frames for the benchmark.", "quantity_in_stock": int64(i % 40), "price": float64(20 + i%180)}
		}},
		{"ints", 20_000, []string{"id", "n"}, func(i int) table.Row { return table.Row{"id": int64(i + 1000), "n": int64(i * 7)} }},
		{"list", 500, []string{"id", "lines"}, func(i int) table.Row {
			l := make([]any, 1000)
			for j := range l {
				l[j] = int64(1000 + j)
			}
			return table.Row{"id": fmt.Sprint(i), "lines": l}
		}},
		{"list48", 5000, []string{"id", "lines"}, func(i int) table.Row {
			l := make([]any, 48) // 768 bytes of elements: the allocator's header takes it to 896
			for j := range l {
				l[j] = j%2 == 0
			}
			return table.Row{"id": fmt.Sprint(i), "lines": l}
		}},
		{"extras", 10_000, []string{"id", "n"}, func(i int) table.Row { // fields beyond the shape
			r := table.Row{"id": int64(i + 1000), "n": 1.5}
			for j := range 12 {
				r[fmt.Sprintf("extra_field_%d", j)] = int64(i*j + 300)
			}
			return r
		}},
		{"strings", 2000, []string{"id", "tags"}, func(i int) table.Row {
			l := make([]any, 100)
			for j := range l {
				l[j] = fmt.Sprintf("tag-%d-%d", i, j)
			}
			return table.Row{"id": fmt.Sprint(i), "tags": l}
		}},
		{"nested", 2000, []string{"id", "lines"}, func(i int) table.Row {
			l := make([]any, 20)
			for j := range l {
				l[j] = map[string]any{"sku": fmt.Sprintf("S%d", j), "qty": int64(j + 300), "price": 1.5}
			}
			return table.Row{"id": fmt.Sprint(i), "lines": l, "extra": map[string]any{"a": true}}
		}},
	}
	for _, w := range []int{9, 16, 64} {
		shape, row := wide(w)
		cases = append(cases, struct {
			name  string
			n     int
			shape []string
			row   func(i int) table.Row
		}{fmt.Sprintf("wide%d", w), 20_000, shape, row})
	}
	for _, c := range cases {
		rs := make([]table.Row, c.n)
		for i := range rs {
			rs[i] = c.row(i)
		}
		// The pool's record of the rows (its own memory, not the worker's) is measured alone
		// first, and taken out of what the worker's rows and the record take together.
		encode := func(sent *rowCache, each func(frame []byte)) {
			for part := 0; part < c.n; part += findPart {
				var e encoder
				e.reset(msgReply)
				require.NoError(t, e.rows(rs[part:min(c.n, part+findPart)], c.shape, sent))
				each(e.buf[5:])
			}
		}
		before := heapInUse()
		record := newRowCache(1<<40, nil)
		encode(record, func([]byte) {})
		recordCost := int64(heapInUse() - before)
		runtime.KeepAlive(record)
		record = nil

		var held []table.Row
		sent := newRowCache(1<<40, nil)
		before = heapInUse()
		encode(sent, func(frame []byte) {
			d := newDecoder(bytes.Clone(frame))
			d.rows(&held)
			require.NoError(t, d.err)
		})
		used := int64(heapInUse()-before) - recordCost
		require.Len(t, held, c.n)
		counted := sent.allowance()
		t.Logf("%-9s counted %6d B/row, heap %6d B/row (the pool's record %d B/row)", c.name, counted/int64(c.n), used/int64(c.n), recordCost/int64(c.n))
		assert.GreaterOrEqual(t, counted, used, c.name)
		assert.LessOrEqual(t, counted, used+used/8, "%s: the estimate is close: a worker keeps as many rows as its memory allows", c.name)
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
