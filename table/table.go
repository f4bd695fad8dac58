// Package table is the plain-Go data model shared by the store and the plan helpers: rows,
// schemas, queries, the staged view a plan reads and writes through, and the change set a run
// produces.
//
// It imports neither clover nor starlark: the store implements View over its database, the
// builtins package exposes a View to Starlark, and contracts and renderers read ChangeSets.
// Keeping the shapes here lets each of those packages stay on its side of the data flow.
package table

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Row is one record as plain Go values. Field values are one of: nil, bool, int64, float64,
// string, []any or map[string]any (nested values use the same kinds). Rows returned by a View are
// shared and must be treated as read-only; a caller that wants to change one copies it first.
type Row = map[string]any

// Query selects rows of one table. The zero Query selects every row in key order.
type Query struct {
	// Where is the dict form of a filter, evaluated in Go: {"name": "Aviator"} (every key must
	// hold), operator maps such as {"price": {"$lt": 100}}, and {"$or": [...]}/{"$and": [...]}.
	// See Compile for the operators.
	Where map[string]any
	// Match is the function form of a filter (a plan's `lambda row: ...`, wrapped by the
	// builtins). It is called with a shared row that it must not modify. An error stops the query.
	Match func(Row) (bool, error)
	// Limit is the most rows to return; 0 means no limit.
	Limit int
	// Reverse walks the table from the highest key down.
	Reverse bool
}

// Table is one table of a staged view. Reads see the run's own writes. Every method is safe to
// call from one goroutine at a time (a run is single-threaded).
type Table interface {
	// Schema describes the table; it is never nil.
	Schema() *Schema
	// Len is the number of rows, including the run's own inserts and removals.
	Len() int
	// Find returns the rows that match q in key order (natural order: digit runs compare as
	// numbers, so "TXN9" < "TXN10"). The rows it returns are recorded as read by the run.
	Find(q Query) ([]Row, error)
	// Count returns how many rows match q (q.Limit is ignored). It records no reads.
	Count(q Query) (int, error)
	// Get returns the row with the given key value, recording the read (also of a missing key).
	Get(key any) (Row, bool, error)
	// Insert validates row against the schema, stages it and returns its key. A missing key is
	// generated when the schema says how; a duplicate key is an error.
	Insert(row Row) (any, error)
	// Update merges fields into every row that matches q, validating each result, and returns
	// how many rows changed. Changing the key field is an error.
	Update(fields Row, q Query) (int, error)
	// Remove stages the removal of every row that matches q and returns how many were removed.
	Remove(q Query) (int, error)
}

// View is a set of tables as one run sees them.
type View interface {
	// Names lists the tables a plan may use, sorted.
	Names() []string
	// Table returns the named table, or false if the view has no such table.
	Table(name string) (Table, bool)
}

// Schema declares one table: its key field and the type and rules of each field. Schemas are
// data (JSON) that a domain ships; nothing about a particular domain is compiled into Go.
type Schema struct {
	Name   string  `json:"name"`
	Key    string  `json:"key"`
	Doc    string  `json:"doc,omitempty"`
	Fields []Field `json:"fields"`
	// KeyPrefix, when set, lets Insert generate a missing key as the prefix plus the next
	// number, zero-padded to KeyDigits (for example TXN002).
	KeyPrefix string `json:"key_prefix,omitempty"`
	KeyDigits int    `json:"key_digits,omitempty"`
	// KeyMax bounds the number of keys of the form KeyPrefix+digits, so that the highest key
	// always has a next one (0: DefaultKeyMax). A key beyond it is refused, whoever writes it.
	KeyMax int64 `json:"key_max,omitempty"`
	// Indexes names the fields besides the key that reads look rows up by: an equality or $ieq
	// on such a field is answered from an index; on any other field a read walks the table
	// (and the run's figures say so: see store.Scan). Only scalar fields can be indexed.
	Indexes []string `json:"indexes,omitempty"`
	// Writes, when WritesHelpers ("helpers"), lets only the domain's helpers (helpers.star) write
	// the table: a plan's own insert, update or remove of it is refused by the check and, where
	// the check cannot see it, by the call. Empty: plans write it too.
	Writes string `json:"writes,omitempty"`
	// SQL, when set, keeps the table's rows in an existing SQL table of the PostgreSQL store's
	// database instead of one the store makes (see store/pg). The bbolt store ignores it.
	SQL *SQLMapping `json:"sql,omitempty"`
}

