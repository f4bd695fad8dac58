package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// How an audit record is stored (issue 32: the audit write's cost is its bytes).
//
// A record is stored as the JSON of its RunRecord with two things said once, not twice:
//
//   - A pending run's Writes repeat the rows of its Changes (an update's before and after, an
//     inserted row, a deleted row). A write whose before and row are exactly its row's change
//     in Changes is stored without them, marked "in_changes": true; reading the record takes
//     them (copies) from Changes again. Such writes are stored as "apply_writes", not
//     "writes": an older starplan then finds nothing to apply in the run (and says so) instead
//     of applying writes it reads without their rows.
//   - A bare program is its reply: when Program equals Reply, "program" is stored empty and
//     "program_is_reply": true says where it is.
//   - A Python rewrite's before is a line of the program: when every rewrite's is one line, the
//     program's line Line, they are stored empty and "rewrites_before_in_program": true says
//     where they are (an older starplan shows those rewrites without their before).
//   - An update's after is its before but for its fields: when every update's is, each after is
//     stored as its fields alone and "updates_after_fields": true says so (an older starplan
//     shows those afters cut to their changed fields).
//
// Records written before this (every field whole, neither mark) read as they always did, and a
// record reads back as the RunRecord that was written: the documents every reader prints are
// unchanged. The hash chain covers the stored bytes, whichever form they have.

// storedRecord is a record as stored: RunRecord with Writes in their stored form.
type storedRecord struct {
	RunRecord
	// ProgramIsReply says that the program is the reply (stored as "program": "").
	ProgramIsReply bool `json:"program_is_reply,omitempty"`
	// BeforesInProgram says that every rewrite's Before is its line of the program (stored as
	// "before": "").
	BeforesInProgram bool `json:"rewrites_before_in_program,omitempty"`
	// AftersAsFields says that every update of Changes is stored with its After cut to its
	// Fields: the rest is its Before.
	AftersAsFields bool `json:"updates_after_fields,omitempty"`
	// Writes shadows RunRecord.Writes: the writes when none names its rows in Changes.
	Writes *storedPending `json:"writes,omitempty"`
	// WritesOnce holds the writes instead when some name their rows in Changes: under a name an
	// older starplan does not read, so that it finds nothing to apply in the run rather than
	// writes without rows (which it would apply as deletes).
	WritesOnce *storedPending `json:"apply_writes,omitempty"`
}

// writes is the record's stored writes, under either name.
func (s *storedRecord) writes() *storedPending {
	if s.WritesOnce != nil {
		return s.WritesOnce
	}
	return s.Writes
}

// storedPending is store.Pending as stored: writes may name their rows in Changes.
type storedPending struct {
	Domain string              `json:"domain"`
	Writes []storedWrite       `json:"writes"`
	Reads  []store.PendingRead `json:"reads"`
}

type storedWrite struct {
	store.PendingWrite
	// InChanges says that Before and Row are the row's change in the record's Changes.
	InChanges bool `json:"in_changes,omitempty"`
}

// recordValue is a record as a system document's value: it stores itself in its stored form.
type recordValue struct{ r *RunRecord }

// EncodeJSON implements store.SelfEncoded.
func (v recordValue) EncodeJSON() ([]byte, error) { return v.r.encodeStored() }

// encodeStored is the record's stored JSON.
func (r *RunRecord) encodeStored() ([]byte, error) {
	return r.stored().encode()
}

// stored is the record in its stored form. It shares r's rows; r is not changed.
func (r *RunRecord) stored() *storedRecord {
	s := new(storedRecord)
	r.storeInto(s)
	return s
}

// storeInto is stored, into s: a caller's own, which need not be on the heap (every queued
// record is encoded from one; issue 32).
func (r *RunRecord) storeInto(s *storedRecord) {
	*s = storedRecord{RunRecord: *r}
	s.RunRecord.Writes = nil // shadowed
	if r.Program != "" && r.Program == r.Reply {
		s.Program, s.ProgramIsReply = "", true
	}
	// The encoder writes those befores empty, and cuts each after to its fields (fieldsOnly), as
	// it writes them, without copies of the rewrites and the change set; cut makes the copies
	// encoding/json would need.
	s.BeforesInProgram = beforesInProgram(r.Rewrites, r.Program)
	s.AftersAsFields = aftersAreFields(r.Changes)
	if r.Writes != nil {
		rows := rowChangesOf(r.Changes, len(r.Writes.Writes))
		p := &storedPending{Domain: r.Writes.Domain, Reads: r.Writes.Reads}
		if r.Writes.Writes != nil {
			p.Writes = make([]storedWrite, len(r.Writes.Writes))
		}
		once := false
		for i, w := range r.Writes.Writes {
			c, ok := rows.find(rowRef{w.Table, rowKey(w.Key)})
			if ok && sameRow(w.Before, c.before) && sameRow(w.Row, c.after) {
				w.Before, w.Row = nil, nil
				p.Writes[i] = storedWrite{PendingWrite: w, InChanges: true}
				once = true
				continue
			}
			p.Writes[i] = storedWrite{PendingWrite: w}
		}
		if once {
			s.WritesOnce = p
		} else {
			s.Writes = p
		}
	}
}

