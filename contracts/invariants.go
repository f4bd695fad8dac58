package contracts

import (
	"context"
	"fmt"
	"maps"
	"sort"

	"github.com/starplan/starplan/table"
)

// Invariant is a rule a domain writes itself (kind starlark): a function of the run's change set
// that returns what is wrong with it, one Finding each. It runs wherever the policy runs: on the
// dry run and again inside the apply, on the changes as they will be committed. The error is for
// a failure of the function itself (a bug in the domain's rule, a limit): the rule then refuses
// the changes, since it cannot vouch for them.
//
// data is the data as it would be after the change (Input.Data), for a rule that reads: its reads
// are the run's, recorded with the plan's, so the apply refuses as a conflict when anything it
// read moved. nil where there is no such view (inside an apply, where those recorded reads vouch
// for a reading rule's verdict, and the domain check's example answers): a rule that reads is then
// not run again.
// contracts does not run Starlark: the engine builds each Invariant from the domain's
// invariants.star (see engine.New) and binds them with BindInvariants.
type Invariant func(ctx context.Context, changes table.ChangeSet, data table.View) ([]Finding, error)

// MaxStarlarkRules is the most rules of kind starlark a domain may have: they run one after the
// other, at apply outside the store's write lock unless the data they read moved meanwhile
// (store.ApplyPending).
const MaxStarlarkRules = 16

// Finding is one problem an Invariant found.
type Finding struct {
	Message string
	Hint    string
}

// InvariantFunctions lists the functions the domain's starlark rules name, sorted.
func (d *Domain) InvariantFunctions() []string {
	var names []string
	for _, r := range d.Rules {
		if r.Kind == "starlark" {
			if fn, ok := r.Params["function"].(string); ok {
				names = append(names, fn)
			}
		}
	}
	sort.Strings(names)
	return names
}

// BindInvariants gives the domain's starlark rules their functions; every function a rule names
// must be there. Bind before the domain checks any run.
func (d *Domain) BindInvariants(fns map[string]Invariant) error {
	for _, name := range d.InvariantFunctions() {
		if fns[name] == nil {
			return fmt.Errorf("a starlark rule names the function %s, which invariants.star does not define", name)
		}
	}
	d.invariants = maps.Clone(fns)
	return nil
}

func buildStarlark(ps *params) checkFunc {
	fn, rule := ps.str("function"), ps.rule
	return func(p *pass) error {
		inv := p.invariants[fn]
		if inv == nil {
			return fmt.Errorf("the invariant function %s is not bound: the engine loads it from the domain's invariants.star", fn)
		}
		ctx := withSubject(context.Background(), p.in.Subject)
		if !p.in.Deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, p.in.Deadline)
			defer cancel()
		}
		found, err := inv(ctx, p.in.Changes, p.in.Data)
		if err != nil {
			// A rule that cannot say whether the changes keep it refuses them.
			p.report(rule, fmt.Sprintf("the rule could not be checked: %s: %v", fn, err),
				"a fault in the domain's invariants.star, not in the plan; the domain's author must correct it")
			return nil
		}
		for _, f := range found {
			p.report(rule, f.Message, f.Hint)
		}
		return nil
	}
}
