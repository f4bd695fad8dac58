package builtins

import (
	"container/list"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// This file is Python's re module on Go's RE2 engine (regexp). Matching is linear in the input,
// so a pattern cannot be made to backtrack exponentially (no ReDoS); the price is that lookaround,
// backreferences, atomic groups, possessive quantifiers and conditionals are refused with an
// explanation. A Python pattern is translated to RE2 syntax first: \d, \w and \s keep their
// Unicode meaning (ASCII with re.ASCII), \Z becomes \z, \uXXXX becomes \x{XXXX}, {,n} becomes
// {0,n}, inline global flags are lifted, verbose patterns lose their whitespace and comments.
//
// Positions (start, end, span, pos, endpos) are byte offsets, like Starlark's string indexing,
// so s[m.start():m.end()] is the match in a plan; Python counts code points instead.

// Python's flag values, so that plans may combine them with | and pass the ints around.
const (
	reIgnoreCase = 2
	reLocale     = 4
	reMultiline  = 8
	reDotAll     = 16
	reUnicode    = 32
	reVerbose    = 64
	reASCII      = 256
)

// MaxPatternBytes is the longest regular expression re accepts: 10 KiB.
const MaxPatternBytes = 10 << 10

// rePatternCacheSize is how many compiled patterns the process keeps (least recently used).
const rePatternCacheSize = 256

// reHint is the advice that closes every refusal of a construct RE2 lacks.
const reHint = "RE2 runs in linear time and never backtracks, so lookaround, backreferences, atomic groups, possessive quantifiers and conditionals do not exist; match a broader pattern and check the groups in code, or use str methods such as startswith, endswith, split and find"

// UnsupportedRegexError reports a Python regular-expression construct that RE2 cannot run.
type UnsupportedRegexError struct {
	Construct string // "lookahead (?=...)", "backreference \\1", ...
	Offset    int    // byte offset in the pattern
}

func (e *UnsupportedRegexError) Error() string {
	return fmt.Sprintf("%s at position %d is not supported (hint: %s)", e.Construct, e.Offset, reHint)
}

func newReModule() *starlarkstruct.Module {
	fn := func(name string, impl func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)) *starlark.Builtin {
		return starlark.NewBuiltin("re."+name, impl)
	}
	flag := func(v int) starlark.Value { return starlark.MakeInt(v) }
	return &starlarkstruct.Module{Name: "re", Members: starlark.StringDict{
		"compile":    fn("compile", reCompile),
		"search":     fn("search", reModuleCall("search", 2)),
		"match":      fn("match", reModuleCall("match", 2)),
		"fullmatch":  fn("fullmatch", reModuleCall("fullmatch", 2)),
		"findall":    fn("findall", reModuleCall("findall", 2)),
		"finditer":   fn("finditer", reModuleCall("finditer", 2)),
		"split":      fn("split", reModuleCall("split", 3)),
		"sub":        fn("sub", reModuleCall("sub", 4)),
		"subn":       fn("subn", reModuleCall("subn", 4)),
		"escape":     fn("escape", reEscape),
		"IGNORECASE": flag(reIgnoreCase), "I": flag(reIgnoreCase),
		"MULTILINE": flag(reMultiline), "M": flag(reMultiline),
		"DOTALL": flag(reDotAll), "S": flag(reDotAll),
		"VERBOSE": flag(reVerbose), "X": flag(reVerbose),
		"ASCII": flag(reASCII), "A": flag(reASCII),
		"UNICODE": flag(reUnicode), "U": flag(reUnicode),
		"NOFLAG": flag(0),
	}}
}

// --- compiling and caching --------------------------------------------------------------------

// rePattern is a compiled pattern, shared through the cache by every run that uses the same
// source and flags. Its regexps are safe for concurrent use; the variants compile on first use.
type rePattern struct {
	source    string // the Python pattern
	flags     int    // Python flags, with UNICODE added unless ASCII
	goPattern string // the translation, flags included
	re        *regexp.Regexp
	names     map[string]int

	anchored, full, after, afterFull lazyRegexp
}

type lazyRegexp struct {
	once sync.Once
	re   *regexp.Regexp
	err  error
}

func (l *lazyRegexp) get(expr string) (*regexp.Regexp, error) {
	l.once.Do(func() { l.re, l.err = regexp.Compile(expr) })
	return l.re, l.err
}

// anchoredRe matches only at the start of the text (match).
func (p *rePattern) anchoredRe() (*regexp.Regexp, error) {
	return p.anchored.get(`\A(?:` + p.goPattern + `)`)
}

// fullRe matches only the whole text (fullmatch).
func (p *rePattern) fullRe() (*regexp.Regexp, error) {
	return p.full.get(`\A(?:` + p.goPattern + `)\z`)
}

// afterRe finds the pattern after one leading character, which gives a search that starts
// inside a string the left context it needs (for ^, \b, \B).
func (p *rePattern) afterRe() (*regexp.Regexp, error) {
	return p.after.get(`(?s:.)(?:` + p.goPattern + `)`)
}

func (p *rePattern) afterFullRe() (*regexp.Regexp, error) {
	return p.afterFull.get(`(?s:.)(?:` + p.goPattern + `)\z`)
}

type reKey struct {
	pattern string
	flags   int
}

// reCache is the one piece of state shared by runs: an LRU of compiled patterns.
var reCache = struct {
	sync.Mutex
	order *list.List // of *reCacheEntry, most recent first
	byKey map[reKey]*list.Element
}{order: list.New(), byKey: map[reKey]*list.Element{}}

type reCacheEntry struct {
	key reKey
	pat *rePattern
}

