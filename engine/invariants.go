package engine

import (
	"context"
	"fmt"
	"time"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/table"
)

// InvariantsFile is the file of a domain's directory that holds the functions its starlark rules
// name (contracts.Invariant).
const InvariantsFile = "invariants.star"

// invariantLimits bound one call of an invariant, at dry run and at apply: a rule over a change
// set has no reason to take long, and it runs in the trusted process.
//
// It and invariantsTime are variables only so that a test asserting which other limit fires
// can lift the time (liftRuleTime): on a loaded machine speed must not pick the limit.
// Nothing else sets them.
var invariantLimits = sandbox.Limits{MaxSteps: 1_000_000, Timeout: 2 * time.Second, MaxMemory: 64 << 20}

// invariantsTime bounds a domain's starlark rules together, on one change set.
var invariantsTime = 4 * time.Second

// maxFindings is the most findings one invariant reports; the rest are counted.
const maxFindings = 20

// loadInvariants checks and runs a domain's invariants.star (Starlark, with the language
// builtins and nothing else: an invariant sees the change set it is given, not the tables) and
// returns its functions as contracts.Invariant values. Each call runs sandboxed under
// invariantLimits, with the change set as a frozen dict: {table: {"inserted": [row],
// "updated": [{"key", "before", "after", "fields"}], "deleted": [row]}}. A function returns a
// list of findings, each a string or a dict {"message", "hint"}.
//
// With a bound (domain check), the calls share its allowance too; a call it stops, and every call
// after, finds nothing: the bound's error refuses the domain instead.
func loadInvariants(src string, bound *checkBound) (map[string]contracts.Invariant, diag.List) {
	reg, ds := sandbox.NewEnv().LoadModule(InvariantsFile, src, false)
	if len(ds) > 0 {
		return nil, ds
	}
	out := map[string]contracts.Invariant{}
	for _, h := range reg {
		fn, name := h.Value, h.Name
		out[name] = func(ctx context.Context, cs table.ChangeSet) ([]contracts.Finding, error) {
			limits := invariantLimits
			if bound != nil {
				var ok bool
				if limits, ok = bound.take(invariantLimits); !ok {
					return nil, nil
				}
			}
			ctx = sandbox.WithSubject(ctx, contracts.SubjectOf(ctx))
			v, steps, err := sandbox.Call(ctx, fn.(starlark.Callable), starlark.Tuple{changeSetValue(cs)}, limits)
			if bound != nil && bound.charge(name, invariantLimits, limits, steps, err) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return findingsOf(name, v)
		}
	}
	return out, nil
}

// changeSetValue is a change set as an invariant gets it.
func changeSetValue(cs table.ChangeSet) starlark.Value {
	rows := func(rs []table.Row) []any {
		out := make([]any, len(rs))
		for i, r := range rs {
			out[i] = map[string]any(r)
		}
		return out
	}
	m := map[string]any{}
	for name, tc := range cs {
		if tc == nil {
			continue
		}
		updated := make([]any, len(tc.Updated))
		for i, u := range tc.Updated {
			fields := make([]any, len(u.Fields))
			for j, f := range u.Fields {
				fields[j] = f
			}
			updated[i] = map[string]any{"key": u.Key, "before": map[string]any(u.Before), "after": map[string]any(u.After), "fields": fields}
		}
		m[name] = map[string]any{"inserted": rows(tc.Inserted), "updated": updated, "deleted": rows(tc.Deleted)}
	}
	v := builtins.FromGo(m)
	v.Freeze()
	return v
}

// findingsOf reads what an invariant returned.
func findingsOf(name string, v starlark.Value) ([]contracts.Finding, error) {
	if v == starlark.None {
		return nil, nil
	}
	list, ok := v.(*starlark.List)
	if !ok {
		return nil, fmt.Errorf("%s returned %s; return a list of findings (strings, or dicts with message and hint)", name, v.Type())
	}
	var out []contracts.Finding
	for i := range list.Len() {
		if len(out) == maxFindings {
			out = append(out, contracts.Finding{Message: fmt.Sprintf("and %d more", list.Len()-i)})
			break
		}
		switch e := list.Index(i).(type) {
		case starlark.String:
			out = append(out, contracts.Finding{Message: clipped(string(e), MaxMessage)})
		case *starlark.Dict:
			var f contracts.Finding
			if m, ok, _ := e.Get(starlark.String("message")); ok {
				if s, ok := m.(starlark.String); ok {
					f.Message = clipped(string(s), MaxMessage)
				}
			}
			if h, ok, _ := e.Get(starlark.String("hint")); ok {
				if s, ok := h.(starlark.String); ok {
					f.Hint = clipped(string(s), MaxMessage)
				}
			}
			if f.Message == "" {
				return nil, fmt.Errorf("%s returned a finding without a message string", name)
			}
			out = append(out, f)
		default:
			return nil, fmt.Errorf("%s returned a finding of type %s; return strings or dicts with message and hint", name, e.Type())
		}
	}
	return out, nil
}

// bindInvariants loads a domain's invariants.star (src; "" when it has none) and binds its
// functions to the policy's starlark rules.
func bindInvariants(policy *contracts.Domain, src string) error {
	if src == "" && len(policy.InvariantFunctions()) == 0 {
		return nil
	}
	fns, ds := loadInvariants(src, nil)
	if len(ds) > 0 {
		return fmt.Errorf("%s: %s", InvariantsFile, ds[0])
	}
	return policy.BindInvariants(fns)
}
