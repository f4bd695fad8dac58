package table

// Matcher is a compiled where-filter. It is immutable and safe for concurrent use.
type Matcher struct {
	all bool
}

// Compile checks a dict-form where-filter against the schema and compiles it. Unknown fields and
// operators are *QueryError values with a did-you-mean; so are operands of the wrong kind.
// A nil or empty where matches every row.
//
// TODO(where): the real compiler; this placeholder matches every row.
func Compile(s *Schema, where map[string]any) (*Matcher, error) {
	return &Matcher{all: true}, nil
}

// Match reports whether the row satisfies the filter.
func (m *Matcher) Match(r Row) bool { return m.all }

// Equalities returns the top-level equality constraints of the filter (field → value, from plain
// values and $eq), which a caller may answer from an index before calling Match on candidates.
// The map is empty when the filter has none; callers must not modify it.
func (m *Matcher) Equalities() map[string]any { return nil }
