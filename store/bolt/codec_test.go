package bolt

import (
	"math"
	"strings"
	"testing"

	"github.com/starplan/starplan/store"

	d "github.com/ostafen/clover/v2/document"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// codecSchema has a field of every kind; the tests' rows leave some out, decoded as None.
func codecSchema(t *testing.T) *store.Schema {
	s, err := store.CompileSchema(&table.Schema{Name: "t", Key: "k", Fields: []table.Field{
		{Name: "k", Type: table.TypeString},
		{Name: "i", Type: table.TypeInt},
		{Name: "f", Type: table.TypeFloat},
		{Name: "b", Type: table.TypeBool},
		{Name: "s", Type: table.TypeString},
		{Name: "l", Type: table.TypeList},
		{Name: "o", Type: table.TypeObject},
	}})
	require.NoError(t, err)
	return s
}

// TestDecodeRowReadsWhatCloverWrites encodes documents with clover's own encoder and checks
// that the direct decoder used by Open gives back the same row and version.
func TestDecodeRowReadsWhatCloverWrites(t *testing.T) {
	s := codecSchema(t)
	for _, row := range []table.Row{
		{"k": "a", "i": int64(0), "f": 0.0, "b": false, "s": ""},
		{"k": "é", "i": int64(127), "f": 1.5, "b": true, "s": strings.Repeat("x", 31)},
		{"k": "b", "i": int64(128), "f": -0.25, "b": nil, "s": strings.Repeat("y", 32)},
		{"k": "c", "i": int64(-1), "f": math.MaxFloat64, "s": strings.Repeat("z", 256)},
		{"k": "d", "i": int64(-33), "f": 80.0, "s": strings.Repeat("w", 70000)},
		{"k": "e", "i": int64(math.MinInt64), "f": math.SmallestNonzeroFloat64},
		{"k": "f", "i": int64(math.MaxInt64), "f": 1e300},
		{"k": "g", "i": int64(-129)},
		{"k": "h", "i": int64(70000)},
		{"k": "j", "i": int64(-70000)},
		{"k": "l", "i": int64(1) << 40},
	} {
		raw, err := d.Encode(encodeDoc(rowDocID(3, 1), row, 42))
		require.NoError(t, err)
		got, ver, err := decodeRow(s, raw)
		require.NoError(t, err, "%v", row)
		assert.Equal(t, int64(42), ver)
		want := table.Row{"k": nil, "i": nil, "f": nil, "b": nil, "s": nil, "l": nil, "o": nil}
		for k, v := range row {
			want[k] = v
		}
		assert.Equal(t, want, got)
	}
}

func TestDecodeValueNested(t *testing.T) {
	doc := d.NewDocument()
	doc.Set("list", []any{int64(1), "two", []any{3.5, nil}, map[string]any{"x": true}})
	raw, err := d.Encode(doc)
	require.NoError(t, err)
	r := mpReader{b: raw}
	v, err := r.value()
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"list": []any{int64(1), "two", []any{3.5, nil}, map[string]any{"x": true}}}, v)
}

func TestDecodeRowRejects(t *testing.T) {
	s, err := store.CompileSchema(&table.Schema{Name: "t", Key: "k", Fields: []table.Field{{Name: "k", Type: table.TypeString}}})
	require.NoError(t, err)
	raw, err := d.Encode(encodeDoc(rowDocID(1, 1), table.Row{"k": "a", "extra": 1}, 1))
	require.NoError(t, err)
	_, _, err = decodeRow(s, raw)
	assert.ErrorContains(t, err, `stored field "extra" is not in the schema`)

	raw, err = d.Encode(encodeDoc(rowDocID(1, 1), table.Row{"k": 5}, 1))
	require.NoError(t, err)
	_, _, err = decodeRow(s, raw)
	assert.ErrorContains(t, err, "stored key 5 is not a string")

	raw, err = d.Encode(encodeDoc(rowDocID(1, 1), table.Row{"k": "abc"}, 1))
	require.NoError(t, err)
	for n := range raw {
		_, _, err = decodeRow(s, raw[:n])
		assert.Error(t, err, "truncated at %d of %d: %q", n, len(raw), raw)
	}
}

