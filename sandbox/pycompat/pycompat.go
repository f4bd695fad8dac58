// Package pycompat rewrites, before parsing, the Python constructs that a model writes out of
// habit and that have an exact Starlark meaning: f-strings, %-formatting and str.format with
// format specs, `is None`/`is True`/`is False`, generator expressions, chained comparisons and
// imports of modules that are already predeclared. Every rewrite is recorded (line, rule, the
// line before and after) and every construct it refuses is reported as a diag.Diagnostic with a
// hint, so a run's audit shows exactly what the program became.
//
// It owns only source-to-source translation. It must not parse with go.starlark.net, resolve
// names, run anything or decide whether a program is acceptable: constructs it does not know
// (try/except, class, lambda-isms, walrus, `**`, ...) are left untouched for the checker, and a
// refused construct is left as it was written. The output always has exactly the lines of the
// input, and each construct stays on its line, so diagnostics downstream refer to the program's
// own lines. Text inside string literals and comments is never touched (f-strings excepted).
//
// Rewrites target plain Starlark plus the builtin format(value, spec) that the sandbox
// predeclares (Python's format-spec mini-language), and Starlark's own str, repr and int. A
// program that rebinds one of those names breaks the rewritten code; that is not detected here.
//
// Exact, with two documented approximations: a generator becomes a list, so any() and all()
// evaluate every element instead of stopping at the first decisive one; and `"%5s" % x` with one
// conversion assumes x is not a tuple (Python would unpack a tuple value).
//
// Translate never panics (a last-resort recover returns the source unchanged with
// CodeInternal) and runs in time linear in the size of its input: nesting, copies and f-string
// scanning are bounded.
package pycompat

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/starplan/starplan/diag"
)

// Options configure Translate. The zero value knows no modules, so every import is refused.
type Options struct {
	// Modules maps each predeclared module name (math, json, re) to its member names. An import
	// of a module that is not a key is refused; so is an import of a member not listed.
	Modules map[string][]string
}

