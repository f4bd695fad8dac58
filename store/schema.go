package store

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/starplan/starplan/table"
)

// Schema is a table.Schema checked and compiled once: fields by name, patterns compiled.
type Schema struct {
	*table.Schema
	FieldsByName map[string]*Field
	KeyField     *Field
	Indexed      map[string]bool // the key and the declared indexes (Schema.Indexes)
}

type Field struct {
	*table.Field
	re   *regexp.Regexp
	enum map[string]bool
	// items (lists) and keys (objects) are the compiled schemas of a nested field's parts;
	// values (maps) that of every value of a map, keyRE its key pattern.
	items  *Field
	keys   map[string]*Field
	values *Field
	keyRE  *regexp.Regexp
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// ValidName reports whether name may name a domain, a table or a field: a letter followed by
// letters, digits or _ (names starting with "_" are starplan's own).
func ValidName(name string) bool { return nameRE.MatchString(name) }

// CompileSchema checks that s is a usable schema and compiles it. Table and field names start
// with a letter (names starting with "_" are reserved for starplan's own fields and collections);
// the key field is declared, required and a string or an int.
func CompileSchema(s *table.Schema) (*Schema, error) {
	if !nameRE.MatchString(s.Name) {
		return nil, fmt.Errorf("table name %q: must be a letter followed by letters, digits or _", s.Name)
	}
	c := &Schema{Schema: s, FieldsByName: make(map[string]*Field, len(s.Fields))}
	for i := range s.Fields {
		f := &s.Fields[i]
		if !nameRE.MatchString(f.Name) {
			return nil, fmt.Errorf("table %s: field name %q: must be a letter followed by letters, digits or _", s.Name, f.Name)
		}
		if c.FieldsByName[f.Name] != nil {
			return nil, fmt.Errorf("table %s: field %q is declared twice", s.Name, f.Name)
		}
		if f.MaxBytes != 0 && !f.Nested() {
			return nil, fmt.Errorf("table %s: field %q: max_bytes applies to list, object and map fields", s.Name, f.Name)
		}
		if f.MaxBytes < 0 || f.MaxBytes > table.MaxValueBytes {
			return nil, fmt.Errorf("table %s: field %q: max_bytes must be between 0 (the default, %d) and %d", s.Name, f.Name, table.DefaultMaxBytes, table.MaxValueBytes)
		}
		cf, err := compileField(f, f.Name, 1)
		if err != nil {
			return nil, fmt.Errorf("table %s: field %s", s.Name, err)
		}
		c.FieldsByName[f.Name] = cf
	}
	c.KeyField = c.FieldsByName[s.Key]
	switch {
	case c.KeyField == nil:
		return nil, fmt.Errorf("table %s: key field %q is not declared", s.Name, s.Key)
	case c.KeyField.Type != table.TypeString && c.KeyField.Type != table.TypeInt:
		return nil, fmt.Errorf("table %s: key field %q must be a string or an int, not %s", s.Name, s.Key, c.KeyField.Type)
	case s.KeyPrefix != "" && c.KeyField.Type != table.TypeString:
		return nil, fmt.Errorf("table %s: key_prefix needs a string key field", s.Name)
	case s.KeyDigits < 0:
		return nil, fmt.Errorf("table %s: key_digits must be >= 0", s.Name)
	case s.KeyMax < 0 || (s.KeyMax > 0 && s.KeyPrefix == ""):
		return nil, fmt.Errorf("table %s: key_max must be > 0 and needs a key_prefix", s.Name)
	case s.KeyMax >= math.MaxInt64/2:
		return nil, fmt.Errorf("table %s: key_max %d leaves no room to increment; use at most %d", s.Name, s.KeyMax, int64(math.MaxInt64/2-1))
	}
	c.KeyField.Required = true
	c.Indexed = map[string]bool{s.Key: true}
	for _, name := range s.Indexes {
		f := c.FieldsByName[name]
		switch {
		case f == nil:
			return nil, fmt.Errorf("table %s: index on %q: no such field%s", s.Name, name, DidYouMean(name, s.FieldNames()))
		case name == s.Key:
			return nil, fmt.Errorf("table %s: index on %q: the key is always indexed", s.Name, name)
		case c.Indexed[name]:
			return nil, fmt.Errorf("table %s: index on %q is declared twice", s.Name, name)
		case f.Nested():
			return nil, fmt.Errorf("table %s: index on %q: a %s field cannot be indexed (an index holds whole scalar values)", s.Name, name, f.Type)
		}
		c.Indexed[name] = true
	}
	if err := checkSQLMapping(s); err != nil {
		return nil, err
	}
	return c, nil
}

// checkSQLMapping checks a table's "sql" property as far as it can be without a database: the
// table's name is schema.table, each mapped field is declared, no two fields share a column,
// and none maps onto the columns the PostgreSQL store adds (_version, _ord). Whether the
// columns exist, with which types, is for the store to check against its catalog.
func checkSQLMapping(s *table.Schema) error {
	m := s.SQL
	if m == nil {
		return nil
	}
	schema, name, ok := strings.Cut(m.Table, ".")
	if !ok || !sqlIdentOK(schema) || !sqlIdentOK(name) {
		return fmt.Errorf("table %s: sql.table %q: must be schema.table (for example public.orders), each part 1 to 63 bytes without a dot, a quote or a NUL", s.Name, m.Table)
	}
	taken := map[string]string{}
	for _, f := range s.Fields {
		col := m.Column(f.Name)
		if !sqlIdentOK(col) {
			return fmt.Errorf("table %s: sql.columns.%s: column %q must be 1 to 63 bytes without a dot, a quote or a NUL", s.Name, f.Name, col)
		}
		if col == "_version" || col == "_ord" {
			return fmt.Errorf("table %s: field %s: column %s is the name of a column the PostgreSQL store adds to a mapped table; map the field onto another column", s.Name, f.Name, col)
		}
		if other, dup := taken[col]; dup {
			return fmt.Errorf("table %s: fields %s and %s both map onto column %s; give each its own column (sql.columns)", s.Name, other, f.Name, col)
		}
		taken[col] = f.Name
	}
	for _, field := range slices.Sorted(maps.Keys(m.Columns)) {
		if s.Field(field) == nil {
			return fmt.Errorf("table %s: sql.columns: no field %q%s", s.Name, field, DidYouMean(field, s.FieldNames()))
		}
	}
	return nil
}

func sqlIdentOK(s string) bool {
	return s != "" && len(s) <= 63 && !strings.ContainsAny(s, ".\"\x00")
}

// compileField checks and compiles one field declaration at the given nesting level (a table's
// field is level 1). Its errors start with the field's path: `"address.city": ...`.
func compileField(f *table.Field, path string, level int) (*Field, error) {
	errorf := func(format string, args ...any) error {
		return fmt.Errorf("%q: "+format, append([]any{path}, args...)...)
	}
	switch f.Type {
	case table.TypeString, table.TypeInt, table.TypeFloat, table.TypeBool, table.TypeTimestamp, table.TypeList, table.TypeObject, table.TypeMap:
	default:
		return nil, errorf("unknown type %q (want string, int, float, bool, timestamp, list, object or map)", f.Type)
	}
	if f.Nested() && level > table.MaxNesting {
		return nil, errorf("lists, objects and maps nest more than %d deep", table.MaxNesting)
	}
	if (f.Values != nil || f.Keys != nil) && f.Type != table.TypeMap {
		return nil, errorf("values and keys apply to map fields")
	}
	if f.Type == table.TypeMap && f.Values == nil {
		return nil, errorf(`a map declares the type of its values, such as "values": {"type": "float"}`)
	}
	if f.Items != nil && f.Type != table.TypeList {
		return nil, errorf("items applies to list fields")
	}
	if (len(f.Fields) > 0 || f.Additional) && f.Type != table.TypeObject {
		return nil, errorf("fields and additional apply to object fields")
	}
	if f.MaxLen < 0 {
		return nil, errorf("max_len must be >= 0 (0: the default, %d characters)", table.DefaultMaxLen)
	}
	cf := &Field{Field: f}
	if f.Pattern != "" {
		re, err := regexp.Compile(`^(?:` + f.Pattern + `)$`)
		if err != nil {
			return nil, errorf("pattern: %v", err)
		}
		cf.re = re
	}
	if len(f.Enum) > 0 {
		cf.enum = make(map[string]bool, len(f.Enum))
		for _, e := range f.Enum {
			cf.enum[e] = true
		}
	}
	if f.Items != nil {
		if f.Items.MaxBytes != 0 || f.Items.ReadOnly {
			return nil, errorf("items: max_bytes and read_only apply to a table's own fields")
		}
		items, err := compileField(f.Items, path+"[]", level+1)
		if err != nil {
			return nil, err
		}
		cf.items = items
	}
	if f.Type == table.TypeMap {
		if f.Values.MaxBytes != 0 || f.Values.ReadOnly || f.Values.Name != "" {
			return nil, errorf("values: name, max_bytes and read_only apply to a table's own fields")
		}
		values, err := compileField(f.Values, path+"[]", level+1)
		if err != nil {
			return nil, err
		}
		cf.values = values
		if k := f.Keys; k != nil {
			if k.MaxLen < 0 {
				return nil, errorf("keys: max_len must be >= 0 (0: the default, %d characters)", table.DefaultMaxLen)
			}
			if k.Pattern != "" {
				re, err := regexp.Compile(`^(?:` + k.Pattern + `)$`)
				if err != nil {
					return nil, errorf("keys: pattern: %v", err)
				}
				cf.keyRE = re
			}
		}
	}
	if f.Type == table.TypeObject {
		cf.keys = make(map[string]*Field, len(f.Fields))
		for i := range f.Fields {
			sub := &f.Fields[i]
			if !nameRE.MatchString(sub.Name) {
				return nil, errorf("key name %q: must be a letter followed by letters, digits or _", sub.Name)
			}
			if cf.keys[sub.Name] != nil {
				return nil, errorf("key %q is declared twice", sub.Name)
			}
			if sub.MaxBytes != 0 || sub.ReadOnly {
				return nil, errorf("key %q: max_bytes and read_only apply to a table's own fields", sub.Name)
			}
			k, err := compileField(sub, path+"."+sub.Name, level+1)
			if err != nil {
				return nil, err
			}
			cf.keys[sub.Name] = k
		}
	}
	return cf, nil
}

// ValidateRow checks row against the schema and returns it with every value converted to its
// field's stored kind (a copy: row is not changed), or the first rule it breaks.
func (s *Schema) ValidateRow(row table.Row) (table.Row, error) { return s.validateInto(row, false) }

// ValidateOwned is ValidateRow for a row no one else holds (an import's record): its map becomes
// the validated row, instead of a copy (an import validates millions). On an error the row may
// be part converted.
func (s *Schema) ValidateOwned(row table.Row) (table.Row, error) { return s.validateInto(row, true) }

func (s *Schema) validateInto(in table.Row, owned bool) (table.Row, error) {
	out := in
	if !owned {
		out = make(table.Row, len(s.Fields))
	}
	key := keyOf(s, in) // the key as given, before any conversion, for the errors
	set := 0            // the fields given a value
	for name, v := range in {
		f := s.FieldsByName[name]
		if f == nil {
			return nil, s.UnknownField(key, name, v)
		}
		rule := ""
		if f == s.KeyField {
			rule = s.keyRule(v) // before the pattern: it says why such a key cannot be
		}
		if rule != "" {
			return nil, &table.FieldError{Table: s.Name, Key: key, Field: name, Value: v, Rule: rule}
		}
		nv, err := s.CheckField(f, key, v)
		if err != nil {
			return nil, err
		}
		if str, ok := nv.(string); ok && f == s.KeyField && len(str) > MaxKeyBytes { // after max_len: its rule says more
			return nil, &table.FieldError{Table: s.Name, Key: key, Field: name, Value: v,
				Rule: fmt.Sprintf("is a key of %d bytes; a key may have at most %d", len(str), MaxKeyBytes)}
		}
		// Keyed by the schema's own string: every row shares one copy of each field name,
		// instead of one per row as a decoder made it, and a lookup compares the pointers.
		out[f.Name] = nv
		if nv != nil {
			set++
		}
	}
	if set == len(s.Fields) { // every field has its value (the names are the schema's, each once)
		return out, nil
	}
	for i := range s.Fields {
		f := &s.Fields[i]
		if out[f.Name] != nil {
			continue
		}
		if f.Required || f.Name == s.Key {
			return nil, &table.FieldError{Table: s.Name, Key: key, Field: f.Name, Value: nil, Rule: "is required"}
		}
		out[f.Name] = nil
	}
	return out, nil
}

// MaxKeyBytes bounds a text key: the file's key index holds each key encoded (at most about
// three times as long, see keyenc.go), and bbolt refuses keys past 32 KiB.
const MaxKeyBytes = 4096

// keyRule returns the rule a key value breaks, if any: a key of the generated form (KeyPrefix
// and digits) must carry a number up to the table's MaxKeyNum, or the next key could not be made.
func (s *Schema) keyRule(k any) string {
	str, ok := k.(string)
	if !ok || s.KeyPrefix == "" || !strings.HasPrefix(str, s.KeyPrefix) {
		return ""
	}
	digits := str[len(s.KeyPrefix):]
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return ""
	}
	if n, err := strconv.ParseInt(digits, 10, 64); err != nil || n > s.MaxKeyNum() {
		return fmt.Sprintf("must carry a number of at most %d (key_max): a larger one leaves no next %s key", s.MaxKeyNum(), s.Name)
	}
	return ""
}

