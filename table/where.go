package table

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/starplan/starplan/internal/spell"
)

// Operators a where-filter may use inside a field's operator dict, in the order they are
// documented. $or and $and appear at the top level of a filter (or inside another $or/$and).
var (
	FieldOperators = []string{
		"$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$in", "$nin",
		"$ieq", "$contains", "$icontains", "$startswith", "$regex",
	}
	LogicalOperators = []string{"$or", "$and"}
)

// MaxWhereDepth is how deeply $or/$and may nest in one filter.
const MaxWhereDepth = 32

// The size of one filter is bounded, because it is evaluated by starplan itself (in the parent
// process when plans run isolated) against every row a query walks: these bounds keep the work
// per row small and the compile cheap, whatever a plan builds.
const (
	// MaxWhereOperands is the most operators and operand values (each element of an $in or
	// $nin list counts) one filter may hold.
	MaxWhereOperands = 10_000
	// MaxWhereRegexes is the most $regex operators one filter may hold.
	MaxWhereRegexes = 16
	// MaxRegexLen is the longest $regex pattern, in bytes.
	MaxRegexLen = 1024
)

// Matcher is a compiled where-filter. It is immutable and safe for concurrent use. A nil
// *Matcher matches every row.
type Matcher struct {
	root   group
	eq     map[string]any
	foldEq map[string]string
	// slow is set when a row's match can take long (a $regex: its cost is its program's size
	// times the text's length), so a scan looks at its run's deadline at every row.
	slow bool
}

// Slow reports whether matching one row can take long enough that a scan should look at its
// deadline between every two rows.
func (m *Matcher) Slow() bool { return m != nil && m.slow }

// group is a conjunction of per-field conditions and nested groups, or (when or is set) a
// disjunction of groups only.
type group struct {
	or     bool
	fields []fieldCond
	groups []group
}

// fieldCond holds every operator applied to one field, or to a path into an object field
// ("address.city": field address, path [city]); the value is looked up once per row.
type fieldCond struct {
	field string
	path  []string
	ops   []op
	// wild marks a path with a "*" (any entry of a map): the condition holds when the value at
	// some entry satisfies every operator.
	wild bool
}

