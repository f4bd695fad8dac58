package sandbox

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/table"
)

// Diagnostic codes of the check stage. They are stable: tools, tests and the repair prompt rely
// on them.
const (
	CodeSyntax            = "syntax-error"
	CodeUnknownName       = "unknown-name"
	CodeResolve           = "resolve-error"
	CodePredeclaredAssign = "predeclared-assign"
	CodeReservedName      = "reserved-name"
	CodeLoad              = "load"
	CodeTooLarge          = "program-too-large"
	CodeTooDeep           = "nesting-too-deep"
	CodeControlChar       = "program-control-char" // see checkText

	// The static checks of helper calls (builtins.Helper.Check; the codes are declared with that
	// contract): a literal dict's key that is not a field of the table (insert, update, where),
	// an operator a where-filter does not know there, and a helper or table method called with
	// arguments its signature does not take.
	CodeUnknownField    = builtins.CodeUnknownField
	CodeUnknownOperator = builtins.CodeUnknownOperator
	CodeWrongArguments  = builtins.CodeWrongArguments
)

// planFile is the file name programs are compiled under; positions in it are the program's.
const planFile = "plan.star"

// fileOptions is the dialect: Python-like top-level code, reassignable globals (plans set
// answer_text more than once), while loops bounded by the step limit, sets; no recursion.
var fileOptions = &syntax.FileOptions{
	Set:             true,
	While:           true,
	TopLevelControl: true,
	GlobalReassign:  true,
}

// pythonism is a Python construct that Starlark lacks, recognised by the scanner, with what to
// write instead. Rules are data so that the list can be rendered for the prompt.
type pythonism struct {
	Code      string
	Word      string // keyword or operator that introduces it
	LineStart bool   // only at the start of a logical line
	Message   string
	Hint      string
}

// Pythonisms lists the Python constructs the checker rejects, with the hint it gives. The prompt
// renders the same list.
var Pythonisms = []pythonism{
	{"python-try", "try", true, "Starlark has no try/except", "test the condition first (for example `if item == None:`) and set STATUS and answer_text"},
	{"python-try", "except", true, "Starlark has no try/except", "test the condition first and set STATUS and answer_text"},
	{"python-try", "finally", true, "Starlark has no try/finally", "run the cleanup code unconditionally"},
	{"python-raise", "raise", true, "Starlark has no exceptions to raise", "set STATUS (for example \"invalid_request\") and answer_text, and skip the writes"},
	{"python-class", "class", true, "Starlark has no classes", "use dicts for records and plain functions for behaviour"},
	{"python-with", "with", true, "Starlark has no with statement", "call the helpers directly; there is nothing to open or close"},
	{"python-global", "global", true, "Starlark functions cannot rebind globals", "return the value from the function and assign it at top level"},
	{"python-global", "nonlocal", true, "Starlark functions cannot rebind enclosing variables", "return the value and assign it in the caller"},
	{"python-del", "del", true, "Starlark has no del statement", "use d.pop(key) for dicts, list.remove(x) for lists, tbl.remove(where) for rows"},
	{"python-assert", "assert", true, "Starlark has no assert statement", "check the condition with if, and set STATUS and answer_text when it fails"},
	{"python-async", "async", false, "Starlark has no async functions", "call the helpers directly; they return their results"},
	{"python-async", "await", false, "Starlark has no await", "call the helpers directly; they return their results"},
	{"python-yield", "yield", false, "Starlark has no generators", "build a list and return it"},
	{"python-decorator", "@", true, "Starlark has no decorators", "call the wrapping function explicitly"},
	{"python-walrus", ":=", false, "Starlark has no := assignment expressions", "assign the value on its own line first"},
	{"python-power", "**", false, "Starlark has no ** power operator", "use pow(x, y), or x * x for a square"},
	{"python-is", "is", false, "Starlark has no identity comparison", "compare values with == and !="},
	{"python-import", "import", false, "Starlark has no imports", "math, json and re are already available by name; drop the import"},
}

// Program is a checked, compiled plan, ready to run any number of times.
type Program struct {
	// Source is the program as the checker saw it: the extracted program after the pycompat
	// rewrites. Diagnostics refer to its lines, which are the extracted program's lines.
	Source string
	prog   *starlark.Program
	// uses are the environment's names the program refers to (the resolver's predeclared
	// bindings): the only ones its code can look up, so a run's predeclared dict holds only
	// them (runPredeclared) instead of a copy of the whole environment.
	uses []string
}

