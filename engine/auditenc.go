package engine

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
)

// recordEncoder writes a stored record's JSON without reflection: the same bytes as
// json.Marshal of its storedRecord (TestRecordEncoderIsEncodingJSON holds it to that, every
// field set), at a fraction of the cost — encoding/json walks rows (maps of any) by reflection
// and sorts their keys through reflect values, which was most of the audit write's encoding
// (issue 32). Small parts that are rare or short (diagnostics, model, limits, scans, reads) are
// left to encoding/json.
type recordEncoder struct {
	err error
	// fieldsOnly writes each update's after as its fields alone (storedRecord.AftersAsFields).
	fieldsOnly bool
	// shapes are the sorted names of the last objects of several names written: a record's rows
	// are a few tables' rows, each of its table's names, and an object with a shape's names is
	// written in its order without listing and sorting its own, nor encoding the names again
	// (issue 32). An encoder that writes several records (a batch's: auditLog.encode) keeps
	// them from one to the next.
	shapes [4]shape
	nshape int
}

// shape is the sorted names of an object, and the names as the object's JSON has them:
// keys[ends[i-1]:ends[i]] is name i's `"name":`, with the comma before it after the first.
type shape struct {
	names []string
	keys  []byte
	ends  []int
}

func newShape(names []string) shape {
	n := 0
	for _, k := range names {
		n += len(k) + 4 // quotes, colon, comma: names that need no escape
	}
	sh := shape{names: slices.Clone(names), keys: make([]byte, 0, n), ends: make([]int, len(names))}
	for i, k := range names {
		if i > 0 {
			sh.keys = append(sh.keys, ',')
		}
		sh.keys = append(store.AppendJSONString(sh.keys, k), ':')
		sh.ends[i] = len(sh.keys)
	}
	return sh
}

func (s *storedRecord) encode() ([]byte, error) { return s.encodeAfter(0) }

// encodeAfter is encode's JSON after room zero bytes, which a store may write its header into
// (store.RoomEncoded).
func (s *storedRecord) encodeAfter(room int) ([]byte, error) {
	return s.encodeInto(make([]byte, room, max(recordBufSize, 2*room)))
}

// recordBufSize is the capacity of a new record's buffer: most records fit (8 KiB: a size
// class of its own).
const recordBufSize = 8192

// encodeInto appends the record's JSON to b.
func (s *storedRecord) encodeInto(b []byte) ([]byte, error) {
	var e recordEncoder
	return e.record(b, s)
}