// value is the row's value at the condition's field and path: None when the path leads
// nowhere (a missing key, or a value that is not a dict on the way).
func (f *fieldCond) value(r Row) any {
	v := r[f.field]
	for _, k := range f.path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

type opCode uint8

const (
	opEq opCode = iota
	opNe
	opLt
	opLte
	opGt
	opGte
	opIn
	opNin
	opIeq
	opContains
	opIcontains
	opStartswith
	opRegex
)

var opCodes = map[string]opCode{
	"$eq": opEq, "$ne": opNe, "$lt": opLt, "$lte": opLte, "$gt": opGt, "$gte": opGte,
	"$in": opIn, "$nin": opNin, "$ieq": opIeq, "$contains": opContains,
	"$icontains": opIcontains, "$startswith": opStartswith, "$regex": opRegex,
}

// opAliases maps operators from other query languages to the nearest one here.
var opAliases = map[string]string{
	"$le": "$lte", "$ge": "$gte", "$neq": "$ne", "$not": "$ne", "$notin": "$nin", "$not_in": "$nin",
	"$like": "$icontains", "$ilike": "$icontains", "$includes": "$contains", "$has": "$contains",
	"$match": "$regex", "$regexp": "$regex", "$re": "$regex", "$prefix": "$startswith",
	"$starts_with": "$startswith", "$equals": "$eq", "$eqi": "$ieq", "$iequals": "$ieq",
	"$endswith": "$regex", "$ends_with": "$regex", "$exists": "$ne",
}

type op struct {
	code opCode
	// floatOrder marks $lt/$lte/$gt/$gte with a number operand that is exactly val.f, which
	// fieldCond.match evaluates inline.
	floatOrder bool
	val        operand   // every operator but $in/$nin
	list       []operand // $in, $nin
	// strSet and numSet answer $in/$nin over long lists of strings or numbers.
	strSet map[string]struct{}
	numSet map[float64]struct{}
	re     *regexp.Regexp
}

type operandKind uint8

const (
	kNil operandKind = iota
	kBool
	kNum
	kStr
	kOther // lists and dicts, compared deeply (only on fields without a declared type)
)

// operand is one constant of a filter, converted once at Compile.
type operand struct {
	kind operandKind
	b    bool
	n    number
	s    string
	v    any // the normalised value
	// f is the number as a float64, and exactF says it is exactly that number (always for a
	// float; for an int up to 2^53 in magnitude).
	f      float64
	exactF bool
}

// Compile checks a dict-form where-filter against the schema and compiles it.
//
// A filter is a dict whose entries must all hold. An entry is either a field and a value
// ({"name": "Aviator"}: equal, with int and float values equal when their values are), a field
// and a dict of operators ({"price": {"$gte": 50, "$lt": 100}}: every operator must hold), or
// "$or"/"$and" with a list of filters. The operators are:
//
//	$eq $ne                 equal / not equal (None matches a missing value)
//	$lt $lte $gt $gte       order: numbers by value, strings and timestamps by their text
//	$in $nin                one of / none of a list of values
//	$ieq                    equal ignoring case (text)
//	$contains $icontains    substring of a text (the second ignores case), or element of a list
//	$startswith             prefix of a text
//	$regex                  Go RE2 regular expression that must match somewhere in the text
//
// On list and object fields a value compares whole ({"tags": ["a", "b"]}, equal element by
// element and in order; a dict without operator keys is a value to compare with on an object
// field, {"address": {"city": "Oslo"}}), $contains matches a list holding an element equal to
// its operand ($icontains: a text element ignoring case), and a dotted name is a path into an
// object field ({"address.city": "Oslo"}; None where the path leads nowhere). On a map field a
// path names an entry by its key ({"payment_methods.gc_1.source": "gift_card"}) or any entry
// with * ({"payment_methods.*.source": "gift_card"}: some entry's value satisfies every operator
// given for that key; a map without entries matches none). A path cannot go into a list's
// elements: that is $contains, or a function.
//
// A missing or None field value satisfies only $eq None, $ne with a value, $in with None in
// its list, and $nin without None in its list.
//
// Unknown fields and operators are *QueryError values with a did-you-mean; so are operands of
// the wrong kind for the field's declared type (a string for $lt on a float field, a non-list
// for $in, an invalid regular expression), so that Match never fails. A nil schema accepts any
// field. A nil or empty where matches every row.
func Compile(s *Schema, where map[string]any) (*Matcher, error) {
	c := compiler{schema: s}
	if bad, ok := invalidText(where); ok {
		// A stored filter is JSON, which can only spell a cut character as U+FFFD: re-evaluated
		// at apply, it would be another filter than the one the plan ran.
		return nil, c.errorf("", "the filter holds text that is not valid UTF-8 (%q): a character was cut in two, perhaps by slicing a string", bad)
	}
	m := &Matcher{}
	if err := c.group(&m.root, where, 0); err != nil {
		return nil, err
	}
	m.eq = equalities(&m.root)
	m.foldEq = foldEqualities(&m.root)
	m.slow = c.regexes > 0
	return m, nil
}

// Match reports whether the row satisfies the filter. It does not allocate.
func (m *Matcher) Match(r Row) bool {
	if m == nil {
		return true
	}
	if len(m.root.groups) == 0 {
		for i := range m.root.fields {
			if !m.root.fields[i].match(r) {
				return false
			}
		}
		return true
	}
	return m.root.match(r)
}

// Equalities returns the equality constraints every matching row satisfies: field → value, from
// plain values and $eq at the top level and inside top-level $and lists (never inside $or), so a
// caller may answer the filter from an index and call Match on the candidates only. Values are
// normalised to the field's declared type (an int operand on a float field is a float64, an
// integral float on an int field an int64); equality with None is left out. The map is nil when
// the filter has none; callers must not modify it.
func (m *Matcher) Equalities() map[string]any {
	if m == nil {
		return nil
	}
	return m.eq
}

// FoldEqualities returns the $ieq constraints every matching row satisfies, as Equalities does
// for equality: field → the text it equals ignoring case. A caller may answer the filter from an
// index keyed by FoldKey and call Match on the candidates. The map is nil when the filter has
// none; callers must not modify it.
func (m *Matcher) FoldEqualities() map[string]string {
	if m == nil {
		return nil
	}
	return m.foldEq
}

// FoldKey returns the text that every string equal to s ignoring case (strings.EqualFold) maps
// to: each character replaced by the smallest of the characters that fold to it (for ASCII
// letters, the capital), invalid UTF-8 read as U+FFFD as EqualFold reads it. Two strings are
// equal ignoring case exactly when their keys are equal, so an index keyed by FoldKey answers
// $ieq and, with a check of each candidate, $eq.
func FoldKey(s string) string {
	ascii, lower := true, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		lower = lower || 'a' <= c && c <= 'z'
	}
	if ascii {
		if !lower {
			return s
		}
		return strings.ToUpper(s) // one allocation for ASCII text
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s { // ranging over a string reads invalid bytes as U+FFFD, as EqualFold does
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// eachSure calls fn for every operator of code that every row g matches satisfies: on a whole
// field (not a path), at the top level and inside $and groups, never under $or; the first of a
// field wins.
func eachSure(g *group, code opCode, fn func(field string, o *op)) {
	if g.or {
		return
	}
	for i := range g.fields {
		f := &g.fields[i]
		if f.path != nil {
			continue // an index holds whole field values
		}
		for j := range f.ops {
			if f.ops[j].code == code {
				fn(f.field, &f.ops[j])
			}
		}
	}
	for i := range g.groups {
		eachSure(&g.groups[i], code, fn)
	}
}

// equalities and foldEqualities collect what Equalities and FoldEqualities return.
func equalities(g *group) map[string]any {
	var eq map[string]any
	eachSure(g, opEq, func(field string, o *op) {
		if o.val.kind == kNil {
			return
		}
		if eq == nil {
			eq = make(map[string]any)
		}
		if _, dup := eq[field]; !dup {
			eq[field] = o.val.v
		}
	})
	return eq
}

func foldEqualities(g *group) map[string]string {
	var eq map[string]string
	eachSure(g, opIeq, func(field string, o *op) {
		if o.val.kind != kStr {
			return
		}
		if eq == nil {
			eq = make(map[string]string)
		}
		if _, dup := eq[field]; !dup {
			eq[field] = o.val.s
		}
	})
	return eq
}

// ---- matching ----

func (g *group) match(r Row) bool {
	if g.or {
		// An $or group holds only its alternatives, each a group of its own.
		for i := range g.groups {
			if g.groups[i].match(r) {
				return true
			}
		}
		return false
	}
	for i := range g.fields {
		if !g.fields[i].match(r) {
			return false
		}
	}
	for i := range g.groups {
		if !g.groups[i].match(r) {
			return false
		}
	}
	return true
}

func (f *fieldCond) match(r Row) bool {
	v := r[f.field]
	if f.wild {
		return f.matchAny(v, f.path)
	}
	if f.path != nil {
		v = f.value(r)
	}
	return f.matchValue(v)
}

// matchAny reports whether some value at path inside v satisfies every operator: a "*" in the
// path goes into every entry of a dict (a map), in turn. A "*" over no entries (an empty map,
// None, a value that is not a dict) matches nothing; a key that leads nowhere is None, as on a
// path without "*".
func (f *fieldCond) matchAny(v any, path []string) bool {
	for i, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			if slices.Contains(path[i:], Wildcard) {
				return false // no entries
			}
			return f.matchValue(nil)
		}
		if k != Wildcard {
			v = m[k]
			continue
		}
		for _, e := range m {
			if f.matchAny(e, path[i+1:]) {
				return true
			}
		}
		return false
	}
	return f.matchValue(v)
}

// matchValue reports whether v satisfies every operator of the condition.
func (f *fieldCond) matchValue(v any) bool {
	for i := range f.ops {
		o := &f.ops[i]
		if o.floatOrder {
			// The common case inline: an order operator with an operand that is exactly a
			// float64, against a float or a not-too-large int. NaN compares false.
			var x float64
			switch y := v.(type) {
			case float64:
				x = y
			case int64:
				if y < -(1<<53) || y > 1<<53 {
					if !o.match(v) {
						return false
					}
					continue
				}
				x = float64(y)
			default:
				if !o.match(v) { // other kinds: exact comparison or false
					return false
				}
				continue
			}
			var ok bool
			switch o.code {
			case opLt:
				ok = x < o.val.f
			case opLte:
				ok = x <= o.val.f
			case opGt:
				ok = x > o.val.f
			default:
				ok = x >= o.val.f
			}
			if !ok {
				return false
			}
			continue
		}
		if !o.match(v) {
			return false
		}
	}
	return true
}

func (o *op) match(v any) bool {
	switch o.code {
	case opEq:
		return o.val.equal(v)
	case opNe:
		return !o.val.equal(v)
	case opLt, opLte, opGt, opGte:
		c, ok := o.val.compare(v)
		if !ok {
			return false
		}
		switch o.code {
		case opLt:
			return c < 0
		case opLte:
			return c <= 0
		case opGt:
			return c > 0
		}
		return c >= 0
	case opIn:
		return o.in(v)
	case opNin:
		return !o.in(v)
	case opIeq:
		s, ok := v.(string)
		return ok && strings.EqualFold(s, o.val.s)
	case opContains:
		switch x := v.(type) {
		case string:
			return o.val.kind == kStr && strings.Contains(x, o.val.s)
		case []any:
			for _, e := range x {
				if o.val.equal(e) {
					return true
				}
			}
		}
		return false
	case opIcontains:
		switch x := v.(type) {
		case string:
			return containsFold(x, o.val.s)
		case []any:
			for _, e := range x {
				if s, ok := e.(string); ok && strings.EqualFold(s, o.val.s) {
					return true
				}
			}
		}
		return false
	case opStartswith:
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, o.val.s)
	case opRegex:
		s, ok := v.(string)
		return ok && o.re.MatchString(s)
	}
	return false
}