// check parses, validates and compiles src against env. It returns the compiled program, or the
// diagnostics that stop it. It never runs any of the program's code.
func (e *Env) check(src string, limits Limits) (*Program, diag.List) {
	if len(src) > limits.MaxProgram {
		return nil, diag.List{{
			Stage: diag.StageCheck, Code: CodeTooLarge,
			Message: fmt.Sprintf("the program is %d bytes; at most %d are accepted", len(src), limits.MaxProgram),
			Hint:    "a plan should be a short program: query with where filters instead of spelling data out",
		}}
	}
	// A program fastParse takes is scanned once: its tokens say what lex would find, and lex
	// runs only to report it.
	f, fl, fast, slabs := fastParsePooled(planFile, src)
	if e.freshTrees {
		f, fl, fast = fastParse(planFile, src)
	}
	// Nothing refers to the tree once the check returns: the compiled program keeps positions,
	// names and constants, the diagnostics positions and text. Its slabs go to the next plan.
	defer slabs.release()
	if !fast || fl.maxDepth > limits.MaxNesting || fl.needLex {
		lx := lex(src)
		if lx.maxDepth > limits.MaxNesting {
			return nil, diag.List{{
				Stage: diag.StageCheck, Code: CodeTooDeep, Line: lx.depthAt.line, Col: lx.depthAt.col,
				Message: fmt.Sprintf("brackets and blocks are nested %d deep; at most %d are accepted", lx.maxDepth, limits.MaxNesting),
				Hint:    "flatten the expression: compute parts into variables first",
			}}
		}
		if ds := findPythonisms(lx.tokens); len(ds) > 0 {
			return nil, ds
		}
	}
	p := &Program{Source: src, uses: make([]string, 0, 16)} // plans name a dozen or so
	var ds diag.List
	_, p.prog, ds = e.compileFile(planFile, src, f, &p.uses)
	if len(ds) > 0 {
		return nil, ds
	}
	return p, nil
}

// compile parses src as the file name, checks its tree, installs the memory guards and compiles
// it against e's names: the steps every Starlark file starplan runs goes through (a plan, a
// domain's helpers, its invariants).
func (e *Env) compile(name, src string) (*syntax.File, *starlark.Program, diag.List) {
	f, _, _ := fastParse(name, src)
	return e.compileFile(name, src, f, nil)
}

// compileFile is compile with src already parsed into f by fastParse; nil: parse it here. When
// uses is not nil, it is given the environment's names the resolver binds (each once).
func (e *Env) compileFile(name, src string, f *syntax.File, uses *[]string) (*syntax.File, *starlark.Program, diag.List) {
	if f == nil {
		var err error
		if f, err = fileOptions.Parse(name, src, 0); err != nil {
			return nil, nil, syntaxDiagnostics(err)
		}
	}
	var seen *builtins.NumericNames // what the guard rewrite needs, gathered on the check's walk
	if !e.unguarded {
		seen = new(builtins.NumericNames)
	}
	if ds := e.checkTree(f, seen); len(ds) > 0 {
		return nil, nil, ds
	}
	if seen != nil {
		guardTree(f, seen)
	}
	isPredeclared := e.isPredeclared
	if uses != nil {
		// The resolver asks once per name (it remembers the answer for the file), and every
		// name it binds as predeclared is one it asked about and was told yes.
		isPredeclared = func(name string) bool {
			ok := e.isPredeclared(name)
			if ok {
				*uses = append(*uses, name)
			}
			return ok
		}
	}
	prog, err := starlark.FileProgram(f, isPredeclared)
	if err != nil {
		return nil, nil, e.resolveDiagnostics(err)
	}
	return f, prog, nil
}

// findPythonisms reports every Python-only construct in the token stream.
func findPythonisms(toks []lexToken) diag.List {
	var ds diag.List
	for _, t := range toks {
		for _, p := range Pythonisms {
			if t.text != p.Word || (p.LineStart && !t.lineStart) {
				continue
			}
			if p.Word == "**" && (t.prev == "(" || t.prev == ",") {
				continue // f(**kwargs) and def f(**kwargs) are Starlark
			}
			ds = append(ds, diag.Diagnostic{
				Stage: diag.StageCheck, Code: p.Code, Line: t.line, Col: t.col,
				Message: p.Message, Hint: p.Hint,
			})
		}
	}
	return ds
}

