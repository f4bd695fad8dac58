package bolt

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunkReader reads data n bytes at a time, so that records cross the scan's reads anywhere.
type chunkReader struct {
	data []byte
	n    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[n:]
	return n, nil
}

var errEnough = errors.New("enough records")

// readAll reads a file's records with read, fn failing at record stop (0: never).
func readAll(read func(fn func(record) error) error, stop int) ([]record, error) {
	var recs []record
	err := read(func(rc record) error {
		recs = append(recs, rc)
		if rc.num == stop {
			return errEnough
		}
		return nil
	})
	return recs, err
}

func jsonScanSchema(t testing.TB) *store.Schema {
	sc, err := store.CompileSchema(&table.Schema{Name: "t", Key: "k", Fields: []table.Field{
		{Name: "k", Type: table.TypeString}, {Name: "n", Type: table.TypeInt}, {Name: "x", Type: table.TypeFloat},
		{Name: "l", Type: table.TypeList}, {Name: "o", Type: table.TypeObject},
	}})
	require.NoError(t, err)
	return sc
}

var jsonScanSeeds = []string{
	`[]`, ` [ ] trailing`, `[{}]`, `[{"k":"a","n":1,"x":1.5}]`, "[\n {\"k\": \"a\"},\n {\"k\": \"b\", \"n\": -0}\n]",
	`{"t": [{"k": "a"}], "u": 1}`, `{"u": [1], "t": [{"k": "a"}]}`, `{"u": 1}`, `"x"`, ``, `[`, `[{`, `[{"k"`, `[{"k":`,
	`[{"k":"a"},]`, `[,{"k":"a"}]`, `[{"k":"a"} {"k":"b"}]`, `[{"k":"a"},{"k":"b"}`, `[null]`, `[1, {"k": "a"}]`,
	`[{"k":"a"}, null]`, `[{"k":"a"}, 5]`, `[{"k": "a\"b\\c\u00e9\ud83d\ude00"}]`, `[{"k": "bad \x escape"}]`,
	"[{\"k\": \"ctl \x01\"}]", "[{\"k\": \"\xff\xfe invalid utf8\"}]", "[{\"\xffkey\": 1}]", `[{"k\u0041": 1}]`,
	`[{"n": 01}]`, `[{"n": 1.}]`, `[{"n": .5}]`, `[{"n": 1e}]`, `[{"n": 1e+}]`, `[{"n": -}]`, `[{"n": 1.5e-3}]`,
	`[{"n": 123456789012345678}]`, `[{"n": 1234567890123456789}]`, `[{"n": 9223372036854775808}]`,
	`[{"n": -9223372036854775808}]`, `[{"n": 1e400}]`, `[{"n": -1e-400}]`, `[{"n": 2E3}]`, `[{"n": 12abc}]`,
	`[{"b": true, "c": false, "d": null}]`, `[{"b": tru}]`, `[{"b": truex}]`, `[{"b": nul}]`,
	`[{"l": [1, "two", [3.5, null], {"x": true}], "o": {"a": {"b": [1e2]}}}]`, `[{"l": [1, }]`, `[{"o": {"a" 1}}]`,
	`[{"l": ["]", "[", "\"]"]}]`, `[{"k": "a", "k": "b"}]`, `[{"k": "a",}]`, `[{"k" "a"}]`, `[{"k": "a"}}]`,
	"\ufeff[{\"k\": \"a\"}]", "[{\"k\":\"a\"}]\n[{\"k\":\"b\"}]", `[{"k":"a"},{"k":"b"},{"k":"c"},{"k":"d"}]`,
	`[{"k":"a"}] {"x":1} ]]]`, "[{\"k\":\"a\"}]\n\t x", "[] \r\n\t", `[{"k":"a"}]x`, `{"t": [{"k": "a"}]} x`,
	`{"t": [{"k": "a"}]}, {}`, `{"t": [], "u": [}`, `{"t": [], "u": 1} `, `{"t": [{"k": "a"}], "u": [1]`,
	"\ufeff\ufeff[]", "\ufeff [{\"k\": \"a\"}] x", "\ufeff{\"t\": [{\"k\": \"a\"}]} x", "\ufeff", "\xef\xbb", "\xef\xbb[]", " \ufeff[]",
	"[{\"k\":\"a\"}]\n\n  long trailing text that goes on \u00e9\u00e9\u00e9 past the part shown\nand a line",
}