func (o *op) in(v any) bool {
	switch x := v.(type) {
	case string:
		if o.strSet != nil {
			_, ok := o.strSet[x]
			return ok
		}
	case float64:
		if o.numSet != nil && !math.IsNaN(x) {
			_, ok := o.numSet[x]
			return ok
		}
	case int64:
		if f := float64(x); o.numSet != nil && f < 0x1p63 && int64(f) == x {
			_, ok := o.numSet[f]
			return ok
		}
	}
	for i := range o.list {
		if o.list[i].equal(v) {
			return true
		}
	}
	return false
}

// equal reports whether a row value equals the operand (numbers across int and float).
func (c *operand) equal(v any) bool {
	switch c.kind {
	case kNil:
		return v == nil
	case kStr:
		s, ok := v.(string)
		return ok && s == c.s
	case kNum:
		n, ok := asNumber(v)
		return ok && n.cmp(c.n) == 0 && !n.isNaN()
	case kBool:
		b, ok := v.(bool)
		return ok && b == c.b
	}
	return ValuesEqual(c.v, v)
}

// compare orders a row value against the operand: <0 when the value is smaller. ok is false
// when they cannot be ordered (missing value, other kind, NaN).
func (c *operand) compare(v any) (int, bool) {
	switch c.kind {
	case kNum:
		// (fieldCond.match handles float operands inline.)
		if x, ok := v.(int64); ok && c.n.isInt {
			return cmpInt(x, c.n.i), true
		}
		n, ok := asNumber(v)
		if !ok || n.isNaN() {
			return 0, false
		}
		return n.cmp(c.n), true
	case kStr:
		s, ok := v.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(s, c.s), true
	}
	return 0, false
}