// syntaxDiagnostics converts a parse error.
func syntaxDiagnostics(err error) diag.List {
	var se syntax.Error
	if errors.As(err, &se) {
		return diag.List{{
			Stage: diag.StageCheck, Code: CodeSyntax, Line: int(se.Pos.Line), Col: int(se.Pos.Col),
			Message: se.Msg, Hint: syntaxHint(se.Msg),
		}}
	}
	return diag.List{{Stage: diag.StageCheck, Code: CodeSyntax, Message: err.Error()}}
}

// syntaxHint suggests a fix for the parse errors that Python habits cause most.
func syntaxHint(msg string) string {
	switch {
	case strings.Contains(msg, "want ':'") && strings.Contains(msg, "got ,"):
		return "Starlark has no set literals: write set([a, b])"
	case strings.Contains(msg, "unindent") || strings.Contains(msg, "indent"):
		return "indent blocks consistently with spaces"
	case strings.Contains(msg, "got for"):
		return "a generator expression needs brackets in Starlark: write [x for x in xs]"
	case strings.Contains(msg, "else"):
		return "Starlark has no for/else or while/else: use a flag variable"
	}
	return "Starlark's grammar is Python's without classes, exceptions, imports and generators"
}

// checkTree applies the rules that need the syntax tree: no load, no rebinding of the helpers,
// no use of the sandbox's reserved names; and it asks the helpers to check their calls. It shows
// every node to seen, when not nil, so that the guard rewrite needs no walk of its own (walkTree
// shows them in syntax.Walk's order, as GuardTreeSeen asks).
func (e *Env) checkTree(f *syntax.File, seen *builtins.NumericNames) diag.List {
	var ds diag.List
	topLevelBindings(f.Stmts, func(id *syntax.Ident) {
		if e.protected[id.Name] && !strings.HasPrefix(id.Name, reservedPrefix) {
			ds = append(ds, diag.Diagnostic{
				Stage: diag.StageCheck, Code: CodePredeclaredAssign,
				Line: int(id.NamePos.Line), Col: int(id.NamePos.Col),
				Message: fmt.Sprintf("%s is a predeclared helper and cannot be reassigned", id.Name),
				Hint:    fmt.Sprintf("choose another name for your variable, for example my_%s", strings.TrimSuffix(id.Name, "_tbl")),
			})
		}
	})
	// A helper's findings are kept apart until the walk has seen every binding: a name that a
	// function, lambda or comprehension binds may be another value there, so its findings are
	// dropped (top-level rebinding is predeclared-assign).
	type finding struct {
		name string
		d    diag.Diagnostic
	}
	var found []finding
	var bound map[string]bool // helper names bound anywhere in the program
	bind := func(id *syntax.Ident) {
		if e.calls[id.Name] != nil {
			if bound == nil {
				bound = map[string]bool{}
			}
			bound[id.Name] = true
		}
	}
	walkTree(f, func(n syntax.Node) {
		if seen != nil {
			seen.Visit(n)
		}
		switch n := n.(type) {
		case *syntax.CallExpr:
			if name, method := callee(n); e.calls[name] != nil {
				for _, d := range e.calls[name](method, n) {
					found = append(found, finding{name, d})
				}
			}
		case *syntax.AssignStmt:
			builtins.BindingTargets(n.LHS, bind)
		case *syntax.ForStmt:
			builtins.BindingTargets(n.Vars, bind)
		case *syntax.ForClause:
			builtins.BindingTargets(n.Vars, bind)
		case *syntax.DefStmt:
			bind(n.Name)
			paramNames(n.Params, bind)
		case *syntax.LambdaExpr:
			paramNames(n.Params, bind)
		case *syntax.LoadStmt:
			ds = append(ds, diag.Diagnostic{
				Stage: diag.StageCheck, Code: CodeLoad, Line: int(n.Load.Line), Col: int(n.Load.Col),
				Message: "load() is not allowed in a plan",
				Hint:    "every helper and module is already available by name",
			})
		case *syntax.Ident:
			if strings.HasPrefix(n.Name, reservedPrefix) {
				ds = append(ds, diag.Diagnostic{
					Stage: diag.StageCheck, Code: CodeReservedName,
					Line: int(n.NamePos.Line), Col: int(n.NamePos.Col),
					Message: fmt.Sprintf("names starting with %s are reserved for the sandbox", reservedPrefix),
					Hint:    "rename the variable",
				})
			}
		}
	})
	for _, f := range found {
		if !bound[f.name] {
			ds = append(ds, f.d)
		}
	}
	return ds
}