func keyOf(s *Schema, row table.Row) any {
	k := row[s.Key]
	switch k.(type) {
	case string, int64, int:
		return k
	}
	return nil
}

// UnknownField is the error for a field name the table does not declare, with the nearest.
func (s *Schema) UnknownField(key any, name string, v any) error {
	rule := fmt.Sprintf("is not a field of %s", s.Name)
	if near := nearest(name, s.FieldNames()); near != "" {
		rule += fmt.Sprintf(" (did you mean %q?)", near)
	} else {
		rule += " (its fields are " + strings.Join(s.FieldNames(), ", ") + ")"
	}
	return &table.FieldError{Table: s.Name, Key: key, Field: name, Value: v, Rule: rule}
}

// CheckField converts v to the stored kind of the table's field f, or returns a
// *table.FieldError naming the rule it breaks; in a list or object value the error's Field is
// the path of the offending part ("address.city", "lines[2].qty") and its Value that part.
func (s *Schema) CheckField(f *Field, key, v any) (any, error) {
	if !f.Nested() || v == nil {
		nv, rule := f.Check(v)
		if rule != "" {
			return nil, &table.FieldError{Table: s.Name, Key: key, Field: f.Name, Value: v, Rule: rule}
		}
		return nv, nil
	}
	w := nestedCheck{budget: f.ValueBytes(), value: v}
	nv := w.walk(f, f.Name, v, 1)
	if w.rule != "" {
		return nil, &table.FieldError{Table: s.Name, Key: key, Field: w.path, Value: w.bad, Rule: w.rule}
	}
	return nv, nil
}

