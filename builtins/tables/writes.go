package tables

import (
	"fmt"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/table"
)

// HelpersFile is the file a domain's helpers are compiled from (sandbox.HelpersFile says the same;
// a test keeps them equal): a write made by a function of it is a helper's.
const HelpersFile = "helpers.star"

// CodeHelpersOnly is the diagnostic of a plan's own write to a table only the domain's helpers may
// write (table.Schema.Writes).
const CodeHelpersOnly = "helpers-only"

// writeMethods are the methods that change a table.
var writeMethods = map[string]bool{"insert": true, "update": true, "remove": true}

// helpersOnly reports whether only the domain's helpers may write t.
func (t *TableValue) helpersOnly() bool { return t.schema.Writes == table.WritesHelpers }

// writersHint names the helpers that write t, for a plan that wrote it itself.
func (t *TableValue) writersHint() string {
	if len(t.writers) == 0 {
		return fmt.Sprintf("only the domain's helpers write %s; call the helper that does what you need", t.schema.Name)
	}
	return fmt.Sprintf("call %s, which writes %s", strings.Join(t.writers, " or "), t.schema.Name)
}

// checkWrite refuses a write by a plan to a table only helpers may write: the function calling
// the method must be one of helpers.star. A plan's function passed to a helper and called back is
// the plan's (it is the innermost caller); a helper that calls a function it was given lends it
// nothing, but a plan that passes the table's bound method itself to such a helper borrows the
// helper's right, so helpers should not call what they are given with rows.
func (t *TableValue) checkWrite(thread *starlark.Thread, b *starlark.Builtin) error {
	if !t.helpersOnly() {
		return nil
	}
	if thread.CallStackDepth() > 1 && thread.CallFrame(1).Pos.Filename() == HelpersFile {
		return nil
	}
	return fmt.Errorf("%s: %s may be written only by the domain's helpers, not by a plan directly; %s", b.Name(), t.schema.Name, t.writersHint())
}

// checkHelpersOnly is the static half of checkWrite: a write method called on a helpers-only table
// outside helpers.star.
func (t *TableValue) checkHelpersOnly(method string, call *syntax.CallExpr) diag.List {
	if !t.helpersOnly() || !writeMethods[method] || call.Lparen.Filename() == HelpersFile {
		return nil
	}
	return diag.List{t.diagnostic(CodeHelpersOnly, call.Fn,
		fmt.Sprintf("%s may be written only by the domain's helpers; a plan may not call .%s on it", t.schema.Name, method),
		"", t.writersHint())}
}

// writingHelper returns the public helper through which the running write is made: the
// outermost function of helpers.star on the stack, when the method's immediate caller is one
// of them; "" for a plan's own write (a plan function a helper calls back included).
func writingHelper(thread *starlark.Thread) string {
	if thread.CallStackDepth() < 2 || thread.CallFrame(1).Pos.Filename() != HelpersFile {
		return ""
	}
	for i := thread.CallStackDepth() - 1; i >= 1; i-- {
		if f := thread.CallFrame(i); f.Pos.Filename() == HelpersFile {
			return f.Name
		}
	}
	return ""
}

// recordVia notes that helper wrote the rows of t with keys.
func (t *TableValue) recordVia(thread *starlark.Thread, helper string, keys []any) {
	b, _ := thread.Local(bindingKey).(*binding)
	if b == nil || helper == "" || len(keys) == 0 {
		return
	}
	if b.via == nil {
		b.via = map[string]map[string]string{}
	}
	rows := b.via[t.schema.Name]
	if rows == nil {
		rows = map[string]string{}
		b.via[t.schema.Name] = rows
	}
	for _, k := range keys {
		rows[fmt.Sprint(k)] = helper
	}
}

// matchedKeys returns the keys of the rows q selects in tb, for a helper's update or remove:
// the same predicate the write reads, so it records no read the write does not.
func (t *TableValue) matchedKeys(tb table.Table, q table.Query) ([]any, error) {
	rows, err := tb.Find(q)
	if err != nil {
		return nil, err
	}
	keys := make([]any, len(rows))
	for i, r := range rows {
		keys[i] = r[t.schema.Key]
	}
	return keys, nil
}