// FuzzReadJSONRecords holds readJSONRecords (the scan, then encoding/json from the first thing it
// does not take) to decodeJSONRecords (encoding/json alone): for any file, read in chunks of any
// size, and a callback that stops at any record, the same records (rows, numbers and lines) and
// the same error.
//
// limit, when not 0, lowers the record bound (MaxRecordBytes) to that many bytes, so that where
// the two refuse a record is fuzzed too.
func FuzzReadJSONRecords(f *testing.F) {
	for i, s := range jsonScanSeeds {
		f.Add([]byte(s), uint8(i), uint8(i%3), uint8(0))
		f.Add([]byte(s), uint8(i), uint8(0), uint8(8+i%16))
	}
	sc := jsonScanSchema(f)
	f.Fuzz(func(t *testing.T, data []byte, chunk, stop, limit uint8) {
		if limit > 0 {
			lowerRecordLimit(t, int(limit))
		}
		compareReaders(t, sc, func() io.Reader { return &chunkReader{data: data, n: int(chunk) + 1} }, int(stop))
	})
}

// lowerRecordLimit sets the record bound to n bytes for the test.
func lowerRecordLimit(t testing.TB, n int) {
	old := recordLimit
	recordLimit = n
	t.Cleanup(func() { recordLimit = old })
}

// compareReaders holds readJSONRecords to decodeJSONRecords alone on the file mk returns (once for
// each), fn failing at record stop (0: never): the same records and the same error.
func compareReaders(t testing.TB, sc *store.Schema, mk func() io.Reader, stop int) {
	t.Helper()
	want, wantErr := readAll(func(fn func(record) error) error {
		return decodeJSONRecords(bg, sc, mk(), jsonResume{line: 1}, fn)
	}, stop)
	got, gotErr := readAll(func(fn func(record) error) error { return readJSONRecords(bg, sc, mk(), fn) }, stop)
	if len(got) != len(want) {
		t.Fatalf("%d records, encoding/json %d (errors %v; %v)", len(got), len(want), gotErr, wantErr)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d: %#v, encoding/json %#v", i+1, got[i], want[i])
		}
	}
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("error %v, encoding/json %v", gotErr, wantErr)
	}
}