func TestRowDocIDsIncrease(t *testing.T) {
	ids := []string{rowDocID(1, 1), rowDocID(1, 2), rowDocID(1, 300), rowDocID(2, 1), rowDocID(1<<40, 1)}
	for i := 1; i < len(ids); i++ {
		assert.Less(t, ids[i-1], ids[i])
	}
	assert.Equal(t, "00000000-0001-8000-8000-000000000001", ids[0])
	assert.Equal(t, "01020304-0506-0708-090a-0b0c0d0e0fff", formatUUID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 255}))
	assert.Len(t, sysDocID("_runs", "a"), 36)
	assert.NotEqual(t, sysDocID("_runs", "a"), sysDocID("_runs", "b"))
}

// TestAppendDocIsWhatCloverWrites encodes rows of every kind a row holds, at the lengths where
// msgpack changes form, with appendDoc and with clover's encoder: clover decodes both to the same
// document, and decodeRow to the same row and version.
func TestAppendDocIsWhatCloverWrites(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	s := codecSchema(t)
	list := func(n int) []any {
		l := make([]any, n)
		for i := range l {
			l[i] = int64(i)
		}
		return l
	}
	obj := func(n int) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[strings.Repeat("k", i+1)] = []any{"v", nil, true, 2.5}
		}
		return m
	}
	var rows []table.Row
	for _, i := range []int64{0, 127, 128, 255, 256, -1, -32, -33, -128, -129, 32767, 32768, -32768, -32769,
		math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1, math.MaxInt64, math.MinInt64} {
		rows = append(rows, table.Row{"k": "i", "i": i})
	}
	for _, n := range []int{0, 31, 32, 255, 256, 65535, 65536} {
		rows = append(rows, table.Row{"k": strings.Repeat("é", n/2) + strings.Repeat("x", n%2), "s": strings.Repeat("s", n)})
	}
	for _, n := range []int{0, 15, 16, 65535, 65536} {
		rows = append(rows, table.Row{"k": "l", "l": list(n)})
	}
	for _, n := range []int{0, 15, 16, 300} {
		rows = append(rows, table.Row{"k": "o", "o": obj(n)})
	}
	rows = append(rows,
		table.Row{"k": "all", "i": nil, "f": -0.25, "b": true, "s": "", "l": []any{[]any{map[string]any{"x": []any{}}}}, "o": map[string]any{}},
		table.Row{"k": "float", "f": math.SmallestNonzeroFloat64, "b": false},
		table.Row{"k": "inf", "f": math.Inf(-1)},
	)
	for _, row := range rows {
		id := rowDocID(7, 3)
		mine, ok := appendDoc([]byte("prefix"), id, row, 42)
		require.True(t, ok)
		require.Equal(t, "prefix", string(mine[:6]), "appends")
		mine = mine[6:]
		theirs, err := d.Encode(encodeDoc(id, row, 42))
		require.NoError(t, err)
		a, err := d.Decode(mine)
		require.NoError(t, err, "clover reads the document appendDoc writes")
		b, err := d.Decode(theirs)
		require.NoError(t, err)
		assert.Equal(t, b.ToMap(), a.ToMap(), "row %s", row["k"])
		gotMine, verMine, err := decodeRow(s, mine)
		require.NoError(t, err)
		gotTheirs, verTheirs, err := decodeRow(s, theirs)
		require.NoError(t, err)
		assert.Equal(t, gotTheirs, gotMine)
		assert.Equal(t, int64(42), verMine)
		assert.Equal(t, verTheirs, verMine)
	}
	// Kinds a row does not hold are left to clover.
	for _, v := range []any{3, int32(3), uint64(3), float32(1), []string{"a"}, map[string]string{}, []any{1}, map[string]any{"x": struct{}{}}} {
		_, ok := appendDoc(nil, "id", table.Row{"k": "x", "v": v}, 1)
		assert.False(t, ok, "%T", v)
	}
}
