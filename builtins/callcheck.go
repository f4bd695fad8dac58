package builtins

import (
	"fmt"
	"strings"

	"go.starlark.net/syntax"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/internal/spell"
)

// Codes of the diagnostics a helper's static check (Helper.Check) gives. They are check-stage
// codes, listed with the others in package sandbox, and as stable as those.
const (
	// CodeUnknownField: a literal dict passed to a table method names a field the table does
	// not have (a row to insert, fields to update, a where-filter).
	CodeUnknownField = "unknown-field"
	// CodeUnknownOperator: a literal where-filter uses an operator where does not know, or one
	// it knows in the wrong place ($lt at the top of the filter, $or inside a field's operators).
	CodeUnknownOperator = "unknown-operator"
	// CodeWrongArguments: a helper or table method is called with too many positional
	// arguments, a keyword that names none of its parameters, one parameter twice, or without a
	// required one.
	CodeWrongArguments = "wrong-arguments"
)

// CallCheck checks one call of a helper from its syntax alone, before the run. method is "" for
// a call of the helper's own name, name(...), and the attribute for a call of one of its
// methods, name.method(...). The sandbox calls it only where name is certainly the predeclared
// helper (no function or comprehension binds the name).
//
// It returns a check-stage diagnostic, positioned at the offending argument or key, for each
// thing that is certainly wrong, and must never flag a call that could succeed at run time: it
// judges literals only and leaves *args, **kwargs and computed values alone.
type CallCheck func(method string, call *syntax.CallExpr) diag.List

// Param is one parameter of a helper or method, declared once for its signature in the
// reference and for the static check of its calls.
type Param struct {
	Name string
	// Default is the default as the reference shows it ("None", "transactions_tbl"); "" means
	// the parameter is required.
	Default string
}

// Params is a parameter list, in positional order.
type Params []Param

// String renders the list as a signature shows it: "fields, where" or "where=None".
func (ps Params) String() string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Name
		if p.Default != "" {
			parts[i] += "=" + p.Default
		}
	}
	return strings.Join(parts, ", ")
}

// Bind checks the arguments of call against the parameters, the way starlark.UnpackArgs will
// at run time, and calls bind with the index and argument expression of every parameter it can
// bind for certain (positional arguments before any *args, and keywords), in the call's order.
// callee names the helper in messages ("inventory_tbl.update") and signature is how to call it,
// for the hints. A list has at most 64 parameters.
//
// It reports, with CodeWrongArguments: more positional arguments than parameters (at the first
// extra one), a keyword that names no parameter (at the keyword, with a did-you-mean), a
// parameter given twice (at the second), and a required parameter missing (at the closing
// parenthesis). A call with *args or **kwargs is never reported missing an argument, and one
// with *args binds none of its positionals.
func (ps Params) Bind(callee, signature string, call *syntax.CallExpr, bind func(i int, arg syntax.Expr)) diag.List {
	var ds diag.List
	report := func(pos syntax.Position, hint, format string, args ...any) {
		ds = append(ds, diag.Diagnostic{
			Stage: diag.StageCheck, Code: CodeWrongArguments, Line: int(pos.Line), Col: int(pos.Col),
			Message: fmt.Sprintf(format, args...), Hint: hint + "call it as " + signature,
		})
	}
	var bound uint64 // bit i: parameter i has its argument
	positional, spread := 0, false
	for _, arg := range call.Args {
		switch a := arg.(type) {
		case *syntax.UnaryExpr:
			if a.Op == syntax.STAR || a.Op == syntax.STARSTAR {
				spread = true
				continue
			}
		case *syntax.BinaryExpr:
			if kw, ok := a.X.(*syntax.Ident); ok && a.Op == syntax.EQ {
				i := ps.index(kw.Name)
				switch {
				case i < 0 && len(ps) == 0:
					report(kw.NamePos, "", "%s takes no arguments", callee)
				case i < 0:
					hint := ""
					if near := spell.Nearest(kw.Name, ps.names()); near != "" {
						hint = fmt.Sprintf("did you mean %s? ", near)
					}
					report(kw.NamePos, hint, "%s has no parameter %s", callee, kw.Name)
				case bound&(1<<i) != 0:
					report(kw.NamePos, "", "%s got two values for %s", callee, kw.Name)
				default:
					bound |= 1 << i
					bind(i, a.Y)
				}
				continue
			}
		}
		// A positional argument (the grammar puts every one before the keywords).
		if positional == len(ps) {
			start, _ := arg.Span()
			if len(ps) == 0 {
				report(start, "", "%s takes no arguments", callee)
			} else {
				plural := "s"
				if len(ps) == 1 {
					plural = ""
				}
				report(start, "", "%s takes at most %d argument%s (%s); got more", callee, len(ps), plural, ps)
			}
			return ds
		}
		if !spread {
			bound |= 1 << positional
			bind(positional, arg)
		}
		positional++
	}
	if !spread {
		for i, p := range ps {
			if p.Default == "" && bound&(1<<i) == 0 {
				report(call.Rparen, "", "%s needs its %s argument", callee, p.Name)
			}
		}
	}
	return ds
}

func (ps Params) index(name string) int {
	for i, p := range ps {
		if p.Name == name {
			return i
		}
	}
	return -1
}

func (ps Params) names() []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// Check returns the CallCheck of a plain function with these parameters: Bind's diagnostics on
// calls of its name, nothing on anything else.
func (ps Params) Check(name, signature string) CallCheck {
	return func(method string, call *syntax.CallExpr) diag.List {
		if method != "" {
			return nil
		}
		return ps.Bind(name, signature, call, func(int, syntax.Expr) {})
	}
}