// nestedCheck validates a list or object value against its schema, copying it with every
// number in its stored kind. It stops at the first problem, which it keeps with its path.
type nestedCheck struct {
	budget int // bytes the value may still encode to
	value  any // the whole value, for a rule about all of it
	path   string
	bad    any
	rule   string
}

func (w *nestedCheck) fail(path string, v any, rule string) any {
	if w.rule == "" {
		w.path, w.bad, w.rule = path, v, rule
	}
	return nil
}

// spend charges n bytes of the encoded value; false when it is too large.
func (w *nestedCheck) spend(n int, f *Field) bool {
	if w.budget -= n; w.budget < 0 {
		w.fail(f.Name, w.value, fmt.Sprintf("must encode to at most %d bytes (max_bytes)", f.ValueBytes()))
		return false
	}
	return true
}

// walk checks the value v of the table's field f, which is at nesting level 1. It returns the
// stored form; after a failure the result is meaningless.
func (w *nestedCheck) walk(f *Field, path string, v any, level int) any {
	return w.walkIn(f, f, path, v, level)
}

// walkIn checks v at path against f (nil: no declared type) at a nesting level, within root's
// byte budget.
func (w *nestedCheck) walkIn(root, f *Field, path string, v any, level int) any {
	if w.rule != "" {
		return nil
	}
	switch {
	case f == nil:
		return w.untyped(root, path, v, level)
	case v == nil:
		if f.Required {
			return w.fail(path, v, "is required")
		}
		w.spend(4, root)
		return nil
	case f.Type == table.TypeList:
		l, ok := v.([]any)
		if !ok {
			return w.fail(path, v, "must be a list")
		}
		if level > table.MaxNesting {
			return w.fail(path, v, fmt.Sprintf("nests lists and objects more than %d deep", table.MaxNesting))
		}
		if !w.spend(2+len(l), root) {
			return nil
		}
		out := make([]any, len(l))
		for i, e := range l {
			out[i] = w.walkIn(root, f.items, path+table.PathIndex(i), e, level+1)
			if w.rule != "" {
				return nil
			}
		}
		return out
	case f.Type == table.TypeObject:
		m, ok := v.(map[string]any)
		if !ok {
			return w.fail(path, v, "must be a dict")
		}
		if level > table.MaxNesting {
			return w.fail(path, v, fmt.Sprintf("nests lists and objects more than %d deep", table.MaxNesting))
		}
		if !w.spend(2+len(m), root) {
			return nil
		}
		out := make(map[string]any, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			sub := f.keys[k]
			if sub == nil && !f.Additional {
				names := f.KeyNames()
				rule := "is not among the keys of " + f.Name // no "key ": the sandbox would hint at row.get
				if near := nearest(k, names); near != "" {
					rule += fmt.Sprintf(" (did you mean %q?)", near)
				} else if len(names) > 0 {
					rule += " (they are " + strings.Join(names, ", ") + ")"
				}
				return w.fail(path+table.PathKey(k), m[k], rule)
			}
			if !utf8.ValidString(k) {
				return w.fail(path, v, "must have keys that are valid UTF-8 text")
			}
			if !w.spend(len(k)+3, root) {
				return nil
			}
			out[k] = w.walkIn(root, sub, path+table.PathKey(k), m[k], level+1)
			if w.rule != "" {
				return nil
			}
		}
		for i := range f.Fields {
			if sub := &f.Fields[i]; sub.Required && out[sub.Name] == nil {
				return w.fail(path+table.PathKey(sub.Name), nil, "is required")
			}
		}
		return out
	case f.Type == table.TypeMap:
		m, ok := v.(map[string]any)
		if !ok {
			return w.fail(path, v, "must be a dict (a map from keys to values)")
		}
		if level > table.MaxNesting {
			return w.fail(path, v, fmt.Sprintf("nests lists, objects and maps more than %d deep", table.MaxNesting))
		}
		if !w.spend(2+len(m), root) {
			return nil
		}
		out := make(map[string]any, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if rule := f.keyRule(k); rule != "" {
				return w.fail(path+table.PathKey(k), k, rule)
			}
			if !w.spend(len(k)+3, root) {
				return nil
			}
			out[k] = w.walkIn(root, f.values, path+table.PathKey(k), m[k], level+1)
			if w.rule != "" {
				return nil
			}
		}
		return out
	}
	nv, rule := f.Check(v)
	if rule != "" {
		return w.fail(path, v, rule)
	}
	if s, ok := nv.(string); ok {
		w.spend(len(s)+2, root)
	} else {
		w.spend(8, root)
	}
	return nv
}