// compilePattern returns the compiled pattern for a Python pattern and flags, from the cache
// when it can.
func compilePattern(pattern string, flags int) (*rePattern, error) {
	key := reKey{pattern, flags}
	reCache.Lock()
	if el, ok := reCache.byKey[key]; ok {
		reCache.order.MoveToFront(el)
		p := el.Value.(*reCacheEntry).pat
		reCache.Unlock()
		return p, nil
	}
	reCache.Unlock()

	p, err := newPattern(pattern, flags)
	if err != nil {
		return nil, err
	}
	reCache.Lock()
	defer reCache.Unlock()
	if el, ok := reCache.byKey[key]; ok { // compiled concurrently by another run
		reCache.order.MoveToFront(el)
		return el.Value.(*reCacheEntry).pat, nil
	}
	reCache.byKey[key] = reCache.order.PushFront(&reCacheEntry{key, p})
	for reCache.order.Len() > rePatternCacheSize {
		last := reCache.order.Back()
		reCache.order.Remove(last)
		delete(reCache.byKey, last.Value.(*reCacheEntry).key)
	}
	return p, nil
}

func newPattern(pattern string, flags int) (*rePattern, error) {
	if len(pattern) > MaxPatternBytes {
		return nil, fmt.Errorf("the pattern is %d bytes, over the limit of %d (hint: match with a shorter pattern, or use str methods)", len(pattern), MaxPatternBytes)
	}
	goPat, flags, err := translateRegexp(pattern, flags)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(goPat)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) && (se.Code == syntax.ErrInvalidRepeatSize || se.Code == syntax.ErrLarge) {
			return nil, fmt.Errorf("%v (RE2 allows at most 1000 repetitions and a bounded program size)", err)
		}
		return nil, err
	}
	p := &rePattern{source: pattern, flags: flags, goPattern: goPat, re: re, names: map[string]int{}}
	for i, name := range re.SubexpNames() {
		if name != "" {
			p.names[name] = i
		}
	}
	return p, nil
}

// --- translation from Python to RE2 syntax ----------------------------------------------------

// Unicode and ASCII bodies of the character classes \d, \w and \s, as Python 3 defines them for
// str patterns (\s: str.isspace; \w: str.isalnum or '_').
const (
	uniDigit = `\p{Nd}`
	uniWord  = `\p{L}\p{N}_`
	uniSpace = `\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`
	ascDigit = `0-9`
	ascWord  = `0-9A-Za-z_`
	ascSpace = `\t-\r `
)

// classBody returns the class body for \d, \w or \s (lower case) in the given mode.
func classBody(c byte, ascii bool) string {
	switch {
	case c == 'd' && ascii:
		return ascDigit
	case c == 'd':
		return uniDigit
	case c == 'w' && ascii:
		return ascWord
	case c == 'w':
		return uniWord
	case ascii:
		return ascSpace
	}
	return uniSpace
}

var complementCache sync.Map // class body → body of its complement

