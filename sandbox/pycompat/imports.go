package pycompat

import (
	"sort"
	"strings"

	"github.com/starplan/starplan/internal/spell"
)

// importName is one imported name: module (or member) path and the name it binds.
type importName struct {
	path string // "math", or for from-imports the member "floor"
	as   string // the bound name, "" when not renamed
	off  int    // source offset, for diagnostics
}

// emitImport translates the import statement that starts at toks[i]: an import of predeclared
// modules is dropped (or becomes `m = math` for an alias), a from-import becomes assignments
// (`floor, ceil = math.floor, math.ceil`). It returns the index of the token that ends the
// statement, or i when it wrote nothing (the statement is reported, or is not a valid import).
func (t *translator) emitImport(b *writer, toks []token, i, hi int) int {
	end := i
	for end < hi && toks[end].kind != kNewline && !t.isOp(toks[end], ";") {
		end = next(toks, end, hi)
	}
	var lhs, rhs []string
	if t.isName(toks[i], "import") {
		names, ok := t.importList(toks, i+1, end, true)
		if !ok {
			return i
		}
		bad := false
		for _, n := range names {
			if _, known := t.opts.Modules[n.path]; !known {
				t.unknownModule(n.path, n.off)
				bad = true
				continue
			}
			if n.as != "" && n.as != n.path {
				lhs, rhs = append(lhs, n.as), append(rhs, n.path)
			}
		}
		if bad {
			return i
		}
	} else {
		// from M import a, b as c  |  from M import (a, b)  |  from M import *
		k := i + 1
		mod := ""
		for k < end && (t.isOp(toks[k], ".") || t.isOp(toks[k], "...")) {
			mod += t.text(toks[k])
			k++
		}
		modOff := toks[min(i+1, end-1)].start
		if k < end && toks[k].kind == kName && !t.isName(toks[k], "import") {
			p, j, ok := t.dotted(toks, k, end)
			if !ok {
				return i
			}
			mod += p
			k = j
		}
		if mod == "" || k >= end || !t.isName(toks[k], "import") {
			return i
		}
		k++
		if k < end && t.isOp(toks[k], "*") && k+1 == end {
			t.diag(CodeImportStar, toks[i].start, "`from "+mod+" import *` is not supported",
				"import the names you use (from "+mod+" import name), or write "+mod+".name")
			return i
		}
		lo, hi2 := k, end
		if k < end && t.isOp(toks[k], "(") && toks[k].match == end-1 {
			lo, hi2 = k+1, end-1
		}
		names, ok := t.importList(toks, lo, hi2, false)
		if !ok {
			return i
		}
		members, known := t.opts.Modules[mod]
		if !known {
			t.unknownModule(mod, modOff)
			return i
		}
		bad := false
		for _, n := range names {
			if !contains(members, n.path) {
				t.unknownMember(mod, n.path, members, n.off)
				bad = true
				continue
			}
			as := n.as
			if as == "" {
				as = n.path
			}
			lhs, rhs = append(lhs, as), append(rhs, mod+"."+n.path)
		}
		if bad {
			return i
		}
	}

	// Keep the statement's line breaks and comments; backslash continuations become plain
	// newlines, since the replacement is complete on its first line.
	var kept strings.Builder
	for k := i + 1; k < end; k++ {
		breaksAndComments(&kept, t.keptGap(toks, k))
	}
	followed := end < hi && t.isOp(toks[end], ";")
	if followed && strings.Contains(kept.String(), "\n") {
		return i // `from m import (a,\n b); x = 1`: no exact single-line form; left to the checker
	}
	var repl string
	switch {
	case len(lhs) > 0:
		repl = strings.Join(lhs, ", ") + " = " + strings.Join(rhs, ", ")
	case followed || !t.stmtStart(toks, i) || (i > 0 && toks[i-1].kind != kNewline) || t.indented(toks[i].start):
		repl = "pass" // a statement is (or may be) needed here
	}
	b.WriteString(repl)
	b.WriteString(kept.String())
	t.record(RuleImport, toks[i].start, toks[end-1].end)
	return end
}