// keyRule returns the rule a key of the map field f breaks, if any. (Its words avoid "key "
// followed by a space: the sandbox reads that as a missing dict key and hints at row.get.)
func (f *Field) keyRule(k string) string {
	maxLen := table.DefaultMaxLen
	if f.Keys != nil && f.Keys.MaxLen > 0 {
		maxLen = f.Keys.MaxLen
	}
	switch {
	case !utf8.ValidString(k):
		return "cannot be a key: it is not valid UTF-8 text (a character was cut in two, perhaps by slicing)"
	case len(k) > utf8.UTFMax*maxLen || utf8.RuneCountInString(k) > maxLen:
		return fmt.Sprintf("cannot be a key: keys here have at most %d characters (keys.max_len)", maxLen)
	case f.keyRE != nil && !f.keyRE.MatchString(k):
		return fmt.Sprintf("cannot be a key: keys here must match the pattern %s (keys.pattern)", f.Keys.Pattern)
	}
	return ""
}

// untyped checks a value where the schema declares no type (the elements of a list without
// items, the additional keys of an object): any value a row holds, nested within the bounds.
// A whole float becomes an int, as JSON (records, exports) would read it back.
func (w *nestedCheck) untyped(root *Field, path string, v any, level int) any {
	switch x := v.(type) {
	case nil:
		w.spend(4, root)
		return nil
	case bool:
		w.spend(5, root)
		return x
	case string:
		if !utf8.ValidString(x) {
			return w.fail(path, v, "must be valid UTF-8 text (a character was cut in two, perhaps by slicing)")
		}
		w.spend(len(x)+2, root)
		return x
	case float64, float32:
		fl := toFloat(x)
		if math.IsNaN(fl) || math.IsInf(fl, 0) {
			return w.fail(path, v, "must be a finite number")
		}
		w.spend(8, root)
		if fl == math.Trunc(fl) && math.Abs(fl) < 1<<63 {
			return int64(fl)
		}
		return fl
	case []any, map[string]any:
		typ := table.TypeList
		if _, ok := x.(map[string]any); ok {
			typ = table.TypeObject
		}
		open := &Field{Field: &table.Field{Name: root.Name, Type: typ, Additional: true}}
		return w.walkIn(root, open, path, v, level)
	}
	if i, ok := ToInt(v); ok {
		w.spend(8, root)
		return i
	}
	return w.fail(path, v, fmt.Sprintf("must be None, a bool, a number, a string, a list or a dict, not a Go %T", v))
}