// complementBody returns a class body that matches exactly the characters body does not.
func complementBody(body string) (string, error) {
	if v, ok := complementCache.Load(body); ok {
		return v.(string), nil
	}
	re, err := syntax.Parse("[^"+body+"]", syntax.Perl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if re.Op == syntax.OpCharClass {
		for i := 0; i+1 < len(re.Rune); i += 2 {
			fmt.Fprintf(&b, `\x{%x}-\x{%x}`, re.Rune[i], re.Rune[i+1])
		}
	}
	complementCache.Store(body, b.String())
	return b.String(), nil
}

type reTranslator struct {
	src     string
	i       int
	flags   int
	out     strings.Builder
	verbose bool
}

func (t *reTranslator) ascii() bool { return t.flags&reASCII != 0 }

func (t *reTranslator) unsupported(construct string, at int) error {
	return &UnsupportedRegexError{Construct: construct, Offset: at}
}

// translateRegexp turns a Python pattern into RE2 syntax and returns it with the effective
// flags (the argument's, plus inline global flags, plus UNICODE unless ASCII).
func translateRegexp(src string, flags int) (string, int, error) {
	if flags&reLocale != 0 {
		return "", 0, errors.New("cannot use LOCALE flag with a str pattern")
	}
	if flags&reASCII != 0 && flags&reUnicode != 0 {
		return "", 0, errors.New("ASCII and UNICODE flags are incompatible")
	}
	t := &reTranslator{src: src, flags: flags}
	t.verbose = flags&reVerbose != 0
	// Inline global flags such as (?i) must open the pattern, as in Python 3.11.
	for strings.HasPrefix(t.src[t.i:], "(?") {
		j := t.i + 2
		for j < len(src) && strings.IndexByte("aiLmsux", src[j]) >= 0 {
			j++
		}
		if j == t.i+2 || j >= len(src) || src[j] != ')' {
			break
		}
		for _, c := range src[t.i+2 : j] {
			switch c {
			case 'a':
				t.flags |= reASCII
			case 'i':
				t.flags |= reIgnoreCase
			case 'L':
				return "", 0, errors.New("bad inline flags: cannot use 'L' flag with a str pattern")
			case 'm':
				t.flags |= reMultiline
			case 's':
				t.flags |= reDotAll
			case 'u':
				t.flags |= reUnicode
			case 'x':
				t.flags |= reVerbose
				t.verbose = true
			}
		}
		t.i = j + 1
	}
	if t.flags&reASCII != 0 && t.flags&reUnicode != 0 {
		return "", 0, errors.New("ASCII and UNICODE flags are incompatible")
	}
	if t.flags&reASCII == 0 {
		t.flags |= reUnicode
	}
	var goFlags string
	for _, f := range []struct {
		bit int
		c   string
	}{{reIgnoreCase, "i"}, {reMultiline, "m"}, {reDotAll, "s"}} {
		if t.flags&f.bit != 0 {
			goFlags += f.c
		}
	}
	if goFlags != "" {
		t.out.WriteString("(?" + goFlags + ")")
	}
	if err := t.run(); err != nil {
		return "", 0, err
	}
	return t.out.String(), t.flags, nil
}

func (t *reTranslator) run() error {
	src := t.src
	for t.i < len(src) {
		c := src[t.i]
		at := t.i
		switch {
		case t.verbose && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'):
			t.i++
		case t.verbose && c == '#':
			for t.i < len(src) && src[t.i] != '\n' {
				t.i++
			}
		case c == '\\':
			if err := t.escape(); err != nil {
				return err
			}
		case c == '[':
			if err := t.class(); err != nil {
				return err
			}
		case c == '(':
			if err := t.group(); err != nil {
				return err
			}
		case c == '{':
			if err := t.brace(); err != nil {
				return err
			}
		case c == '*' || c == '+' || c == '?':
			t.out.WriteByte(c)
			t.i++
			if err := t.afterQuantifier(at); err != nil {
				return err
			}
		default:
			_, w := utf8.DecodeRuneInString(src[t.i:])
			t.out.WriteString(src[t.i : t.i+w])
			t.i += w
		}
	}
	return nil
}

// afterQuantifier copies a lazy '?' and refuses a possessive '+'.
func (t *reTranslator) afterQuantifier(at int) error {
	if t.i < len(t.src) {
		switch t.src[t.i] {
		case '?':
			t.out.WriteByte('?')
			t.i++
		case '+':
			return t.unsupported("possessive quantifier "+t.src[at:t.i+1], at)
		}
	}
	return nil
}

// brace handles {m,n}: a quantifier when well formed (with {,n} as {0,n}), else a literal.
func (t *reTranslator) brace() error {
	src, at := t.src, t.i
	j := at + 1
	lo := j
	for j < len(src) && src[j] >= '0' && src[j] <= '9' {
		j++
	}
	loStr := src[lo:j]
	hiStr, comma := loStr, false
	if j < len(src) && src[j] == ',' {
		comma = true
		j++
		hi := j
		for j < len(src) && src[j] >= '0' && src[j] <= '9' {
			j++
		}
		hiStr = src[hi:j]
	}
	if j >= len(src) || src[j] != '}' || (loStr == "" && !comma) {
		t.out.WriteString(`\{`)
		t.i++
		return nil
	}
	if loStr == "" {
		loStr = "0"
	}
	if comma {
		t.out.WriteString("{" + loStr + "," + hiStr + "}")
	} else {
		t.out.WriteString("{" + loStr + "}")
	}
	if n, err := strconv.Atoi(loStr); err == nil && hiStr != "" {
		if m, err := strconv.Atoi(hiStr); err == nil && m < n {
			return fmt.Errorf("min repeat greater than max repeat at position %d", at+1)
		}
	}
	t.i = j + 1
	return t.afterQuantifier(at)
}

func (t *reTranslator) group() error {
	src, at := t.src, t.i
	rest := src[at:]
	switch {
	case strings.HasPrefix(rest, "(?P<"):
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return fmt.Errorf("missing >, unterminated name at position %d", at+4)
		}
		name := rest[4:end]
		if !validGroupName(name) {
			return fmt.Errorf("bad character in group name '%s' at position %d (RE2 group names use letters, digits and _)", name, at+4)
		}
		t.out.WriteString(rest[:end+1])
		t.i += end + 1
	case strings.HasPrefix(rest, "(?P="):
		return t.unsupported("backreference (?P=name)", at)
	case strings.HasPrefix(rest, "(?="):
		return t.unsupported("lookahead (?=...)", at)
	case strings.HasPrefix(rest, "(?!"):
		return t.unsupported("negative lookahead (?!...)", at)
	case strings.HasPrefix(rest, "(?<="):
		return t.unsupported("lookbehind (?<=...)", at)
	case strings.HasPrefix(rest, "(?<!"):
		return t.unsupported("negative lookbehind (?<!...)", at)
	case strings.HasPrefix(rest, "(?>"):
		return t.unsupported("atomic group (?>...)", at)
	case strings.HasPrefix(rest, "(?("):
		return t.unsupported("conditional group (?(...)...)", at)
	case strings.HasPrefix(rest, "(?#"):
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return fmt.Errorf("missing ), unterminated comment at position %d", at)
		}
		t.i += end + 1
	case strings.HasPrefix(rest, "(?:"):
		t.out.WriteString("(?:")
		t.i += 3
	case strings.HasPrefix(rest, "(?<"):
		end := strings.IndexByte(rest, '>')
		if end < 0 || !validGroupName(rest[3:end]) {
			return fmt.Errorf("unknown extension ?< at position %d", at+1)
		}
		t.out.WriteString("(?P<" + rest[3:end+1])
		t.i += end + 1
	case strings.HasPrefix(rest, "(?"):
		// Scoped flags (?i:...), (?-i:...), (?s-m:...).
		j := 2
		for j < len(rest) && strings.IndexByte("aiLmsux-", rest[j]) >= 0 {
			j++
		}
		if j >= len(rest) || j == 2 {
			return fmt.Errorf("unknown extension ?%s at position %d", rest[2:min(len(rest), 3)], at+1)
		}
		if rest[j] == ')' {
			return fmt.Errorf("global flags not at the start of the expression at position %d", at)
		}
		if rest[j] != ':' {
			return fmt.Errorf("unknown flag at position %d", at+j)
		}
		for _, c := range rest[2:j] {
			if c == 'a' || c == 'u' || c == 'L' || c == 'x' {
				return fmt.Errorf("the scoped flag %q is not supported here; pass re.ASCII or re.VERBOSE for the whole pattern", c)
			}
		}
		t.out.WriteString(rest[:j+1])
		t.i += j + 1
	default:
		t.out.WriteByte('(')
		t.i++
	}
	return nil
}

