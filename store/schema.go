package store

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/starplan/starplan/table"
)

// schema is a table.Schema checked and compiled once: fields by name, patterns compiled.
type schema struct {
	*table.Schema
	fields map[string]*field
	key    *field
}

type field struct {
	*table.Field
	re   *regexp.Regexp
	enum map[string]bool
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// compileSchema checks that s is a usable schema and compiles it. Table and field names start
// with a letter (names starting with "_" are reserved for starplan's own fields and collections);
// the key field is declared, required and a string or an int.
func compileSchema(s *table.Schema) (*schema, error) {
	if !nameRE.MatchString(s.Name) {
		return nil, fmt.Errorf("table name %q: must be a letter followed by letters, digits or _", s.Name)
	}
	c := &schema{Schema: s, fields: make(map[string]*field, len(s.Fields))}
	for i := range s.Fields {
		f := &s.Fields[i]
		if !nameRE.MatchString(f.Name) {
			return nil, fmt.Errorf("table %s: field name %q: must be a letter followed by letters, digits or _", s.Name, f.Name)
		}
		if c.fields[f.Name] != nil {
			return nil, fmt.Errorf("table %s: field %q is declared twice", s.Name, f.Name)
		}
		switch f.Type {
		case table.TypeString, table.TypeInt, table.TypeFloat, table.TypeBool, table.TypeTimestamp:
		default:
			return nil, fmt.Errorf("table %s: field %q: unknown type %q (want string, int, float, bool or timestamp)", s.Name, f.Name, f.Type)
		}
		cf := &field{Field: f}
		if f.Pattern != "" {
			re, err := regexp.Compile(`^(?:` + f.Pattern + `)$`)
			if err != nil {
				return nil, fmt.Errorf("table %s: field %q: pattern: %v", s.Name, f.Name, err)
			}
			cf.re = re
		}
		if len(f.Enum) > 0 {
			cf.enum = make(map[string]bool, len(f.Enum))
			for _, e := range f.Enum {
				cf.enum[e] = true
			}
		}
		c.fields[f.Name] = cf
	}
	c.key = c.fields[s.Key]
	switch {
	case c.key == nil:
		return nil, fmt.Errorf("table %s: key field %q is not declared", s.Name, s.Key)
	case c.key.Type != table.TypeString && c.key.Type != table.TypeInt:
		return nil, fmt.Errorf("table %s: key field %q must be a string or an int, not %s", s.Name, s.Key, c.key.Type)
	case s.KeyPrefix != "" && c.key.Type != table.TypeString:
		return nil, fmt.Errorf("table %s: key_prefix needs a string key field", s.Name)
	case s.KeyDigits < 0:
		return nil, fmt.Errorf("table %s: key_digits must be >= 0", s.Name)
	case s.KeyMax < 0 || (s.KeyMax > 0 && s.KeyPrefix == ""):
		return nil, fmt.Errorf("table %s: key_max must be > 0 and needs a key_prefix", s.Name)
	case s.KeyMax >= math.MaxInt64/2:
		return nil, fmt.Errorf("table %s: key_max %d leaves no room to increment; use at most %d", s.Name, s.KeyMax, int64(math.MaxInt64/2-1))
	}
	for i := range s.Fields {
		if f := &s.Fields[i]; f.MaxLen < 0 {
			return nil, fmt.Errorf("table %s: field %q: max_len must be >= 0 (0: the default, %d characters)", s.Name, f.Name, table.DefaultMaxLen)
		}
	}
	c.key.Required = true
	return c, nil
}

// Validate checks row against the schema and returns the row as it would be stored: a new map
// with every declared field (nil when the row lacks it), ints given for float fields as float64
// and floats with an integral value given for int fields as int64 (3.0 is accepted as 3, 3.5 is
// not: arithmetic and JSON produce 3.0, and rejecting it would cost a repair round for nothing).
// The first problem found is returned as a *table.FieldError naming the field, the value and the
// rule; an unknown field is rejected with a did-you-mean.
func Validate(s *table.Schema, row table.Row) (table.Row, error) {
	c, err := compileSchema(s)
	if err != nil {
		return nil, err
	}
	return c.validate(row)
}

func (s *schema) validate(row table.Row) (table.Row, error) {
	out := make(table.Row, len(s.Fields))
	for name, v := range row {
		f := s.fields[name]
		if f == nil {
			return nil, s.unknownField(row, name, v)
		}
		var nv any
		rule := ""
		if f == s.key {
			rule = s.keyRule(v) // before the pattern: it says why such a key cannot be
		}
		if rule == "" {
			nv, rule = f.check(v)
		}
		if rule != "" {
			return nil, &table.FieldError{Table: s.Name, Key: keyOf(s, row), Field: name, Value: v, Rule: rule}
		}
		out[name] = nv
	}
	for i := range s.Fields {
		f := &s.Fields[i]
		if out[f.Name] != nil {
			continue
		}
		if f.Required || f.Name == s.Key {
			return nil, &table.FieldError{Table: s.Name, Key: keyOf(s, row), Field: f.Name, Value: nil, Rule: "is required"}
		}
		out[f.Name] = nil
	}
	return out, nil
}

// keyRule returns the rule a key value breaks, if any: a key of the generated form (KeyPrefix
// and digits) must carry a number up to the table's MaxKeyNum, or the next key could not be made.
func (s *schema) keyRule(k any) string {
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

func keyOf(s *schema, row table.Row) any {
	k := row[s.Key]
	switch k.(type) {
	case string, int64, int:
		return k
	}
	return nil
}

func (s *schema) unknownField(row table.Row, name string, v any) error {
	rule := fmt.Sprintf("is not a field of %s", s.Name)
	if near := nearest(name, s.FieldNames()); near != "" {
		rule += fmt.Sprintf(" (did you mean %q?)", near)
	} else {
		rule += " (its fields are " + strings.Join(s.FieldNames(), ", ") + ")"
	}
	return &table.FieldError{Table: s.Name, Key: keyOf(s, row), Field: name, Value: v, Rule: rule}
}

// check converts v to the field's stored kind, or returns the rule it breaks.
func (f *field) check(v any) (any, string) {
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
		return s, ""
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
			i, ok := toInt(v)
			if !ok {
				return nil, f.numRule("must be an int")
			}
			n = i
		}
		if (f.Min != nil && cmpIntFloat(n, *f.Min) < 0) || (f.Max != nil && cmpIntFloat(n, *f.Max) > 0) {
			return nil, f.numRule("must be an int")
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
			i, ok := toInt(v)
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
		return fl, ""
	}
	return nil, "has an unknown type " + f.Type
}

// numRule adds the field's bounds to a type rule: "must be an int >= 0".
func (f *field) numRule(rule string) string {
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

func (f *field) bounds(x float64, kind string) string {
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

// toInt converts Go's integer kinds to int64.
func toInt(v any) (int64, bool) {
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
		if _, err := time.Parse(layout, s); err == nil {
			return true
		}
	}
	return false
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