func (n number) isNaN() bool { return !n.isInt && math.IsNaN(n.f) }

// ValuesEqual reports whether two Row values are equal: lists and dicts element by element,
// numbers by exact value across int and float (int64(80) equals float64(80), but 2^53+1 does not
// equal the float 2^53), and NaN equal to nothing, not even itself. Values of different kinds are
// never equal ("1" is not 1), nor is anything outside the kinds a Row holds.
func ValuesEqual(a, b any) bool { return equalValues(a, b, false) }

// equalValues is ValuesEqual, or with kinds set equality as a diff sees it, where a number's
// kind matters too (1 and 1.0 differ: a float field that became an int changed).
func equalValues(a, b any, kinds bool) bool {
	if kinds {
		_, af := a.(float64)
		_, bf := b.(float64)
		if af != bf {
			return false
		}
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i], kinds) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalValues(xv, yv, kinds) {
				return false
			}
		}
		return true
	}
	xn, ok := asNumber(a)
	if !ok {
		return false
	}
	yn, ok := asNumber(b)
	return ok && !xn.isNaN() && !yn.isNaN() && xn.cmp(yn) == 0
}

// containsFold reports whether substr is within s, ignoring case (Unicode simple folding, as
// strings.EqualFold). It does not allocate.
func containsFold(s, substr string) bool {
	if substr == "" {
		return true
	}
	for i := 0; i < len(s); {
		if hasPrefixFold(s[i:], substr) {
			return true
		}
		if s[i] < utf8.RuneSelf {
			i++
		} else {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	for prefix != "" {
		if s == "" {
			return false
		}
		var sr, pr rune
		if s[0] < utf8.RuneSelf && prefix[0] < utf8.RuneSelf {
			sr, pr = rune(s[0]), rune(prefix[0])
			s, prefix = s[1:], prefix[1:]
		} else {
			var n, m int
			sr, n = utf8.DecodeRuneInString(s)
			pr, m = utf8.DecodeRuneInString(prefix)
			s, prefix = s[n:], prefix[m:]
		}
		if !foldEqual(sr, pr) {
			return false
		}
	}
	return true
}

// foldEqual reports whether two runes are equal under simple Unicode case folding.
func foldEqual(a, b rune) bool {
	if a == b {
		return true
	}
	if a < b {
		a, b = b, a
	}
	if a < utf8.RuneSelf {
		return 'A' <= b && b <= 'Z' && a == b+'a'-'A'
	}
	r := unicode.SimpleFold(b)
	for r != b && r < a {
		r = unicode.SimpleFold(r)
	}
	return r == a
}

// ---- compiling ----

type compiler struct {
	schema   *Schema
	operands int // operators and operand values so far
	regexes  int
}

// count charges n operands to the filter and says when it is too large.
func (c *compiler) count(n int) error {
	c.operands += n
	if c.operands > MaxWhereOperands {
		return c.errorf("", "the filter has more than %d operators and values; filter on fewer values, or use a function: lambda row: ...", MaxWhereOperands)
	}
	return nil
}

func (c *compiler) errorf(suggestion, format string, args ...any) *QueryError {
	name := "where"
	if c.schema != nil && c.schema.Name != "" {
		name = c.schema.Name
	}
	return &QueryError{Table: name, Message: fmt.Sprintf(format, args...), Suggestion: suggestion}
}

func (c *compiler) group(g *group, where map[string]any, depth int) error {
	if depth > MaxWhereDepth {
		return c.errorf("", "the filter nests $or/$and more than %d deep; simplify it or use a function: lambda row: ...", MaxWhereDepth)
	}
	var kbuf [8]string // a filter names a few fields: their names sorted without allocating
	for _, key := range sortedNames(kbuf[:0], where) {
		val := where[key]
		if strings.HasPrefix(key, "$") {
			if err := c.logical(g, key, val, depth); err != nil {
				return err
			}
			continue
		}
		f, path, err := c.field(key)
		if err != nil {
			return err
		}
		fc := fieldCond{field: key, path: path, wild: slices.Contains(path, Wildcard)}
		if path != nil {
			fc.field, _ = splitPath(key)
		}
		if ops, isOps := val.(map[string]any); isOps && !(f != nil && (f.Type == TypeObject || f.Type == TypeMap) && !hasOperator(ops)) {
			if len(ops) == 0 {
				return c.errorf("", "field %q has an empty operator dict; write a value, or an operator such as {%q: {\"$eq\": ...}}", key, key)
			}
			var obuf [4]string
			for _, name := range sortedNames(obuf[:0], ops) {
				o, err := c.op(f, key, name, ops[name])
				if err != nil {
					return err
				}
				fc.ops = append(fc.ops, o)
			}
		} else {
			o, err := c.op(f, key, "$eq", val)
			if err != nil {
				return err
			}
			fc.ops = append(fc.ops, o)
		}
		g.fields = append(g.fields, fc)
	}
	return nil
}

// sortedNames appends m's keys to into, sorted.
func sortedNames(into []string, m map[string]any) []string {
	for k := range m {
		into = append(into, k)
	}
	slices.Sort(into)
	return into
}

func (c *compiler) logical(g *group, key string, val any, depth int) error {
	if e := OperatorError(key, true, ""); e != nil {
		return c.errorf(e.Suggestion, "%s", e.Message)
	}
	list, ok := val.([]any)
	if !ok {
		return c.errorf("", "%s needs a list of filters, such as {%q: [{\"name\": \"Aviator\"}, {\"price\": {\"$lt\": 100}}]}; got %s", key, key, describe(val))
	}
	if len(list) == 0 {
		return c.errorf("", "%s needs at least one filter in its list", key)
	}
	if err := c.count(len(list)); err != nil {
		return err
	}
	sub := group{or: key == "$or"}
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return c.errorf("", "%s element %d must be a filter dict such as {\"name\": \"Aviator\"}; got %s", key, i, describe(e))
		}
		if key == "$or" {
			// Each alternative is its own conjunction.
			var alt group
			if err := c.group(&alt, m, depth+1); err != nil {
				return err
			}
			sub.groups = append(sub.groups, alt)
		} else if err := c.group(&sub, m, depth+1); err != nil {
			return err
		}
	}
	g.groups = append(g.groups, sub)
	return nil
}