// record appends s's JSON to b.
func (e *recordEncoder) record(b []byte, s *storedRecord) ([]byte, error) {
	e.err, e.fieldsOnly = nil, false
	r := &s.RunRecord
	b = e.raw(b, `{"run_id":`)
	b = e.str(b, r.ID)
	b = e.raw(b, `,"time":`)
	b = e.time(b, r.Time)
	b = e.raw(b, `,"origin":`)
	b = e.str(b, r.Origin)
	b = e.raw(b, `,"request":`)
	b = e.str(b, r.Request)
	b = e.optStr(b, `,"subject":`, r.Subject)
	b = e.optStr(b, `,"trace_id":`, r.TraceID)
	b = e.raw(b, `,"reply":`)
	b = e.str(b, r.Reply)
	b = e.raw(b, `,"reply_bytes":`)
	b = e.int(b, int64(r.ReplyBytes))
	b = e.optStr(b, `,"reply_sha256":`, r.ReplySHA256)
	b = e.raw(b, `,"program":`)
	b = e.str(b, r.Program)
	b = e.raw(b, `,"rewrites":`)
	if r.Rewrites == nil {
		b = e.raw(b, "null")
	} else {
		b = e.raw(b, "[")
		for i, w := range r.Rewrites {
			if i > 0 {
				b = e.raw(b, ",")
			}
			b = e.raw(b, `{"line":`)
			b = e.int(b, int64(w.Line))
			b = e.raw(b, `,"rule":`)
			b = e.str(b, w.Rule)
			b = e.raw(b, `,"before":`)
			if s.BeforesInProgram {
				b = e.raw(b, `""`) // its line of the program
			} else {
				b = e.str(b, w.Before)
			}
			b = e.raw(b, `,"after":`)
			b = e.str(b, w.After)
			b = e.raw(b, "}")
		}
		b = e.raw(b, "]")
	}
	b = e.raw(b, `,"diagnostics":`)
	switch {
	case r.Diagnostics == nil:
		b = e.raw(b, "null")
	case len(r.Diagnostics) == 0: // most runs': not worth encoding/json's reflection
		b = e.raw(b, "[]")
	default:
		b = e.json(b, r.Diagnostics)
	}
	b = e.raw(b, `,"stdout":`)
	b = e.str(b, r.Stdout)
	b = e.raw(b, `,"stdout_truncated":`)
	b = e.bool(b, r.StdoutTruncated)
	b = e.raw(b, `,"answer_text":`)
	b = e.str(b, r.AnswerText)
	b = e.raw(b, `,"status":`)
	b = e.str(b, r.Status)
	b = e.raw(b, `,"changes":`)
	e.fieldsOnly = s.AftersAsFields
	b = e.changes(b, r.Changes)
	e.fieldsOnly = false
	b = e.raw(b, `,"changed_rows":`)
	b = e.int(b, int64(r.ChangedRows))
	b = e.raw(b, `,"outcome":`)
	b = e.str(b, string(r.Outcome))
	b = e.optStr(b, `,"limit":`, string(r.Limit))
	b = e.raw(b, `,"steps":`)
	b = strconv.AppendUint(b, r.Steps, 10)
	b = e.raw(b, `,"duration_ms":`)
	b = e.float(b, r.DurationMS)
	b = e.raw(b, `,"pending":`)
	b = e.bool(b, r.Pending)
	b = e.raw(b, `,"applied":`)
	b = e.bool(b, r.Applied)
	if r.AppliedAt != nil {
		b = e.raw(b, `,"applied_at":`)
		b = e.time(b, *r.AppliedAt)
	}
	b = e.optStr(b, `,"apply_error":`, r.ApplyError)
	if r.ConflictAt != nil {
		b = e.raw(b, `,"conflict_at":`)
		b = e.time(b, *r.ConflictAt)
	}
	b = e.optStr(b, `,"apply_origin":`, r.ApplyOrigin)
	if r.Model != nil {
		b = e.raw(b, `,"model":`)
		b = e.json(b, r.Model)
	}
	if r.Limits != nil {
		b = e.raw(b, `,"limits":`)
		b = e.json(b, r.Limits)
	}
	if len(r.Truncated) > 0 {
		b = e.raw(b, `,"truncated":`)
		b = e.strs(b, r.Truncated)
	}
	b = e.raw(b, `,"proposed_by":`)
	b = e.str(b, r.ProposedBy)
	if len(r.ApprovedBy) > 0 {
		b = e.raw(b, `,"approved_by":`)
		b = e.strs(b, r.ApprovedBy)
	}
	b = e.optStr(b, `,"rejected_by":`, r.RejectedBy)
	b = e.optStr(b, `,"auto_approved_by_rule":`, r.AutoApprovedByRule)
	if r.ApprovalsNeeded != 0 {
		b = e.raw(b, `,"approvals_needed":`)
		b = e.int(b, int64(r.ApprovalsNeeded))
	}
	if len(r.Scans) > 0 {
		b = e.raw(b, `,"scans":[`)
		for i, sc := range r.Scans {
			if i > 0 {
				b = e.raw(b, ",")
			}
			b = e.raw(b, `{"table":`)
			b = e.str(b, sc.Table)
			b = e.raw(b, `,"fields":`)
			b = e.strs(b, sc.Fields)
			b = e.raw(b, `,"calls":`)
			b = e.int(b, int64(sc.Calls))
			b = e.raw(b, `,"rows_examined":`)
			b = e.int(b, sc.Rows)
			b = e.raw(b, "}")
		}
		b = e.raw(b, "]")
	}
	if s.ProgramIsReply {
		b = e.raw(b, `,"program_is_reply":true`)
	}
	if s.BeforesInProgram {
		b = e.raw(b, `,"rewrites_before_in_program":true`)
	}
	if s.AftersAsFields {
		b = e.raw(b, `,"updates_after_fields":true`)
	}
	b = e.pending(b, `,"writes":{"domain":`, s.Writes)
	b = e.pending(b, `,"apply_writes":{"domain":`, s.WritesOnce)
	b = e.raw(b, "}")
	return b, e.err
}