// aftersAsFields returns cs with every update's After cut to its Fields, when there is an
// update and every update's After is its Before but for its Fields (the same names, each field
// once, every field in both): a copy, cs is not changed.
func aftersAsFields(cs table.ChangeSet) (table.ChangeSet, bool) {
	if !aftersAreFields(cs) {
		return nil, false
	}
	out := make(table.ChangeSet, len(cs))
	for name, tc := range cs {
		if tc == nil || len(tc.Updated) == 0 {
			out[name] = tc
			continue
		}
		c := *tc
		c.Updated = make([]table.Update, len(tc.Updated))
		for i, u := range tc.Updated {
			after := make(table.Row, len(u.Fields))
			for _, f := range u.Fields {
				after[f] = u.After[f]
			}
			u.After = after
			c.Updated[i] = u
		}
		out[name] = &c
	}
	return out, true
}

// aftersAreFields reports whether cs has an update and every update's After is its Before but
// for its Fields (aftersAsFields).
func aftersAreFields(cs table.ChangeSet) bool {
	found := false
	for _, tc := range cs {
		if tc == nil {
			continue
		}
		for _, u := range tc.Updated {
			if !afterIsBeforeButFields(u) {
				return false
			}
			found = true
		}
	}
	return found
}

// cut is s with its rewrites and Changes as stored (empty befores when BeforesInProgram,
// aftersAsFields' copy when AftersAsFields), as encoding/json would write it: what encode
// writes without the copies.
func (s *storedRecord) cut() *storedRecord {
	c := *s
	if s.BeforesInProgram {
		c.Rewrites = make([]pycompat.Rewrite, len(s.Rewrites))
		for i, w := range s.Rewrites {
			w.Before = ""
			c.Rewrites[i] = w
		}
	}
	if cs, ok := aftersAsFields(s.Changes); ok && s.AftersAsFields {
		c.Changes = cs
	}
	return &c
}

// afterIsBeforeButFields reports whether u.After is u.Before with u.Fields' values put in: the
// same names, each of Fields once and in both, every other value the same.
//
// One walk of Before, a look-up in After each (issue 32: a dry-run stream's writer asks of every
// update): every name of Before is in After, which has as many, so the two have the same names;
// and Fields, sorted and each once, are all among them when as many of Before's names are
// Fields as there are Fields.
func afterIsBeforeButFields(u table.Update) bool {
	if u.Before == nil || u.After == nil || len(u.After) != len(u.Before) || len(u.Fields) == 0 {
		return false
	}
	for i := 1; i < len(u.Fields); i++ {
		if u.Fields[i-1] >= u.Fields[i] { // sorted, each once
			return false
		}
	}
	fields := 0
	for k, bv := range u.Before {
		av, ok := u.After[k]
		if !ok {
			return false
		}
		if _, changed := slices.BinarySearch(u.Fields, k); changed {
			fields++
			continue
		}
		if !sameValue(av, bv) {
			return false
		}
	}
	return fields == len(u.Fields)
}

// beforesInProgram reports whether every rewrite (there is one at least) has for Before its line
// of program, whole and not empty.
func beforesInProgram(rw []pycompat.Rewrite, program string) bool {
	if len(rw) == 0 {
		return false
	}
	// A walk of the program's lines, forward while the rewrites go forward (they are in line
	// order), without an index of them (every record asks; issue 32); programLines' lines.
	n, at := 1, 0 // line n starts at at
	for _, w := range rw {
		if w.Before == "" || w.Line < 1 {
			return false
		}
		if w.Line < n {
			n, at = 1, 0
		}
		for ; n < w.Line; n++ {
			i := strings.IndexByte(program[at:], '\n')
			if i < 0 {
				return false // the program has no line w.Line
			}
			at += i + 1
		}
		line := program[at:]
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		if line != w.Before {
			return false
		}
	}
	return true
}

