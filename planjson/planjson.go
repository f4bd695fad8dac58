// Package planjson compiles the JSON step plans of plan-and-execute planners into a starplan
// program, so that such a plan goes through the same check, limits, contract, diff and approval
// as a written one. The compiled program is what runs and what the audit log keeps.
//
// A plan is an object with a list of steps; each step calls one tool and names its result:
//
//	{"steps": [
//	  {"id": "item", "tool": "inventory_tbl.get", "args": [{"name": {"$ieq": "wayfarer"}}]},
//	  {"id": "sold", "tool": "inventory_tbl.update", "depends_on": ["item"],
//	   "args": [{"quantity_in_stock": {"$expr": "item['quantity_in_stock'] - 3"}}, {"$ref": "item"}]},
//	  {"id": "done", "tool": "respond", "depends_on": ["sold"],
//	   "args": {"status": "success", "answer_text": "Sold 3 Wayfarer."}}
//	]}
//
// becomes, in dependency order (the plan's own order where it leaves a choice):
//
//	item = inventory_tbl.get({"name": {"$ieq": "wayfarer"}})
//	sold = inventory_tbl.update({"quantity_in_stock": item['quantity_in_stock'] - 3}, item)
//	STATUS = "success"
//	answer_text = "Sold 3 Wayfarer."
//
// A step's id is a name for its result (a lower-case identifier). "tool" is a table method
// ("<table>.<method>") or a domain helper, as the tools list given to Compile names them, or
// "respond", which sets the run's STATUS and answer_text from its "status" and "answer_text"
// arguments. "args" is a list of positional arguments or an object of keyword arguments. An
// argument is JSON, except two one-key objects: {"$ref": "id"} or {"$ref": "id.field"} is an
// earlier step's result (or a field of it), and {"$expr": "..."} is a starplan expression, put
// into the program as it is and checked with it. depends_on lists the steps a step must follow;
// a $ref, and a step id named in an $expr, count as dependencies too.
//
// Every problem of the plan (not JSON, an unknown tool or step, a duplicate id, a cycle) is a
// check diagnostic naming the step, all of them at once.
package planjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"go.starlark.net/syntax"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/internal/spell"
	"github.com/starplan/starplan/sandbox/pycompat"
)

// Diagnostic codes of a plan that cannot be compiled.
const (
	CodeInvalid     = "plan-json-invalid"      // not a JSON plan of the documented shape
	CodeStepID      = "plan-json-step-id"      // a step id that is missing, not a name, or used twice
	CodeUnknownTool = "plan-json-unknown-tool" // a tool the store does not have
	CodeUnknownStep = "plan-json-unknown-step" // depends_on or $ref names no step
	CodeCycle       = "plan-json-cycle"        // steps that depend on each other in a circle
	CodeArgument    = "plan-json-argument"     // an argument that cannot be compiled
)

// Respond is the tool that sets the run's STATUS and answer_text.
const Respond = "respond"

// Bounds of a plan, far above what a plan needs and far below what would cost anything.
const (
	MaxSteps       = 500 // steps in one plan, and names in one step's depends_on
	MaxDepth       = 32  // nesting of an argument's JSON
	MaxDiagnostics = 50  // problems reported before the compiler stops looking
)

// Plan is a JSON step plan.
type Plan struct {
	Steps []Step `json:"steps"`
}

// Step is one step of a Plan.
type Step struct {
	ID        string          `json:"id"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args,omitempty"`
	DependsOn []string        `json:"depends_on,omitempty"`
}

var (
	idPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)
	words     = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	// reserved are names a step's result may not take: the language's words and the globals a
	// plan sets.
	reserved = map[string]bool{
		"and": true, "break": true, "continue": true, "def": true, "elif": true, "else": true,
		"for": true, "if": true, "in": true, "lambda": true, "load": true, "not": true, "or": true,
		"pass": true, "return": true, "while": true, "answer_text": true, "STATUS": true,
	}
)