// pending writes a record's writes under name (which opens the object), if there are any.
func (e *recordEncoder) pending(b []byte, name string, p *storedPending) []byte {
	if p != nil {
		b = e.raw(b, name)
		b = e.str(b, p.Domain)
		b = e.raw(b, `,"writes":`)
		if p.Writes == nil {
			b = e.raw(b, "null")
		} else {
			b = e.raw(b, "[")
			for i, w := range p.Writes {
				if i > 0 {
					b = e.raw(b, ",")
				}
				b = e.write(b, &w)
			}
			b = e.raw(b, "]")
		}
		b = e.raw(b, `,"reads":`)
		b = e.reads(b, p.Reads)
		b = e.raw(b, "}")
	}
	return b
}

func (e *recordEncoder) write(b []byte, w *storedWrite) []byte {
	b = e.raw(b, `{"table":`)
	b = e.str(b, w.Table)
	b = e.raw(b, `,"key":`)
	b = e.value(b, w.Key)
	b = e.raw(b, `,"base":`)
	b = e.int(b, w.Base)
	if len(w.Before) > 0 {
		b = e.raw(b, `,"before":`)
		b = e.row(b, w.Before)
	}
	b = e.raw(b, `,"row":`)
	b = e.row(b, w.Row)
	if w.InChanges {
		b = e.raw(b, `,"in_changes":true`)
	}
	b = e.raw(b, "}")
	return b
}

// reads writes a pending run's reads.
func (e *recordEncoder) reads(b []byte, rs []store.PendingRead) []byte {
	if rs == nil {
		b = e.raw(b, "null")
		return b
	}
	b = e.raw(b, "[")
	for i, r := range rs {
		if i > 0 {
			b = e.raw(b, ",")
		}
		b = e.raw(b, `{"table":`)
		b = e.str(b, r.Table)
		if r.Key != nil {
			b = e.raw(b, `,"key":`)
			b = e.value(b, r.Key)
		}
		if r.All {
			b = e.raw(b, `,"all":true`)
		}
		b = e.raw(b, `,"version":`)
		b = e.int(b, r.Version)
		b = e.optStr(b, `,"pred":`, r.Pred)
		if len(r.Where) > 0 {
			b = e.raw(b, `,"where":`)
			b = e.rawJSON(b, r.Where)
		}
		if r.From != nil {
			b = e.raw(b, `,"from":`)
			b = e.value(b, r.From)
		}
		if r.To != nil {
			b = e.raw(b, `,"to":`)
			b = e.value(b, r.To)
		}
		if r.N != 0 {
			b = e.raw(b, `,"n":`)
			b = e.int(b, r.N)
		}
		b = e.optStr(b, `,"digest":`, r.Digest)
		b = e.raw(b, "}")
	}
	b = e.raw(b, "]")
	return b
}

func (e *recordEncoder) changes(b []byte, cs table.ChangeSet) []byte {
	if cs == nil {
		b = e.raw(b, "null")
		return b
	}
	b = e.raw(b, "{")
	var names [8]string
	for i, name := range sortedKeysIn(cs, names[:0]) {
		if i > 0 {
			b = e.raw(b, ",")
		}
		b = e.str(b, name)
		b = e.raw(b, ":")
		tc := cs[name]
		if tc == nil {
			b = e.raw(b, "null")
			continue
		}
		b = e.raw(b, `{"key":`)
		b = e.str(b, tc.Key)
		b = e.raw(b, `,"inserted":`)
		b = e.rows(b, tc.Inserted)
		b = e.raw(b, `,"updated":`)
		if tc.Updated == nil {
			b = e.raw(b, "null")
		} else {
			b = e.raw(b, "[")
			for j, u := range tc.Updated {
				if j > 0 {
					b = e.raw(b, ",")
				}
				b = e.raw(b, `{"key":`)
				b = e.value(b, u.Key)
				b = e.raw(b, `,"before":`)
				b = e.row(b, u.Before)
				b = e.raw(b, `,"after":`)
				if e.fieldsOnly {
					b = e.fields(b, u.After, u.Fields)
				} else {
					b = e.row(b, u.After)
				}
				b = e.raw(b, `,"fields":`)
				b = e.strs(b, u.Fields)
				if len(u.Paths) > 0 {
					b = e.raw(b, `,"paths":`)
					b = e.strs(b, u.Paths)
				}
				b = e.raw(b, "}")
			}
			b = e.raw(b, "]")
		}
		b = e.raw(b, `,"deleted":`)
		b = e.rows(b, tc.Deleted)
		if len(tc.Via) > 0 {
			b = e.raw(b, `,"via":{`)
			for j, k := range slices.Sorted(maps.Keys(tc.Via)) {
				if j > 0 {
					b = e.raw(b, ",")
				}
				b = e.str(b, k)
				b = e.raw(b, ":")
				b = e.str(b, tc.Via[k])
			}
			b = e.raw(b, "}")
		}
		b = e.raw(b, "}")
	}
	b = e.raw(b, "}")
	return b
}

