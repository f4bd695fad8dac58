package tables

import (
	"fmt"
	"strings"

	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/table"
)

// literalChecks are the static checks of a method's literal arguments, by parameter name: every
// method calls its filter where and its dict of field values row (insert) or fields (update).
var literalChecks = map[string]func(t *TableValue, arg syntax.Expr) diag.List{
	"where":  (*TableValue).checkWhere,
	"row":    (*TableValue).checkFields,
	"fields": (*TableValue).checkFields,
}

// checkCall is the table value's builtins.CallCheck: a method call's arguments against the
// method's parameters, then its literal dicts against the schema. Anything the check cannot be
// sure of (an unknown method, which Attr explains at run time; computed dicts, keys and
// filters; *args and **kwargs) is left to the run.
func (t *TableValue) checkCall(name string, call *syntax.CallExpr) diag.List {
	i := methodIndex(name)
	if i < 0 {
		return nil
	}
	m := &tableMethods[i]
	if ds := t.checkHelpersOnly(name, call); len(ds) > 0 {
		return ds
	}
	var ds diag.List
	bindDiags := m.params.Bind(t.calls[i].callee, t.calls[i].signature, call, func(p int, arg syntax.Expr) {
		if check := literalChecks[m.params[p].Name]; check != nil {
			ds = append(ds, check(t, arg)...)
		}
	})
	return append(bindDiags, ds...)
}

// checkFields reports the string-literal keys of a literal dict that are not fields of the
// table: a row to insert or the fields to update.
func (t *TableValue) checkFields(arg syntax.Expr) diag.List {
	var ds diag.List
	for _, x := range literalDict(arg) {
		e := x.(*syntax.DictEntry)
		key, ok := stringLiteral(e.Key)
		if !ok || t.schema.Field(key) != nil {
			continue
		}
		names := t.schema.FieldNames()
		ds = append(ds, t.diagnostic(builtins.CodeUnknownField, e.Key,
			fmt.Sprintf("%q is not a field of %s", key, t.schema.Name),
			table.Nearest(key, names), "the fields are "+strings.Join(names, ", ")))
	}
	return ds
}

// checkWhere reports what Compile would refuse in a literal where-filter by its keys alone:
// unknown fields, and operators that are unknown or out of place, down through the operator
// dicts of fields and the literal filters listed under $or and $and. Operand values are left
// to the run.
func (t *TableValue) checkWhere(arg syntax.Expr) diag.List {
	var ds diag.List
	for _, x := range literalDict(arg) {
		e := x.(*syntax.DictEntry)
		key, ok := stringLiteral(e.Key)
		if !ok {
			continue
		}
		if strings.HasPrefix(key, "$") {
			if qe := table.OperatorError(key, true, ""); qe != nil {
				ds = append(ds, t.diagnostic(builtins.CodeUnknownOperator, e.Key, qe.Message, qe.Suggestion, "use $or or $and with a list of filters, or a field name"))
				continue
			}
			var subs []syntax.Expr
			switch list := unparen(e.Value).(type) {
			case *syntax.ListExpr:
				subs = list.List
			case *syntax.TupleExpr:
				subs = list.List
			}
			for _, sub := range subs {
				ds = append(ds, t.checkWhere(sub)...)
			}
			continue
		}
		if qe := t.schema.WhereFieldError(key); qe != nil {
			ds = append(ds, t.diagnostic(builtins.CodeUnknownField, e.Key, qe.Message, qe.Suggestion, "filter on one of the fields listed"))
			continue
		}
		for _, y := range literalDict(e.Value) {
			oe := y.(*syntax.DictEntry)
			name, ok := stringLiteral(oe.Key)
			if !ok {
				continue
			}
			if qe := table.OperatorError(name, false, key); qe != nil {
				ds = append(ds, t.diagnostic(builtins.CodeUnknownOperator, oe.Key, qe.Message, qe.Suggestion,
					"use one of "+strings.Join(table.FieldOperators, " ")+", or a function: lambda row: ..."))
			}
		}
	}
	return ds
}

// diagnostic is a check-stage finding at the expression at: with a did-you-mean when suggestion
// is set, otherwise the fallback hint.
func (t *TableValue) diagnostic(code string, at syntax.Expr, message, suggestion, fallback string) diag.Diagnostic {
	pos, _ := unparen(at).Span()
	hint := fallback
	if suggestion != "" {
		hint = fmt.Sprintf("did you mean %s?", suggestion)
	}
	return diag.Diagnostic{Stage: diag.StageCheck, Code: code, Line: int(pos.Line), Col: int(pos.Col),
		Message: t.name + ": " + message, Hint: hint}
}

// literalDict returns the entries (each a *syntax.DictEntry) of a dict literal ({...}, perhaps
// in parentheses), or nil for any other expression.
func literalDict(e syntax.Expr) []syntax.Expr {
	if d, ok := unparen(e).(*syntax.DictExpr); ok {
		return d.List
	}
	return nil
}

// stringLiteral returns the value of a string literal ("name", perhaps in parentheses).
func stringLiteral(e syntax.Expr) (string, bool) {
	lit, ok := unparen(e).(*syntax.Literal)
	if !ok || lit.Token != syntax.STRING {
		return "", false
	}
	s, ok := lit.Value.(string)
	return s, ok
}

func unparen(e syntax.Expr) syntax.Expr {
	for {
		p, ok := e.(*syntax.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}
