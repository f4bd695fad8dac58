package builtins

import (
	"go.starlark.net/syntax"
)

// GuardTree rewrites, in place, the operations of a checked program that can amplify memory or
// work in a single interpreter step into calls of the guards that Guards returns:
//
//	a * b          → _sp_mul(a, b)         unless both operands are number literals
//	a + b          → _sp_add(a, b)         unless an operand is a number
//	x += y, x *= y → x = _sp_iadd(x, y)    (in place for lists, as before) when x is a name,
//	                                        or an index or field whose parts are names or literals;
//	                                        not x += y when x or y is a number
//	a % b          → _sp_mod(a, b)         unless both operands are int literals
//	a // b         → _sp_floordiv(a, b)    unless both operands are int literals (Python's
//	                                        floored quotient of floats, see FloatDivMod)
//	x %= y, x //= y → x = _sp_mod(x, y), x = _sp_floordiv(x, y) (a[f()] %= y as below)
//	a << b         → _sp_shl(a, b)         unless both operands are number literals
//	a[f()] += y    → _sp_augindex(a, f(), "+", y)   (also *=, %=, //=), when a or f() is not a plain name
//	x.m(args)      → _sp_method(x, "m", args)       for the methods in guardedMethods (join,
//	                                                 replace, format, split, extend, ...)
//	x.m            → _sp_attr(x, "m")               the same methods anywhere else (an alias
//	                                                 such as j = sep.join, or x.m(*args))
//
// and Guards shadows getattr, so getattr(s, "replace") is guarded too: a string's or list's
// guarded method is only ever reached through a guard, whatever the program does with it.
//
// Each guard estimates the size of the result and asks the run's budget before doing exactly
// what the operator or method would; on other operand types it defers to the original
// operation, so a program's meaning never changes. Positions are kept, so runtime errors still
// point at the operator. The checker must have rejected every name starting with GuardPrefix.
//
// "A number" is what the rewrite can prove is one without running anything (see numericNames):
// a number literal, a name that only ever holds numbers (total = 0.0 … total += x), or + - / of
// those. A + with a number on either side is numeric or an error (1 + "a" fails), never a string
// or list, and adding integers grows them by a bit at most, so its guard would only ever do the
// addition itself. * and % keep their guards unless their operands are literals: on big integers
// they charge the work of the multiplication or division (x = x * x doubles x's size); % and //
// of a float literal keep theirs too, to compute as Python does.
func GuardTree(f *syntax.File) {
	g := guarder{numeric: numericNames(f)}
	g.stmts(f.Stmts)
}

// GuardTreeSeen is GuardTree for a caller that has already walked the whole of f (syntax.Walk,
// every node visited) and shown each node to seen.Visit: the rewrite then needs no walk of its
// own to find the numeric names. A check walks every plan's tree anyway (sandbox's checkTree).
func GuardTreeSeen(f *syntax.File, seen *NumericNames) {
	g := guarder{numeric: seen.result()}
	g.stmts(f.Stmts)
}

type guarder struct {
	numeric map[string]bool // names that only ever hold numbers (numericNames)
}

func (g guarder) stmts(list []syntax.Stmt) {
	for i, s := range list {
		list[i] = g.stmt(s)
	}
}