// sortedKeysIn is slices.Sorted(maps.Keys(m)) appending to keys: a caller's array on its stack holds a row's
// few names without an allocation (a record writes a dozen rows; issue 32).
func sortedKeysIn[V any](m map[string]V, keys []string) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (e *recordEncoder) rows(b []byte, rows []table.Row) []byte {
	if rows == nil {
		b = e.raw(b, "null")
		return b
	}
	b = e.raw(b, "[")
	for i, row := range rows {
		if i > 0 {
			b = e.raw(b, ",")
		}
		b = e.row(b, row)
	}
	b = e.raw(b, "]")
	return b
}

func (e *recordEncoder) row(b []byte, row table.Row) []byte {
	if row == nil {
		b = e.raw(b, "null")
		return b
	}
	b = e.object(b, row)
	return b
}

// fields writes row cut to names (sorted, each once, each in row: afterIsBeforeButFields), as
// object writes that cut's copy.
func (e *recordEncoder) fields(b []byte, row table.Row, names []string) []byte {
	b = e.raw(b, "{")
	for i, k := range names {
		if i > 0 {
			b = e.raw(b, ",")
		}
		b = e.str(b, k)
		b = e.raw(b, ":")
		b = e.value(b, row[k])
	}
	b = e.raw(b, "}")
	return b
}

func (e *recordEncoder) object(b []byte, m map[string]any) []byte {
	start := len(b)
shapes:
	for i := range e.shapes {
		sh := e.shapes[i] // a copy: a value's own objects may change them
		if len(sh.names) != len(m) || len(sh.names) < 2 {
			continue
		}
		// m has as many names as the shape and each of the shape's: the same names.
		b = append(b, '{')
		at := 0
		for j, k := range sh.names {
			v, ok := m[k]
			if !ok {
				b = b[:start]
				continue shapes
			}
			b = append(b, sh.keys[at:sh.ends[j]]...)
			at = sh.ends[j]
			b = e.value(b, v)
		}
		return append(b, '}')
	}
	b = e.raw(b, "{")
	var buf [16]string
	names := sortedKeysIn(m, buf[:0])
	for i, k := range names {
		if i > 0 {
			b = e.raw(b, ",")
		}
		b = e.str(b, k)
		b = e.raw(b, ":")
		b = e.value(b, m[k])
	}
	if len(names) >= 2 {
		e.shapes[e.nshape%len(e.shapes)] = newShape(names)
		e.nshape++
	}
	b = e.raw(b, "}")
	return b
}

// value writes a row's value: the kinds rows hold by hand, anything else by encoding/json.
func (e *recordEncoder) value(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		b = e.raw(b, "null")
	case string:
		b = e.str(b, v)
	case int64:
		b = e.int(b, v)
	case int:
		b = e.int(b, int64(v))
	case float64:
		b = e.float(b, v)
	case bool:
		b = e.bool(b, v)
	case map[string]any:
		if v == nil {
			b = e.raw(b, "null")
			return b
		}
		b = e.object(b, v)
	case []any:
		if v == nil {
			b = e.raw(b, "null")
			return b
		}
		b = e.raw(b, "[")
		for i, x := range v {
			if i > 0 {
				b = e.raw(b, ",")
			}
			b = e.value(b, x)
		}
		b = e.raw(b, "]")
	default:
		b = e.json(b, v)
	}
	return b
}

func (e *recordEncoder) raw(b []byte, s string) []byte { return append(b, s...) }
func (e *recordEncoder) int(b []byte, n int64) []byte  { return strconv.AppendInt(b, n, 10) }
func (e *recordEncoder) bool(b []byte, v bool) []byte  { return strconv.AppendBool(b, v) }
func (e *recordEncoder) str(b []byte, s string) []byte { return store.AppendJSONString(b, s) }
func (e *recordEncoder) strs(b []byte, l []string) []byte {
	if l == nil {
		b = e.raw(b, "null")
		return b
	}
	b = e.raw(b, "[")
	for i, s := range l {
		if i > 0 {
			b = e.raw(b, ",")
		}
		b = e.str(b, s)
	}
	b = e.raw(b, "]")
	return b
}