func validGroupName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// escape translates an escape outside a character class.
func (t *reTranslator) escape() error {
	src, at := t.src, t.i
	if at+1 >= len(src) {
		return errors.New("bad escape (end of pattern)")
	}
	c := src[at+1]
	switch c {
	case 'd', 'w', 's':
		t.out.WriteString("[" + classBody(c, t.ascii()) + "]")
	case 'D', 'W', 'S':
		t.out.WriteString("[^" + classBody(c+'a'-'A', t.ascii()) + "]")
	case 'A', 'b', 'B':
		t.out.WriteString(src[at : at+2])
	case 'Z', 'z':
		t.out.WriteString(`\z`)
	case 'a', 'f', 'n', 'r', 't', 'v':
		t.out.WriteString(src[at : at+2])
	case 'x', 'u', 'U', 'N', '0':
		return t.writeCodeEscape(at)
	default:
		if c >= '1' && c <= '9' {
			// Three octal digits are a character; anything else is a group reference.
			if c <= '7' && at+3 < len(src) && isOctal(src[at+2]) && isOctal(src[at+3]) {
				return t.writeCodeEscape(at)
			}
			return t.unsupported(`backreference \`+string(c), at)
		}
		if c < utf8.RuneSelf && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return fmt.Errorf("bad escape \\%c at position %d", c, at)
		}
		r, w := utf8.DecodeRuneInString(src[at+1:])
		if r < utf8.RuneSelf {
			t.out.WriteString(`\` + string(r))
		} else {
			fmt.Fprintf(&t.out, `\x{%x}`, r)
		}
		t.i += 1 + w
		return nil
	}
	t.i += 2
	return nil
}

// writeCodeEscape writes the character of the code escape at at (see codeEscape) as \x{...}
// and moves past the escape.
func (t *reTranslator) writeCodeEscape(at int) error {
	r, n, err := t.codeEscape(at)
	if err != nil {
		return err
	}
	fmt.Fprintf(&t.out, `\x{%x}`, r)
	t.i += n
	return nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// codeEscape reads \xhh, \uhhhh, \Uhhhhhhhh or an octal escape at at, returning the character
// and the escape's length.
func (t *reTranslator) codeEscape(at int) (rune, int, error) {
	src := t.src
	c := src[at+1]
	hexDigits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
	switch {
	case hexDigits > 0:
		end := at + 2 + hexDigits
		if end > len(src) {
			return 0, 0, fmt.Errorf("incomplete escape \\%c at position %d", c, at)
		}
		for i := at + 2; i < end; i++ {
			if !isHex(src[i]) {
				return 0, 0, fmt.Errorf("incomplete escape %s at position %d", src[at:i], at)
			}
		}
		v, _ := strconv.ParseUint(src[at+2:end], 16, 32)
		if v > utf8.MaxRune {
			return 0, 0, fmt.Errorf("bad escape %s at position %d", src[at:end], at)
		}
		return rune(v), end - at, nil
	case c == 'N':
		return 0, 0, fmt.Errorf(`named character escapes \N{...} are not supported at position %d (hint: write the character itself)`, at)
	}
	// Octal: \0 plus up to two more digits, or three digits.
	end := at + 1
	for end < len(src) && end < at+4 && isOctal(src[end]) {
		end++
	}
	v, _ := strconv.ParseUint(src[at+1:end], 8, 32)
	if v > 0o377 {
		return 0, 0, fmt.Errorf("octal escape value %s outside of range 0-0o377 at position %d", src[at:end], at)
	}
	return rune(v), end - at, nil
}

// class translates a character class [...] (with escapes, and \W or \S inside computed as
// complements so that they keep Python's Unicode meaning).
func (t *reTranslator) class() error {
	src, at := t.src, t.i
	i := at + 1
	negate := false
	if i < len(src) && src[i] == '^' {
		negate = true
		i++
	}
	var body strings.Builder
	first := true
	for {
		if i >= len(src) {
			return fmt.Errorf("unterminated character set at position %d", at)
		}
		c := src[i]
		if c == ']' && !first {
			i++
			break
		}
		first = false
		if c != '\\' {
			r, w := utf8.DecodeRuneInString(src[i:])
			writeClassRune(&body, r, c == '-')
			i += w
			continue
		}
		if i+1 >= len(src) {
			return errors.New("bad escape (end of pattern)")
		}
		e := src[i+1]
		switch e {
		case 'd', 'w', 's':
			body.WriteString(classBody(e, t.ascii()))
			i += 2
		case 'D', 'W', 'S':
			comp, err := complementBody(classBody(e+'a'-'A', t.ascii()))
			if err != nil {
				return err
			}
			body.WriteString(comp)
			i += 2
		case 'a', 'f', 'n', 'r', 't', 'v':
			body.WriteString(src[i : i+2])
			i += 2
		case 'b':
			body.WriteString(`\x{8}`)
			i += 2
		case 'x', 'u', 'U', 'N', '0', '1', '2', '3', '4', '5', '6', '7': // hex, named or octal
			r, n, err := t.codeEscape(i)
			if err != nil {
				return err
			}
			writeClassRune(&body, r, false)
			i += n
		default:
			switch {
			case e >= '8' && e <= '9', e < utf8.RuneSelf && (e >= 'a' && e <= 'z' || e >= 'A' && e <= 'Z'):
				return fmt.Errorf("bad escape \\%c at position %d", e, i)
			default:
				r, w := utf8.DecodeRuneInString(src[i+1:])
				writeClassRune(&body, r, false)
				i += 1 + w
			}
		}
	}
	t.out.WriteByte('[')
	if negate {
		t.out.WriteByte('^')
	}
	t.out.WriteString(body.String())
	t.out.WriteByte(']')
	t.i = i
	return nil
}

// writeClassRune writes one character of a class; a range dash stays a dash.
func writeClassRune(b *strings.Builder, r rune, dash bool) {
	switch {
	case dash:
		b.WriteByte('-')
	case r == '\\' || r == ']' || r == '[' || r == '^' || r == '-':
		b.WriteByte('\\')
		b.WriteRune(r)
	case r < 0x20 || r == 0x7f:
		fmt.Fprintf(b, `\x{%x}`, r)
	default:
		b.WriteRune(r)
	}
}

// --- the module's functions -------------------------------------------------------------------

// reEscape is Python 3.7's re.escape: a backslash before each character that is special in a
// pattern.
func reEscape(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &s); err != nil {
		return nil, err
	}
	var out strings.Builder
	for _, r := range s {
		switch r {
		case '\t':
			out.WriteString(`\t`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\v':
			out.WriteString(`\v`)
		case '\f':
			out.WriteString(`\f`)
		default:
			if strings.ContainsRune(`()[]{}?*+-|^$\.&~# `, r) {
				out.WriteByte('\\')
			}
			out.WriteRune(r)
		}
	}
	return starlark.String(out.String()), nil
}