// Compile compiles a JSON step plan into a program. tools lists the tools a step may call:
// "<table>.<method>" for table methods and the names of domain helpers (respond is always
// known); a step id may not be one of the names either. The program is empty when there are
// diagnostics.
func Compile(src []byte, tools []string) (string, diag.List) {
	c := &compiler{tools: map[string]bool{}, byID: map[string]int{}}
	for _, t := range tools {
		c.tools[t] = true
		c.taken(t)
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	var plan Plan
	if err := dec.Decode(&plan); err != nil {
		return "", c.fail(CodeInvalid, -1, "the plan is not a JSON plan: %v", err)
	}
	if dec.More() {
		return "", c.fail(CodeInvalid, -1, "the plan holds more than one JSON value")
	}
	switch {
	case len(plan.Steps) == 0:
		return "", c.fail(CodeInvalid, -1, `the plan has no steps: it is {"steps": [{"id", "tool", "args", "depends_on"}, ...]}`)
	case len(plan.Steps) > MaxSteps:
		return "", c.fail(CodeInvalid, -1, "the plan has %d steps; at most %d are accepted", len(plan.Steps), MaxSteps)
	}
	c.steps = plan.Steps
	c.index()
	lines := make([]string, len(c.steps))
	deps := make([][]int, len(c.steps))
	for i := range c.steps {
		if c.full() {
			break
		}
		lines[i], deps[i] = c.step(i)
	}
	var order []int
	if !c.full() {
		order = c.order(deps)
	}
	if len(c.ds) > 0 {
		if c.more > 0 || c.full() {
			c.ds = append(c.ds, diag.Diagnostic{Stage: diag.StageCheck, Code: CodeInvalid,
				Message: fmt.Sprintf("the compiler stopped after %d problems; fix these and check again", MaxDiagnostics)})
		}
		return "", c.ds
	}
	var b strings.Builder
	for _, i := range order {
		b.WriteString(lines[i])
	}
	return b.String(), nil
}

type compiler struct {
	tools   map[string]bool
	names   map[string]bool // names a step id may not take (tools' first parts)
	steps   []Step
	byID    map[string]int
	ds      diag.List
	current int      // the step being compiled
	refs    []int    // the steps it depends on, so far
	more    int      // problems found past MaxDiagnostics
	ids     []string // the step ids, sorted, for hints (made once)
	list    []string // the tools, sorted, for hints (made once)
}

// taken records the first part of a tool name ("inventory_tbl" of "inventory_tbl.get") as a
// name no step may rebind.
func (c *compiler) taken(tool string) {
	if c.names == nil {
		c.names = map[string]bool{}
	}
	name, _, _ := strings.Cut(tool, ".")
	c.names[name] = true
}

func (c *compiler) where(i int) string {
	if i < 0 {
		return ""
	}
	if id := c.steps[i].ID; id != "" {
		return fmt.Sprintf("step %d (%q): ", i+1, id)
	}
	return fmt.Sprintf("step %d: ", i+1)
}

func (c *compiler) report(code string, i int, hint, format string, args ...any) {
	if len(c.ds) >= MaxDiagnostics {
		c.more++
		return
	}
	c.ds = append(c.ds, diag.Diagnostic{Stage: diag.StageCheck, Code: code, Message: c.where(i) + fmt.Sprintf(format, args...), Hint: hint})
}

// full reports whether the compiler has found as many problems as it reports: it stops looking.
func (c *compiler) full() bool { return len(c.ds) >= MaxDiagnostics }

func (c *compiler) fail(code string, i int, format string, args ...any) diag.List {
	c.report(code, i, "", format, args...)
	return c.ds
}

// index checks the step ids and maps them to their steps.
func (c *compiler) index() {
	for i, s := range c.steps {
		switch {
		case s.ID == "":
			c.report(CodeStepID, i, `give every step an "id": the name of its result`, "the step has no id")
		case !idPattern.MatchString(s.ID) || reserved[s.ID]:
			c.report(CodeStepID, i, "use a lower-case name of letters, digits and _ (such as item or new_stock)", "id %q is not a name a result can have", clip(s.ID))
		case c.names[s.ID]:
			c.report(CodeStepID, i, "name the result after what it holds, such as item or sale", "id %q is the name of a table or helper", s.ID)
		default:
			if j, dup := c.byID[s.ID]; dup {
				c.report(CodeStepID, i, "give each step its own id", "id %q is also step %d's", s.ID, j+1)
				continue
			}
			c.byID[s.ID] = i
		}
	}
}

// step compiles step i to its line and the steps it depends on.
func (c *compiler) step(i int) (string, []int) {
	s := c.steps[i]
	c.current, c.refs = i, nil
	if len(s.DependsOn) > MaxSteps {
		c.report(CodeInvalid, i, "list each step it follows once", "depends_on names %d steps; a plan has at most %d", len(s.DependsOn), MaxSteps)
		return "", nil
	}
	for _, d := range s.DependsOn {
		if j, ok := c.byID[d]; ok {
			c.refs = append(c.refs, j)
		} else {
			c.report(CodeUnknownStep, i, c.stepHint(d), "depends_on names %q, which is no step's id", clip(d))
		}
	}
	if s.Tool != Respond && !c.tools[s.Tool] {
		hint := "the tools are " + strings.Join(c.toolList(), ", ")
		if near := nearest(s.Tool, c.toolList()); near != "" {
			hint = "did you mean " + near + "?"
		}
		c.report(CodeUnknownTool, i, hint, "tool %q is not one of the store's tools", clip(s.Tool))
	}
	var line string
	if s.Tool == Respond {
		line = c.respond(s)
	} else {
		args := c.args(s.Args)
		line = fmt.Sprintf("%s = %s(%s)\n", s.ID, s.Tool, args)
	}
	return line, c.refs
}

// respond compiles the respond step: STATUS and answer_text from its arguments.
func (c *compiler) respond(s Step) string {
	var kw map[string]json.RawMessage
	if err := json.Unmarshal(s.Args, &kw); err != nil || kw["status"] == nil {
		c.report(CodeArgument, c.current, `"args": {"status": "success", "answer_text": "..."}`, "respond takes an object with status and answer_text")
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "STATUS = %s\n", c.value(kw["status"], 0))
	if a, ok := kw["answer_text"]; ok {
		fmt.Fprintf(&b, "answer_text = %s\n", c.value(a, 0))
	}
	for k := range kw {
		if k != "status" && k != "answer_text" {
			c.report(CodeArgument, c.current, "respond takes status and answer_text only", "respond has an argument %q", clip(k))
		}
	}
	return b.String()
}

// args compiles a step's arguments: a JSON list (positional) or object (keywords).
func (c *compiler) args(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	switch raw[0] {
	case '[':
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			c.report(CodeArgument, c.current, "", "args: %v", err)
			return ""
		}
		parts := make([]string, len(list))
		for i, a := range list {
			parts[i] = c.value(a, 0)
		}
		return strings.Join(parts, ", ")
	case '{':
		var kw map[string]json.RawMessage
		if err := json.Unmarshal(raw, &kw); err != nil {
			c.report(CodeArgument, c.current, "", "args: %v", err)
			return ""
		}
		keys := slices.Sorted(maps.Keys(kw))
		parts := make([]string, len(keys))
		for i, k := range keys {
			if !idPattern.MatchString(k) {
				c.report(CodeArgument, c.current, "keyword arguments are lower-case names", "args has a keyword %q", clip(k))
			}
			parts[i] = k + "=" + c.value(kw[k], 0)
		}
		return strings.Join(parts, ", ")
	}
	c.report(CodeArgument, c.current, `give "args" as a list of positional arguments or an object of keyword arguments`, "args is neither a list nor an object")
	return ""
}