func (g guarder) stmt(s syntax.Stmt) syntax.Stmt {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		s.RHS = g.expr(s.RHS)
		if s.Op == syntax.EQ {
			s.LHS = g.target(s.LHS)
			return s
		}
		// count += 1 cannot amplify; l *= 2 can, whatever the right-hand side. x %= y and
		// x //= y may be float arithmetic, which the guards do as Python.
		guard := s.Op == syntax.STAR_EQ || s.Op == syntax.PLUS_EQ && !g.isNumber(s.RHS) && !g.isNumber(s.LHS) ||
			s.Op == syntax.PERCENT_EQ || s.Op == syntax.SLASHSLASH_EQ
		switch {
		case guard && simpleTarget(s.LHS):
			name := nameIAdd
			switch s.Op {
			case syntax.STAR_EQ:
				name = nameIMul
			case syntax.PERCENT_EQ:
				name = nameMod
			case syntax.SLASHSLASH_EQ:
				name = nameFloorDiv
			}
			s.RHS = callExpr(name, s.OpPos, s.LHS, s.RHS)
			s.Op = syntax.EQ
			return s
		case guard:
			if ix, ok := s.LHS.(*syntax.IndexExpr); ok {
				// a[f()] += y: evaluate a and f() once, in the guard.
				op := "+"
				switch s.Op {
				case syntax.STAR_EQ:
					op = "*"
				case syntax.PERCENT_EQ:
					op = "%"
				case syntax.SLASHSLASH_EQ:
					op = "//"
				}
				opLit := &syntax.Literal{Token: syntax.STRING, TokenPos: s.OpPos, Raw: `"` + op + `"`, Value: op}
				return &syntax.ExprStmt{X: callExpr(nameAugIndex, s.OpPos, g.expr(ix.X), g.expr(ix.Y), opLit, s.RHS)}
			}
		}
		s.LHS = g.target(s.LHS)
	case *syntax.ExprStmt:
		s.X = g.expr(s.X)
	case *syntax.IfStmt:
		s.Cond = g.expr(s.Cond)
		g.stmts(s.True)
		g.stmts(s.False)
	case *syntax.ForStmt:
		s.X = g.expr(s.X)
		g.stmts(s.Body)
	case *syntax.WhileStmt:
		s.Cond = g.expr(s.Cond)
		g.stmts(s.Body)
	case *syntax.DefStmt:
		g.params(s.Params)
		g.stmts(s.Body)
	case *syntax.ReturnStmt:
		if s.Result != nil {
			s.Result = g.expr(s.Result)
		}
	}
	return s
}

// target rewrites the expressions inside an assignment target (indexes), not the target itself.
func (g guarder) target(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.IndexExpr:
		e.X, e.Y = g.expr(e.X), g.expr(e.Y)
	case *syntax.DotExpr:
		e.X = g.expr(e.X)
	case *syntax.TupleExpr:
		for i, x := range e.List {
			e.List[i] = g.target(x)
		}
	case *syntax.ListExpr:
		for i, x := range e.List {
			e.List[i] = g.target(x)
		}
	case *syntax.ParenExpr:
		e.X = g.target(e.X)
	}
	return e
}

func (g guarder) params(ps []syntax.Expr) {
	for _, p := range ps {
		if b, ok := p.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			b.Y = g.expr(b.Y) // default value
		}
	}
}

func (g guarder) exprs(list []syntax.Expr) {
	for i, x := range list {
		list[i] = g.expr(x)
	}
}

