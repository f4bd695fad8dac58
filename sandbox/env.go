package sandbox

import (
	"maps"
	"sort"
	"sync"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/builtins/tables"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/internal/benchhook"
	"github.com/starplan/starplan/table"
)

// Env is everything a plan can name: Starlark's universe, the language builtins and modules, the
// guards, and the registries the caller adds (the table helpers of a domain). An Env is
// immutable and safe for concurrent runs; build it once per domain. It remembers the programs it
// checked last (see checkCache), so build one per domain and keep it.
type Env struct {
	registry    builtins.Registry
	predeclared starlark.StringDict           // frozen values, shared by every run
	inputs      map[string]bool               // names whose values each run supplies
	protected   map[string]bool               // names a plan may not rebind at top level
	modules     map[string][]string           // module name → member names, for pycompat
	calls       map[string]builtins.CallCheck // helper name → the static check of its calls
	unguarded   bool                          // benchmarks only: no guard rewrite and no watchdog
	wholeEnv    bool                          // tests only: every run's predeclared is the whole environment
	freshTrees  bool                          // tests only: a check's tree is cut from new slabs
	checks      *checkCache                   // recently checked programs; nil: none kept
	// shared returns the identities of the values reachable from predeclared, which no run's
	// memory measure counts; computed the first time a run measures.
	shared func() map[any]struct{}
}

// NewDomainEnv returns the environment of plans over tables with the given schemas and a
// domain's helpers (the source of its helpers.star; "" for none): the one a runner builds from a
// view's schemas. The diagnostics are the helpers' problems, positioned in that file; the
// environment is nil when there are any.
func NewDomainEnv(schemas []*table.Schema, helpers string) (*Env, diag.List) {
	var writers map[string][]string
	if helpers != "" && anyHelpersOnly(schemas) {
		writers = HelperWriters(helpers) // named when a plan writes a table only helpers may
	}
	base := tables.RegistryWriters(schemas, writers)
	env := NewEnv(base)
	if helpers == "" {
		return env, nil
	}
	reg, ds := env.LoadHelpers(helpers)
	if len(ds) > 0 {
		return nil, ds
	}
	return NewEnv(base, reg), nil
}

// NewEnv builds an environment from the language builtins, the guards and regs, in that order;
// a later registry's name replaces an earlier one's.
func NewEnv(regs ...builtins.Registry) *Env {
	all := append(builtins.Registry{}, builtins.Language()...)
	all = append(all, builtins.Guards()...)
	for _, r := range regs {
		all = append(all, r...)
	}
	e := &Env{
		inputs:    map[string]bool{},
		protected: map[string]bool{},
		modules:   map[string][]string{},
		calls:     map[string]builtins.CallCheck{},
		unguarded: benchhook.Unguarded(),
		checks:    newCheckCache(),
	}
	byName := map[string]int{}
	for _, h := range all {
		if i, ok := byName[h.Name]; ok {
			e.registry[i] = h
			continue
		}
		byName[h.Name] = len(e.registry)
		e.registry = append(e.registry, h)
	}
	for _, h := range e.registry {
		switch h.Group {
		case builtins.GroupInput:
			e.inputs[h.Name] = true
			e.protected[h.Name] = true
		case builtins.GroupTable, builtins.GroupDomain:
			e.protected[h.Name] = true
		case builtins.GroupModule:
			e.protected[h.Name] = true
			if m, ok := h.Value.(starlark.HasAttrs); ok {
				names := m.AttrNames()
				sort.Strings(names)
				e.modules[h.Name] = names
			}
		}
		if h.Hidden {
			e.protected[h.Name] = true
		}
		if h.Check != nil && h.Value != nil {
			e.calls[h.Name] = h.Check
		}
	}
	e.predeclared = e.registry.Predeclared()
	e.shared = sync.OnceValue(func() map[any]struct{} { return sharedValues(e.predeclared) })
	return e
}

// Registry returns every name of the environment, hidden guards included, in order.
func (e *Env) Registry() builtins.Registry { return e.registry }

// isPredeclared reports whether name is supplied by the environment (not by the universe).
func (e *Env) isPredeclared(name string) bool {
	_, ok := e.predeclared[name]
	return ok || e.inputs[name]
}

// runPredeclared returns the predeclared names of one run of p: the shared values plus the run's
// inputs, converted from plain Go values and frozen. Inputs the environment does not declare are
// ignored; declared inputs the run does not supply are None. Only the names p uses are in it
// (Program.uses): its code looks up no other.
func (e *Env) runPredeclared(p *Program, inputs map[string]any) starlark.StringDict {
	if len(e.inputs) == 0 {
		return e.predeclared
	}
	if p.uses == nil || e.wholeEnv {
		d := maps.Clone(e.predeclared)
		for name := range e.inputs {
			d[name] = inputValue(inputs[name])
		}
		return d
	}
	d := make(starlark.StringDict, len(p.uses))
	for _, name := range p.uses {
		if e.inputs[name] {
			d[name] = inputValue(inputs[name])
		} else {
			d[name] = e.predeclared[name]
		}
	}
	return d
}

// inputValue is a run's input as a frozen Starlark value.
func inputValue(v any) starlark.Value {
	s := builtins.FromGo(v)
	s.Freeze()
	return s
}