// value compiles one JSON value into a starplan expression.
func (c *compiler) value(raw json.RawMessage, depth int) string {
	if depth > MaxDepth {
		c.report(CodeArgument, c.current, "", "an argument is nested more than %d levels deep", MaxDepth)
		return "None"
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "None"
	}
	switch raw[0] {
	case '{':
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			c.report(CodeArgument, c.current, "", "%v", err)
			return "None"
		}
		if len(obj) == 1 {
			if r, ok := obj["$ref"]; ok {
				return c.ref(r)
			}
			if e, ok := obj["$expr"]; ok {
				return c.expr(e)
			}
		}
		keys := slices.Sorted(maps.Keys(obj))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = quote(k) + ": " + c.value(obj[k], depth+1)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case '[':
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			c.report(CodeArgument, c.current, "", "%v", err)
			return "None"
		}
		parts := make([]string, len(list))
		for i, e := range list {
			parts[i] = c.value(e, depth+1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			c.report(CodeArgument, c.current, "", "%v", err)
			return "None"
		}
		return quote(s)
	}
	switch string(raw) {
	case "true":
		return "True"
	case "false":
		return "False"
	case "null":
		return "None"
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		c.report(CodeArgument, c.current, "", "%v", err)
		return "None"
	}
	return n.String()
}

// ref compiles {"$ref": "id"} or {"$ref": "id.field.sub"} to id["field"]["sub"].
func (c *compiler) ref(raw json.RawMessage) string {
	var path string
	if err := json.Unmarshal(raw, &path); err != nil {
		c.report(CodeArgument, c.current, `{"$ref": "step_id"} or {"$ref": "step_id.field"}`, "$ref is not a string")
		return "None"
	}
	parts := strings.Split(path, ".")
	j, ok := c.byID[parts[0]]
	if !ok {
		c.report(CodeUnknownStep, c.current, c.stepHint(parts[0]), "$ref names %q, which is no step's id", clip(parts[0]))
		return "None"
	}
	c.refs = append(c.refs, j)
	var b strings.Builder
	b.WriteString(parts[0])
	for _, f := range parts[1:] {
		b.WriteString("[" + quote(f) + "]")
	}
	return b.String()
}