// Check converts a scalar v to the field's stored kind, or returns the rule it breaks.
func (f *Field) Check(v any) (any, string) {
	if v == nil {
		if f.Required {
			return nil, "is required"
		}
		return nil, ""
	}
	switch f.Type {
	case table.TypeString, table.TypeTimestamp:
		s, ok := v.(string)
		if !ok {
			if f.Type == table.TypeTimestamp {
				return nil, "must be an ISO-8601 timestamp string such as 2025-01-01T09:00:00"
			}
			return nil, "must be a string"
		}
		// The length first: every later check is linear in it. A string of more than 4 bytes a
		// character allowed is too long without counting.
		maxLen := f.MaxChars()
		if len(s) > utf8.UTFMax*maxLen || utf8.RuneCountInString(s) > maxLen {
			return nil, fmt.Sprintf("must have at most %d characters (max_len)", maxLen)
		}
		if !utf8.ValidString(s) {
			// Starlark slices strings by byte; a cut character would be stored as U+FFFD (JSON
			// has no other way), so what a reviewer saw is not what would be written.
			return nil, "must be valid UTF-8 text (a character was cut in two, perhaps by slicing)"
		}
		if f.Type == table.TypeTimestamp {
			if !isTimestamp(s) {
				return nil, "must be an ISO-8601 timestamp such as 2025-01-01T09:00:00"
			}
		}
		if f.MinLen > 0 && utf8.RuneCountInString(s) < f.MinLen {
			if f.MinLen == 1 {
				return nil, "must not be empty"
			}
			return nil, fmt.Sprintf("must have at least %d characters", f.MinLen)
		}
		if f.enum != nil && !f.enum[s] {
			return nil, "must be one of " + strings.Join(quoteAll(f.Enum), ", ")
		}
		if f.re != nil && !f.re.MatchString(s) {
			return nil, fmt.Sprintf("must match the pattern %s", f.Pattern)
		}
		return v, "" // v, not s: boxing s again would allocate (an import checks millions)
	case table.TypeBool:
		b, ok := v.(bool)
		if !ok {
			return nil, "must be True or False"
		}
		return b, ""
	case table.TypeInt:
		var n int64
		switch x := v.(type) {
		case bool:
			return nil, f.numRule("must be an int")
		case float64, float32:
			fl := toFloat(x)
			if fl != math.Trunc(fl) || math.IsInf(fl, 0) || math.Abs(fl) >= 1<<63 {
				return nil, f.numRule("must be an int (a whole number)")
			}
			n = int64(fl)
		default:
			i, ok := ToInt(v)
			if !ok {
				return nil, f.numRule("must be an int")
			}
			n = i
		}
		if (f.Min != nil && cmpIntFloat(n, *f.Min) < 0) || (f.Max != nil && cmpIntFloat(n, *f.Max) > 0) {
			return nil, f.numRule("must be an int")
		}
		if _, same := v.(int64); same {
			return v, ""
		}
		return n, ""
	case table.TypeFloat:
		var fl float64
		switch x := v.(type) {
		case float64, float32:
			fl = toFloat(x)
		case bool:
			return nil, f.numRule("must be a number")
		default:
			i, ok := ToInt(v)
			if !ok {
				return nil, f.numRule("must be a number")
			}
			fl = float64(i)
		}
		if math.IsNaN(fl) || math.IsInf(fl, 0) {
			return nil, "must be a finite number"
		}
		if rule := f.bounds(fl, "a number"); rule != "" {
			return nil, rule
		}
		if _, same := v.(float64); same {
			return v, ""
		}
		return fl, ""
	}
	return nil, "has an unknown type " + f.Type
}

