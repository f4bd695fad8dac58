package sandbox

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/diag"
)

// HelpersFile is the name a domain's helpers are compiled under: positions in them are the
// file's, and a runtime error inside a helper is reported at the plan's call of it.
const HelpersFile = "helpers.star"

// moduleLimits bound the top level of a domain's Starlark file (LoadModule), which only defines
// functions and constants: it is held to them as a plan's run is to its own, memory measured
// alike (the guards and the heap watchdog), wherever the file is loaded.
var moduleLimits = Limits{MaxSteps: 1_000_000, Timeout: 2 * time.Second, MaxMemory: 64 << 20}.Effective(Limits{})

// moduleTimeLift, when not zero, replaces moduleLimits.Timeout (LiftModuleTime).
var moduleTimeLift atomic.Int64

// topLevelLimits returns the limits a domain file's top level runs under now.
func topLevelLimits() Limits {
	l := moduleLimits
	if d := moduleTimeLift.Load(); d != 0 {
		l.Timeout = time.Duration(d)
	}
	return l
}

// LiftModuleTime lifts the time bound of domain files' top levels to d until the returned
// function is called. It is for tests, here and in packages that load domains, that assert the
// memory or the step limit fires: which limit fires first must not depend on the machine's speed
// (on a loaded 2-core machine under -race, 2 s can pass before 64 MiB are allocated).
func LiftModuleTime(d time.Duration) (restore func()) {
	old := moduleTimeLift.Swap(int64(d))
	return func() { moduleTimeLift.Store(old) }
}

// LoadHelpers checks and runs a domain's helpers, Starlark source written by the domain's
// author, and returns each function it defines as a domain helper (names starting with _ are
// the file's own). The file is checked as plans are (no load, no reserved names, the memory
// guards) and sees e's names; its top level runs once, now, under the limits of moduleLimits
// (1,000,000 steps, 2 s, 64 MiB), and a top level that passes one is refused with a
// limit-exceeded diagnostic naming it. A helper runs in the
// thread of the plan that calls it, so the plan's step, time and memory limits count its work.
//
// A helper's reference is its def line (the signature), the first paragraph of its docstring
// (the doc) and a docstring line "Example: ..." (the example). Every problem is a diagnostic
// positioned in the file.
func (e *Env) LoadHelpers(src string) (builtins.Registry, diag.List) {
	return e.LoadModule(HelpersFile, src, true)
}

// LoadModule is LoadHelpers for a file of another name; with needDoc false, its functions need
// no docstring (they are not shown to a model).
func (e *Env) LoadModule(file, src string, needDoc bool) (builtins.Registry, diag.List) {
	if len(src) > DefaultMaxProgram {
		return nil, diag.List{{Stage: diag.StageCheck, Code: CodeTooLarge,
			Message: fmt.Sprintf("%s is %d bytes; at most %d are accepted", file, len(src), DefaultMaxProgram)}}
	}
	f, prog, ds := e.compile(file, src)
	if len(ds) > 0 {
		return nil, ds
	}
	thread := &starlark.Thread{Name: "helpers"}
	b := bind(context.Background(), thread, topLevelLimits(), e.shared, watchSelf)
	globals, err := initProgram(prog, thread, e.predeclared)
	b.end(globals)
	if err != nil {
		return nil, diag.List{moduleDiagnostic(file, limitError(err, b.reason.get()))}
	}
	globals.Freeze()
	lines := strings.Split(src, "\n")
	var reg builtins.Registry
	for _, stmt := range f.Stmts {
		def, ok := stmt.(*syntax.DefStmt)
		if !ok || strings.HasPrefix(def.Name.Name, "_") {
			continue
		}
		fn, ok := globals[def.Name.Name].(*starlark.Function)
		if !ok {
			continue // rebound by a later statement
		}
		doc, example := docOf(fn.Doc())
		if doc == "" && needDoc {
			return nil, diag.List{{Stage: diag.StageCheck, Code: CodeHelperDoc, Line: int(def.Def.Line), Col: int(def.Def.Col),
				Message: fmt.Sprintf("helper %s has no docstring", def.Name.Name),
				Hint:    `start its body with a """docstring""": what it returns, then an "Example: ..." line; the prompt shows it to the model`}}
		}
		sig := signature(lines, def)
		h := builtins.Helper{
			Name:      def.Name.Name,
			Group:     builtins.GroupDomain,
			Signature: sig,
			Doc:       doc,
			Example:   example,
			Value:     fn,
		}
		if ps, ok := paramsOf(fn); ok {
			h.Check = ps.Check(def.Name.Name, sig) // calls with the wrong arguments fail the check
		}
		reg = append(reg, h)
	}
	return reg, nil
}

// CodeHelperDoc is the diagnostic of a domain helper without a docstring.
const CodeHelperDoc = "helper-doc"

// docOf splits a docstring into its first paragraph, on one line, and its "Example:" line.
func docOf(s string) (doc, example string) {
	var para []string
	inPara := true
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Example:"):
			example = strings.TrimSpace(strings.TrimPrefix(l, "Example:"))
		case l == "":
			inPara = inPara && len(para) == 0
		case inPara:
			para = append(para, l)
		}
	}
	return strings.Join(para, " "), example
}