// expr compiles {"$expr": "..."}: the expression as it is (parenthesised, so it stays one
// argument), with the step ids it names as dependencies.
func (c *compiler) expr(raw json.RawMessage) string {
	var e string
	if err := json.Unmarshal(raw, &e); err != nil || strings.TrimSpace(e) == "" {
		c.report(CodeArgument, c.current, `{"$expr": "item['price'] * 3"}`, "$expr is not an expression")
		return "None"
	}
	if strings.ContainsAny(e, "\n\r") {
		c.report(CodeArgument, c.current, "write the expression on one line", "$expr spans lines")
		return "None"
	}
	if why := notOneExpression(e); why != "" {
		c.report(CodeArgument, c.current, `an $expr is one expression, such as item['price'] * 3; statements belong in steps of their own`, "$expr %q is not one expression: %s", clip(e), why)
		return "None"
	}
	for _, w := range words.FindAllString(e, -1) {
		if j, ok := c.byID[w]; ok && j != c.current {
			c.refs = append(c.refs, j)
		}
	}
	return "(" + e + ")"
}

// notOneExpression says why e is not exactly one expression without comments, or "" when it is.
// The compiled program must do what the steps say and nothing more: an $expr such as
// "0); tbl.remove(...); (0" would add statements no step declares, and a comment would hide the
// rest of its line.
func notOneExpression(e string) string {
	tr := pycompat.Translate(e, pycompat.Options{}) // f-strings and the like, as the program will have them
	if len(tr.Diagnostics) == 0 {
		e = tr.Source
	}
	x, err := (&syntax.FileOptions{}).ParseExpr("expr", e, syntax.RetainComments)
	if err != nil {
		return err.Error()
	}
	commented := false
	syntax.Walk(x, func(n syntax.Node) bool {
		if n == nil {
			return false
		}
		if c := n.Comments(); c != nil && (len(c.Before) > 0 || len(c.Suffix) > 0 || len(c.After) > 0) {
			commented = true
		}
		return !commented
	})
	if commented || strings.Contains(e, "#") && hasComment(e) {
		return "it holds a comment"
	}
	return ""
}

// hasComment reports whether e has a # outside its string literals.
func hasComment(e string) bool {
	var quote rune
	escaped := false
	for _, r := range e {
		switch {
		case escaped:
			escaped = false
		case quote != 0 && r == '\\':
			escaped = true
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote = r
		case quote == 0 && r == '#':
			return true
		}
	}
	return false
}

// order sorts the steps so that each follows what it depends on, keeping the plan's order
// where it leaves a choice; a cycle is a diagnostic on each of its steps.
func (c *compiler) order(deps [][]int) []int {
	n := len(deps)
	indeg := make([]int, n)
	next := make([][]int, n)
	for i, ds := range deps {
		for _, j := range slices.Compact(slices.Sorted(slices.Values(ds))) {
			if j == i {
				c.report(CodeCycle, i, "a step cannot use its own result", "the step depends on itself")
				continue
			}
			indeg[i]++
			next[j] = append(next[j], i)
		}
	}
	var order, ready []int
	for i := range n {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		sort.Ints(ready) // the plan's own order among the steps that may go next
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, k := range next[i] {
			if indeg[k]--; indeg[k] == 0 {
				ready = append(ready, k)
			}
		}
	}
	if len(order) < n {
		var stuck []string
		for i := range n {
			if indeg[i] > 0 {
				stuck = append(stuck, fmt.Sprintf("%q", c.steps[i].ID))
			}
		}
		for i := range n {
			if indeg[i] > 0 {
				c.report(CodeCycle, i, "remove one of the dependencies between these steps", "the step is in a dependency cycle among %s", strings.Join(stuck, ", "))
			}
		}
	}
	return order
}

func (c *compiler) stepHint(id string) string {
	if c.ids == nil {
		c.ids = slices.Sorted(maps.Keys(c.byID))
	}
	if near := nearest(id, c.ids); near != "" {
		return "did you mean " + near + "?"
	}
	if len(c.ids) > 20 {
		return "the plan has no step with that id"
	}
	return "the steps are " + strings.Join(c.ids, ", ")
}

func (c *compiler) toolList() []string {
	if c.list == nil {
		c.list = append(slices.Sorted(maps.Keys(c.tools)), Respond)
	}
	return c.list
}

// nearest is spell.Nearest for names a step could mean; a name longer than any id or tool is no
// slip of the keyboard, and comparing it would cost its length times every candidate's.
func nearest(name string, candidates []string) string {
	if len(name) > 80 {
		return ""
	}
	return spell.Nearest(name, candidates)
}

// quote writes s as a string literal: JSON's escapes are starplan's too.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// clip cuts a plan's text quoted back in a message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