// numRule adds the field's bounds to a type rule: "must be an int >= 0".
func (f *Field) numRule(rule string) string {
	if f.Min != nil {
		rule += " >= " + fmtNum(*f.Min)
		if f.Max != nil {
			rule += " and <= " + fmtNum(*f.Max)
		}
	} else if f.Max != nil {
		rule += " <= " + fmtNum(*f.Max)
	}
	return rule
}

func (f *Field) bounds(x float64, kind string) string {
	if (f.Min != nil && x < *f.Min) || (f.Max != nil && x > *f.Max) {
		return f.numRule("must be " + kind)
	}
	return ""
}

func fmtNum(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// cmpIntFloat compares n with x exactly (float64(n) rounds beyond 2^53).
func cmpIntFloat(n int64, x float64) int {
	if n > -1<<53 && n < 1<<53 {
		return cmp.Compare(float64(n), x)
	}
	return new(big.Float).SetInt64(n).Cmp(big.NewFloat(x))
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case float32:
		return float64(x)
	}
	return math.NaN()
}

// ToInt converts Go's integer kinds to int64.
func ToInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	case uint:
		if uint64(x) <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

var timestampLayouts = []string{
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05",
	"2006-01-02",
}

// isTimestamp accepts the ISO-8601 forms plans and imports produce: a date, or a date and a time
// (T or a space between them) with optional seconds, fraction and zone (Z or ±hh:mm).
func isTimestamp(s string) bool {
	for _, layout := range timestampLayouts {
		if !mayParse(layout, s) {
			continue // time.Parse would fail (and allocate its error)
		}
		if _, err := time.Parse(layout, s); err == nil {
			return true
		}
	}
	return false
}

