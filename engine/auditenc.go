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
	b   []byte
	err error
	// fieldsOnly writes each update's after as its fields alone (storedRecord.AftersAsFields).
	fieldsOnly bool
}

func (s *storedRecord) encode() ([]byte, error) { return s.encodeAfter(0) }

// encodeAfter is encode's JSON after room zero bytes, which a store may write its header into
// (store.RoomEncoded).
func (s *storedRecord) encodeAfter(room int) ([]byte, error) {
	e := recordEncoder{b: make([]byte, room, max(8192, 2*room))} // most records fit (8 KiB: a size class of its own)
	r := &s.RunRecord
	e.raw(`{"run_id":`)
	e.str(r.ID)
	e.raw(`,"time":`)
	e.time(r.Time)
	e.raw(`,"origin":`)
	e.str(r.Origin)
	e.raw(`,"request":`)
	e.str(r.Request)
	e.optStr(`,"subject":`, r.Subject)
	e.optStr(`,"trace_id":`, r.TraceID)
	e.raw(`,"reply":`)
	e.str(r.Reply)
	e.raw(`,"reply_bytes":`)
	e.int(int64(r.ReplyBytes))
	e.optStr(`,"reply_sha256":`, r.ReplySHA256)
	e.raw(`,"program":`)
	e.str(r.Program)
	e.raw(`,"rewrites":`)
	if r.Rewrites == nil {
		e.raw("null")
	} else {
		e.raw("[")
		for i, w := range r.Rewrites {
			if i > 0 {
				e.raw(",")
			}
			e.raw(`{"line":`)
			e.int(int64(w.Line))
			e.raw(`,"rule":`)
			e.str(w.Rule)
			e.raw(`,"before":`)
			if s.BeforesInProgram {
				e.raw(`""`) // its line of the program
			} else {
				e.str(w.Before)
			}
			e.raw(`,"after":`)
			e.str(w.After)
			e.raw("}")
		}
		e.raw("]")
	}
	e.raw(`,"diagnostics":`)
	e.json(r.Diagnostics)
	e.raw(`,"stdout":`)
	e.str(r.Stdout)
	e.raw(`,"stdout_truncated":`)
	e.bool(r.StdoutTruncated)
	e.raw(`,"answer_text":`)
	e.str(r.AnswerText)
	e.raw(`,"status":`)
	e.str(r.Status)
	e.raw(`,"changes":`)
	e.fieldsOnly = s.AftersAsFields
	e.changes(r.Changes)
	e.fieldsOnly = false
	e.raw(`,"changed_rows":`)
	e.int(int64(r.ChangedRows))
	e.raw(`,"outcome":`)
	e.str(string(r.Outcome))
	e.optStr(`,"limit":`, string(r.Limit))
	e.raw(`,"steps":`)
	e.b = strconv.AppendUint(e.b, r.Steps, 10)
	e.raw(`,"duration_ms":`)
	e.float(r.DurationMS)
	e.raw(`,"pending":`)
	e.bool(r.Pending)
	e.raw(`,"applied":`)
	e.bool(r.Applied)
	if r.AppliedAt != nil {
		e.raw(`,"applied_at":`)
		e.time(*r.AppliedAt)
	}
	e.optStr(`,"apply_error":`, r.ApplyError)
	if r.ConflictAt != nil {
		e.raw(`,"conflict_at":`)
		e.time(*r.ConflictAt)
	}
	e.optStr(`,"apply_origin":`, r.ApplyOrigin)
	if r.Model != nil {
		e.raw(`,"model":`)
		e.json(r.Model)
	}
	if r.Limits != nil {
		e.raw(`,"limits":`)
		e.json(r.Limits)
	}
	if len(r.Truncated) > 0 {
		e.raw(`,"truncated":`)
		e.strs(r.Truncated)
	}
	e.raw(`,"proposed_by":`)
	e.str(r.ProposedBy)
	if len(r.ApprovedBy) > 0 {
		e.raw(`,"approved_by":`)
		e.strs(r.ApprovedBy)
	}
	e.optStr(`,"rejected_by":`, r.RejectedBy)
	e.optStr(`,"auto_approved_by_rule":`, r.AutoApprovedByRule)
	if r.ApprovalsNeeded != 0 {
		e.raw(`,"approvals_needed":`)
		e.int(int64(r.ApprovalsNeeded))
	}
	if len(r.Scans) > 0 {
		e.raw(`,"scans":[`)
		for i, sc := range r.Scans {
			if i > 0 {
				e.raw(",")
			}
			e.raw(`{"table":`)
			e.str(sc.Table)
			e.raw(`,"fields":`)
			e.strs(sc.Fields)
			e.raw(`,"calls":`)
			e.int(int64(sc.Calls))
			e.raw(`,"rows_examined":`)
			e.int(sc.Rows)
			e.raw("}")
		}
		e.raw("]")
	}
	if s.ProgramIsReply {
		e.raw(`,"program_is_reply":true`)
	}
	if s.BeforesInProgram {
		e.raw(`,"rewrites_before_in_program":true`)
	}
	if s.AftersAsFields {
		e.raw(`,"updates_after_fields":true`)
	}
	e.pending(`,"writes":{"domain":`, s.Writes)
	e.pending(`,"apply_writes":{"domain":`, s.WritesOnce)
	e.raw("}")
	return e.b, e.err
}

