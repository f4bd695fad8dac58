package sandbox

import "go.starlark.net/syntax"

// walkTree calls visit on n and on every node under it, in syntax.Walk's order (a node before
// its children, children in source order), once each: syntax.Walk also calls its function with
// nil after each node's children, so a walk that needs no post-order pays for twice the calls.
// TestWalkTreeMatchesWalk compares the two over the test corpus.
func walkTree(n syntax.Node, visit func(syntax.Node)) {
	visit(n)
	switch n := n.(type) {
	case *syntax.File:
		walkStmts(n.Stmts, visit)
	case *syntax.ExprStmt:
		walkTree(n.X, visit)
	case *syntax.IfStmt:
		walkTree(n.Cond, visit)
		walkStmts(n.True, visit)
		walkStmts(n.False, visit)
	case *syntax.AssignStmt:
		walkTree(n.LHS, visit)
		walkTree(n.RHS, visit)
	case *syntax.DefStmt:
		walkTree(n.Name, visit)
		walkExprs(n.Params, visit)
		walkStmts(n.Body, visit)
	case *syntax.ForStmt:
		walkTree(n.Vars, visit)
		walkTree(n.X, visit)
		walkStmts(n.Body, visit)
	case *syntax.WhileStmt:
		walkTree(n.Cond, visit)
		walkStmts(n.Body, visit)
	case *syntax.ReturnStmt:
		if n.Result != nil {
			walkTree(n.Result, visit)
		}
	case *syntax.LoadStmt:
		walkTree(n.Module, visit)
		for _, from := range n.From {
			walkTree(from, visit)
		}
		for _, to := range n.To {
			walkTree(to, visit)
		}
	case *syntax.ListExpr:
		walkExprs(n.List, visit)
	case *syntax.ParenExpr:
		walkTree(n.X, visit)
	case *syntax.CondExpr:
		walkTree(n.Cond, visit)
		walkTree(n.True, visit)
		walkTree(n.False, visit)
	case *syntax.IndexExpr:
		walkTree(n.X, visit)
		walkTree(n.Y, visit)
	case *syntax.DictEntry:
		walkTree(n.Key, visit)
		walkTree(n.Value, visit)
	case *syntax.SliceExpr:
		walkTree(n.X, visit)
		if n.Lo != nil {
			walkTree(n.Lo, visit)
		}
		if n.Hi != nil {
			walkTree(n.Hi, visit)
		}
		if n.Step != nil {
			walkTree(n.Step, visit)
		}
	case *syntax.Comprehension:
		walkTree(n.Body, visit)
		for _, clause := range n.Clauses {
			walkTree(clause, visit)
		}
	case *syntax.IfClause:
		walkTree(n.Cond, visit)
	case *syntax.ForClause:
		walkTree(n.Vars, visit)
		walkTree(n.X, visit)
	case *syntax.TupleExpr:
		walkExprs(n.List, visit)
	case *syntax.DictExpr:
		walkExprs(n.List, visit)
	case *syntax.UnaryExpr:
		if n.X != nil {
			walkTree(n.X, visit)
		}
	case *syntax.BinaryExpr:
		walkTree(n.X, visit)
		walkTree(n.Y, visit)
	case *syntax.DotExpr:
		walkTree(n.X, visit)
		walkTree(n.Name, visit)
	case *syntax.CallExpr:
		walkTree(n.Fn, visit)
		walkExprs(n.Args, visit)
	case *syntax.LambdaExpr:
		walkExprs(n.Params, visit)
		walkTree(n.Body, visit)
	case *syntax.BranchStmt, *syntax.Ident, *syntax.Literal:
	default:
		panic(n) // a node syntax.Walk would not know either
	}
}

func walkStmts(stmts []syntax.Stmt, visit func(syntax.Node)) {
	for _, s := range stmts {
		walkTree(s, visit)
	}
}

func walkExprs(xs []syntax.Expr, visit func(syntax.Node)) {
	for _, x := range xs {
		walkTree(x, visit)
	}
}