// hasOperator reports whether a dict in a filter has an operator key: then it is an operator
// dict, otherwise (on an object field) a value to compare with.
func hasOperator(m map[string]any) bool {
	for k := range m {
		if strings.HasPrefix(k, "$") {
			return true
		}
	}
	return false
}

// field returns the declared field a filter key names, or nil when the schema is nil, the name
// is the key field without a declaration or the key leads into an object's undeclared keys (any
// kind is accepted then). A key with dots ("address.city") is a path into an object field;
// path is its keys after the field, nil for a plain field.
func (c *compiler) field(name string) (f *Field, path []string, err error) {
	if c.schema == nil {
		_, path = splitPath(name)
		return nil, path, nil
	}
	f, path, qe := c.schema.WhereField(name)
	if qe != nil {
		return nil, nil, c.errorf(qe.Suggestion, "%s", qe.Message)
	}
	return f, path, nil
}

// WhereField resolves a filter key: the declared field it names and, for a dotted key
// ("address.city", a path into an object field), its keys after the field. The field is nil for
// the key field without a declaration or a path into an object's undeclared keys (any kind is
// accepted then). The error is the one Compile gives; the static check of a plan reports the
// same words before the run.
func (s *Schema) WhereField(name string) (f *Field, path []string, qe *QueryError) {
	name, path = splitPath(name)
	if f = s.Field(name); f == nil {
		if name == s.Key && path == nil {
			return nil, nil, nil
		}
		names := s.FieldNames()
		return nil, nil, &QueryError{Table: s.Name, Suggestion: Nearest(name, names),
			Message: fmt.Sprintf("unknown field %q; the fields are %s", name, strings.Join(names, ", "))}
	}
	at := name
	for _, k := range path {
		switch {
		case f.Type == TypeMap:
			// A key of the map ("payment_methods.gc_1") or any of them ("payment_methods.*").
			if f.Values == nil {
				return nil, path, nil
			}
			f = f.Values
			if k == Wildcard {
				at += ".*"
			} else {
				at += "." + k
			}
			continue
		case k == Wildcard:
			return nil, nil, &QueryError{Table: s.Name, Message: fmt.Sprintf("%s is %s: * stands for any entry of a map field only", at, article(f.Type))}
		case f.Type == TypeList:
			return nil, nil, &QueryError{Table: s.Name, Message: fmt.Sprintf("%s is a list: a path cannot go into its elements; use {%q: {\"$contains\": ...}} for an element, or a function: lambda row: ...", at, at)}
		case f.Type != TypeObject:
			return nil, nil, &QueryError{Table: s.Name, Message: fmt.Sprintf("%s is %s and has no keys; a dotted name is a path into an object field", at, article(f.Type))}
		}
		sub := f.Field(k)
		if sub == nil {
			if f.Additional {
				return nil, path, nil
			}
			keys := f.KeyNames()
			return nil, nil, &QueryError{Table: s.Name, Suggestion: Nearest(k, keys),
				Message: fmt.Sprintf("%q is not among the keys of %s; they are %s", k, at, strings.Join(keys, ", "))}
		}
		f, at = sub, at+"."+k
	}
	return f, path, nil
}

