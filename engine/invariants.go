package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/builtins/tables"
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
// can lift the time (liftRuleTime): on a loaded machine speed must not pick the limit; and so
// that a test of a rule only time can stop waits less (shortenRuleTime). Nothing else sets them.
var invariantLimits = sandbox.Limits{MaxSteps: 1_000_000, Timeout: 2 * time.Second, MaxMemory: 64 << 20}

// invariantsTime bounds a domain's starlark rules together, on one change set.
var invariantsTime = 4 * time.Second

// maxFindings is the most findings one invariant reports; the rest are counted.
const maxFindings = 20

// loadInvariants checks and runs a domain's invariants.star (Starlark, with the language
// builtins and nothing else) and returns its functions as contracts.Invariant values. Each call
// runs sandboxed under invariantLimits, with the change set as a frozen dict: {table:
// {"inserted": [row], "updated": [{"key", "before", "after", "fields"}], "deleted": [row]}}. A
// function returns a list of findings, each a string or a dict {"message", "hint"}.
//
// A function of two parameters is a reading rule: its second argument is the data as it would be
// after the change (dataValue over the run's staged view, read-only: data["orders"].get(where),
// search, count, get_by_key, all, last), and it reads at most ruleRowsRead rows per call. Where
// there is no view (inside an apply) it is not called: the reads it made at the dry run are in
// the run's read set, and the apply is a conflict when any of them moved.
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
		reads := false
		if f, ok := fn.(*starlark.Function); ok && f.NumParams() >= 2 {
			reads = true
		}
		out[name] = func(ctx context.Context, cs table.ChangeSet, data table.View) ([]contracts.Finding, error) {
			if reads && data == nil {
				return nil, nil // vouched for by the reads recorded with the run (see above)
			}
			limits := invariantLimits
			if bound != nil {
				var ok bool
				if limits, ok = bound.take(invariantLimits); !ok {
					return nil, nil
				}
			}
			ctx = sandbox.WithSubject(ctx, contracts.SubjectOf(ctx))
			args := starlark.Tuple{changeSetValue(cs)}
			var setup func(*starlark.Thread)
			var view *ruleView
			if reads {
				view = &ruleView{v: data, max: ruleRowsRead}
				args = append(args, newDataValue(view))
				setup = func(th *starlark.Thread) { tables.Bind(th, view, time.Time{}) }
			}
			v, steps, err := sandbox.CallOn(ctx, fn.(starlark.Callable), args, limits, setup)
			if bound != nil && bound.charge(name, invariantLimits, limits, steps, err) {
				return nil, nil
			}
			if view != nil && view.exceeded && err != nil {
				return nil, fmt.Errorf("%s read more than %d rows (a rule reads the rows it checks: filter with where, or use count)", name, ruleRowsRead)
			}
			if err != nil {
				return nil, err
			}
			return findingsOf(name, v)
		}
	}
	return out, nil
}

// ruleRowsRead is the most rows one call of a reading rule may read (rows its searches return,
// rows it gets by key). A variable only so that a test can lower it; nothing else sets it.
var ruleRowsRead = 10_000

// errRuleWrites is what a reading rule's write gets: its view is read-only.
var errRuleWrites = errors.New("a rule reads the data; it cannot change it (only plans and helpers write)")

// ruleView is the read-only view of the data a reading rule gets: the run's staged view, whose
// reads it records as the run's, with writes refused and the rows read counted against max.
type ruleView struct {
	v        table.View
	max      int
	read     int
	exceeded bool
}

func (r *ruleView) Names() []string { return r.v.Names() }

func (r *ruleView) Table(name string) (table.Table, bool) {
	t, ok := r.v.Table(name)
	if !ok {
		return nil, false
	}
	return ruleTable{t, r}, true
}

// take counts n rows read; an error once more than max were.
func (r *ruleView) take(n int) error {
	r.read += n
	if r.read > r.max {
		r.exceeded = true
		return fmt.Errorf("the rule read more than %d rows", r.max)
	}
	return nil
}