// SQLMapping maps a table onto an existing SQL table: Table is "schema.table", and Columns
// names the column of each field whose column is not named as the field (field → column).
type SQLMapping struct {
	Table   string            `json:"table"`
	Columns map[string]string `json:"columns,omitempty"`
}

// Column is the SQL column that holds field: the mapped one, else the field's name.
func (m *SQLMapping) Column(field string) string {
	if m != nil {
		if c, ok := m.Columns[field]; ok {
			return c
		}
	}
	return field
}

// WritesHelpers is the Schema.Writes of a table only the domain's helpers may write.
const WritesHelpers = "helpers"

// DefaultKeyMax is the highest key number of a table with a KeyPrefix that declares no KeyMax:
// nine digits, far below int64's limit, so incrementing the highest key never overflows.
const DefaultKeyMax = 999_999_999

// MaxKeyNum returns the highest number a key of the form KeyPrefix+digits may carry.
func (s *Schema) MaxKeyNum() int64 {
	if s.KeyMax > 0 {
		return s.KeyMax
	}
	return DefaultKeyMax
}

// Field types a schema can declare.
const (
	TypeString    = "string"
	TypeInt       = "int"
	TypeFloat     = "float" // accepts ints too; they are stored as float64
	TypeBool      = "bool"
	TypeTimestamp = "timestamp" // an ISO-8601 string such as 2025-01-01T09:00:00
	// TypeList is a list of values ([]any in Go, a list in a plan). Items, when declared,
	// describes every element; without it an element may be any value a row holds.
	TypeList = "list"
	// TypeObject is a map from text keys to values (map[string]any in Go, a dict in a plan).
	// Fields declares its known keys; other keys are refused unless Additional is set.
	TypeObject = "object"
	// TypeMap is a map from text keys chosen by the data (ids) to values of one declared type
	// (map[string]any in Go, a dict in a plan): Values describes every value, at any depth,
	// and Keys may constrain the keys. A payment method by its id: {"gc_1": {"balance": 57.0}}.
	TypeMap = "map"
)

// Bounds of nested (list and object) values, so that no row a plan writes can make later
// commands slow: every read, filter, diff and codec walks a value whole.
const (
	// MaxNesting is the most levels of lists and objects one field value may have, counting the
	// field's own: a list of objects holding lists is 3. Schemas may not declare deeper ones.
	MaxNesting = 8
	// DefaultMaxBytes is the largest encoded size, in bytes, of a list or object field's value
	// when its schema declares no max_bytes: about its JSON size, escapes not counted.
	DefaultMaxBytes = 64 << 10
	// MaxValueBytes is the largest max_bytes a schema may declare (1 MiB).
	MaxValueBytes = 1 << 20
)

// Field declares one field of a table.
type Field struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Required bool     `json:"required,omitempty"`
	Doc      string   `json:"doc,omitempty"`
	Min      *float64 `json:"min,omitempty"`       // inclusive lower bound for numbers
	Max      *float64 `json:"max,omitempty"`       // inclusive upper bound for numbers
	MinLen   int      `json:"min_len,omitempty"`   // for strings: at least this many characters
	MaxLen   int      `json:"max_len,omitempty"`   // for strings: at most this many characters (0: DefaultMaxLen)
	Enum     []string `json:"enum,omitempty"`      // for strings: one of these values
	Pattern  string   `json:"pattern,omitempty"`   // for strings: RE2 the whole value must match
	ReadOnly bool     `json:"read_only,omitempty"` // may be set on insert, never changed by update

	// Items describes each element of a list field (its Name is unused); nil accepts any value.
	Items *Field `json:"items,omitempty"`
	// Fields declares the known keys of an object field, each a Field of its own (any type,
	// nested up to MaxNesting). A declared key that is required must be present and not None.
	Fields []Field `json:"fields,omitempty"`
	// Additional lets an object field hold keys beyond Fields, with any value. The default
	// (false) refuses them with a did-you-mean, as an unknown table field is refused.
	Additional bool `json:"additional,omitempty"`
	// Values describes every value of a map field (its Name is unused; it may be a list, an
	// object or a map itself). A map field must declare it.
	Values *Field `json:"values,omitempty"`
	// Keys constrains the keys of a map field; nil: any text of at most DefaultMaxLen characters.
	Keys *KeyRule `json:"keys,omitempty"`
	// MaxBytes bounds the encoded size of a list or object field's whole value, in bytes (0:
	// DefaultMaxBytes; at most MaxValueBytes). Only a table's own fields declare it.
	MaxBytes int `json:"max_bytes,omitempty"`
}