// WhereFieldError returns the error Compile gives for a filter on the key name (a field, or a
// dotted path into an object field), or nil when a filter may name it.
func (s *Schema) WhereFieldError(name string) *QueryError {
	_, _, qe := s.WhereField(name)
	return qe
}

// OperatorError returns the error Compile gives for the key name starting with "$", or nil
// when a filter knows that operator in that position: top says name is a key at the top of a
// filter (or of an $or/$and element), where only $or and $and are operators; otherwise it is a
// key of the operator dict of field. The suggestion is an alias from another query language ($le →
// $lte) or the nearest operator. The static check of a plan reports the same words before the
// run.
func OperatorError(name string, top bool, field string) *QueryError {
	_, isField := opCodes[name]
	isLogical := slices.Contains(LogicalOperators, name)
	switch {
	case top && isField:
		return &QueryError{Message: fmt.Sprintf("operator %s must be applied to a field, as in {\"price\": {%q: ...}}", name, name)}
	case top && !isLogical:
		return &QueryError{Suggestion: Nearest(name, LogicalOperators),
			Message: fmt.Sprintf("unknown operator %q at the top of the filter; use $or or $and with a list of filters, or a field name", name)}
	case !top && isLogical:
		return &QueryError{Message: fmt.Sprintf("%s belongs at the top of the filter, as in {%q: [{%q: ...}, ...]}", name, name, field)}
	case !top && !isField:
		suggestion := opAliases[strings.ToLower(name)]
		if suggestion == "" {
			suggestion = Nearest(name, FieldOperators)
		}
		return &QueryError{Suggestion: suggestion,
			Message: fmt.Sprintf("unknown operator %q for field %q; the operators are %s", name, field, strings.Join(FieldOperators, " "))}
	}
	return nil
}