func (g guarder) expr(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.BinaryExpr:
		e.X, e.Y = g.expr(e.X), g.expr(e.Y)
		switch {
		case e.Op == syntax.STAR && !(isNumberLit(e.X) && isNumberLit(e.Y)):
			return callExpr(nameMul, e.OpPos, e.X, e.Y)
		case e.Op == syntax.PLUS && !g.isNumber(e.X) && !g.isNumber(e.Y):
			return callExpr(nameAdd, e.OpPos, e.X, e.Y)
		case e.Op == syntax.PERCENT && !(isIntLit(e.X) && isIntLit(e.Y)):
			return callExpr(nameMod, e.OpPos, e.X, e.Y)
		case e.Op == syntax.SLASHSLASH && !(isIntLit(e.X) && isIntLit(e.Y)):
			return callExpr(nameFloorDiv, e.OpPos, e.X, e.Y)
		case e.Op == syntax.LTLT && !(isNumberLit(e.X) && isNumberLit(e.Y)):
			return callExpr(nameShl, e.OpPos, e.X, e.Y)
		}
	case *syntax.CallExpr:
		dot, isDot := e.Fn.(*syntax.DotExpr)
		direct := isDot && guardedMethods[dot.Name.Name] && !hasStarArgs(e.Args)
		if direct {
			dot.X = g.expr(dot.X)
		} else {
			e.Fn = g.expr(e.Fn) // a guarded x.m becomes _sp_attr(x, "m")
		}
		for i, a := range e.Args {
			if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
				b.Y = g.expr(b.Y) // keyword argument
				continue
			}
			e.Args[i] = g.expr(a)
		}
		if direct {
			// x.m(args) becomes _sp_method(x, "m", args) in place: one new argument list, and the
			// call keeps its node (positioned at the method's name, where errors point).
			// The guard's name, the method's and the argument list are one allocation.
			m := &methodNode{fn: syntax.Ident{NamePos: dot.NamePos, Name: nameMethod}}
			setStringLit(&m.name, dot.Name)
			args := m.args[:0]
			if len(e.Args)+2 > len(m.args) {
				args = make([]syntax.Expr, 0, len(e.Args)+2)
			}
			args = append(append(args, dot.X, &m.name), e.Args...)
			e.Fn = &m.fn
			e.Lparen, e.Args, e.Rparen = dot.NamePos, args, dot.NamePos
			return e
		}
	case *syntax.UnaryExpr:
		if e.X != nil {
			e.X = g.expr(e.X)
		}
	case *syntax.ParenExpr:
		e.X = g.expr(e.X)
	case *syntax.DotExpr:
		e.X = g.expr(e.X)
		if guardedMethods[e.Name.Name] {
			return callExpr(nameAttr, e.NamePos, e.X, stringLit(e.Name))
		}
	case *syntax.IndexExpr:
		e.X, e.Y = g.expr(e.X), g.expr(e.Y)
	case *syntax.SliceExpr:
		e.X = g.expr(e.X)
		for _, p := range []*syntax.Expr{&e.Lo, &e.Hi, &e.Step} {
			if *p != nil {
				*p = g.expr(*p)
			}
		}
	case *syntax.ListExpr:
		g.exprs(e.List)
	case *syntax.TupleExpr:
		g.exprs(e.List)
	case *syntax.DictExpr:
		for _, x := range e.List {
			entry := x.(*syntax.DictEntry)
			entry.Key, entry.Value = g.expr(entry.Key), g.expr(entry.Value)
		}
	case *syntax.CondExpr:
		e.Cond, e.True, e.False = g.expr(e.Cond), g.expr(e.True), g.expr(e.False)
	case *syntax.LambdaExpr:
		g.params(e.Params)
		e.Body = g.expr(e.Body)
	case *syntax.Comprehension:
		e.Body = g.expr(e.Body)
		for _, c := range e.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				c.X = g.expr(c.X)
			case *syntax.IfClause:
				c.Cond = g.expr(c.Cond)
			}
		}
	case *syntax.DictEntry:
		e.Key, e.Value = g.expr(e.Key), g.expr(e.Value)
	}
	return e
}

// stringLit is the name of id as a string literal at its position.
func stringLit(id *syntax.Ident) *syntax.Literal {
	lit := new(syntax.Literal)
	setStringLit(lit, id)
	return lit
}

// setStringLit makes lit the name of id as a string literal at its position.
func setStringLit(lit *syntax.Literal, id *syntax.Ident) {
	raw, ok := quotedMethods[id.Name]
	if !ok {
		raw = `"` + id.Name + `"`
	}
	*lit = syntax.Literal{Token: syntax.STRING, TokenPos: id.NamePos, Raw: raw, Value: id.Name}
}

// methodNode is what rewriting x.m(args) into _sp_method(x, "m", args) adds to the tree, in one
// allocation: the guard's name, the method's name as a literal and, for calls of up to two
// arguments, the new argument list.
type methodNode struct {
	fn   syntax.Ident
	name syntax.Literal
	args [4]syntax.Expr
}

// quotedMethods are the guarded method names as string literals, made once: the rewrite quotes
// one for every guarded call of every plan.
var quotedMethods = func() map[string]string {
	m := make(map[string]string, len(guardedMethods))
	for name := range guardedMethods {
		m[name] = `"` + name + `"`
	}
	return m
}()

// callNode is a call of a guard and the guard's name, allocated together: the rewrite makes one
// for every amplifying operation of a plan, and one allocation is cheaper than two.
type callNode struct {
	call syntax.CallExpr
	fn   syntax.Ident
}

// callExpr builds name(args...) positioned at pos.
func callExpr(name string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	n := &callNode{fn: syntax.Ident{NamePos: pos, Name: name}}
	n.call = syntax.CallExpr{Fn: &n.fn, Lparen: pos, Args: args, Rparen: pos}
	return &n.call
}

