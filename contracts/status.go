package contracts

import (
	"fmt"
	"strings"

	"github.com/starplan/starplan/internal/spell"
)

func statusDoc(c *Contract) string {
	return "STATUS: one of " + strings.Join(c.Statuses, ", ")
}

func checkStatus(p *pass) {
	c := p.contract
	allowed := strings.Join(c.Statuses, ", ")
	v, ok := p.in.Globals[StatusGlobal]
	if !ok {
		p.reportf(CodeStatusMissing, fmt.Sprintf("set STATUS = %q (or another allowed value) before the plan ends", c.Statuses[0]),
			"STATUS is not set; it must be one of %s", allowed)
		return
	}
	s, ok := v.(string)
	if !ok {
		p.reportf(CodeStatusType, fmt.Sprintf("assign a string: STATUS = %q", c.Statuses[0]),
			"STATUS is %s; it must be a string, one of %s", describeValue(v), allowed)
		return
	}
	if c.allows(s) {
		return
	}
	hint := "use one of the allowed values exactly as written"
	if near := c.suggest(s); near != "" {
		hint = fmt.Sprintf("did you mean STATUS = %q?", near)
	}
	p.reportf(CodeStatusInvalid, hint, "STATUS is %q; it must be one of %s", s, allowed)
}

func (c *Contract) allows(s string) bool {
	for _, a := range c.Statuses {
		if a == s {
			return true
		}
	}
	return false
}

// suggest returns the allowed STATUS closest to s: the same value up to case, spaces, hyphens
// and surrounding quotes, else the first nearest by Levenshtein distance if it is close enough
// (at most one edit per three characters, and at most 3), else "".
func (c *Contract) suggest(s string) string {
	norm := func(x string) string {
		x = strings.ToLower(strings.Trim(strings.TrimSpace(x), `"'`))
		return strings.NewReplacer(" ", "_", "-", "_").Replace(x)
	}
	n := norm(s)
	best, bestDist := "", min(3, max(1, len(n)/3))+1
	for _, a := range c.Statuses {
		na := norm(a)
		if na == n {
			return a
		}
		if d := spell.Levenshtein(n, na, bestDist); d < bestDist {
			best, bestDist = a, d
		}
	}
	return best
}

func writesDoc(c *Contract) string {
	if c.WriteStatus == "" {
		return "nothing may be written: this domain is read-only"
	}
	return fmt.Sprintf("nothing may be written unless STATUS is %q", c.WriteStatus)
}

// checkWrites rejects staged changes under a valid STATUS other than the write status. A missing
// or invalid STATUS is reported by checkStatus alone: the fix there decides whether writes are
// allowed.
func checkWrites(p *pass) {
	c := p.contract
	s, ok := p.in.Globals[StatusGlobal].(string)
	if !ok || !c.allows(s) || s == c.WriteStatus || p.in.Changes.Empty() {
		return
	}
	var parts []string
	for _, name := range p.tables() {
		t := p.changes(name)
		var ops []string
		for _, op := range []struct {
			n    int
			verb string
		}{{len(t.Inserted), "inserted"}, {len(t.Updated), "updated"}, {len(t.Deleted), "deleted"}} {
			if op.n > 0 {
				ops = append(ops, fmt.Sprintf("%d %s", op.n, op.verb))
			}
		}
		parts = append(parts, name+": "+strings.Join(ops, ", "))
	}
	allowed := "no STATUS may write in this domain"
	hint := "remove the writes"
	if c.WriteStatus != "" {
		allowed = fmt.Sprintf("only STATUS %q may write", c.WriteStatus)
		hint = fmt.Sprintf("decide first, then write: check everything before the first insert or update, and write only when STATUS = %q", c.WriteStatus)
	}
	p.reportf(CodeWritesNotAllowed, hint, "STATUS is %q but the plan changes rows (%s); %s", s, strings.Join(parts, "; "), allowed)
}

func changesDoc(c *Contract) string {
	var must, mustNot []string
	for _, s := range c.Statuses {
		if req, ok := c.RequiresChange[s]; ok && req {
			must = append(must, fmt.Sprintf("%q", s))
		} else if ok {
			mustNot = append(mustNot, fmt.Sprintf("%q", s))
		}
	}
	var parts []string
	if len(must) > 0 {
		parts = append(parts, "STATUS "+strings.Join(must, ", ")+" only when the plan changes data")
	}
	if len(mustNot) > 0 {
		parts = append(parts, "STATUS "+strings.Join(mustNot, ", ")+" only when it changes nothing")
	}
	return strings.Join(parts, "; ")
}

// checkChanges holds a valid STATUS to its requires_change: a claim of a change the plan did not
// stage, or of no change when it staged some. Writes under a STATUS that may not write at all
// are checkWrites'.
func checkChanges(p *pass) {
	c := p.contract
	s, ok := p.in.Globals[StatusGlobal].(string)
	if !ok || !c.allows(s) {
		return
	}
	req, declared := c.RequiresChange[s]
	switch {
	case !declared:
	case req && p.in.Changes.Empty():
		p.reportf(CodeChangeMissing, fmt.Sprintf("stage the change before claiming it, or end with the STATUS that says why nothing changed (one of %s)", strings.Join(c.others(s), ", ")),
			"STATUS is %q, which says data changed, but the plan staged no change", s)
	case !req && s == c.WriteStatus && !p.in.Changes.Empty():
		p.reportf(CodeChangeUnexpected, "remove the writes, or end with the STATUS of a change",
			"STATUS is %q, which says nothing changed, but the plan changes rows (%s)", s, strings.Join(p.tables(), ", "))
	}
}

// others lists the statuses but s, quoted.
func (c *Contract) others(s string) []string {
	var out []string
	for _, a := range c.Statuses {
		if a != s {
			out = append(out, fmt.Sprintf("%q", a))
		}
	}
	return out
}

// NoneHint is the hint of a plan that used None as a row (a lookup found nothing), in the
// domain's own words: the statuses that change nothing, one of which says so to the customer.
func (c *Contract) NoneHint() string {
	var quiet []string
	for _, s := range c.Statuses {
		if s != c.WriteStatus {
			quiet = append(quiet, fmt.Sprintf("%q", s))
		}
	}
	if len(quiet) == 0 {
		return "a lookup such as tbl.get(...) returned None: check for None first, and say so in answer_text"
	}
	return fmt.Sprintf("a lookup such as tbl.get(...) returned None: check for None first, then set STATUS to the one that tells the customer why (%s) and change nothing",
		strings.Join(quiet, ", "))
}