// KeyRule constrains the keys of a map field.
type KeyRule struct {
	// Pattern is an RE2 expression every key must match whole ("gc_[0-9]+"); empty: any key.
	Pattern string `json:"pattern,omitempty"`
	// MaxLen is the most characters a key may have (0: DefaultMaxLen).
	MaxLen int `json:"max_len,omitempty"`
}

// Nested reports whether the field holds lists, objects or maps.
func (f *Field) Nested() bool { return f.Type == TypeList || f.Type == TypeObject || f.Type == TypeMap }

// ValueBytes returns the most bytes a list, object or map value of f may encode to.
func (f *Field) ValueBytes() int {
	if f.MaxBytes > 0 {
		return f.MaxBytes
	}
	return DefaultMaxBytes
}

// KeyNames lists the declared keys of an object field in declaration order.
func (f *Field) KeyNames() []string { return fieldNames(f.Fields) }

// Field returns the declared key of an object field, or nil.
func (f *Field) Field(name string) *Field { return fieldNamed(f.Fields, name) }

// DefaultMaxLen is the most characters a string field holds when its schema declares no
// max_len: every stored string is bounded, so no row a plan writes can make later commands slow.
// A domain that needs longer text declares a larger max_len.
const DefaultMaxLen = 1000

// MaxChars returns the most characters a string value of f may have.
func (f *Field) MaxChars() int {
	if f.MaxLen > 0 {
		return f.MaxLen
	}
	return DefaultMaxLen
}

// Field returns the named field, or nil.
func (s *Schema) Field(name string) *Field { return fieldNamed(s.Fields, name) }

// fieldNamed is the field of fs with that name, or nil: a table's fields and an object's keys
// are looked up alike.
func fieldNamed(fs []Field, name string) *Field {
	for i := range fs {
		if fs[i].Name == name {
			return &fs[i]
		}
	}
	return nil
}

// fieldNames lists the names of fs in declaration order.
func fieldNames(fs []Field) []string {
	names := make([]string, len(fs))
	for i := range fs {
		names[i] = fs[i].Name
	}
	return names
}

// FieldNames lists the declared fields in declaration order.
func (s *Schema) FieldNames() []string { return fieldNames(s.Fields) }

// FieldError is a write that breaks the schema. Its message names the table, the field, the
// value and the rule, so a plan's author knows what to change.
type FieldError struct {
	Table string
	Key   any    // the row's key, when known
	Field string // the field; empty for a row-level problem such as a duplicate key
	Value any
	Rule  string // the rule broken, in words: "must be an int >= 0"
}

func (e *FieldError) Error() string {
	where := e.Table
	if e.Key != nil {
		where = fmt.Sprintf("%s row %v", e.Table, e.Key)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", where, e.Rule)
	}
	return fmt.Sprintf("%s: field %q = %s %s", where, e.Field, FormatValue(e.Value), e.Rule)
}

// QueryError is a malformed where-filter: an unknown field or operator, or an operand of the
// wrong kind. Suggestion holds a did-you-mean when one is close enough.
type QueryError struct {
	Table      string
	Message    string
	Suggestion string
}

func (e *QueryError) Error() string {
	if e.Suggestion != "" {
		return fmt.Sprintf("%s: %s (did you mean %q?)", e.Table, e.Message, e.Suggestion)
	}
	return fmt.Sprintf("%s: %s", e.Table, e.Message)
}

// MaxFormatted is about the most characters FormatValue renders of one value: messages quote
// values, and a value a plan controls must not make a message (and the result and audit record
// that carry it) as large as itself.
const MaxFormatted = 200

// FormatValue renders a field value for messages: strings quoted, lists and dicts as a plan
// writes them (["a", 1], {"city": "Oslo"}, keys sorted), others as Go prints them; a longer
// rendering is cut at about MaxFormatted characters and says how long the value was (a list or
// dict: that it was cut).
func FormatValue(v any) string { return FormatValueAs(v, pythonScalar) }

// FormatValueAs is FormatValue with the scalars other than strings (None, bools, numbers) spelled
// by scalar, at every depth: the same quoting of strings and keys, nesting and cut. (An import's
// errors spell them as JSON does, where the values came from.)
func FormatValueAs(v any, scalar func(any) string) string {
	switch v := v.(type) {
	case []any, map[string]any:
		var sb strings.Builder
		formatNested(&sb, v, scalar)
		if sb.Len() <= MaxFormatted {
			return sb.String()
		}
		return clipRunes(sb.String(), MaxFormatted) + "… (cut)"
	case string:
		if len(v) <= MaxFormatted {
			return fmt.Sprintf("%q", v)
		}
		return fmt.Sprintf("%q… (%d bytes)", clipRunes(v, MaxFormatted), len(v))
	default:
		s := scalar(v)
		if len(s) <= MaxFormatted {
			return s
		}
		return fmt.Sprintf("%s… (%d characters)", clipRunes(s, MaxFormatted), len(s))
	}
}