// isNumber reports whether e, as the rewrite has left it so far, always evaluates to a number
// or fails (see numericExpr).
func (g guarder) isNumber(e syntax.Expr) bool { return numericExpr(e, g.numeric) }

// numericExpr reports whether e always evaluates to an int or a float, or fails, given that the
// names in numeric only ever hold numbers: a number literal, such a name, a unary sign of a
// number, a / b, a + b or a - b with a number on either side, and a // b or a % b with a number
// on the left. (a * b needs both: 2 * "ab" is a string.) Every other expression, calls included
// (float could be rebound), is not known to be one.
func numericExpr(e syntax.Expr, numeric map[string]bool) bool {
	switch e := e.(type) {
	case *syntax.Literal:
		return e.Token == syntax.INT || e.Token == syntax.FLOAT
	case *syntax.Ident:
		return numeric[e.Name]
	case *syntax.ParenExpr:
		return numericExpr(e.X, numeric)
	case *syntax.UnaryExpr:
		return (e.Op == syntax.MINUS || e.Op == syntax.PLUS || e.Op == syntax.TILDE) && e.X != nil && numericExpr(e.X, numeric)
	case *syntax.BinaryExpr:
		switch e.Op {
		case syntax.SLASH:
			return true // only numbers divide
		case syntax.PLUS, syntax.MINUS:
			return numericExpr(e.X, numeric) || numericExpr(e.Y, numeric)
		case syntax.SLASHSLASH, syntax.PERCENT:
			return numericExpr(e.X, numeric)
		case syntax.STAR:
			return numericExpr(e.X, numeric) && numericExpr(e.Y, numeric)
		}
	case *syntax.CondExpr:
		return numericExpr(e.True, numeric) && numericExpr(e.False, numeric)
	case *syntax.CallExpr:
		// a % b and a // b as the rewrite has left them.
		if id, ok := e.Fn.(*syntax.Ident); ok && (id.Name == nameMod || id.Name == nameFloorDiv) && len(e.Args) == 2 {
			return numericExpr(e.Args[0], numeric)
		}
	}
	return false
}

// numericNames returns the names that only ever hold numbers in f: every binding of the name,
// in any scope of the file, is name = <a number> or name += / -= / /= / //= / %= <anything> (a
// number on the left keeps the result a number, or fails). A name bound any other way anywhere
// (a loop or comprehension variable, a parameter, a def, an unpacking, name *= y) is not one, in
// any scope: the analysis does not tell scopes apart, so it never mistakes one scope's name for
// another's. Names start as numbers and lose it until nothing changes (a name assigned only from
// another such name, or never, holds no value that is not a number).
func numericNames(f *syntax.File) map[string]bool {
	var c NumericNames
	syntax.Walk(f, func(n syntax.Node) bool {
		c.Visit(n)
		return true
	})
	return c.result()
}

// NumericNames gathers, one node at a time, what numericNames needs from a tree, for
// GuardTreeSeen. Its zero value is ready to use.
type NumericNames struct {
	assigns []*syntax.AssignStmt // name = x and name op= x, for the names still candidates
	bad     map[string]bool
	numeric map[string]bool
}

// Visit records what node n binds.
func (c *NumericNames) Visit(n syntax.Node) {
	switch n := n.(type) {
	case *syntax.AssignStmt:
		id, ok := n.LHS.(*syntax.Ident)
		if !ok {
			markBound(n.LHS, c.badNames())
			break
		}
		switch n.Op {
		case syntax.EQ, syntax.PLUS_EQ, syntax.MINUS_EQ, syntax.SLASH_EQ, syntax.SLASHSLASH_EQ, syntax.PERCENT_EQ:
			if c.numeric == nil {
				c.numeric = map[string]bool{}
			}
			c.numeric[id.Name] = true
			c.assigns = append(c.assigns, n)
		default:
			c.badNames()[id.Name] = true
		}
	case *syntax.ForStmt:
		markBound(n.Vars, c.badNames())
	case *syntax.ForClause:
		markBound(n.Vars, c.badNames())
	case *syntax.DefStmt:
		c.badNames()[n.Name.Name] = true
		markParams(n.Params, c.badNames())
	case *syntax.LambdaExpr:
		markParams(n.Params, c.badNames())
	case *syntax.LoadStmt:
		for _, id := range n.To {
			c.badNames()[id.Name] = true
		}
	}
}