// signature is the def's text from its name to its closing parenthesis, on one line.
func signature(lines []string, def *syntax.DefStmt) string {
	from, to := def.Name.NamePos, def.Rparen
	var b strings.Builder
	for ln := from.Line; ln <= to.Line && int(ln) <= len(lines); ln++ {
		text := lines[ln-1]
		start, end := 0, len(text)
		if ln == from.Line {
			start = runeOffset(text, int(from.Col))
		}
		if ln == to.Line {
			end = runeOffset(text, int(to.Col)+1)
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strings.TrimSpace(text[start:end]))
	}
	return strings.ReplaceAll(strings.ReplaceAll(b.String(), "( ", "("), " )", ")")
}

// runeOffset is the byte offset of the 1-based rune column col in text.
func runeOffset(text string, col int) int {
	off := 0
	for i := 1; i < col && off < len(text); i++ {
		_, n := utf8.DecodeRuneInString(text[off:])
		off += n
	}
	return off
}

// paramsOf is a function's parameters as the static call check reads them; false for a function
// with *args, **kwargs or keyword-only parameters, whose calls the check leaves to the run.
func paramsOf(fn *starlark.Function) (builtins.Params, bool) {
	if fn.HasVarargs() || fn.HasKwargs() || fn.NumKwonlyParams() > 0 {
		return nil, false
	}
	ps := make(builtins.Params, fn.NumParams())
	for i := range ps {
		ps[i].Name, _ = fn.Param(i)
		if d := fn.ParamDefault(i); d != nil {
			ps[i].Default = d.String()
		}
	}
	return ps, true
}

// Call calls fn, a function a module defined (LoadModule), on a thread of its own under limits
// (steps, time, memory; the zero value means the defaults), held to them as a run is: memory is
// measured by the guards and the heap watchdog, and what the call holds is its own values, not
// its module's globals or its arguments. steps is what the call took (builtins' charged work
// included; never more than limits.MaxSteps). The error is the function's: a runtime error, a
// panic turned into an error, or a *LimitError naming the limit that stopped it.
func Call(ctx context.Context, fn starlark.Callable, args starlark.Tuple, limits Limits) (v starlark.Value, steps uint64, err error) {
	return CallOn(ctx, fn, args, limits, nil)
}

// CallOn is Call with setup run on the call's thread before fn is called (nil: none): a domain's
// reading rule gets its read-only view of the data bound there (tables.Bind).
func CallOn(ctx context.Context, fn starlark.Callable, args starlark.Tuple, limits Limits, setup func(*starlark.Thread)) (v starlark.Value, steps uint64, err error) {
	limits = limits.Effective(Limits{})
	thread := &starlark.Thread{Name: "call"}
	builtins.SetSubject(thread, subjectOf(ctx))
	if setup != nil {
		setup(thread)
	}
	shared := sync.OnceValue(func() map[any]struct{} { return callShared(fn, args) })
	b := bind(ctx, thread, limits, shared, watchSelf)
	defer func() {
		b.end(nil)
		steps = min(thread.ExecutionSteps(), limits.MaxSteps)
		err = limitError(err, b.reason.get())
	}()
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	v, err = starlark.Call(thread, fn, args, nil)
	return v, 0, locate(err)
}

// callShared returns the identities of the values a Call did not make: its function's module's
// globals (frozen, shared by every call) and its arguments (the caller's).
func callShared(fn starlark.Callable, args starlark.Tuple) map[any]struct{} {
	r := newReach(nil, 0)
	if f, ok := fn.(*starlark.Function); ok {
		for _, v := range f.Globals() {
			r.value(v)
		}
	}
	for _, v := range args {
		r.value(v)
	}
	return r.seen
}

// moduleDiagnostic describes a failed top level of a domain's file, at its innermost position.
func moduleDiagnostic(file string, err error) diag.Diagnostic {
	d := diag.Diagnostic{Stage: diag.StageCheck, Code: CodeRuntime, Message: err.Error()}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		d.Message = ee.Msg
		// The innermost frame with a place in the file: a guard's refusal (a builtin, the
		// innermost frame) has none.
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			if pos := ee.CallStack[i].Pos; pos.Line > 0 {
				d.Line, d.Col = int(pos.Line), int(pos.Col)
				break
			}
		}
	}
	var le *LimitError
	if errors.As(err, &le) {
		d.Code = CodeLimit
		switch le.Limit {
		case LimitMemory:
			d.Hint = fmt.Sprintf("the top level of %s may hold at most %s, measured as a plan's run is: it defines functions and constants; build large values inside a function, when it is called",
				file, builtins.FormatBytes(moduleLimits.MaxMemory))
		default:
			d.Hint = fmt.Sprintf("the top level of %s runs once at every load, within %d steps and %s: it defines functions and constants; move the work into a function",
				file, moduleLimits.MaxSteps, topLevelLimits().Timeout)
		}
	}
	return d
}
