package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
)

// readJSONRecords reads a JSON array of row objects (or the table's member of an object of
// tables) as a stream, handing each record to fn as it is read.
//
// encoding/json took half of a large import's reading: a reflective decoder, a map it then
// copied, numbers as text. So the records of the common file (an array of flat objects, as Export
// writes) are scanned here (jsonScan), straight into rows with the field names shared with the
// schema (a nested value, or a string with escapes or invalid UTF-8, is decoded alone by
// encoding/json); from the first thing the scan does not take (another layout such as Dump's
// object of tables, bad JSON, a record past MaxRecordBytes, the reader's error or end, the
// array's end, after which only white space may come) the rest
// of the file goes to encoding/json (decodeJSONRecords), which says what is wrong as it always
// did. A record is the same either way: FuzzReadJSONRecords holds the two readers to the same
// records, lines and errors.
func readJSONRecords(ctx context.Context, sc *store.Schema, r io.Reader, fn func(record) error) error {
	s := &jsonScan{sc: sc, r: store.ContextReader(ctx, r), line: 1}
	from, err := s.records(ctx, fn)
	if err != nil || from == nil {
		return err
	}
	return decodeJSONRecords(ctx, sc, s.rest(), *from, fn)
}

// jsonResume is where decodeJSONRecords starts: at the file's start, inside its array (after
// its opening bracket, and after record records when that is not 0), or after the array's end
// (ended), on line line, col bytes after the line's start.
type jsonResume struct {
	inArray bool
	record  int
	ended   bool
	line    int
	col     int
}

// jsonScan reads records from a buffer of the file. Its position is always between records: at
// the start, after the array's opening bracket, or after a record, before its separator; so
// the rest of the file, from there, can be handed to decodeJSONRecords.
type jsonScan struct {
	sc      *store.Schema
	r       io.Reader
	buf     []byte // bytes read: buf[at:] are not taken yet
	at      int
	line    int   // the line of buf[at]
	col     int   // the bytes of that line before buf[at]
	err     error // the reader's error, io.EOF at the end
	inArray bool
	n       int // records handed to fn
	scans   int // records scanned, from their start: n and those scanned again after a read
}

// jsonScanBuffer is the buffer's size; it grows for a record that does not fit, up to
// MaxRecordBytes+1, and comes back to this size after it.
const jsonScanBuffer = 256 << 10

// The outcome of scanning a value.
const (
	scanOK    = iota
	scanMore  // the buffer ends inside the value: read more, and scan the value again
	scanOther // not what the scan takes: decodeJSONRecords reads the rest
)

// records scans records until the array's end and the white space after it to the file's end,
// an error of fn or the context (returned), or a place where decodeJSONRecords must go on
// (returned as from).
func (s *jsonScan) records(ctx context.Context, fn func(record) error) (from *jsonResume, err error) {
	resume := func() (*jsonResume, error) {
		return &jsonResume{inArray: s.inArray, record: s.n, line: s.line, col: s.col}, nil
	}
	for {
		b := s.buf
		p := s.space(s.at)
		if p == len(b) {
			if !s.fill() {
				return resume()
			}
			continue
		}
		c := b[p]
		switch {
		case !s.inArray:
			if p == 0 && s.line == 1 && s.col == 0 && c == utf8BOM[0] { // the file's first byte
				if len(b) < len(utf8BOM) && bytes.HasPrefix(utf8BOM, b) && s.fill() {
					continue
				}
				if bytes.HasPrefix(b, utf8BOM) { // skipped, as decodeJSONRecords and the CSV reader do
					s.take(len(utf8BOM))
					continue
				}
			}
			if c != '[' {
				return resume()
			}
			s.take(p + 1)
			s.inArray = true
			continue
		case c == ']':
			s.take(p + 1)
			return s.end()
		case s.n > 0:
			if c != ',' {
				return resume()
			}
			if p = s.space(p + 1); p == len(b) {
				if !s.fill() {
					return resume()
				}
				continue
			}
			c = b[p]
		}
		if c != '{' {
			return resume()
		}
		if (s.n+1)%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		s.scans++
		row, end, st := s.object(p)
		switch st {
		case scanMore:
			if !s.fill() {
				return resume()
			}
			continue
		case scanOther:
			return resume()
		}
		line := s.line + bytes.Count(b[s.at:p], newline)
		s.take(end)
		s.n++
		if err := fn(record{row: row, num: s.n, line: line}); err != nil {
			return nil, err
		}
	}
}