// patternArg compiles a module function's pattern argument, a str or a compiled pattern.
func patternArg(name string, v starlark.Value, flags int) (*rePattern, error) {
	switch v := v.(type) {
	case *rePatternValue:
		if flags != 0 {
			return nil, fmt.Errorf("%s: cannot process flags argument with a compiled pattern", name)
		}
		return v.p, nil
	case starlark.String:
		p, err := compilePattern(string(v), flags)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("%s: first argument must be string or compiled pattern, not %s", name, pyType(v))
}

func reCompile(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pat starlark.Value
	var flags int
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pat, "flags?", &flags); err != nil {
		return nil, err
	}
	if pv, ok := pat.(*rePatternValue); ok && flags == 0 {
		return pv, nil
	}
	p, err := patternArg(b.Name(), pat, flags)
	if err != nil {
		return nil, err
	}
	return &rePatternValue{p: p}, nil
}

// reModuleCall makes re.<method>(pattern, ..., flags=0): it compiles the pattern and calls the
// pattern method with the arguments between (nargs of them, pattern included).
func reModuleCall(method string, nargs int) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var pat, a1, a2, a3 starlark.Value
		var flags int
		names := map[string][]any{
			"search": {"pattern", &pat, "string", &a1, "flags?", &flags},
			"split":  {"pattern", &pat, "string", &a1, "maxsplit?", &a2, "flags?", &flags},
			"sub":    {"pattern", &pat, "repl", &a1, "string", &a2, "count?", &a3, "flags?", &flags},
		}
		var spec []any
		switch method {
		case "split":
			spec = names["split"]
		case "sub", "subn":
			spec = names["sub"]
		default:
			spec = names["search"]
		}
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, spec...); err != nil {
			return nil, err
		}
		p, err := patternArg(b.Name(), pat, flags)
		if err != nil {
			return nil, err
		}
		call := starlark.Tuple{a1}
		for _, a := range []starlark.Value{a2, a3} {
			if a != nil {
				call = append(call, a)
			}
		}
		return p.call(thread, b.Name(), method, call, nil)
	}
}

// --- pattern objects --------------------------------------------------------------------------

// rePatternValue is a compiled pattern as a Starlark value (type "re.Pattern").
type rePatternValue struct{ p *rePattern }

var (
	_ starlark.HasAttrs = (*rePatternValue)(nil)
	_ starlark.HasAttrs = (*reMatch)(nil)
	_ starlark.Mapping  = (*reMatch)(nil)
)

var rePatternMethods = []string{"findall", "finditer", "fullmatch", "match", "search", "split", "sub", "subn"}

func (v *rePatternValue) String() string {
	s := "re.compile(" + starlark.String(v.p.source).String()
	if f := v.p.flags &^ reUnicode; f != 0 {
		s += fmt.Sprintf(", %d", f)
	}
	return s + ")"
}
func (v *rePatternValue) Type() string          { return "re.Pattern" }
func (v *rePatternValue) Freeze()               {}
func (v *rePatternValue) Truth() starlark.Bool  { return true }
func (v *rePatternValue) Hash() (uint32, error) { return starlark.String(v.p.source).Hash() }
func (v *rePatternValue) AttrNames() []string {
	return append([]string{"flags", "groupindex", "groups", "pattern"}, rePatternMethods...)
}

func (v *rePatternValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "pattern":
		return starlark.String(v.p.source), nil
	case "flags":
		return starlark.MakeInt(v.p.flags), nil
	case "groups":
		return starlark.MakeInt(v.p.re.NumSubexp()), nil
	case "groupindex":
		d := starlark.NewDict(len(v.p.names))
		for i, n := range v.p.re.SubexpNames() {
			if n != "" {
				_ = d.SetKey(starlark.String(n), starlark.MakeInt(i))
			}
		}
		d.Freeze()
		return d, nil
	}
	for _, m := range rePatternMethods {
		if m == name {
			method := name
			return starlark.NewBuiltin(name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
				return v.p.call(thread, "Pattern."+method, method, args, kwargs)
			}).BindReceiver(v), nil
		}
	}
	return nil, nil
}

