package contracts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/starplan/starplan/table"
)

// Approval is who must approve a domain's runs before their changes are written: the "approval"
// object of policy.json. The zero value (no "approval" object) is the default: one approver who
// is not the run's proposer (four eyes), except that an admin credential and the local user may
// approve their own runs; pending runs never expire; no auto rule lets a run through without a
// person. Reads and runs with no changes need no approval.
//
//	"approval": {
//	  "required_approvals": 2,
//	  "four_eyes": "always",
//	  "pending_ttl": "24h",
//	  "auto": [
//	    {"name": "small_sale", "doc": "...", "kind": "auto_apply",
//	     "params": {"max_rows_written": 2, "tables": ["inventory", "transactions"]}},
//	    {"name": "routine", "doc": "...", "kind": "needs_person"}
//	  ]
//	}
type Approval struct {
	// RequiredApprovals is how many distinct approvers a run needs; it is applied when the last
	// of them approves. 0 means 1; at most MaxRequiredApprovals.
	RequiredApprovals int `json:"required_approvals,omitempty"`
	// FourEyes is FourEyesDefault ("" or "default": admins and the local user may approve their
	// own runs) or FourEyesAlways (nobody may). A proposer credential never may.
	FourEyes string `json:"four_eyes,omitempty"`
	// PendingTTL is how long a run waits for approval ("24h", "90m", "7d"); an older one is
	// expired: it can only be rejected or run again. Empty: never.
	PendingTTL string `json:"pending_ttl,omitempty"`
	// Auto are the rules that let a run through without a person, checked in order at apply,
	// on the change set being committed; the first that allows it approves it.
	Auto []AutoRule `json:"auto,omitempty"`

	ttl time.Duration
}

// The values of Approval.FourEyes.
const (
	FourEyesDefault = "default"
	FourEyesAlways  = "always"
)

// MaxRequiredApprovals is the most approvers a domain may require of one run.
const MaxRequiredApprovals = 10

// NeedsPersonFunction is the function of invariants.star a needs_person rule calls when its
// params name none.
const NeedsPersonFunction = "needs_person"

// AutoRule is one auto-approval rule: a name, a one-line doc, a kind (see AutoKinds) and its
// parameters.
type AutoRule struct {
	Name   string         `json:"name"`
	Doc    string         `json:"doc"`
	Kind   string         `json:"kind"`
	Params map[string]any `json:"params,omitempty"`

	maxRows  int
	tables   map[string]bool
	function string
}

// NeedsPerson is a domain's own auto rule (kind needs_person): a Starlark function of the change
// set that returns why a person must look at it, or "" when none need to. The engine builds it
// from invariants.star and binds it with BindNeedsPerson. The error is for a fault of the function
// itself; the rule then does not let the run through.
type NeedsPerson func(ctx context.Context, changes table.ChangeSet) (reason string, err error)

// AutoKinds documents the kinds of auto rules.
func AutoKinds() []KindDoc {
	return []KindDoc{
		{Name: "auto_apply", Params: "max_rows_written, [tables]", Doc: "lets a run through when it changes at most max_rows_written rows, all in the listed tables"},
		{Name: "needs_person", Params: "[function]", Doc: "lets a run through when the function of invariants.star (default needs_person) returns None for its change set; a string is the reason a person must look"},
	}
}

// TTL is how long a run may wait for approval; 0 means for ever.
func (a *Approval) TTL() time.Duration { return a.ttl }

// Required is how many distinct approvers a run needs (at least 1).
func (a *Approval) Required() int { return max(a.RequiredApprovals, 1) }

// Always reports whether nobody may approve a run they proposed (four_eyes "always").
func (a *Approval) Always() bool { return a.FourEyes == FourEyesAlways }

// NeedsPersonFunctions lists the functions of invariants.star the needs_person rules call.
func (a *Approval) NeedsPersonFunctions() []string {
	var out []string
	for _, r := range a.Auto {
		if r.Kind == "needs_person" {
			out = append(out, r.function)
		}
	}
	return out
}

func (a *Approval) validate() error {
	if a.RequiredApprovals < 0 || a.RequiredApprovals > MaxRequiredApprovals {
		return fmt.Errorf("approval.required_approvals must be between 1 and %d (0: 1)", MaxRequiredApprovals)
	}
	switch a.FourEyes {
	case "", FourEyesDefault, FourEyesAlways:
	default:
		return fmt.Errorf("approval.four_eyes is %q: use %q (admins and the local user may approve their own runs) or %q (nobody may)", a.FourEyes, FourEyesDefault, FourEyesAlways)
	}
	if a.PendingTTL != "" {
		d, err := parseTTL(a.PendingTTL)
		if err != nil {
			return fmt.Errorf("approval.pending_ttl: %w", err)
		}
		a.ttl = d
	}
	names := map[string]bool{}
	for i := range a.Auto {
		r := &a.Auto[i]
		if err := checkNamed("approval.auto rule", i, r.Name, r.Doc, names); err != nil {
			return err
		}
		p := &params{m: r.Params, rule: r.Name}
		switch r.Kind {
		case "auto_apply":
			r.maxRows = p.positiveInt("max_rows_written")
			if _, ok := r.Params["tables"]; ok {
				r.tables = set(p.strs("tables", false))
			}
		case "needs_person":
			r.function = NeedsPersonFunction
			if _, ok := r.Params["function"]; ok {
				r.function = p.str("function")
			}
		default:
			return fmt.Errorf("approval.auto rule %q: unknown kind %q (known: auto_apply, needs_person)", r.Name, r.Kind)
		}
		if err := p.finish(); err != nil {
			return fmt.Errorf("approval.auto rule %q (kind %s): %w", r.Name, r.Kind, err)
		}
	}
	return nil
}