// end reads the white space after the array's end: to the file's end (nil), or to what follows,
// which decodeJSONRecords refuses (from, ended), as it does the reader's error.
func (s *jsonScan) end() (*jsonResume, error) {
	for {
		p := s.space(s.at)
		s.take(p)
		if p < len(s.buf) || !s.fill() && s.err != io.EOF {
			return &jsonResume{ended: true, line: s.line, col: s.col}, nil
		}
		if s.at == len(s.buf) && s.err == io.EOF {
			return nil, nil
		}
	}
}

var newline = []byte{'\n'}

// take moves the position to p, counting the lines and columns it passes.
func (s *jsonScan) take(p int) {
	s.line, s.col = advance(s.buf[s.at:p], s.line, s.col)
	s.at = p
}

// advance returns the line and column (bytes before it on its line) after b, which starts at
// line and col.
func advance(b []byte, line, col int) (int, int) {
	if n := bytes.Count(b, newline); n > 0 {
		return line + n, len(b) - bytes.LastIndexByte(b, '\n') - 1
	}
	return line, col + len(b)
}

// fill reads more of the file after buf[at:], which it moves to the front, and reports whether
// the scan should go on: not after the reader's end or error, nor once it keeps more than
// MaxRecordBytes since the last record's end (decodeJSONRecords, handed them, refuses at the
// same place). It reads until it holds half as much again as it kept (a byte more at least),
// so that a record arriving in small reads (a pipe) is scanned again a few times, not once a
// read: its scans add up to a few times its length, where scanning it after each read of n
// bytes would take its length²/2n.
func (s *jsonScan) fill() bool {
	if s.err != nil {
		return false
	}
	kept := len(s.buf) - s.at
	if kept > recordLimit {
		return false
	}
	need := min(kept+max(kept/2, 1), recordLimit+1)
	switch c := cap(s.buf); {
	case c < need, c-kept < 4<<10 && c <= recordLimit, c > jsonScanBuffer && kept < jsonScanBuffer/2:
		nb := make([]byte, kept, min(max(2*need, jsonScanBuffer), recordLimit+1))
		copy(nb, s.buf[s.at:])
		s.buf = nb
	default:
		s.buf = s.buf[:copy(s.buf, s.buf[s.at:])]
	}
	s.at = 0
	for len(s.buf) < need { // a reader that reads nothing is stopped by the import's context
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if err != nil {
			s.err = err
			break
		}
	}
	return true
}

// rest is the file from the scan's position on.
func (s *jsonScan) rest() io.Reader {
	pending := bytes.NewReader(s.buf[s.at:])
	switch s.err {
	case nil:
		return io.MultiReader(pending, s.r)
	case io.EOF:
		return pending
	}
	return io.MultiReader(pending, errReader{s.err})
}

// errReader fails with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// space returns the position of the first byte at or after p that is not JSON white space.
func (s *jsonScan) space(p int) int { return jsonSpace(s.buf, p) }

// jsonSpace returns the position of the first byte of b at or after p that is not JSON white
// space (len(b) when none is).
func jsonSpace(b []byte, p int) int {
	for ; p < len(b); p++ {
		switch b[p] {
		case ' ', '\t', '\n', '\r':
		default:
			return p
		}
	}
	return len(b)
}

// object scans the object at p into a row, and returns the position after it.
func (s *jsonScan) object(p int) (table.Row, int, int) {
	b := s.buf
	row := make(table.Row, len(s.sc.Fields))
	if p = s.space(p + 1); p == len(b) {
		return nil, p, scanMore
	}
	if b[p] == '}' {
		return row, p + 1, scanOK
	}
	for {
		if b[p] != '"' {
			return nil, p, scanOther
		}
		raw, simple, end, st := s.str(p)
		if st != scanOK {
			return nil, end, st
		}
		var key string
		if simple {
			if f := s.sc.FieldsByName[string(raw)]; f != nil {
				key = f.Name // the schema's string: no copy per row
			} else {
				key = string(raw)
			}
		} else if json.Unmarshal(raw, &key) != nil {
			return nil, end, scanOther
		}
		if p = s.space(end); p == len(b) {
			return nil, p, scanMore
		}
		if b[p] != ':' {
			return nil, p, scanOther
		}
		if p = s.space(p + 1); p == len(b) {
			return nil, p, scanMore
		}
		v, end, st := s.value(p)
		if st != scanOK {
			return nil, end, st
		}
		row[key] = v
		if p = s.space(end); p == len(b) {
			return nil, p, scanMore
		}
		switch b[p] {
		case ',':
			if p = s.space(p + 1); p == len(b) {
				return nil, p, scanMore
			}
		case '}':
			return row, p + 1, scanOK
		default:
			return nil, p, scanOther
		}
	}
}