// pythonScalar spells a scalar as a plan (Python) writes it.
func pythonScalar(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	}
	return fmt.Sprint(v)
}

// formatNested writes v for FormatValueAs, stopping soon after MaxFormatted bytes.
func formatNested(sb *strings.Builder, v any, scalar func(any) string) {
	if sb.Len() > MaxFormatted {
		return
	}
	switch x := v.(type) {
	case []any:
		sb.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				sb.WriteString(", ")
			}
			if sb.Len() > MaxFormatted {
				return
			}
			formatNested(sb, e, scalar)
		}
		sb.WriteByte(']')
	case map[string]any:
		sb.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				sb.WriteString(", ")
			}
			if sb.Len() > MaxFormatted {
				return
			}
			fmt.Fprintf(sb, "%q: ", clipRunes(k, MaxFormatted))
			formatNested(sb, x[k], scalar)
		}
		sb.WriteByte('}')
	case string:
		fmt.Fprintf(sb, "%q", clipRunes(x, MaxFormatted))
	default:
		sb.WriteString(FormatValueAs(x, scalar))
	}
}

// clipRunes returns the first n runes of s at most, never cutting a UTF-8 sequence.
func clipRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// ChangeSet is what a run would change, per table name. Its size grows with the number of changed
// rows, never with the size of a table. A table with no changes has no entry.
type ChangeSet map[string]*TableChanges

// TableChanges lists one table's changes, each list in key order.
type TableChanges struct {
	Key      string   `json:"key"` // the table's key field
	Inserted []Row    `json:"inserted"`
	Updated  []Update `json:"updated"`
	Deleted  []Row    `json:"deleted"`
	// Via names, by row key (as fmt.Sprint renders it), the domain helper through which a row was
	// written: the public function of helpers.star the plan called. A row the plan wrote itself
	// has no entry; absent when no helper wrote the table.
	Via map[string]string `json:"via,omitempty"`
}

// RowVia returns the helper through which the row with key was written, or "".
func (t *TableChanges) RowVia(key any) string {
	if t == nil || t.Via == nil {
		return ""
	}
	return t.Via[fmt.Sprint(key)]
}

// Attribute sets each table's Via from via (table → row key → helper), keeping only the rows the
// change set holds: a row a helper wrote and the plan then put back is no change.
func (c ChangeSet) Attribute(via map[string]map[string]string) {
	for name, rows := range via {
		t := c[name]
		if t == nil {
			continue
		}
		keep := func(key any) {
			if h, ok := rows[fmt.Sprint(key)]; ok {
				if t.Via == nil {
					t.Via = map[string]string{}
				}
				t.Via[fmt.Sprint(key)] = h
			}
		}
		for _, r := range t.Inserted {
			keep(r[t.Key])
		}
		for _, u := range t.Updated {
			keep(u.Key)
		}
		for _, r := range t.Deleted {
			keep(r[t.Key])
		}
	}
}

// Update is one changed row: its state before and after the run, and the fields that differ.
type Update struct {
	Key    any      `json:"key"`
	Before Row      `json:"before"`
	After  Row      `json:"after"`
	Fields []string `json:"fields"` // changed fields, sorted
	// Paths, when a list or dict changed, are the changed fields with each nested one replaced
	// by the paths inside it that changed ("address.city", "lines[1].qty"); see UpdatePaths.
	// Absent otherwise, so other updates keep the shape they always had.
	Paths []string `json:"paths,omitempty"`
}

// Empty reports whether the change set changes nothing.
func (c ChangeSet) Empty() bool {
	for _, t := range c {
		if len(t.Inserted)+len(t.Updated)+len(t.Deleted) > 0 {
			return false
		}
	}
	return true
}

// Tables lists the names of the tables with changes, sorted.
func (c ChangeSet) Tables() []string {
	names := make([]string, 0, len(c))
	for name, t := range c {
		if len(t.Inserted)+len(t.Updated)+len(t.Deleted) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// Rows counts the changed rows over all tables.
func (c ChangeSet) Rows() int {
	n := 0
	for _, t := range c {
		n += len(t.Inserted) + len(t.Updated) + len(t.Deleted)
	}
	return n
}