type ruleTable struct {
	t table.Table
	r *ruleView
}

func (t ruleTable) Schema() *table.Schema            { return t.t.Schema() }
func (t ruleTable) Len() int                         { return t.t.Len() }
func (t ruleTable) Count(q table.Query) (int, error) { return t.t.Count(q) }

func (t ruleTable) Find(q table.Query) ([]table.Row, error) {
	if q.Limit == 0 || q.Limit > t.r.max-t.r.read+1 {
		q.Limit = t.r.max - t.r.read + 1 // one more than allowed is enough to know it is too many
	}
	rows, err := t.t.Find(q)
	if err != nil {
		return nil, err
	}
	if err := t.r.take(len(rows)); err != nil {
		return nil, err
	}
	return rows, nil
}

func (t ruleTable) Get(key any) (table.Row, bool, error) {
	if err := t.r.take(1); err != nil {
		return nil, false, err
	}
	return t.t.Get(key)
}

func (t ruleTable) Insert(table.Row) (any, error)              { return nil, errRuleWrites }
func (t ruleTable) Update(table.Row, table.Query) (int, error) { return 0, errRuleWrites }
func (t ruleTable) Remove(table.Query) (int, error)            { return 0, errRuleWrites }

// dataValue is a reading rule's second argument: data["orders"] is the orders table as a plan's
// table value (the same methods, run on the rule's read-only view bound to its thread).
type dataValue struct {
	view   table.View
	tables map[string]*tables.TableValue
}

var _ starlark.Mapping = (*dataValue)(nil)

func newDataValue(v table.View) *dataValue {
	d := &dataValue{view: v, tables: map[string]*tables.TableValue{}}
	for _, name := range v.Names() {
		if t, ok := v.Table(name); ok {
			d.tables[name] = tables.NewTableValue(t.Schema())
		}
	}
	return d
}

func (d *dataValue) String() string        { return "<data>" }
func (d *dataValue) Type() string          { return "data" }
func (d *dataValue) Freeze()               {}
func (d *dataValue) Truth() starlark.Bool  { return starlark.True }
func (d *dataValue) Hash() (uint32, error) { return 0, errors.New("unhashable type: data") }

// Get returns the table value of the named table.
func (d *dataValue) Get(k starlark.Value) (starlark.Value, bool, error) {
	s, ok := k.(starlark.String)
	if !ok {
		return nil, false, fmt.Errorf("data is indexed by a table name (a string), not %s", k.Type())
	}
	if t, ok := d.tables[string(s)]; ok {
		return t, true, nil
	}
	return nil, false, fmt.Errorf("data has no table %q (it has %s)", string(s), strings.Join(d.view.Names(), ", "))
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
// functions to the policy's starlark rules. It returns the names of the rules whose functions read
// the data (two parameters), for the hint of a conflict their reads may cause.
func bindInvariants(policy *contracts.Domain, src string) ([]string, error) {
	if src == "" && len(policy.InvariantFunctions()) == 0 {
		return nil, nil
	}
	fns, ds := loadInvariants(src, nil)
	if len(ds) > 0 {
		return nil, fmt.Errorf("%s: %s", InvariantsFile, ds[0])
	}
	if err := policy.BindInvariants(fns); err != nil {
		return nil, err
	}
	reading := readingFunctions(src)
	var rules []string
	for _, r := range policy.Rules {
		if fn, ok := r.Params["function"].(string); ok && r.Kind == "starlark" && reading[fn] {
			rules = append(rules, r.Name)
		}
	}
	return rules, nil
}

// readingFunctions lists the top-level functions of invariants.star with two parameters or more.
func readingFunctions(src string) map[string]bool {
	f, err := (&syntax.FileOptions{}).Parse(InvariantsFile, src, 0)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, stmt := range f.Stmts {
		if def, ok := stmt.(*syntax.DefStmt); ok && len(def.Params) >= 2 {
			out[def.Name.Name] = true
		}
	}
	return out
}