// str scans the string at p. simple says that raw is its text (no escapes, valid UTF-8);
// otherwise raw is the quoted string, for encoding/json to decode as it does (escapes, and
// invalid UTF-8 made U+FFFD).
func (s *jsonScan) str(p int) (raw []byte, simple bool, end int, st int) {
	b := s.buf
	escaped, ascii := false, true
	for q := p + 1; q < len(b); q++ {
		switch c := b[q]; {
		case c == '"':
			if escaped || !ascii && !utf8.Valid(b[p+1:q]) {
				return b[p : q+1], false, q + 1, scanOK
			}
			return b[p+1 : q], true, q + 1, scanOK
		case c == '\\':
			escaped = true
			q++ // the escaped byte; encoding/json checks the escape
		case c < 0x20:
			return nil, false, q, scanOther
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false, len(b), scanMore
}

// value scans the value at p as fromJSON gives encoding/json's.
func (s *jsonScan) value(p int) (any, int, int) {
	b := s.buf
	switch c := b[p]; {
	case c == '"':
		raw, simple, end, st := s.str(p)
		if st != scanOK {
			return nil, end, st
		}
		if simple {
			return string(raw), end, scanOK
		}
		var str string
		if json.Unmarshal(raw, &str) != nil {
			return nil, end, scanOther
		}
		return str, end, scanOK
	case c == '-' || c >= '0' && c <= '9':
		return s.number(p)
	case c == 't':
		return s.literal(p, "true", true)
	case c == 'f':
		return s.literal(p, "false", false)
	case c == 'n':
		return s.literal(p, "null", nil)
	case c == '[' || c == '{':
		end, st := s.skip(p)
		if st != scanOK {
			return nil, end, st
		}
		dec := json.NewDecoder(bytes.NewReader(b[p:end]))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return nil, end, scanOther
		}
		return store.FromJSON(v), end, scanOK
	}
	return nil, p, scanOther
}

func (s *jsonScan) literal(p int, word string, v any) (any, int, int) {
	b := s.buf
	if len(b)-p < len(word) {
		if string(b[p:]) == word[:len(b)-p] {
			return nil, len(b), scanMore
		}
		return nil, p, scanOther
	}
	if string(b[p:p+len(word)]) != word {
		return nil, p, scanOther
	}
	return v, p + len(word), scanOK
}

// number scans the JSON number at p: an int64 when it has neither fraction nor exponent and
// fits, else a float64 (as fromJSON converts a json.Number).
func (s *jsonScan) number(p int) (any, int, int) {
	b := s.buf
	q := p
	if b[q] == '-' {
		q++
	}
	digits := func() bool { // one digit or more
		start := q
		for q < len(b) && b[q] >= '0' && b[q] <= '9' {
			q++
		}
		return q > start
	}
	missing := func() (any, int, int) { // no digit where one must be
		if q == len(b) {
			return nil, q, scanMore
		}
		return nil, q, scanOther
	}
	intStart := q
	if q < len(b) && b[q] == '0' {
		q++
	} else if !digits() {
		return missing()
	}
	intEnd := q
	plain := true
	if q < len(b) && b[q] == '.' {
		plain = false
		q++
		if !digits() {
			return missing()
		}
	}
	if q < len(b) && (b[q] == 'e' || b[q] == 'E') {
		plain = false
		q++
		if q < len(b) && (b[q] == '+' || b[q] == '-') {
			q++
		}
		if !digits() {
			return missing()
		}
	}
	if q == len(b) {
		return nil, q, scanMore // the number may go on in the bytes not read yet
	}
	if plain && intEnd-intStart <= 18 {
		var n int64
		for _, c := range b[intStart:intEnd] {
			n = n*10 + int64(c-'0')
		}
		if b[p] == '-' {
			n = -n
		}
		return n, q, scanOK
	}
	text := string(b[p:q])
	if plain {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return n, q, scanOK
		}
	}
	if f, err := strconv.ParseFloat(text, 64); err == nil {
		return f, q, scanOK
	}
	return text, q, scanOK
}

// jsonMaxDepth is encoding/json's bound on nesting, less the record's own object.
const jsonMaxDepth = 10000

// skip returns the position after the array or object at p, by its brackets and strings; its
// syntax is encoding/json's to check.
func (s *jsonScan) skip(p int) (int, int) {
	b := s.buf
	depth := 0
	for q := p; q < len(b); q++ {
		switch b[q] {
		case '[', '{':
			if depth++; depth >= jsonMaxDepth { // encoding/json refuses it: let it say so
				return q, scanOther
			}
		case ']', '}':
			if depth--; depth == 0 {
				return q + 1, scanOK
			}
		case '"':
			_, _, end, st := s.str(q)
			if st != scanOK {
				return end, st
			}
			q = end - 1
		}
	}
	return len(b), scanMore
}