// lineIndex finds lines of a program by number.
type lineIndex struct {
	text   string
	starts []int // of lines 1, 2, ... up to the last asked for
}

// programLines indexes program's lines up to the greatest Line of rw.
func programLines(program string, rw []pycompat.Rewrite) lineIndex {
	last := 0
	for _, w := range rw {
		last = max(last, w.Line)
	}
	x := lineIndex{text: program, starts: make([]int, 0, min(last, 1024))}
	for at := 0; len(x.starts) < last; {
		x.starts = append(x.starts, at)
		i := strings.IndexByte(program[at:], '\n')
		if i < 0 {
			break
		}
		at += i + 1
	}
	return x
}

// at is line n (from 1), without its line end, and whether the program has it.
func (x lineIndex) at(n int) (string, bool) {
	if n < 1 || n > len(x.starts) {
		return "", false
	}
	line := x.text[x.starts[n-1]:]
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	return line, true
}

// rowRef names a row of a change set: its table and its key (rowKey).
type rowRef struct {
	table string
	key   any
}

// rowChange is a row's change: before (nil for an insert) and after (nil for a delete).
type rowChange struct{ before, after table.Row }

// rowChangesOf finds the change of each of a pending run's writes (n of them) in cs: by a walk
// of cs for each when both are small, else through rowChanges' index.
func rowChangesOf(cs table.ChangeSet, n int) rowFinder {
	rows := 0
	for _, tc := range cs {
		if tc != nil {
			rows += len(tc.Inserted) + len(tc.Updated) + len(tc.Deleted)
		}
	}
	f := rowFinder{cs: cs}
	if n*rows > 256 {
		f.index = rowChanges(cs)
	}
	return f
}

// rowFinder is rowChangesOf's: a value, not a closure on the heap (every record asks; issue 32).
type rowFinder struct {
	cs    table.ChangeSet
	index map[rowRef]rowChange // nil: walk cs
	// name and tc are the table last asked about and its changes: a run's writes come table by
	// table, and a look-up in cs hashes the name.
	name string
	tc   *table.TableChanges
}

// find is the change of ref's row, and whether cs has one.
func (f *rowFinder) find(ref rowRef) (c rowChange, found bool) {
	if f.index != nil {
		c, found = f.index[ref]
		return c, found
	}
	if f.tc == nil || ref.table != f.name {
		f.name, f.tc = ref.table, f.cs[ref.table]
	}
	tc := f.tc
	if tc == nil {
		return rowChange{}, false
	}
	// The last of a key wins, as in rowChanges' index: inserted, updated, then deleted.
	for _, row := range tc.Inserted {
		if rowKey(row[tc.Key]) == ref.key {
			c, found = rowChange{after: row}, true
		}
	}
	for _, u := range tc.Updated {
		if rowKey(u.Key) == ref.key {
			c, found = rowChange{before: u.Before, after: u.After}, true
		}
	}
	for _, row := range tc.Deleted {
		if rowKey(row[tc.Key]) == ref.key {
			c, found = rowChange{before: row}, true
		}
	}
	return c, found
}

// rowChanges indexes cs by row.
func rowChanges(cs table.ChangeSet) map[rowRef]rowChange {
	out := map[rowRef]rowChange{}
	for name, tc := range cs {
		if tc == nil {
			continue
		}
		for _, row := range tc.Inserted {
			out[rowRef{name, rowKey(row[tc.Key])}] = rowChange{after: row}
		}
		for _, u := range tc.Updated {
			out[rowRef{name, rowKey(u.Key)}] = rowChange{before: u.Before, after: u.After}
		}
		for _, row := range tc.Deleted {
			out[rowRef{name, rowKey(row[tc.Key])}] = rowChange{before: row}
		}
	}
	return out
}

// rowKey is a key as JSON has it, and comparable: a string key "1" and an int key 1 differ, an
// int key 1 and a float key 1.0 do not (a record read back has the kinds of the key's field in
// its rows, but a write's key is read as a plain number).
func rowKey(k any) any {
	switch k := k.(type) {
	case string, int64, nil:
		return k
	case int:
		return int64(k)
	case float64:
		if k == math.Trunc(k) && math.Abs(k) < 1<<63 {
			return int64(k)
		}
		return k
	case json.Number: // a record checked as it is stored (CheckRecord)
		return rowKey(plainNumbers(k))
	}
	b, _ := json.Marshal(k)
	return jsonKey(b)
}