// mayParse is false when time.Parse(layout, s) must fail, by the shape of s alone: the date alone
// is 10 bytes; a time needs the layout's separator (T or a space) at byte 10; a zone (Z or
// ±hh:mm) ends s exactly when the layout has one. It is only a filter: time.Parse decides.
func mayParse(layout, s string) bool {
	if len(layout) == 10 {
		return len(s) == 10
	}
	if len(s) <= 10 || s[10] != layout[10] {
		return false
	}
	n := len(s)
	zoned := s[n-1] == 'Z' || (n >= 6 && (s[n-6] == '+' || s[n-6] == '-') && s[n-3] == ':')
	return zoned == strings.HasSuffix(layout, "Z07:00")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// nearest is the did-you-mean shared with the where compiler, so hints read the same.
func nearest(x string, candidates []string) string { return table.Nearest(x, candidates) }

// NormKey converts a key value to the kind the key field stores (string, or int64), or explains
// why it cannot be a key of this table.
func (s *Schema) NormKey(k any) (any, error) {
	switch s.KeyField.Type {
	case table.TypeString:
		if str, ok := k.(string); ok {
			return str, nil
		}
		return nil, &table.QueryError{Table: s.Name, Message: fmt.Sprintf("key %s must be a string (%s is a string field)", table.FormatValue(k), s.Key)}
	default:
		v, rule := s.KeyField.Check(k)
		if rule != "" || v == nil {
			return nil, &table.QueryError{Table: s.Name, Message: fmt.Sprintf("key %s must be an int (%s is an int field)", table.FormatValue(k), s.Key)}
		}
		return v, nil
	}
}

// KeyNum returns n when key is the schema's KeyPrefix followed by digits only (and n fits int64).
func (s *Schema) KeyNum(key any) (int64, bool) {
	str, ok := key.(string)
	if !ok || s.KeyPrefix == "" || !strings.HasPrefix(str, s.KeyPrefix) {
		return 0, false
	}
	digits := str[len(s.KeyPrefix):]
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// FormatKey renders generated key number n: the prefix and n zero-padded to KeyDigits.
func (s *Schema) FormatKey(n int64) string {
	return fmt.Sprintf("%s%0*d", s.KeyPrefix, s.KeyDigits, n)
}