// parseTTL reads a positive duration: Go's syntax ("24h", "90m") or whole days ("7d").
func parseTTL(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if n, err = strconv.Atoi(days); err == nil {
			d = time.Duration(n) * 24 * time.Hour
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration: write it as \"24h\", \"90m\" or \"7d\"", s)
	}
	return d, nil
}

// positiveInt reads a required integer parameter > 0.
func (p *params) positiveInt(name string) int {
	v, ok := p.get(name, true)
	if !ok {
		return 0
	}
	var n int64
	var err error
	switch v := v.(type) {
	case json.Number:
		n, err = v.Int64()
	case float64:
		n = int64(v)
		if float64(n) != v {
			err = errors.New("not whole")
		}
	case int:
		n = int64(v)
	default:
		err = errors.New("not a number")
	}
	if err != nil || n <= 0 {
		p.fail("parameter %q must be a whole number > 0", name)
	}
	return int(n)
}

// BindNeedsPerson gives the domain's needs_person rules their functions; every function a rule
// names must be there. Bind before the domain's runs are applied.
func (d *Domain) BindNeedsPerson(fns map[string]NeedsPerson) error {
	for _, name := range d.Approval.NeedsPersonFunctions() {
		if fns[name] == nil {
			return fmt.Errorf("an approval rule of kind needs_person names the function %s, which invariants.star does not define", name)
		}
	}
	d.needsPerson = maps.Clone(fns)
	return nil
}

// AutoVerdict is what the auto rules said about one change set.
type AutoVerdict struct {
	// Rule names the first rule that lets the change set through; "" when none does.
	Rule string
	// Refusals say, for each rule that did not, why ("small_sale: changes 3 rows, more than 2").
	Refusals []string
}

// AutoApprove checks the domain's auto rules, in order, on cs (the change set being committed)
// and names the first that lets it through. The error is for a failure of starplan itself; a
// rule's own function failing is a refusal.
func (d *Domain) AutoApprove(ctx context.Context, cs table.ChangeSet) (AutoVerdict, error) {
	var v AutoVerdict
	for i := range d.Approval.Auto {
		r := &d.Approval.Auto[i]
		why, err := d.autoRefusal(ctx, r, cs)
		if err != nil {
			return v, err
		}
		if why == "" {
			v.Rule = r.Name
			return v, nil
		}
		v.Refusals = append(v.Refusals, r.Name+": "+why)
	}
	return v, nil
}

// autoRefusal is why rule r does not let cs through, or "".
func (d *Domain) autoRefusal(ctx context.Context, r *AutoRule, cs table.ChangeSet) (string, error) {
	switch r.Kind {
	case "auto_apply":
		for _, name := range cs.Tables() {
			if !inSet(r.tables, name) {
				return fmt.Sprintf("changes table %s, which the rule does not cover", name), nil
			}
		}
		if n := cs.Rows(); n > r.maxRows {
			return fmt.Sprintf("changes %d rows, more than %d", n, r.maxRows), nil
		}
		return "", nil
	case "needs_person":
		fn := d.needsPerson[r.function]
		if fn == nil {
			return "", fmt.Errorf("contracts: the needs_person function %s is not bound: the engine loads it from the domain's invariants.star", r.function)
		}
		reason, err := fn(ctx, cs)
		if err != nil {
			return fmt.Sprintf("%s failed: %v", r.function, err), nil
		}
		return reason, nil
	}
	return "", fmt.Errorf("contracts: auto rule %q has unknown kind %q", r.Name, r.Kind)
}

// DescribeApproval returns the approval rules in words, one line each, for describe: who must
// approve, how long a run may wait, then each auto rule.
func (d *Domain) DescribeApproval() []RuleDoc {
	a := &d.Approval
	who := "a run that changes data is applied when 1 approver who is not its proposer approves it (admins and the local user may approve their own runs)"
	if n := a.Required(); n > 1 {
		who = fmt.Sprintf("a run that changes data is applied when %d distinct approvers who are not its proposer approve it (admins and the local user may approve their own runs)", n)
	}
	if a.Always() {
		who = strings.Replace(who, "(admins and the local user may approve their own runs)", "(nobody may approve their own runs)", 1)
	}
	docs := []RuleDoc{{Name: "four_eyes", Kind: "approval", Doc: who}}
	if a.ttl > 0 {
		docs = append(docs, RuleDoc{Name: "pending_ttl", Kind: "approval", Doc: fmt.Sprintf("a run not approved within %s expires: it can only be rejected or run again", a.PendingTTL)})
	}
	for _, r := range a.Auto {
		docs = append(docs, RuleDoc{Name: r.Name, Kind: r.Kind, Doc: r.Doc})
	}
	return docs
}

// checkApprovalSchema reports every table an auto rule names that the domain lacks.
func (a *Approval) checkSchema(fields map[string][]string, tables []string) []error {
	var errs []error
	for _, r := range a.Auto {
		for _, t := range stringsOf(r.Params["tables"]) {
			if _, ok := fields[t]; !ok {
				errs = append(errs, fmt.Errorf("approval rule %q: tables names table %q, which the domain does not have%s", r.Name, t, hintOf(t, tables)))
			}
		}
	}
	return errs
}