// jsonKey is a key of another kind, by its JSON.
type jsonKey string

// sameRow reports whether a and b are the same row, nil and empty told apart (they encode
// differently): a write stored as in_changes reads back as it was.
func sameRow(a, b table.Row) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	if a == nil || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		return true // one map (a write's rows are often its change's)
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !sameValue(av, bv) {
			return false
		}
	}
	return true
}

// sameValue reports whether two values of rows are the same.
func sameValue(a, b any) bool {
	switch a.(type) {
	case string, int64, float64, bool, nil:
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// restore makes the stored record the RunRecord it was: the program from the reply, the rows of
// writes from Changes (copies: the two do not share maps). Changes and the writes' keys must be
// read with their kinds already (decodeRecord).
func (s *storedRecord) restore() (*RunRecord, error) {
	r := s.RunRecord
	if s.ProgramIsReply {
		if r.Program != "" {
			return nil, fmt.Errorf("the record is stored with its program as its reply (program_is_reply) and holds a program too")
		}
		r.Program = r.Reply
	}
	if s.BeforesInProgram {
		lines := programLines(r.Program, r.Rewrites)
		rw := make([]pycompat.Rewrite, len(r.Rewrites))
		for i, w := range r.Rewrites {
			line, ok := lines.at(w.Line)
			if !ok || w.Before != "" {
				return nil, fmt.Errorf("rewrite %d (line %d) is stored with its before in the program, which has no line %d or it is stored there too", i+1, w.Line, w.Line)
			}
			w.Before = line
			rw[i] = w
		}
		r.Rewrites = rw
	}
	if s.AftersAsFields {
		cs := make(table.ChangeSet, len(r.Changes))
		for name, tc := range r.Changes {
			if tc == nil || len(tc.Updated) == 0 {
				cs[name] = tc
				continue
			}
			c := *tc
			c.Updated = make([]table.Update, len(tc.Updated))
			for i, u := range tc.Updated {
				if u.Before == nil || len(u.After) != len(u.Fields) {
					return nil, fmt.Errorf("update %d of %s (key %v) is stored with its after as its fields, which it does not hold alone", i+1, name, u.Key)
				}
				after := copyRow(u.Before)
				for _, f := range u.Fields {
					v, ok := u.After[f]
					if !ok {
						return nil, fmt.Errorf("update %d of %s (key %v) is stored with its after as its fields, which it does not hold alone", i+1, name, u.Key)
					}
					after[f] = v
				}
				u.After = after
				c.Updated[i] = u
			}
			cs[name] = &c
		}
		r.Changes = cs
	}
	r.Writes = nil
	if s.Writes != nil && s.WritesOnce != nil {
		return nil, fmt.Errorf("the record has its writes twice (as writes and as apply_writes)")
	}
	if s.Writes != nil {
		// An older starplan applies what it reads under "writes": a write there must hold its
		// rows, never name them in Changes (it would be applied as a delete).
		for i, w := range s.Writes.Writes {
			if w.InChanges {
				return nil, fmt.Errorf("write %d (table %s, key %v) names its rows in the record's changes but is stored as writes, which an older starplan applies without them", i+1, w.Table, w.Key)
			}
		}
	}
	if sw := s.writes(); sw != nil {
		p := &store.Pending{Domain: sw.Domain, Reads: sw.Reads}
		if sw.Writes != nil {
			p.Writes = make([]store.PendingWrite, len(sw.Writes))
		}
		var rows map[rowRef]rowChange
		for i, w := range sw.Writes {
			if w.InChanges {
				if w.Before != nil || w.Row != nil {
					return nil, fmt.Errorf("write %d (table %s, key %v) names its rows in the record's changes and holds rows too", i+1, w.Table, w.Key)
				}
				if rows == nil {
					rows = rowChanges(r.Changes)
				}
				c, ok := rows[rowRef{w.Table, rowKey(w.Key)}]
				if !ok {
					return nil, fmt.Errorf("write %d (table %s, key %v) names its rows in the record's changes, which have no change of that row", i+1, w.Table, w.Key)
				}
				w.Before, w.Row = copyRow(c.before), copyRow(c.after)
			}
			p.Writes[i] = w.PendingWrite
		}
		r.Writes = p
	}
	return &r, nil
}

// copyRow is a deep copy of a decoded row.
func copyRow(row table.Row) table.Row {
	if row == nil {
		return nil
	}
	out := make(table.Row, len(row))
	for k, v := range row {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = copyValue(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = copyValue(x)
		}
		return out
	}
	return v
}