// TestJSONScanEdgesAsEncodingJSON holds the scan to encoding/json where a fuzzer hardly goes: a
// value nested as deep as encoding/json takes and one level more, records around the record
// bound (alone, and two in a row each under it), and a reader that reads nothing for a while.
func TestJSONScanEdgesAsEncodingJSON(t *testing.T) {
	sc := jsonScanSchema(t)
	for _, depth := range []int{jsonMaxDepth - 1, jsonMaxDepth} {
		data := `[{"k": "a", "l": ` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}, {"k": "b"}]`
		compareReaders(t, sc, func() io.Reader { return strings.NewReader(data) }, 0)
	}
	const limit = 64 << 10
	lowerRecordLimit(t, limit)
	record := func(k string, n int) string { return `{"k": "` + k + `", "s": "` + strings.Repeat("x", n) + `"}` }
	overhead := len(record("a", 0))
	for _, n := range []int{limit - overhead - 2, limit - overhead - 1, limit - overhead, limit - overhead + 1, limit + 100} {
		for _, file := range []string{
			"[" + record("a", n) + "]",
			"[" + record("a", 10) + ", " + record("b", n) + ", " + record("c", 10) + "]",
			"[" + record("a", n-3) + "," + record("b", n-3) + "]",
		} {
			for _, chunk := range []int{1 << 10, 64<<10 + 7, len(file)} {
				compareReaders(t, sc, func() io.Reader { return &chunkReader{data: []byte(file), n: chunk} }, 0)
			}
		}
	}
	data := []byte(`[{"k": "a"}, {"k": "b"}, {"k": "c"}]`)
	compareReaders(t, sc, func() io.Reader { return &emptyReads{data: data, at: 16, empty: 150} }, 0)
}

// emptyReads reads data 16 bytes at a time, but reads nothing empty times once at bytes are read.
type emptyReads struct {
	data            []byte
	at, empty, read int
}

func (r *emptyReads) Read(p []byte) (int, error) {
	if r.read >= r.at && r.empty > 0 {
		r.empty--
		return 0, nil
	}
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 16)], r.data)
	r.data, r.read = r.data[n:], r.read+n
	return n, nil
}

// TestJSONScanTakesTheCommonFile checks that the scan itself reads a file as Export writes it,
// pretty-printed or after a byte-order mark, to its end: without it, FuzzReadJSONRecords would hold encoding/json to itself.
// A record the scan does not take hands the rest over, with the records and lines before it.
func TestJSONScanTakesTheCommonFile(t *testing.T) {
	s := openTemp(t)
	var file bytes.Buffer
	require.NoError(t, s.Export(&file, "inventory", JSON))
	sc := s.schemas["inventory"]
	rows := find(t, tbl(t, s.Stage(), "inventory"), table.Query{})
	for i, data := range []string{file.String(), strings.ReplaceAll(file.String(), "\n", "\n\n  "), "\ufeff" + file.String(), "\ufeff" + file.String()} {
		scan := &jsonScan{sc: sc, r: &chunkReader{data: []byte(data), n: 100 - 99*(i/3)}, line: 1} // the last a byte at a time
		recs, err := readAll(func(fn func(record) error) error {
			from, err := scan.records(bg, fn)
			assert.Nil(t, from, "the scan reads the file to its end")
			return err
		}, 0)
		require.NoError(t, err)
		require.Len(t, recs, len(rows))
		for i, rc := range recs {
			assert.Equal(t, i+1, rc.num)
			row, err := sc.ValidateRow(rc.row)
			require.NoError(t, err)
			assert.Equal(t, rows[i], row)
		}
	}

	scan := &jsonScan{sc: sc, r: strings.NewReader("[{\"item_id\": \"A\"},\n{\"item_id\": \"B\"},\n{\"item_id\": \"\\q\"}]"), line: 1}
	recs, err := readAll(func(fn func(record) error) error {
		from, err := scan.records(bg, fn)
		assert.Equal(t, &jsonResume{inArray: true, record: 2, line: 2, col: 16}, from)
		return err
	}, 0)
	require.NoError(t, err)
	assert.Len(t, recs, 2)
}

// TestJSONScanOfALargeRecordInSmallReads reads a record of 1 MiB 1 KiB at a time: it is scanned
// again after a read only once the bytes kept grew by half, not after every read (that is 1,024
// scans of half a MiB on average).
func TestJSONScanOfALargeRecordInSmallReads(t *testing.T) {
	sc := jsonScanSchema(t)
	data := `[{"k": "a", "s": "` + strings.Repeat("x", 1<<20) + `"}, {"k": "b"}]`
	scan := &jsonScan{sc: sc, r: &chunkReader{data: []byte(data), n: 1 << 10}, line: 1}
	recs, err := readAll(func(fn func(record) error) error {
		from, err := scan.records(bg, fn)
		assert.Nil(t, from)
		return err
	}, 0)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Len(t, recs[0].row["s"], 1<<20)
	assert.Less(t, scan.scans, 40, "scans of the records")
}

// TestJSONReadersSeeTheContextBetweenRecords cancels the import at its first record of a file
// that one read holds whole: each reader still stops at its next look at the context (every
// ctxEvery records), not at the end of the file.
func TestJSONReadersSeeTheContextBetweenRecords(t *testing.T) {
	sc := jsonScanSchema(t)
	data := "[" + strings.Repeat(`{"k": "a"},`, 3*ctxEvery) + `{"k": "b"}]`
	for name, read := range map[string]func(ctx context.Context, fn func(record) error) error{
		"scan": func(ctx context.Context, fn func(record) error) error {
			return readJSONRecords(ctx, sc, strings.NewReader(data), fn)
		},
		"encoding/json": func(ctx context.Context, fn func(record) error) error {
			return decodeJSONRecords(ctx, sc, strings.NewReader(data), jsonResume{line: 1}, fn)
		},
	} {
		ctx, cancel := context.WithCancel(bg)
		n := 0
		err := read(ctx, func(record) error { n++; cancel(); return nil })
		assert.ErrorIs(t, err, context.Canceled, name)
		assert.Equal(t, ctxEvery-1, n, "%s: records read", name)
	}
}
