package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/starplan/starplan/table"
)

// Predicate reads.
//
// A run depends on more than the rows it was handed: "the last row of the ledger", "no item is
// called Aviator", "there are 6 transactions" are facts about rows that were absent, and a commit
// that inserts one makes them false without touching any row the run saw. So every read that
// walks a filter (Find, Count, Len, the rows an Update or Remove matched, and the next generated
// key) is recorded as a predicate read: the where-filter, the key range the walk covered (a walk
// that stopped at its limit covered the keys up to the row it stopped at), and what it found among
// the committed rows: their number and a digest of their keys and versions. At apply, a read whose
// table has not been committed to since is valid at once (O(1)); otherwise the backend evaluates
// the filter again over the committed rows of that range, and any difference in what matches is
// a conflict. Both backends record them here (PredReads), so a Pending reads the same in either.
//
// A read that matched more than BigRead committed rows, or whose filter is too large to keep,
// is recorded as a read of the whole table (any commit to the table is then a conflict), as is
// every read past MaxPredReads per table: the record of a run stays bounded.

// BigRead is the most rows one Find records as individual reads. A Find that returns more
// records one read of the whole table instead (at the table's version): recording 50,000 keys
// would cost more than the query, and an apply then conflicts if anything in that table changed.
const BigRead = 256

// MaxPredReads is the most predicate reads one run records per table; further reads of the
// table make the run depend on the whole table.
const MaxPredReads = 64

// MaxWhereJSON is the largest where-filter, in bytes of JSON, a predicate read keeps.
const MaxWhereJSON = 8 << 10

// The kinds of predicate read (PendingRead.Pred).
const (
	PredRows    = "rows"     // the committed rows matching Where in [From, To]: digest and count
	PredCount   = "count"    // how many committed rows match Where
	PredNextKey = "next_key" // the highest number among generated-form keys (N; -1: none)
)

// ReadObs collects, during one walk, the committed rows the filter matched in the walked range.
// A nil *ReadObs collects nothing.
type ReadObs struct {
	CountOnly bool
	Count     int
	Keys      []VerKey // up to BigRead+1 (rows mode)
	// Stop is the key of the row the walk stopped at because the caller had enough (nil: the
	// walk reached the end); rows past it were not looked at.
	Stop    any
	Stopped bool
}

// VerKey is a committed row's key and version.
type VerKey struct {
	Key any
	Ver int64
}

// Add records a committed row the walk matched.
func (o *ReadObs) Add(key any, ver int64) {
	if o == nil {
		return
	}
	o.Count++
	if !o.CountOnly && len(o.Keys) <= BigRead {
		o.Keys = append(o.Keys, VerKey{key, ver})
	}
}

// StopAt records that the walk stopped after the row with key k.
func (o *ReadObs) StopAt(k any) {
	if o != nil {
		o.Stop, o.Stopped = k, true
	}
}

// PredRead is one recorded predicate read.
type PredRead struct {
	Kind     string
	Where    map[string]any
	From, To any // inclusive key bounds; nil: open
	Ver      int64
	N        int64 // rows or count: the number of committed rows matched; next_key: the number
	Digest   uint64
}

// PredReads is what a run's reads of one table depend on beyond the rows they were handed: its
// predicate reads, or the whole table (All) from the oldest version seen (AllVer).
type PredReads struct {
	Preds  []PredRead
	All    bool
	AllVer int64
}

// Note records a predicate read made at table version p.Ver.
func (t *PredReads) Note(p PredRead) {
	if t.All {
		return // every commit to the table already conflicts
	}
	if len(t.Preds) >= MaxPredReads || (p.Kind == PredRows && p.N > BigRead) {
		t.All, t.AllVer = true, t.minVer(p.Ver)
		t.Preds = nil
		return
	}
	for _, q := range t.Preds {
		if q.Kind == p.Kind && q.Ver == p.Ver && q.N == p.N && q.Digest == p.Digest &&
			sameBound(q.From, p.From) && sameBound(q.To, p.To) && whereEqual(q.Where, p.Where) {
			return // a plan asking the same question again (get_current_balance in a loop)
		}
	}
	if t.Preds == nil {
		t.Preds = make([]PredRead, 0, 4) // a plan's reads of a table are a few
	}
	t.Preds = append(t.Preds, p)
}