// pending writes a record's writes under name (which opens the object), if there are any.
func (e *recordEncoder) pending(name string, p *storedPending) {
	if p != nil {
		e.raw(name)
		e.str(p.Domain)
		e.raw(`,"writes":`)
		if p.Writes == nil {
			e.raw("null")
		} else {
			e.raw("[")
			for i, w := range p.Writes {
				if i > 0 {
					e.raw(",")
				}
				e.write(&w)
			}
			e.raw("]")
		}
		e.raw(`,"reads":`)
		e.reads(p.Reads)
		e.raw("}")
	}
}

func (e *recordEncoder) write(w *storedWrite) {
	e.raw(`{"table":`)
	e.str(w.Table)
	e.raw(`,"key":`)
	e.value(w.Key)
	e.raw(`,"base":`)
	e.int(w.Base)
	if len(w.Before) > 0 {
		e.raw(`,"before":`)
		e.row(w.Before)
	}
	e.raw(`,"row":`)
	e.row(w.Row)
	if w.InChanges {
		e.raw(`,"in_changes":true`)
	}
	e.raw("}")
}

// reads writes a pending run's reads.
func (e *recordEncoder) reads(rs []store.PendingRead) {
	if rs == nil {
		e.raw("null")
		return
	}
	e.raw("[")
	for i, r := range rs {
		if i > 0 {
			e.raw(",")
		}
		e.raw(`{"table":`)
		e.str(r.Table)
		if r.Key != nil {
			e.raw(`,"key":`)
			e.value(r.Key)
		}
		if r.All {
			e.raw(`,"all":true`)
		}
		e.raw(`,"version":`)
		e.int(r.Version)
		e.optStr(`,"pred":`, r.Pred)
		if len(r.Where) > 0 {
			e.raw(`,"where":`)
			e.rawJSON(r.Where)
		}
		if r.From != nil {
			e.raw(`,"from":`)
			e.value(r.From)
		}
		if r.To != nil {
			e.raw(`,"to":`)
			e.value(r.To)
		}
		if r.N != 0 {
			e.raw(`,"n":`)
			e.int(r.N)
		}
		e.optStr(`,"digest":`, r.Digest)
		e.raw("}")
	}
	e.raw("]")
}