func (c *compiler) op(f *Field, field, name string, arg any) (op, error) {
	if e := OperatorError(name, false, field); e != nil {
		return op{}, c.errorf(e.Suggestion, "%s", e.Message)
	}
	code := opCodes[name]
	typ := ""
	if f != nil {
		typ = f.Type
	}
	if err := c.count(1); err != nil {
		return op{}, err
	}
	o := op{code: code}
	switch code {
	case opEq, opNe:
		v, err := c.operand(typ, field, name, arg, true)
		if err != nil {
			return op{}, err
		}
		o.val = v
	case opLt, opLte, opGt, opGte:
		if typ == TypeBool || typ == TypeList || typ == TypeObject || typ == TypeMap {
			return op{}, c.errorf("", "field %q is %s and has no order; use $eq or $ne", field, article(typ))
		}
		v, err := c.operand(typ, field, name, arg, false)
		if err != nil {
			return op{}, err
		}
		if v.kind != kNum && v.kind != kStr {
			return op{}, c.errorf("", "%s on field %q needs a number or a text; got %s", name, field, describe(arg))
		}
		o.val = v
		o.floatOrder = v.kind == kNum && v.exactF
	case opIn, opNin:
		list, ok := arg.([]any)
		if !ok {
			return op{}, c.errorf("", "%s needs a list of values, such as {%q: {%q: [...]}}; got %s", name, field, name, describe(arg))
		}
		if err := c.count(len(list)); err != nil {
			return op{}, err
		}
		o.list = make([]operand, len(list))
		for i, e := range list {
			v, err := c.operand(typ, field, name, e, true)
			if err != nil {
				return op{}, err
			}
			o.list[i] = v
		}
		o.buildSets()
	case opIeq, opIcontains, opStartswith, opRegex:
		if code == opIcontains && typ == TypeList && (f.Items == nil || isText(f.Items.Type)) {
			s, ok := arg.(string)
			if !ok {
				return op{}, c.errorf("", "$icontains on list field %q needs a string (an element equal to it ignoring case); got %s", field, describe(arg))
			}
			o.val = operand{kind: kStr, s: s, v: s}
			break
		}
		if !isText(typ) {
			return op{}, c.errorf("", "%s applies to text; field %q is %s: use $eq, $in or an order operator", name, field, article(typ))
		}
		s, ok := arg.(string)
		if !ok {
			return op{}, c.errorf("", "%s on field %q needs a string; got %s", name, field, describe(arg))
		}
		o.val = operand{kind: kStr, s: s, v: s}
		if code == opRegex {
			c.regexes++
			switch {
			case c.regexes > MaxWhereRegexes:
				return op{}, c.errorf("", "the filter has more than %d $regex operators; join the alternatives into one pattern with |", MaxWhereRegexes)
			case len(s) > MaxRegexLen:
				return op{}, c.errorf("", "$regex on field %q is %d bytes; patterns may have at most %d", field, len(s), MaxRegexLen)
			}
			re, err := compileRegex(s)
			if err != nil {
				return op{}, c.errorf("", "$regex on field %q: %v (Go RE2 syntax: no lookarounds or backreferences)", field, err)
			}
			o.re = re
		}
	case opContains:
		if typ == TypeList {
			// An element equal to the operand, checked against the items' declared type.
			itemType := ""
			if f.Items != nil {
				itemType = f.Items.Type
			}
			v, err := c.operand(itemType, field+"[]", name, arg, true)
			if err != nil {
				return op{}, err
			}
			o.val = v
			break
		}
		if !isText(typ) {
			return op{}, c.errorf("", "$contains applies to text or lists; field %q is %s: use $eq or $in", field, article(typ))
		}
		if typ != "" {
			if _, ok := arg.(string); !ok {
				return op{}, c.errorf("", "$contains on field %q needs a string; got %s", field, describe(arg))
			}
		}
		v, err := c.operand(typ, field, name, arg, false)
		if err != nil {
			return op{}, err
		}
		o.val = v
	}
	return o, nil
}

// isText reports whether a field of this declared type holds text (or may, when undeclared).
func isText(typ string) bool {
	return typ == "" || typ == TypeString || typ == TypeTimestamp
}