func (c *NumericNames) badNames() map[string]bool {
	if c.bad == nil {
		c.bad = map[string]bool{}
	}
	return c.bad
}

// result is the names that only ever hold numbers, from what Visit saw.
func (c *NumericNames) result() map[string]bool {
	numeric := c.numeric
	for name := range c.bad {
		delete(numeric, name)
	}
	for changed := true; changed; {
		changed = false
		for _, a := range c.assigns {
			name := a.LHS.(*syntax.Ident).Name
			if numeric[name] && a.Op == syntax.EQ && !numericExpr(a.RHS, numeric) {
				delete(numeric, name)
				changed = true
			}
		}
	}
	return numeric
}

// markBound marks every name an assignment or loop target binds.
func markBound(target syntax.Expr, bad map[string]bool) {
	BindingTargets(target, func(id *syntax.Ident) { bad[id.Name] = true })
}

// BindingTargets calls bind on each identifier an assignment to e binds: x, (x, y), [x, y].
// (The checker's scope analysis and the guard rewrite's numeric names both need it.)
func BindingTargets(e syntax.Expr, bind func(*syntax.Ident)) {
	switch e := e.(type) {
	case *syntax.Ident:
		bind(e)
	case *syntax.TupleExpr:
		for _, x := range e.List {
			BindingTargets(x, bind)
		}
	case *syntax.ListExpr:
		for _, x := range e.List {
			BindingTargets(x, bind)
		}
	case *syntax.ParenExpr:
		BindingTargets(e.X, bind)
	}
}

// markParams marks every parameter name of a def or lambda.
func markParams(params []syntax.Expr, bad map[string]bool) {
	for _, p := range params {
		switch p := p.(type) {
		case *syntax.Ident:
			bad[p.Name] = true
		case *syntax.BinaryExpr: // name=default
			if id, ok := p.X.(*syntax.Ident); ok {
				bad[id.Name] = true
			}
		case *syntax.UnaryExpr: // *args, **kwargs
			if id, ok := p.X.(*syntax.Ident); ok {
				bad[id.Name] = true
			}
		}
	}
}

// isIntLit reports whether e is an int literal, signed or in parentheses.
func isIntLit(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Literal:
		return e.Token == syntax.INT
	case *syntax.UnaryExpr:
		return (e.Op == syntax.MINUS || e.Op == syntax.PLUS) && isIntLit(e.X)
	case *syntax.ParenExpr:
		return isIntLit(e.X)
	}
	return false
}

func isNumberLit(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Literal:
		return e.Token == syntax.INT || e.Token == syntax.FLOAT
	case *syntax.UnaryExpr:
		return (e.Op == syntax.MINUS || e.Op == syntax.PLUS) && isNumberLit(e.X)
	case *syntax.ParenExpr:
		return isNumberLit(e.X)
	}
	return false
}

// simpleTarget reports whether evaluating the target twice (x += y → x = f(x, y)) is the same as
// evaluating it once: a name, or an index or field whose parts are names or literals.
func simpleTarget(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Ident:
		return true
	case *syntax.DotExpr:
		return simpleOperand(e.X)
	case *syntax.IndexExpr:
		return simpleOperand(e.X) && simpleOperand(e.Y)
	}
	return false
}

func simpleOperand(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Ident, *syntax.Literal:
		return true
	case *syntax.DotExpr:
		return simpleOperand(e.X)
	}
	return false
}

// hasStarArgs reports whether a call spreads *args or **kwargs, whose count the guard cannot see
// at the call site.
func hasStarArgs(args []syntax.Expr) bool {
	for _, a := range args {
		if u, ok := a.(*syntax.UnaryExpr); ok && (u.Op == syntax.STAR || u.Op == syntax.STARSTAR) {
			return true
		}
	}
	return false
}