// minVer is the oldest version any recorded read saw, with ver.
func (t *PredReads) minVer(ver int64) int64 {
	for _, q := range t.Preds {
		ver = min(ver, q.Ver)
	}
	return ver
}

// NoteWalk records a walk of where as a predicate read: the rows it matched (rows mode) or
// their number (count mode).
func (t *PredReads) NoteWalk(where map[string]any, reverse bool, o *ReadObs, ver int64) {
	p := PredRead{Kind: PredRows, Where: where, Ver: ver, N: int64(o.Count)}
	if o.CountOnly {
		p.Kind = PredCount
	} else {
		if o.Stopped {
			if reverse {
				p.From = o.Stop
			} else {
				p.To = o.Stop
			}
		}
		p.Digest = ReadDigest(o.Keys)
	}
	t.Note(p)
}

func sameBound(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return table.CompareKeys(a, b) == 0
}

func whereEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	switch sameValue(a, b) {
	case 1:
		return true
	case 0:
		return false
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// sameValue compares two filter values without encoding them: 1 when they encode to the same
// JSON, 0 when they do not, -1 when it cannot tell (kinds other than a filter's usual ones, or
// different kinds: whereEqual then compares their JSON, as it always did).
func sameValue(a, b any) int {
	switch x := a.(type) {
	case nil:
		if b == nil {
			return 1
		}
	case string:
		if y, ok := b.(string); ok {
			return boolInt(x == y)
		}
	case bool:
		if y, ok := b.(bool); ok {
			return boolInt(x == y)
		}
	case int64:
		if y, ok := b.(int64); ok {
			return boolInt(x == y)
		}
	case float64:
		if y, ok := b.(float64); ok && x == x && y == y && x != 0 && y != 0 {
			return boolInt(x == y) // NaN (unencodable) and zeros (0 and -0 differ) go to JSON
		}
	case map[string]any:
		if y, ok := b.(map[string]any); ok && x != nil && y != nil {
			if len(x) != len(y) {
				return 0
			}
			res := 1
			for k, xv := range x {
				yv, ok := y[k]
				if !ok {
					return 0
				}
				switch sameValue(xv, yv) {
				case 0:
					return 0
				case -1:
					res = -1
				}
			}
			return res
		}
	case []any:
		if y, ok := b.([]any); ok && x != nil && y != nil {
			if len(x) != len(y) {
				return 0
			}
			res := 1
			for i := range x {
				switch sameValue(x[i], y[i]) {
				case 0:
					return 0
				case -1:
					res = -1
				}
			}
			return res
		}
	}
	return -1
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ReadDigest is an order-independent digest of (key, version) pairs: the sum of their FNV-1a
// hashes. It is stable across processes, so a run recorded by one can be applied by another.
func ReadDigest(keys []VerKey) uint64 {
	var sum uint64
	for _, k := range keys {
		var h uint64
		switch x := k.Key.(type) {
		case string:
			h = fnvString(fnvString(fnvOffset, "s"), x)
		case int64:
			var buf [24]byte
			h = fnvString(fnvString(fnvOffset, "i"), string(strconv.AppendInt(buf[:0], x, 10)))
		default:
			h = fnvString(fnvOffset, fmt.Sprintf("%T:%v", x, x))
		}
		for i := range 8 {
			h = (h ^ uint64(byte(k.Ver>>(8*i)))) * fnvPrime
		}
		sum += h
	}
	return sum
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// Pending renders the reads for Pending's AddTable. A filter too large to keep turns the
// predicate reads into a read of the whole table at the oldest version seen.
func (t *PredReads) Pending(name string) (reads []PendingRead, all bool, allVer int64) {
	if t.All {
		return nil, true, t.AllVer
	}
	if len(t.Preds) == 0 {
		return nil, false, 0
	}
	// Every filter is encoded into one buffer, sliced once it has stopped growing.
	buf := make([]byte, 0, 48*len(t.Preds)) // most filters are one field's condition
	ends := make([]int, len(t.Preds))
	reads = make([]PendingRead, len(t.Preds))
	for i, p := range t.Preds {
		r := PendingRead{Table: name, Version: p.Ver, Pred: p.Kind, From: p.From, To: p.To, N: p.N}
		if p.Kind == PredRows {
			r.Digest = strconv.FormatUint(p.Digest, 16)
		}
		start := len(buf)
		if len(p.Where) > 0 {
			var err error
			buf, err = AppendMarshal(buf, p.Where)
			if err != nil || len(buf)-start > MaxWhereJSON {
				return nil, true, t.minVer(p.Ver)
			}
		}
		ends[i] = len(buf)
		reads[i] = r
	}
	start := 0
	for i := range reads {
		if ends[i] > start {
			reads[i].Where = json.RawMessage(buf[start:ends[i]:ends[i]])
		}
		start = ends[i]
	}
	return reads, false, 0
}

// PredCheck is a pending predicate read checked against its table's schema (CheckPred), ready
// for a backend to find again at apply.
type PredCheck struct {
	Schema   *Schema
	Kind     string
	Where    map[string]any
	M        *table.Matcher
	From, To any
	Ver      int64
	N        int64
	Digest   uint64
}

// CheckPred checks a pending predicate read against the schema and compiles its filter.
func CheckPred(sc *Schema, r PendingRead) (PredCheck, error) {
	pc := PredCheck{Schema: sc, Kind: r.Pred, Ver: r.Version, N: r.N}
	switch r.Pred {
	case PredRows, PredCount, PredNextKey:
	default:
		return pc, fmt.Errorf("pending read of %s: unknown kind %q", sc.Name, r.Pred)
	}
	if r.Pred == PredRows {
		d, err := strconv.ParseUint(r.Digest, 16, 64)
		if err != nil {
			return pc, fmt.Errorf("pending read of %s: digest %q: %w", sc.Name, r.Digest, err)
		}
		pc.Digest = d
	}
	if len(r.Where) > 0 {
		dec := json.NewDecoder(bytes.NewReader(r.Where))
		dec.UseNumber()
		var w map[string]any
		if err := dec.Decode(&w); err != nil {
			return pc, fmt.Errorf("pending read of %s: where: %w", sc.Name, err)
		}
		pc.Where = FromJSON(w).(map[string]any)
	}
	m, err := table.Compile(sc.Schema, pc.Where)
	if err != nil {
		return pc, fmt.Errorf("pending read of %s: %w", sc.Name, err)
	}
	pc.M = m
	for _, b := range []struct {
		in  any
		out *any
	}{{r.From, &pc.From}, {r.To, &pc.To}} {
		if b.in == nil {
			continue
		}
		k, err := sc.NormKey(FromJSON(b.in))
		if err != nil {
			return pc, fmt.Errorf("pending read of %s: range: %w", sc.Name, err)
		}
		*b.out = k
	}
	return pc, nil
}

// Describe says, for a conflict, what the read was.
func (pc *PredCheck) Describe() string {
	rows := pc.Schema.Name + " rows"
	if len(pc.Where) > 0 {
		rows += " matching " + describeWhere(pc.Where)
	}
	switch pc.Kind {
	case PredNextKey:
		return fmt.Sprintf("the next generated key of %s changed after the run made one", pc.Schema.Name)
	case PredCount:
		return fmt.Sprintf("the number of %s changed after the run counted them", rows)
	}
	switch {
	case pc.From != nil:
		rows = fmt.Sprintf("%s from %s on", rows, table.FormatValue(pc.From))
	case pc.To != nil:
		rows = fmt.Sprintf("%s up to %s", rows, table.FormatValue(pc.To))
	}
	return "the " + rows + " changed after the run read them (a row was inserted, changed or removed)"
}

func describeWhere(where map[string]any) string {
	raw, err := json.Marshal(where)
	if err != nil || len(raw) > 120 {
		return "the run's filter"
	}
	return string(raw)
}
