package engine

import (
	"slices"
	"strings"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/planjson"
)

// planTools lists what a JSON step plan may call (planjson.Compile): every table method as
// "<table>.<method>", and the domain helpers.
func planTools(reg builtins.Registry) []string {
	var tables, methods, tools []string
	for _, h := range reg {
		switch {
		case h.Hidden:
		case h.Group == builtins.GroupTable && strings.HasPrefix(h.Name, "tbl."):
			methods = append(methods, strings.TrimPrefix(h.Name, "tbl."))
		case h.Group == builtins.GroupTable && h.Value != nil:
			tables = append(tables, h.Name)
		case h.Group == builtins.GroupDomain:
			tools = append(tools, h.Name)
		}
	}
	for _, t := range tables {
		for _, m := range methods {
			tools = append(tools, t+"."+m)
		}
	}
	return tools
}

// PlanTools lists what a JSON step plan may call, besides planjson.Respond.
func (e *Engine) PlanTools() []string { return slices.Clone(e.planTools) }

// CompilePlan compiles a JSON step plan against this engine's tools (planjson.Compile): the
// program, or a diagnostic per problem.
func (e *Engine) CompilePlan(plan []byte) (string, diag.List) {
	return planjson.Compile(plan, e.planTools)
}

// compilePlan turns a request's JSON step plan into the program that runs in its place.
// A plan that does not compile is the run id's check_failed result.
func (e *Engine) compilePlan(req Request, id string) (Request, *Result) {
	if len(req.PlanJSON) == 0 {
		return req, nil
	}
	program, ds := e.CompilePlan(req.PlanJSON)
	if len(ds) > 0 {
		res := &Result{RunID: id, Outcome: OutcomeCheckFailed, Diagnostics: ds}
		res.bound()
		res.normalize()
		return req, res
	}
	req.Reply, req.bare = program, true
	return req, nil
}