func (e *recordEncoder) changes(cs table.ChangeSet) {
	if cs == nil {
		e.raw("null")
		return
	}
	e.raw("{")
	var names [8]string
	for i, name := range sortedKeysIn(cs, names[:0]) {
		if i > 0 {
			e.raw(",")
		}
		e.str(name)
		e.raw(":")
		tc := cs[name]
		if tc == nil {
			e.raw("null")
			continue
		}
		e.raw(`{"key":`)
		e.str(tc.Key)
		e.raw(`,"inserted":`)
		e.rows(tc.Inserted)
		e.raw(`,"updated":`)
		if tc.Updated == nil {
			e.raw("null")
		} else {
			e.raw("[")
			for j, u := range tc.Updated {
				if j > 0 {
					e.raw(",")
				}
				e.raw(`{"key":`)
				e.value(u.Key)
				e.raw(`,"before":`)
				e.row(u.Before)
				e.raw(`,"after":`)
				if e.fieldsOnly {
					e.fields(u.After, u.Fields)
				} else {
					e.row(u.After)
				}
				e.raw(`,"fields":`)
				e.strs(u.Fields)
				if len(u.Paths) > 0 {
					e.raw(`,"paths":`)
					e.strs(u.Paths)
				}
				e.raw("}")
			}
			e.raw("]")
		}
		e.raw(`,"deleted":`)
		e.rows(tc.Deleted)
		if len(tc.Via) > 0 {
			e.raw(`,"via":{`)
			for j, k := range slices.Sorted(maps.Keys(tc.Via)) {
				if j > 0 {
					e.raw(",")
				}
				e.str(k)
				e.raw(":")
				e.str(tc.Via[k])
			}
			e.raw("}")
		}
		e.raw("}")
	}
	e.raw("}")
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

func (e *recordEncoder) rows(rows []table.Row) {
	if rows == nil {
		e.raw("null")
		return
	}
	e.raw("[")
	for i, row := range rows {
		if i > 0 {
			e.raw(",")
		}
		e.row(row)
	}
	e.raw("]")
}

func (e *recordEncoder) row(row table.Row) {
	if row == nil {
		e.raw("null")
		return
	}
	e.object(row)
}

// fields writes row cut to names (sorted, each once, each in row: afterIsBeforeButFields), as
// object writes that cut's copy.
func (e *recordEncoder) fields(row table.Row, names []string) {
	e.raw("{")
	for i, k := range names {
		if i > 0 {
			e.raw(",")
		}
		e.str(k)
		e.raw(":")
		e.value(row[k])
	}
	e.raw("}")
}

func (e *recordEncoder) object(m map[string]any) {
	e.raw("{")
	var names [16]string
	for i, k := range sortedKeysIn(m, names[:0]) {
		if i > 0 {
			e.raw(",")
		}
		e.str(k)
		e.raw(":")
		e.value(m[k])
	}
	e.raw("}")
}

// value writes a row's value: the kinds rows hold by hand, anything else by encoding/json.
func (e *recordEncoder) value(v any) {
	switch v := v.(type) {
	case nil:
		e.raw("null")
	case string:
		e.str(v)
	case int64:
		e.int(v)
	case int:
		e.int(int64(v))
	case float64:
		e.float(v)
	case bool:
		e.bool(v)
	case map[string]any:
		if v == nil {
			e.raw("null")
			return
		}
		e.object(v)
	case []any:
		if v == nil {
			e.raw("null")
			return
		}
		e.raw("[")
		for i, x := range v {
			if i > 0 {
				e.raw(",")
			}
			e.value(x)
		}
		e.raw("]")
	default:
		e.json(v)
	}
}

func (e *recordEncoder) raw(s string) { e.b = append(e.b, s...) }
func (e *recordEncoder) int(n int64)  { e.b = strconv.AppendInt(e.b, n, 10) }
func (e *recordEncoder) bool(v bool)  { e.b = strconv.AppendBool(e.b, v) }
func (e *recordEncoder) str(s string) { e.b = store.AppendJSONString(e.b, s) }
func (e *recordEncoder) strs(l []string) {
	if l == nil {
		e.raw("null")
		return
	}
	e.raw("[")
	for i, s := range l {
		if i > 0 {
			e.raw(",")
		}
		e.str(s)
	}
	e.raw("]")
}

func (e *recordEncoder) optStr(name, s string) {
	if s != "" {
		e.raw(name)
		e.str(s)
	}
}

// float writes f as encoding/json does (its floatEncoder): 'f' format, or 'e' for very small and
// very large magnitudes with a one-digit negative exponent; NaN and infinities are errors.
func (e *recordEncoder) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		e.json(f) // encoding/json's error
		return
	}
	e.b = store.AppendJSONFloat(e.b, f)
}

func (e *recordEncoder) time(t time.Time) {
	b, err := t.MarshalJSON()
	if err != nil {
		e.json(t) // encoding/json's error
		return
	}
	e.b = append(e.b, b...)
}

// rawJSON writes raw as encoding/json writes a json.RawMessage, without its reflection:
// compacted, HTML characters escaped; JSON that is not valid is encoding/json's error.
func (e *recordEncoder) rawJSON(raw json.RawMessage) {
	start := len(e.b)
	buf := bytes.NewBuffer(e.b)
	if err := json.Compact(buf, raw); err != nil {
		e.b = e.b[:start]
		e.json(raw)
		return
	}
	e.b = buf.Bytes()
	if bytes.ContainsAny(e.b[start:], "<>&\u2028\u2029") {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, e.b[start:])
		e.b = append(e.b[:start], esc.Bytes()...)
	}
}

// json writes v by encoding/json.
func (e *recordEncoder) json(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		if e.err == nil {
			e.err = err
		}
		return
	}
	e.b = append(e.b, b...)
}