// operand converts a filter constant and checks it against the field's declared type.
func (c *compiler) operand(typ, field, opName string, arg any, allowNil bool) (operand, error) {
	var v operand
	switch x := arg.(type) {
	case nil:
		if !allowNil {
			return v, c.errorf("", "%s on field %q needs a value, not None", opName, field)
		}
		return operand{kind: kNil}, nil
	case bool:
		v = operand{kind: kBool, b: x, v: x}
	case string:
		v = operand{kind: kStr, s: x, v: x}
	case []any, map[string]any:
		_, isList := x.([]any)
		if (typ == TypeList && isList) || ((typ == TypeObject || typ == TypeMap) && !isList) {
			typ = "" // compared as a whole: element kinds are the stored values' business
		}
		if typ != "" {
			hint := ""
			if _, isList := x.([]any); isList {
				hint = fmt.Sprintf(": to match any of several values use {%q: {\"$in\": [...]}}", field)
			}
			return v, c.errorf("", "field %q is %s; %s cannot compare it with %s%s", field, article(typ), opName, describe(arg), hint)
		}
		v = operand{kind: kOther, v: normalise(x)}
		if err := checkFinite(x); err != nil {
			return v, c.errorf("", "%s on field %q: %v", opName, field, err)
		}
		return v, nil
	default:
		n, ok := asNumber(arg)
		if !ok {
			return v, c.errorf("", "%s on field %q: unsupported value %v of Go type %T", opName, field, arg, arg)
		}
		if n.isNaN() {
			return v, c.errorf("", "%s on field %q: NaN never compares equal or ordered; use a number", opName, field)
		}
		v = operand{kind: kNum, n: n, f: n.f, exactF: !n.isInt}
		if n.isInt && n.i >= -(1<<53) && n.i <= 1<<53 {
			v.f, v.exactF = float64(n.i), true
		}
		switch {
		case typ == TypeFloat && n.isInt:
			v.v = float64(n.i)
		case typ == TypeInt && !n.isInt && n.f == math.Trunc(n.f) && math.Abs(n.f) < 0x1p63:
			v.v = int64(n.f)
		case n.isInt:
			v.v = n.i
		default:
			v.v = n.f
		}
	}
	want := ""
	switch typ {
	case TypeString, TypeTimestamp:
		if v.kind != kStr {
			want = "a string"
		}
	case TypeInt, TypeFloat:
		if v.kind != kNum {
			want = "a number"
		}
	case TypeBool:
		if v.kind != kBool {
			want = "True or False"
		}
	case TypeList:
		want = "a list"
		if opName == "$eq" || opName == "$ne" {
			want += fmt.Sprintf(" (it compares the whole list; for an element use {%q: {\"$contains\": ...}})", field)
		}
	case TypeObject, TypeMap:
		want = "a dict"
	}
	if want != "" {
		return v, c.errorf("", "field %q is %s, so %s needs %s; got %s", field, article(typ), opName, want, describe(arg))
	}
	return v, nil
}

// normalise converts the Go integer and float kinds inside a list or dict operand.
func normalise(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalise(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalise(e)
		}
		return out
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	}
	return v
}

func checkFinite(v any) error {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) {
			return fmt.Errorf("NaN never compares equal")
		}
	case []any:
		for _, e := range x {
			if err := checkFinite(e); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range x {
			if err := checkFinite(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// invalidText returns the first string in v (a key or a value, at any depth) that is not valid
// UTF-8.
func invalidText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, !utf8.ValidString(x)
	case []any:
		for _, e := range x {
			if s, bad := invalidText(e); bad {
				return s, true
			}
		}
	case map[string]any:
		for k, e := range x {
			if !utf8.ValidString(k) {
				return k, true
			}
			if s, bad := invalidText(e); bad {
				return s, true
			}
		}
	}
	return "", false
}

// setThreshold is the list length from which $in/$nin use a hash set.
const setThreshold = 8

func (o *op) buildSets() {
	if len(o.list) < setThreshold {
		return
	}
	allStr, allNum := true, true
	for i := range o.list {
		allStr = allStr && o.list[i].kind == kStr
		allNum = allNum && o.list[i].kind == kNum
	}
	switch {
	case allStr:
		o.strSet = make(map[string]struct{}, len(o.list))
		for i := range o.list {
			o.strSet[o.list[i].s] = struct{}{}
		}
	case allNum:
		// Only when every number is exactly a float64, so set membership is exact.
		set := make(map[float64]struct{}, len(o.list))
		for i := range o.list {
			n := o.list[i].n
			f := n.f
			if n.isInt {
				f = float64(n.i)
				if f >= 0x1p63 || int64(f) != n.i {
					return
				}
			}
			set[f] = struct{}{}
		}
		o.numSet = set
	}
}

// article prefixes a type name with its indefinite article: "an int", "a float".
func article(typ string) string {
	if typ != "" && strings.ContainsRune("aeiou", rune(typ[0])) {
		return "an " + typ
	}
	return "a " + typ
}

// describe renders a filter constant with its kind, for messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return "bool " + FormatValue(x)
	case []any:
		return fmt.Sprintf("a list of %d", len(x))
	case map[string]any:
		return "a dict"
	}
	if n, ok := asNumber(v); ok {
		if n.isInt {
			return fmt.Sprintf("int %d", n.i)
		}
		return fmt.Sprintf("float %v", n.f)
	}
	return fmt.Sprintf("%T %v", v, v)
}

// Nearest returns the candidate closest to x for a did-you-mean, or "" when none is close. The
// rule is spell.Nearest's: case and underscores are ignored; a candidate is close when it is
// under half of x's length in edits away (a swap of two adjacent letters is one edit), or,
// failing that, when it is the only one containing x or having x's letters in order
// ("qty" → "quantity_in_stock").
func Nearest(x string, candidates []string) string {
	return spell.Nearest(x, candidates)
}