// call runs one pattern method with Python's parameters.
func (p *rePattern) call(thread *starlark.Thread, name, method string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	var err error
	switch method {
	case "search", "match", "fullmatch", "findall", "finditer":
		var s string
		pos, endpos := 0, -1
		var endv starlark.Value = starlark.None
		if err := starlark.UnpackArgs(name, args, kwargs, "string", &s, "pos?", &pos, "endpos?", &endv); err != nil {
			return nil, err
		}
		if endv != starlark.None {
			if err := starlark.AsInt(endv, &endpos); err != nil {
				return nil, fmt.Errorf("%s: endpos: %v", name, err)
			}
		}
		text, pos := clampRegion(s, pos, endpos)
		switch method {
		case "findall", "finditer":
			v, err = p.findAll(thread, s, text, pos, method == "finditer")
		default:
			v, err = p.matchOne(s, text, pos, method)
		}
	case "split":
		var s string
		maxsplit := 0
		if err := starlark.UnpackArgs(name, args, kwargs, "string", &s, "maxsplit?", &maxsplit); err != nil {
			return nil, err
		}
		v, err = p.split(thread, s, maxsplit)
	case "sub", "subn":
		var repl starlark.Value
		var s string
		count := 0
		if err := starlark.UnpackArgs(name, args, kwargs, "repl", &repl, "string", &s, "count?", &count); err != nil {
			return nil, err
		}
		v, err = p.sub(thread, repl, s, count, method == "subn")
	}
	if err != nil {
		var me *MemoryError
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

// clampRegion applies Python's pos and endpos: the text ends at endpos, the search starts at pos.
func clampRegion(s string, pos, endpos int) (string, int) {
	if endpos < 0 || endpos > len(s) {
		endpos = len(s)
	}
	pos = max(0, min(pos, len(s)))
	if endpos < pos {
		endpos = pos
	}
	return s[:endpos], pos
}

// searchFrom finds the leftmost match in text that starts at or after start, seeing the text
// before start as context. It returns Go's submatch index pairs or nil.
func (p *rePattern) searchFrom(text string, start int, full bool) ([]int, error) {
	if start == 0 {
		if full {
			re, err := p.fullRe()
			if err != nil {
				return nil, err
			}
			return re.FindStringSubmatchIndex(text), nil
		}
		return p.re.FindStringSubmatchIndex(text), nil
	}
	re, err := p.afterRe()
	if full {
		re, err = p.afterFullRe()
	}
	if err != nil {
		return nil, err
	}
	_, k := utf8.DecodeLastRuneInString(text[:start])
	base := start - k
	loc := re.FindStringSubmatchIndex(text[base:])
	if loc == nil {
		return nil, nil
	}
	_, w := utf8.DecodeRuneInString(text[base+loc[0]:])
	loc[0] += w
	for i := range loc {
		if loc[i] >= 0 {
			loc[i] += base
		}
	}
	return loc, nil
}

func (p *rePattern) matchOne(s, text string, pos int, method string) (starlark.Value, error) {
	var loc []int
	var err error
	switch {
	case method == "search":
		loc, err = p.searchFrom(text, pos, false)
	case pos == 0 && method == "match":
		var re *regexp.Regexp
		if re, err = p.anchoredRe(); err == nil {
			loc = re.FindStringSubmatchIndex(text)
		}
	default:
		loc, err = p.searchFrom(text, pos, method == "fullmatch")
		if loc != nil && loc[0] != pos {
			loc = nil
		}
	}
	if err != nil || loc == nil {
		return starlark.None, err
	}
	return &reMatch{p: p, s: s, loc: loc, pos: pos, endpos: len(text)}, nil
}

// each calls fn for the successive matches in text from pos, with Python 3.7's rules: an empty
// match is allowed right after a non-empty one, and after an empty match the search resumes one
// character later. limit > 0 stops after that many matches.
func (p *rePattern) each(thread *starlark.Thread, text string, pos, limit int, fn func(loc []int) error) error {
	pc := pacer{thread: thread}
	n := 0
	mustAdvance := false
	for pos <= len(text) && (limit <= 0 || n < limit) {
		start := pos
		if mustAdvance {
			if pos >= len(text) {
				break
			}
			_, w := utf8.DecodeRuneInString(text[pos:])
			start += w
		}
		loc, err := p.searchFrom(text, start, false)
		if err != nil {
			return err
		}
		if loc == nil {
			break
		}
		if err := fn(loc); err != nil {
			return err
		}
		n++
		mustAdvance = loc[0] == loc[1]
		pos = loc[1]
		if err := pc.step(); err != nil {
			return err
		}
	}
	return nil
}

// groupValue returns group g of a match as a string, or dflt when it did not take part.
func groupValue(s string, loc []int, g int, dflt starlark.Value) starlark.Value {
	if 2*g+1 >= len(loc) || loc[2*g] < 0 {
		return dflt
	}
	return starlark.String(s[loc[2*g]:loc[2*g+1]])
}

// findAll is findall (strings, or tuples of groups) or finditer (match objects).
func (p *rePattern) findAll(thread *starlark.Thread, s, text string, pos int, iter bool) (starlark.Value, error) {
	m := newMeter(thread, "re.findall")
	ng := p.re.NumSubexp()
	per := int64(32 + 32*ng)
	if iter {
		per = 96
	}
	var out []starlark.Value
	err := p.each(thread, text, pos, 0, func(loc []int) error {
		if err := m.grow(int64(len(out)+1) * per); err != nil {
			return err
		}
		switch {
		case iter:
			out = append(out, &reMatch{p: p, s: s, loc: loc, pos: pos, endpos: len(text)})
		case ng == 0:
			out = append(out, groupValue(text, loc, 0, starlark.String("")))
		case ng == 1:
			out = append(out, groupValue(text, loc, 1, starlark.String("")))
		default:
			t := make(starlark.Tuple, ng)
			for g := 1; g <= ng; g++ {
				t[g-1] = groupValue(text, loc, g, starlark.String(""))
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := m.settle(int64(len(out)) * per); err != nil {
		return nil, err
	}
	return starlark.NewList(out), nil
}

func (p *rePattern) split(thread *starlark.Thread, s string, maxsplit int) (starlark.Value, error) {
	if maxsplit < 0 {
		return starlark.NewList([]starlark.Value{starlark.String(s)}), nil
	}
	m := newMeter(thread, "re.split")
	ng := p.re.NumSubexp()
	var out []starlark.Value
	last := 0
	err := p.each(thread, s, 0, maxsplit, func(loc []int) error {
		if err := m.grow(int64(len(out)+ng+2) * 32); err != nil {
			return err
		}
		out = append(out, starlark.String(s[last:loc[0]]))
		for g := 1; g <= ng; g++ {
			out = append(out, groupValue(s, loc, g, starlark.None))
		}
		last = loc[1]
		return nil
	})
	if err != nil {
		return nil, err
	}
	out = append(out, starlark.String(s[last:]))
	if err := m.settle(int64(len(out)+ng+1) * 32); err != nil {
		return nil, err
	}
	return starlark.NewList(out), nil
}

// replPiece is a literal or, when group >= 0, a group reference of a replacement template.
type replPiece struct {
	lit   string
	group int
}

// parseTemplate parses a replacement string as Python's re: \1..\99, \g<n>, \g<name>, the
// escapes \a \b \f \n \r \t \v \\ and octal; an unknown escape of an ASCII letter is an error,
// any other unknown escape is kept with its backslash.
func (p *rePattern) parseTemplate(repl string) ([]replPiece, error) {
	var pieces []replPiece
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			pieces = append(pieces, replPiece{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	ng := p.re.NumSubexp()
	ref := func(g, at int) error {
		if g > ng {
			return fmt.Errorf("invalid group reference %d at position %d", g, at)
		}
		flush()
		pieces = append(pieces, replPiece{group: g})
		return nil
	}
	for i := 0; i < len(repl); {
		c := repl[i]
		if c != '\\' {
			lit.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(repl) {
			return nil, errors.New("bad escape (end of pattern) at position " + strconv.Itoa(i))
		}
		e := repl[i+1]
		switch {
		case e == 'g':
			if i+2 >= len(repl) || repl[i+2] != '<' {
				return nil, fmt.Errorf("missing < at position %d", i+2)
			}
			end := strings.IndexByte(repl[i+3:], '>')
			if end < 0 {
				return nil, fmt.Errorf("missing >, unterminated name at position %d", i+3)
			}
			name := repl[i+3 : i+3+end]
			if name == "" {
				return nil, fmt.Errorf("missing group name at position %d", i+3)
			}
			g, err := strconv.Atoi(name)
			if err != nil {
				var ok bool
				if g, ok = p.names[name]; !ok {
					if !validGroupName(name) {
						return nil, fmt.Errorf("bad character in group name '%s' at position %d", name, i+3)
					}
					return nil, fmt.Errorf("unknown group name '%s'", name)
				}
			} else if g < 0 {
				return nil, fmt.Errorf("bad character in group name '%s' at position %d", name, i+3)
			}
			if err := ref(g, i+3); err != nil {
				return nil, err
			}
			i += 3 + end + 1
		case e == '0':
			j := i + 2
			for j < len(repl) && j < i+4 && isOctal(repl[j]) {
				j++
			}
			v, _ := strconv.ParseUint(repl[i+1:j], 8, 32)
			lit.WriteRune(rune(v))
			i = j
		case e >= '1' && e <= '9':
			if e <= '7' && i+3 < len(repl) && isOctal(repl[i+2]) && isOctal(repl[i+3]) {
				v, _ := strconv.ParseUint(repl[i+1:i+4], 8, 32)
				if v > 0o377 {
					return nil, fmt.Errorf("octal escape value \\%s outside of range 0-0o377 at position %d", repl[i+1:i+4], i)
				}
				lit.WriteRune(rune(v))
				i += 4
				continue
			}
			j := i + 2
			if j < len(repl) && repl[j] >= '0' && repl[j] <= '9' {
				j++
			}
			g, _ := strconv.Atoi(repl[i+1 : j])
			if err := ref(g, i+1); err != nil {
				return nil, err
			}
			i = j
		default:
			if r, ok := map[byte]byte{'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v', '\\': '\\'}[e]; ok {
				lit.WriteByte(r)
			} else if e >= 'a' && e <= 'z' || e >= 'A' && e <= 'Z' {
				return nil, fmt.Errorf("bad escape \\%c at position %d", e, i)
			} else {
				lit.WriteByte('\\')
				lit.WriteByte(e)
			}
			i += 2
		}
	}
	flush()
	return pieces, nil
}

func (p *rePattern) sub(thread *starlark.Thread, repl starlark.Value, s string, count int, withCount bool) (starlark.Value, error) {
	var pieces []replPiece
	var fn starlark.Callable
	switch r := repl.(type) {
	case starlark.String:
		var err error
		if pieces, err = p.parseTemplate(string(r)); err != nil {
			return nil, err
		}
	case starlark.Callable:
		fn = r
	default:
		return nil, fmt.Errorf("repl must be a str or a function, not %s", pyType(repl))
	}
	if count < 0 {
		count = -1 // Python: a negative count replaces nothing
	}
	m := newMeter(thread, "re.sub")
	var out strings.Builder
	last, n := 0, 0
	var err error
	if count >= 0 {
		err = p.each(thread, s, 0, count, func(loc []int) error {
			out.WriteString(s[last:loc[0]])
			if fn != nil {
				v, err := starlark.Call(thread, fn, starlark.Tuple{&reMatch{p: p, s: s, loc: loc, endpos: len(s)}}, nil)
				if err != nil {
					return err
				}
				str, ok := v.(starlark.String)
				if !ok {
					return fmt.Errorf("expected str instance, %s found", pyType(v))
				}
				out.WriteString(string(str))
			} else {
				for _, pc := range pieces {
					if pc.group < 0 {
						out.WriteString(pc.lit)
					} else if loc[2*pc.group] >= 0 {
						out.WriteString(s[loc[2*pc.group]:loc[2*pc.group+1]])
					}
				}
			}
			last = loc[1]
			n++
			return m.grow(int64(out.Len()))
		})
	}
	if err != nil {
		return nil, err
	}
	out.WriteString(s[last:])
	if err := m.settle(int64(out.Len())); err != nil {
		return nil, err
	}
	result := starlark.String(out.String())
	if withCount {
		return starlark.Tuple{result, starlark.MakeInt(n)}, nil
	}
	return result, nil
}

// --- match objects ----------------------------------------------------------------------------

// reMatch is a match object (type "re.Match"). Offsets are byte offsets into the string.
type reMatch struct {
	p           *rePattern
	s           string
	loc         []int
	pos, endpos int
}

var reMatchAttrs = []string{"end", "endpos", "group", "groupdict", "groups", "pos", "re", "span", "start", "string"}

func (m *reMatch) String() string {
	return fmt.Sprintf("<re.Match object; span=(%d, %d), match=%s>", m.loc[0], m.loc[1], starlark.String(m.s[m.loc[0]:m.loc[1]]).String())
}
func (m *reMatch) Type() string          { return "re.Match" }
func (m *reMatch) Freeze()               {}
func (m *reMatch) Truth() starlark.Bool  { return true }
func (m *reMatch) Hash() (uint32, error) { return 0, errors.New("unhashable type: re.Match") }
func (m *reMatch) AttrNames() []string   { return reMatchAttrs }

// Get makes m[g] work like m.group(g).
func (m *reMatch) Get(k starlark.Value) (starlark.Value, bool, error) {
	g, err := m.groupIndex(k)
	if err != nil {
		return nil, false, err
	}
	return groupValue(m.s, m.loc, g, starlark.None), true, nil
}

func (m *reMatch) groupIndex(k starlark.Value) (int, error) {
	switch k := k.(type) {
	case starlark.Int:
		if g, ok := k.Int64(); ok && g >= 0 && int(g) <= m.p.re.NumSubexp() {
			return int(g), nil
		}
	case starlark.String:
		if g, ok := m.p.names[string(k)]; ok {
			return g, nil
		}
	}
	return 0, errors.New("no such group")
}

func (m *reMatch) Attr(name string) (starlark.Value, error) {
	switch name {
	case "string":
		return starlark.String(m.s), nil
	case "re":
		return &rePatternValue{p: m.p}, nil
	case "pos":
		return starlark.MakeInt(m.pos), nil
	case "endpos":
		return starlark.MakeInt(m.endpos), nil
	}
	var impl func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)
	switch name {
	case "group":
		impl = m.group
	case "groups":
		impl = m.groups
	case "groupdict":
		impl = m.groupdict
	case "start", "end", "span":
		impl = m.position
	default:
		return nil, nil
	}
	return starlark.NewBuiltin(name, impl).BindReceiver(m), nil
}

func (m *reMatch) group(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("%s: unexpected keyword arguments", b.Name())
	}
	if len(args) == 0 {
		args = starlark.Tuple{starlark.MakeInt(0)}
	}
	out := make(starlark.Tuple, len(args))
	for i, a := range args {
		v, _, err := m.Get(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", b.Name(), err)
		}
		out[i] = v
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return out, nil
}

func (m *reMatch) groups(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dflt starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "default?", &dflt); err != nil {
		return nil, err
	}
	ng := m.p.re.NumSubexp()
	out := make(starlark.Tuple, ng)
	for g := 1; g <= ng; g++ {
		out[g-1] = groupValue(m.s, m.loc, g, dflt)
	}
	return out, nil
}

func (m *reMatch) groupdict(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dflt starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "default?", &dflt); err != nil {
		return nil, err
	}
	d := starlark.NewDict(len(m.p.names))
	for g, name := range m.p.re.SubexpNames() {
		if name != "" {
			_ = d.SetKey(starlark.String(name), groupValue(m.s, m.loc, g, dflt))
		}
	}
	return d, nil
}

func (m *reMatch) position(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var gv starlark.Value = starlark.MakeInt(0)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "group?", &gv); err != nil {
		return nil, err
	}
	g, err := m.groupIndex(gv)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	start, end := m.loc[2*g], m.loc[2*g+1]
	switch b.Name() {
	case "start":
		return starlark.MakeInt(start), nil
	case "end":
		return starlark.MakeInt(end), nil
	}
	return starlark.Tuple{starlark.MakeInt(start), starlark.MakeInt(end)}, nil
}