// breaksAndComments writes the newlines and comments of a dropped gap, without its spaces and
// backslash continuations.
func breaksAndComments(b *strings.Builder, gap string) {
	for k := 0; k < len(gap); k++ {
		switch gap[k] {
		case '\n':
			b.WriteByte('\n')
		case '#':
			e := strings.IndexByte(gap[k:], '\n')
			if e < 0 {
				e = len(gap) - k
			}
			b.WriteString("  " + gap[k:k+e])
			k += e - 1
		}
	}
}

// indented reports whether the line of off has whitespace before off.
func (t *translator) indented(off int) bool {
	return off > 0 && t.src[off-1] != '\n'
}

// importList parses `a.b as c, d` in toks[lo:hi] (dotted paths only when modules is true). A
// trailing comma is allowed.
func (t *translator) importList(toks []token, lo, hi int, modules bool) ([]importName, bool) {
	var out []importName
	k := lo
	for k < hi {
		if toks[k].kind != kName || isKeyword(t.text(toks[k])) {
			return nil, false
		}
		n := importName{off: toks[k].start}
		if modules {
			p, j, ok := t.dotted(toks, k, hi)
			if !ok {
				return nil, false
			}
			n.path, k = p, j
		} else {
			n.path = t.text(toks[k])
			k++
		}
		if k < hi && t.isName(toks[k], "as") {
			if k+1 >= hi || toks[k+1].kind != kName || isKeyword(t.text(toks[k+1])) {
				return nil, false
			}
			n.as = t.text(toks[k+1])
			k += 2
		}
		out = append(out, n)
		if k < hi {
			if !t.isOp(toks[k], ",") {
				return nil, false
			}
			k++
		}
	}
	return out, len(out) > 0
}

// dotted parses a.b.c from toks[k] and returns it and the index after it.
func (t *translator) dotted(toks []token, k, hi int) (string, int, bool) {
	var s strings.Builder
	for {
		if k >= hi || toks[k].kind != kName || isKeyword(t.text(toks[k])) {
			return "", 0, false
		}
		s.WriteString(t.text(toks[k]))
		k++
		if k+1 < hi && t.isOp(toks[k], ".") {
			s.WriteByte('.')
			k++
			continue
		}
		return s.String(), k, true
	}
}

func (t *translator) moduleNames() []string {
	names := make([]string, 0, len(t.opts.Modules))
	for m := range t.opts.Modules {
		names = append(names, m)
	}
	sort.Strings(names)
	return names
}

func (t *translator) unknownModule(mod string, off int) {
	names := t.moduleNames()
	if len(names) == 0 {
		t.diag(CodeImportUnknown, off, "module "+mod+" is not available: a plan has no modules to import",
			"drop the import and use only the predeclared builtins")
		return
	}
	list := strings.Join(names, ", ")
	msg := "module " + mod + " is not available in a plan; the modules are: " + list
	if s := suggest(mod, names); s != "" {
		msg += " (did you mean " + s + "?)"
	}
	hint := "drop the import and do without " + mod + ": only " + list + " can be used, and they need no import"
	if why, ok := ForeignModuleHint(mod); ok {
		hint = why + "; drop the import: only " + list + " can be used, and they need no import"
	}
	t.diag(CodeImportUnknown, off, msg, hint)
}

func (t *translator) unknownMember(mod, name string, members []string, off int) {
	sorted := append([]string(nil), members...)
	sort.Strings(sorted)
	msg := "module " + mod + " has no member " + name
	if s := suggest(name, sorted); s != "" {
		msg += " (did you mean " + s + "?)"
	}
	hint := "module " + mod + " has no members"
	if len(sorted) > 0 {
		hint = "its members are: " + strings.Join(sorted, ", ")
	}
	t.diag(CodeImportMember, off, msg, hint)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// maxSuggestLen is the longest name, in bytes, that suggest compares: a longer one is never a
// slip of the keyboard, and skipping it keeps a pathological import cheap to report.
const maxSuggestLen = 64

// suggest returns the candidate closest to s by Levenshtein distance, if it is close enough
// (at most half of s's length); the first of equally close candidates wins.
func suggest(s string, candidates []string) string {
	if len(s) > maxSuggestLen {
		return ""
	}
	best, bestD := "", len(s)/2+1
	for _, c := range candidates {
		if len(c) > maxSuggestLen {
			continue
		}
		if d := spell.Levenshtein(s, c, bestD); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