func (e *recordEncoder) optStr(b []byte, name, s string) []byte {
	if s != "" {
		b = e.raw(b, name)
		b = e.str(b, s)
	}
	return b
}

// float writes f as encoding/json does (its floatEncoder): 'f' format, or 'e' for very small and
// very large magnitudes with a one-digit negative exponent; NaN and infinities are errors.
func (e *recordEncoder) float(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return e.json(b, f) // encoding/json's error
	}
	b = store.AppendJSONFloat(b, f)
	return b
}

func (e *recordEncoder) time(b []byte, t time.Time) []byte {
	start := len(b)
	b, err := t.AppendText(append(b, '"')) // MarshalJSON's bytes, without its copy
	if err != nil {
		return e.json(b[:start], t) // encoding/json's error
	}
	return append(b, '"')
}

// rawJSON writes raw as encoding/json writes a json.RawMessage, without its reflection:
// compacted, HTML characters escaped; JSON that is not valid is encoding/json's error.
func (e *recordEncoder) rawJSON(b []byte, raw json.RawMessage) []byte {
	if compactASCII(raw) && (plainValid(raw) || json.Valid(raw)) { // what Compact and HTMLEscape leave as it is
		return append(b, raw...)
	}
	start := len(b)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		b = b[:start]
		b = e.json(b, raw)
		return b
	}
	b = buf.Bytes()
	if bytes.ContainsAny(b[start:], "<>&\u2028\u2029") {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, b[start:])
		b = append(b[:start], esc.Bytes()...)
	}
	return b
}

// compactASCII reports whether raw holds no byte that json.Compact removes (white space) or
// json.HTMLEscape changes (< > &, and U+2028 and U+2029, which are not ASCII): a predicate's
// filter as store.AppendMarshal writes it, unless it holds a space.
func compactASCII(raw []byte) bool {
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainValid reports whether raw, which compactASCII accepts, is surely valid JSON: a value of
// objects, lists, strings without escapes, numbers, true, false and null, nested at most
// maxPlainDepth deep, and nothing after it. False is not sure: json.Valid says (issue 32: it was
// most of the cost of a record's reads, each filter AppendMarshal's plain form).
func plainValid(raw []byte) bool {
	p := plainJSON{b: raw}
	return p.value(0) && p.i == len(raw)
}

const maxPlainDepth = 32

// plainJSON reads plainValid's JSON.
type plainJSON struct {
	b []byte
	i int
}

func (p *plainJSON) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *plainJSON) value(depth int) bool {
	if p.i >= len(p.b) || depth > maxPlainDepth {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		if p.eat('}') {
			return true
		}
		for {
			if !p.str() || !p.eat(':') || !p.value(depth+1) {
				return false
			}
			if !p.eat(',') {
				return p.eat('}')
			}
		}
	case c == '[':
		p.i++
		if p.eat(']') {
			return true
		}
		for {
			if !p.value(depth + 1) {
				return false
			}
			if !p.eat(',') {
				return p.eat(']')
			}
		}
	case c == '"':
		return p.str()
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return p.word("true")
	case c == 'f':
		return p.word("false")
	case c == 'n':
		return p.word("null")
	}
	return false
}

// str reads a string without escapes (compactASCII leaves no control character in it).
func (p *plainJSON) str() bool {
	if !p.eat('"') {
		return false
	}
	for ; p.i < len(p.b); p.i++ {
		switch p.b[p.i] {
		case '"':
			p.i++
			return true
		case '\\':
			return false
		}
	}
	return false
}

func (p *plainJSON) digits() bool {
	start := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// number reads a number as JSON writes it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *plainJSON) number() bool {
	p.eat('-')
	if !p.eat('0') {
		if p.i >= len(p.b) || p.b[p.i] < '1' || p.b[p.i] > '9' {
			return false
		}
		p.digits()
	}
	if p.eat('.') && !p.digits() {
		return false
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		return p.digits()
	}
	return true
}

func (p *plainJSON) word(w string) bool {
	if len(p.b)-p.i < len(w) || string(p.b[p.i:p.i+len(w)]) != w {
		return false
	}
	p.i += len(w)
	return true
}

// json writes v by encoding/json.
func (e *recordEncoder) json(b []byte, v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		if e.err == nil {
			e.err = err
		}
		return b
	}
	return append(b, raw...)
}