// callee names what call calls when it can be a helper: name(...) or name.method(...).
func callee(call *syntax.CallExpr) (name, method string) {
	switch fn := call.Fn.(type) {
	case *syntax.Ident:
		return fn.Name, ""
	case *syntax.DotExpr:
		if x, ok := fn.X.(*syntax.Ident); ok {
			return x.Name, fn.Name.Name
		}
	}
	return "", ""
}

// paramNames calls bind on each parameter name of a def or lambda: x, x=default, *x, **x.
func paramNames(params []syntax.Expr, bind func(*syntax.Ident)) {
	for _, p := range params {
		switch p := p.(type) {
		case *syntax.Ident:
			bind(p)
		case *syntax.BinaryExpr:
			if id, ok := p.X.(*syntax.Ident); ok {
				bind(id)
			}
		case *syntax.UnaryExpr:
			if id, ok := p.X.(*syntax.Ident); ok {
				bind(id)
			}
		}
	}
}

// topLevelBindings calls fn on each identifier that the top-level statements stmts bind at
// module scope (assignments, for-loop variables and def names, also inside top-level
// if/for/while blocks), in order. It collects nothing, so a check allocates nothing for it.
func topLevelBindings(stmts []syntax.Stmt, fn func(*syntax.Ident)) {
	for _, s := range stmts {
		switch s := s.(type) {
		case *syntax.AssignStmt:
			builtins.BindingTargets(s.LHS, fn)
		case *syntax.DefStmt:
			fn(s.Name)
		case *syntax.ForStmt:
			builtins.BindingTargets(s.Vars, fn)
			topLevelBindings(s.Body, fn)
		case *syntax.WhileStmt:
			topLevelBindings(s.Body, fn)
		case *syntax.IfStmt:
			topLevelBindings(s.True, fn)
			topLevelBindings(s.False, fn)
		}
	}
}

// documentedNames lists the names a plan may use: the documented registry and Starlark's
// universe. The resolver's own did-you-mean only knows the program's globals.
func (e *Env) documentedNames() []string {
	names := make([]string, 0, len(e.registry)+len(starlark.Universe))
	for _, h := range e.registry {
		if !h.Hidden && !strings.Contains(h.Name, ".") {
			names = append(names, h.Name)
		}
	}
	n := len(names)
	for name := range starlark.Universe {
		names = append(names, name)
	}
	slices.Sort(names[n:]) // the universe is a map: of equally near names, the same one wins every time
	return names
}

var undefinedRE = regexp.MustCompile(`^undefined: (\S+)(?: \(did you mean (\S+)\?\))?$`)

// resolveDiagnostics converts the resolver's errors: unknown names get a did-you-mean.
// maxResolveDiagnostics is the most name problems a check reports one by one: a hostile program
// can hold tens of thousands, each costing a spelling search.
const maxResolveDiagnostics = 50

func (e *Env) resolveDiagnostics(err error) diag.List {
	var list resolve.ErrorList
	if !errors.As(err, &list) {
		return diag.List{{Stage: diag.StageCheck, Code: CodeResolve, Message: err.Error()}}
	}
	var ds diag.List
	for i, re := range list {
		if i == maxResolveDiagnostics {
			ds = append(ds, diag.Diagnostic{Stage: diag.StageCheck, Code: CodeResolve,
				Message: fmt.Sprintf("and %d more problems with names", len(list)-i),
				Hint:    "correct the ones above first; the rest are often the same mistake"})
			break
		}
		d := diag.Diagnostic{Stage: diag.StageCheck, Code: CodeResolve, Line: int(re.Pos.Line), Col: int(re.Pos.Col), Message: re.Msg}
		if m := undefinedRE.FindStringSubmatch(re.Msg); m != nil {
			d.Code = CodeUnknownName
			d.Message = fmt.Sprintf("%s is not defined", m[1])
			suggestion := m[2]
			if suggestion == "" {
				suggestion = table.Nearest(m[1], e.documentedNames())
			}
			if why, ok := pycompat.ForeignModuleHint(m[1]); ok {
				d.Hint = why
			} else if suggestion != "" && !strings.HasPrefix(suggestion, reservedPrefix) {
				d.Hint = fmt.Sprintf("did you mean %s?", suggestion)
			} else {
				d.Hint = "define it before use, or use one of the helpers in the reference"
			}
		}
		ds = append(ds, d)
	}
	return ds
}