// Rewrite records one construct that Translate rewrote. Line is 1-based; Before and After are
// the whole source lines the construct spans (joined by "\n", at most 50 lines), before and
// after every rewrite of the program. A construct nested in another (a generator inside an
// f-string field) has its own record.
type Rewrite struct {
	Line   int    `json:"line"`
	Rule   string `json:"rule"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// Result is the outcome of Translate. Source has exactly as many lines as the input (when it
// was rewritten, a lone CR line end has become LF, which Starlark reads the same). Rewrites
// are in source order. Diagnostics, all with Stage diag.StagePycompat, are sorted by position;
// there are at most 50 (the first ones), since a model cannot act on more.
type Result struct {
	Source      string
	Rewrites    []Rewrite
	Diagnostics diag.List
}

// The rules, as recorded in Rewrite.Rule.
const (
	RuleFString        = "f-string"        // f"{x:.2f}" -> "{}".format(format(x, ".2f"))
	RulePercentFormat  = "percent-format"  // "%5.1f" % x -> "{}".format(format(x, "5.1f"))
	RuleStrFormat      = "str-format"      // "{:>5}".format(x) -> "{}".format(format(x, ">5"))
	RuleIsNone         = "is-none"         // x is None -> x == None (also True, False)
	RuleGenexp         = "genexp"          // sum(x for x in y) -> sum([x for x in y])
	RuleChainedCompare = "chained-compare" // a < b < c -> (a < b and b < c)
	RuleImport         = "import"          // import math -> (dropped); from math import floor -> floor = math.floor
)

// The diagnostic codes. Each refused construct is left as written.
const (
	// CodeFString: an f-string that cannot be translated exactly (malformed, !a, a nested spec
	// with its own spec, escapes in a spec or debug text, an escape that spells a brace).
	CodeFString = "f-string"
	// CodePercentFormat: a %-format that cannot be translated exactly (* width, %a, %c with a
	// width, precision on an integer conversion, argument count mismatch, a non-literal tuple).
	CodePercentFormat = "percent-format"
	// CodeStrFormat: a str.format call with specs that cannot be translated exactly (nested
	// fields, attribute or index fields, *args, an argument that would be evaluated twice).
	CodeStrFormat = "str-format"
	// CodeChainedCompare: a chained comparison whose middle operand is not a plain value, so
	// splitting it would evaluate that operand twice.
	CodeChainedCompare = "chained-compare"
	// CodeImportUnknown: an import of a module that is not predeclared.
	CodeImportUnknown = "import-unknown"
	// CodeImportMember: from M import X where M has no member X.
	CodeImportMember = "import-member"
	// CodeImportStar: from M import *.
	CodeImportStar = "import-star"
	// CodeInternal: pycompat failed on this input; the source was returned unchanged.
	CodeInternal = "pycompat-internal"
)

// tokenPool recycles token slices between calls; slices grown past maxPooledTokens (a huge
// program) are left to the collector.
var tokenPool = sync.Pool{New: func() any { s := make([]token, 0, 512); return &s }}

const maxPooledTokens = 1 << 14

// hasLoneCR reports whether s holds a CR that is not followed by LF.
func hasLoneCR(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\r' && (i+1 == len(s) || s[i+1] != '\n') {
			return true
		}
	}
	return false
}

// Output bounds.
const (
	maxRewriteLines = 50 // lines of a Rewrite's Before and After
	maxDiagnostics  = 50 // diagnostics in a Result
)

// maxNest bounds bracket nesting that is rewritten; deeper groups are copied verbatim.
const maxNest = 100

// Translate rewrites src (a whole program) and returns the result. It never fails: a construct
// it cannot translate exactly is left untouched and reported.
func Translate(src string, opts Options) Result { return translate(src, opts, true) }

// translate is Translate; byLine renders only the logical lines the pre-scan flags (see
// renderLines), otherwise every token goes through the renderer (the reference the tests compare
// with).
func translate(src string, opts Options, byLine bool) (res Result) {
	orig := src
	if i := strings.IndexByte(src, '\r'); i >= 0 && hasLoneCR(src[i:]) {
		// Starlark (like Python) ends a line at a lone CR. Reading it as LF keeps every offset
		// and every line number, and lets the rest of the package know one line end.
		src = strings.NewReplacer("\r\n", "\r\n", "\r", "\n").Replace(src)
	} else if byLine && !mayNeedRewrite(src) {
		return Result{Source: src} // (the reference renders every token, so it checks the pre-scan too)
	}
	defer func() {
		if r := recover(); r != nil {
			res = Result{Source: orig, Diagnostics: diag.List{{
				Stage: diag.StagePycompat, Code: CodeInternal,
				Message: fmt.Sprintf("internal error in the Python-compatibility pass: %v", r),
				Hint:    "write plain Starlark",
			}}}
		}
	}()
	t := &translator{src: src, opts: opts}
	pooled := tokenPool.Get().(*[]token)
	toks := tokenize(src, 0, len(src), false, (*pooled)[:0])
	defer func() {
		if cap(toks) <= maxPooledTokens {
			*pooled = toks
			tokenPool.Put(pooled)
		}
	}()
	if len(toks) == 0 {
		return Result{Source: orig}
	}
	b := writer{src: src, hint: len(src) + len(src)/4 + 64}
	b.copy(0, toks[0].start)
	if byLine {
		t.renderLines(&b, toks)
	} else {
		t.render(&b, toks, 0, len(toks), 0, true)
	}
	b.copy(toks[len(toks)-1].end, len(src))
	out := b.String()
	if len(t.rewrites) == 0 {
		out = orig
	}
	if out != orig && strings.Count(out, "\n") != strings.Count(src, "\n") {
		panic("line count changed") // recovered above: never hand back a shifted program
	}
	res.Source = out
	res.Diagnostics = t.positions()
	if len(t.rewrites) > 0 {
		t.line(0) // fills t.lineStarts
		outStarts := lineStarts(out)
		slices.SortStableFunc(t.rewrites, func(a, b rewriteRec) int { return cmp.Compare(a.start, b.start) })
		res.Rewrites = make([]Rewrite, 0, len(t.rewrites))
		for _, r := range t.rewrites {
			l1 := t.line(r.start)
			l2 := t.line(r.end)
			if r.end > r.start && l2 > l1 && src[r.end-1] == '\n' {
				l2--
			}
			l2 = min(l2, l1+maxRewriteLines-1)
			res.Rewrites = append(res.Rewrites, Rewrite{
				Line:   l1,
				Rule:   r.rule,
				Before: lineSpan(src, t.lineStarts, l1, l2),
				After:  lineSpan(out, outStarts, l1, l2),
			})
		}
	}
	return res
}

type diagKey struct {
	off  int
	code string
}

// pendingDiag is a diagnostic whose line and column are computed at the end, from off.
type pendingDiag struct {
	off int
	d   diag.Diagnostic
}

type rewriteRec struct {
	rule       string
	start, end int
}

// translator holds the state of one Translate call.
type translator struct {
	src        string
	opts       Options
	rewrites   []rewriteRec
	diags      []pendingDiag
	lineStarts []int
	seen       map[diagKey]bool // diagnostics already reported
	quiet      int              // > 0 while rendering a duplicate: record nothing
	flat       int              // > 0 while rendering a duplicate: gaps with newlines become one space
	fparts     []fpart          // emitFString's scratch for an f-string's pieces (nil while in use)
	exprToks   []token          // renderExpr's scratch for a field's tokens (nil while in use)
}

func (t *translator) record(rule string, start, end int) {
	if t.quiet == 0 {
		t.rewrites = append(t.rewrites, rewriteRec{rule: rule, start: start, end: end})
	}
}

func (t *translator) diag(code string, off int, msg, hint string) {
	if t.quiet > 0 {
		return
	}
	k := diagKey{off, code}
	if t.seen[k] {
		return
	}
	if t.seen == nil {
		t.seen = map[diagKey]bool{}
	}
	t.seen[k] = true
	t.diags = append(t.diags, pendingDiag{off: off, d: diag.Diagnostic{
		Stage: diag.StagePycompat, Code: code, Message: msg, Hint: hint,
	}})
}

// mark returns the current numbers of rewrites and diagnostics, for rollback.
func (t *translator) mark() (int, int) { return len(t.rewrites), len(t.diags) }

// rollback forgets the rewrites and diagnostics recorded since mark, when the text they were
// made in is discarded (it is rendered again, and reported again, by the caller).
func (t *translator) rollback(nrw, nd int) {
	t.rewrites = t.rewrites[:nrw]
	for _, p := range t.diags[nd:] {
		delete(t.seen, diagKey{p.off, p.d.Code})
	}
	t.diags = t.diags[:nd]
}

// positions returns the diagnostics sorted by position, with their lines and columns. Sorted,
// each column is counted from the previous one, so the cost is linear even on one long line.
func (t *translator) positions() diag.List {
	if len(t.diags) == 0 {
		return nil
	}
	sort.SliceStable(t.diags, func(i, j int) bool { return t.diags[i].off < t.diags[j].off })
	out := make(diag.List, min(len(t.diags), maxDiagnostics))
	prevLine, prevOff, prevCol := 0, 0, 0
	for i, p := range t.diags[:len(out)] {
		off := min(max(p.off, 0), len(t.src))
		line := t.line(off)
		start := t.lineStarts[line-1]
		if line == prevLine && off >= prevOff {
			prevCol += utf8.RuneCountInString(t.src[prevOff:off])
		} else {
			prevCol = utf8.RuneCountInString(t.src[start:off]) + 1
		}
		prevLine, prevOff = line, off
		out[i] = p.d
		out[i].Line, out[i].Col = line, prevCol
	}
	return out
}

// lineStarts returns the offsets at which s's lines start.
func lineStarts(s string) []int {
	starts := make([]int, 1, strings.Count(s, "\n")+1)
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return starts
		}
		i += j + 1
		starts = append(starts, i)
	}
}

// lineSpan returns lines l1 through l2 (1-based) of s, whose lines start at starts, without
// the line break after l2: what joining those lines of strings.Split(s, "\n") gives.
func lineSpan(s string, starts []int, l1, l2 int) string {
	end := len(s)
	if l2 < len(starts) {
		end = starts[l2] - 1
	}
	return s[starts[l1-1]:end]
}

// line returns the 1-based line of the byte offset off.
func (t *translator) line(off int) int {
	if t.lineStarts == nil {
		t.lineStarts = lineStarts(t.src)
	}
	return sort.SearchInts(t.lineStarts, off+1)
}

// snippet returns the source of [start, end) on one line, shortened for a message.
func (t *translator) snippet(start, end int) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(t.src[start:end], "\uFFFD")), " ")
	if utf8.RuneCountInString(s) > 60 {
		s = string([]rune(s)[:57]) + "..."
	}
	return s
}
