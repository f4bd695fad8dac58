// Package builtins owns every name a plan can call beyond Starlark's own universe: the
// Python-compatible builtins (sum, round, pow, isinstance, format, ...), the modules (math, json,
// re), the guards on the operations that amplify memory or work (both the guard builtins and
// GuardTree, the rewrite of a program that routes its operators and methods through them), and
// the documentation of the contract globals. The table helpers live in the subpackage
// builtins/tables.
//
// Every name is a Helper value in an explicit list: the sandbox builds its predeclared names from
// that list and the prompt renders its helper reference from the same list, so the prompt can
// never promise a helper the sandbox lacks. There is no init-time registration and the package
// never modifies starlark.Universe.
//
// It must not import clover or the store: table helpers reach data only through table.View.
package builtins

import (
	"sort"

	"go.starlark.net/starlark"
)

// Group says what kind of name a Helper is, for rendering the reference.
type Group string

// The groups, in the order the prompt lists them.
const (
	GroupLanguage Group = "language" // Python-compatible builtins
	GroupModule   Group = "module"   // math, json, re
	GroupTable    Group = "table"    // <table>_tbl values and their methods
	GroupDomain   Group = "domain"   // domain helpers: now, and each domain's own (helpers.star)
	GroupInput    Group = "input"    // per-run inputs such as user_request
	GroupContract Group = "contract" // globals the plan must set: answer_text, STATUS
)

// Helper is one documented name of a plan's environment.
type Helper struct {
	Name      string
	Group     Group
	Signature string // how to call it: "round(x, ndigits=None)"; for values, the name and type
	Doc       string // one line, present tense: "Rounds x half to even, like Python."
	Example   string // a one-line example a plan could contain
	// Value is the predeclared Starlark value. It is nil for names whose value is supplied per
	// run (inputs) and for contract globals, which the plan itself assigns.
	Value starlark.Value
	// Hidden names are predeclared for the sandbox's own rewrites and never documented.
	Hidden bool
	// Check, when set, checks the helper's calls (and its methods' calls) before the run; see
	// CallCheck. It is declared with the helper, from the same parameters as its Signature.
	Check CallCheck
}

// Registry is an ordered list of helpers with unique names.
type Registry []Helper

// Predeclared returns the registry's values as a frozen dictionary, ready to be shared by runs.
// Names without a Value are left out.
func (r Registry) Predeclared() starlark.StringDict {
	d := make(starlark.StringDict, len(r))
	for _, h := range r {
		if h.Value != nil {
			d[h.Name] = h.Value
		}
	}
	d.Freeze()
	return d
}

// Names returns every name in the registry (including those supplied per run), sorted.
func (r Registry) Names() []string {
	names := make([]string, 0, len(r))
	for _, h := range r {
		names = append(names, h.Name)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the helper with the given name.
func (r Registry) Lookup(name string) (Helper, bool) {
	for _, h := range r {
		if h.Name == name {
			return h, true
		}
	}
	return Helper{}, false
}

// Documented returns the helpers a reference should list, in registry order.
func (r Registry) Documented() Registry {
	out := make(Registry, 0, len(r))
	for _, h := range r {
		if !h.Hidden {
			out = append(out, h)
		}
	}
	return out
}
