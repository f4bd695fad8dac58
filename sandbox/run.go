package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/builtins/tables"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/table"
)

// Outcome is how a run ended.
type Outcome string

// The outcomes of a sandbox run. The engine adds contract_violation and conflict.
const (
	OutcomeOK            Outcome = "ok"
	OutcomeCheckFailed   Outcome = "check_failed"
	OutcomeRuntimeError  Outcome = "runtime_error"
	OutcomeLimitExceeded Outcome = "limit_exceeded"
)

// Limit names the limit that stopped a run.
type Limit string

// The limits a run can exceed.
const (
	LimitSteps  Limit = "steps"
	LimitTime   Limit = "time"
	LimitMemory Limit = "memory"
)

// Diagnostic codes of the run stage.
const (
	CodeRuntime   = "runtime-error"
	CodeRecursion = "recursion"
	CodeCancelled = "cancelled"
	CodePanic     = "internal-panic"
	CodeLimit     = "limit-exceeded"
)

// Runner runs one plan. *Env runs it in this process, bounded by the sandbox's in-process
// guards (its memory bound is not hard); isolate.Pool runs it in a worker process under OS
// limits. A runner never panics and never returns nil: every problem is in the Result. An
// engine takes one in its options (engine.Options.Runner).
type Runner interface {
	Run(ctx context.Context, req Request) *Result
}

var _ Runner = (*Env)(nil)

// Request is one run of a plan, the job a Runner is given. It is plain data, so that a runner
// in another process can carry it whole (isolate's round-trip test fills every field).
type Request struct {
	// Reply is a model's reply or a bare program; Extract finds the program in it.
	Reply string
	// Bare says Reply is the program itself, to be checked as it is, without extraction: a
	// program starplan compiled (a JSON step plan) or one the audit log recorded (a replay).
	// Extraction would read a tag inside one of its strings or comments as a block of a reply.
	// Runners must not extract it.
	Bare bool
	// Inputs supplies the environment's per-run names (such as user_request) as plain Go values.
	Inputs map[string]any
	// Limits bounds the run; zero fields mean the runner's defaults (see Limits.Effective).
	Limits Limits
	// View is the run's staged view: every table call of the plan goes to it (tables.Bind).
	// Nil leaves the tables unbound: a plan that calls one fails with tables.ErrNotBound.
	View table.View
	// Now is the run's fixed timestamp, what now() returns (with a View).
	Now time.Time
	// Globals names the final globals to return in Result.Globals; nil returns every one.
	// Converting a plan's intermediate lists of rows costs more than running a small plan, so
	// callers that need only the contract's globals say so.
	Globals []string
	// Helpers is the source of the domain's helpers (helpers.star; "" for none). An Env has its
	// helpers already and ignores it; a runner that builds its own environment from the view's
	// schemas builds it with them (NewDomainEnv).
	Helpers string
}

// Result is everything a run produced. It is plain data, ready to be encoded as JSON.
type Result struct {
	Outcome         Outcome            `json:"outcome"`
	Limit           Limit              `json:"limit,omitempty"`
	Program         string             `json:"program"` // the extracted program, before rewrites
	Diagnostics     diag.List          `json:"diagnostics"`
	Stdout          string             `json:"stdout"`
	StdoutTruncated bool               `json:"stdout_truncated"`
	Rewrites        []pycompat.Rewrite `json:"rewrites"`
	// Globals are the plan's final global variables as plain Go values (functions are left
	// out; NaN and infinities become the strings "nan", "inf" and "-inf").
	Globals map[string]any `json:"globals"`
	Steps   uint64         `json:"steps"`
	// Via is which domain helper wrote which row: table → row key → helper (tables.Via).
	Via      map[string]map[string]string `json:"via,omitempty"`
	Duration time.Duration                `json:"-"` // encoded as duration_ms
	// Phases are the durations of the run's phases inside its runner, for traces, metrics and
	// --timings; not part of the result's JSON.
	Phases Phases `json:"-"`
}

// Phases are the wall times of a run's phases inside its runner, in the order they happen. A
// phase that did not happen is 0 (no extraction for a bare program, no wait in process, no
// rewrite or check when the check cache answered: then Check is the lookup). What a run's
// Duration holds beyond their sum is the runner's own work: in process next to nothing; isolated,
// carrying the run to the worker and its result back.
type Phases struct {
	Extract time.Duration // finding the program in the reply
	Wait    time.Duration // waiting for a free worker (isolated runs)
	Setup   time.Duration // the worker readying itself: its limits, and its environment when the domain is new to it
	Rewrite time.Duration // the text checks and the Python-ism rewrite
	Check   time.Duration // parse, the static checks, the memory guards and compile
	Run     time.Duration // the interpreter, from the program's first step to its last
}

// Checked is their sum up to the end of the check: extraction, a wait, setup, rewrite and check.
func (p Phases) Checked() time.Duration { return p.Extract + p.Wait + p.Setup + p.Rewrite + p.Check }

// MarshalJSON encodes the result with its duration in milliseconds, as duration_ms.
func (r *Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		*plain
		DurationMS float64 `json:"duration_ms"`
	}{(*plain)(r), float64(r.Duration.Microseconds()) / 1000})
}

// Checked is a program that passed extraction, rewriting and the static check.
type Checked struct {
	Program     *Program           // nil when the check failed
	Extracted   string             // the program as extracted from the reply
	Rewrites    []pycompat.Rewrite // what pycompat rewrote
	Diagnostics diag.List          // why the check failed
}

// Check extracts, rewrites and checks a reply without running it.
func (e *Env) Check(reply string, limits Limits) Checked {
	program, ds := Extract(reply)
	if len(ds) > 0 {
		return Checked{Diagnostics: ds}
	}
	return e.CheckProgram(program, limits)
}

// CheckProgram rewrites and checks a program as it is, with no extraction (see Request.Bare).
// A program checked recently is not checked again: its first check is returned.
func (e *Env) CheckProgram(program string, limits Limits) Checked {
	var ph Phases
	return e.checkTimed(program, limits, &ph)
}

// checkTimed is CheckProgram, timing its rewrite and check into ph.
func (e *Env) checkTimed(program string, limits Limits, ph *Phases) Checked {
	limits = limits.Effective(Limits{})
	if e.checks == nil {
		return e.checkProgram(program, limits, ph)
	}
	began := time.Now()
	key := keyOf(program, limits)
	if c, ok := e.checks.get(key); ok {
		ph.Check = time.Since(began)
		return c
	}
	c := e.checkProgram(program, limits, ph)
	e.checks.put(key, c)
	return c
}

func (e *Env) checkProgram(program string, limits Limits, ph *Phases) Checked {
	began := time.Now()
	c := Checked{Extracted: program}
	if c.Diagnostics = checkText(program); len(c.Diagnostics) > 0 {
		ph.Rewrite = time.Since(began)
		return c // before any rewrite, so that positions are the extracted program's
	}
	tr := pycompat.Translate(program, pycompat.Options{Modules: e.modules})
	c.Rewrites = tr.Rewrites
	rewritten := time.Now()
	ph.Rewrite = rewritten.Sub(began)
	if len(tr.Diagnostics) > 0 {
		c.Diagnostics = tr.Diagnostics
		return c
	}
	c.Program, c.Diagnostics = e.check(tr.Source, limits)
	ph.Check = time.Since(rewritten)
	return c
}

// Run extracts, checks and runs a plan. It never panics and never returns an error: every
// problem with the plan is in the Result.
func (e *Env) Run(ctx context.Context, req Request) *Result {
	start := time.Now()
	limits := req.Limits.Effective(Limits{})
	res := &Result{}
	var c Checked
	if req.Bare {
		c = e.checkTimed(req.Reply, limits, &res.Phases)
	} else if program, ds := Extract(req.Reply); len(ds) > 0 {
		res.Phases.Extract = time.Since(start)
		c = Checked{Diagnostics: ds}
	} else {
		res.Phases.Extract = time.Since(start)
		c = e.checkTimed(program, limits, &res.Phases)
	}
	res.Program, res.Rewrites, res.Diagnostics = c.Extracted, c.Rewrites, c.Diagnostics
	if c.Program == nil {
		res.Outcome = OutcomeCheckFailed
	} else {
		began := time.Now()
		e.exec(ctx, c.Program, req, limits, res)
		res.Phases.Run = time.Since(began)
	}
	res.Duration = time.Since(start)
	return res
}

// RunProgram runs an already checked program (for callers that check once and run many times).
func (e *Env) RunProgram(ctx context.Context, p *Program, req Request) *Result {
	start := time.Now()
	res := &Result{Program: p.Source}
	e.exec(ctx, p, req, req.Limits.Effective(Limits{}), res)
	res.Duration = time.Since(start)
	res.Phases.Run = res.Duration
	return res
}

// stopReason records which limit cancelled a thread; the first one wins.
type stopReason struct{ v atomic.Value }

func (s *stopReason) set(l Limit) { s.v.CompareAndSwap(nil, l) }
func (s *stopReason) get() Limit {
	l, _ := s.v.Load().(Limit)
	return l
}

func (e *Env) exec(ctx context.Context, p *Program, req Request, limits Limits, res *Result) {
	out := &capture{max: limits.MaxOutput}
	thread := &starlark.Thread{Name: "plan", Print: out.print}
	mode := watchHeap
	if e.unguarded {
		mode = watchNone
	}
	b := bind(ctx, thread, limits, e.shared, mode)
	subject, _ := req.Inputs[InputSubject].(string)
	builtins.SetSubject(thread, subject)
	if req.View != nil {
		tables.Bind(thread, req.View, req.Now)
	}
	globals, err := initProgram(p.prog, thread, e.runPredeclared(p, req.Inputs))
	b.end(globals)
	// Builtins charge their work in steps (builtins.ChargeWork), so the count can pass the limit
	// by the charge that reached it: the run used its whole allowance.
	res.Steps = min(thread.ExecutionSteps(), limits.MaxSteps)
	res.Stdout, res.StdoutTruncated = out.text()
	res.Globals = plainGlobals(globals, req.Globals)
	res.Via = tables.Via(thread)
	if err == nil {
		res.Outcome = OutcomeOK
		return
	}
	res.Outcome, res.Limit = classify(err, b.reason.get())
	res.Diagnostics = append(res.Diagnostics, runDiagnostic(err, res.Limit, limits))
}

// checkpointSteps is the interval, in steps, at which a run's OnMaxSteps hook is called between
// its step limit's checks: often enough that a run asked to measure its memory does so within a
// millisecond or so of interpretation, rarely enough that the call costs nothing measurable.
const checkpointSteps = 1 << 16

// nextCheckpoint is the step count at which a run that has taken steps calls OnMaxSteps next:
// checkpointSteps later, and never beyond its step limit.
func nextCheckpoint(steps, limit uint64) uint64 {
	if limit-steps > checkpointSteps {
		return steps + checkpointSteps
	}
	return limit
}

// initProgram runs the program, turning a panic in the interpreter or a builtin into an error.
func initProgram(prog *starlark.Program, thread *starlark.Thread, predeclared starlark.StringDict) (globals starlark.StringDict, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return prog.Init(thread, predeclared)
}

// panicError is a panic recovered from the interpreter or a builtin.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("the interpreter panicked: %v", p.value) }

func classify(err error, reason Limit) (Outcome, Limit) {
	var mem *builtins.MemoryError
	var work *builtins.WorkError
	switch {
	case reason != "":
		return OutcomeLimitExceeded, reason
	case errors.As(err, &mem):
		return OutcomeLimitExceeded, LimitMemory
	case errors.As(err, &work):
		return OutcomeLimitExceeded, LimitSteps
	}
	return OutcomeRuntimeError, ""
}

// runDiagnostic describes a failed run at the innermost position of the plan.
func runDiagnostic(err error, limit Limit, limits Limits) diag.Diagnostic {
	d := diag.Diagnostic{Stage: diag.StageRun, Code: CodeRuntime, Message: err.Error()}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		d.Message = ee.Msg
		if fr, ok := inDomainFile(ee); ok {
			// Raised inside the domain's helpers: where in them, for the domain's author; the
			// plan's line below is the call.
			d.Message = fmt.Sprintf("%s:%d:%d: %s", fr.Pos.Filename(), fr.Pos.Line, fr.Pos.Col, ee.Msg)
		}
		stack := ee.CallStack
		for i := len(stack) - 1; i >= 0; i-- {
			if stack[i].Pos.Filename() == planFile {
				d.Line, d.Col = int(stack[i].Pos.Line), int(stack[i].Pos.Col)
				break
			}
		}
	}
	var pe *panicError
	var work *builtins.WorkError
	switch {
	case errors.As(err, &work):
		d.Code, d.Hint = CodeLimit, "plans never need integers of thousands of digits: look for a number that grows in a loop"
	case limit == LimitSteps:
		d.Code, d.Hint = CodeLimit, fmt.Sprintf("the plan ran more than %d steps (work inside helpers counts too): look for a loop that never ends, or filter with where instead of looping over every row", limits.MaxSteps)
	case limit == LimitTime:
		d.Code, d.Hint = CodeLimit, fmt.Sprintf("the plan ran longer than %s: look for a loop that never ends or work that grows too fast", limits.Timeout)
	case limit == LimitMemory:
		d.Code, d.Hint = CodeLimit, fmt.Sprintf("the plan needed more than %s of memory: build smaller values", builtins.FormatBytes(limits.MaxMemory))
	case errors.As(err, &pe):
		d.Code, d.Message = CodePanic, pe.Error()
		d.Hint = "this is a fault in starplan, not in the plan; simplify the plan and report it"
	case strings.Contains(d.Message, "called recursively"):
		d.Code, d.Hint = CodeRecursion, "recursion is not allowed in plans: use a loop"
	case strings.Contains(d.Message, "Starlark computation cancelled"):
		d.Code = CodeCancelled
	default:
		d.Hint = runtimeHint(d.Message)
	}
	return d
}

// HintNoneLookup is the hint of a run that used None as a row. The sandbox knows no domain, so
// it names no STATUS; the engine replaces it with the domain's own (contracts.Contract.NoneHint).
const HintNoneLookup = "a lookup such as tbl.get(...) returned None: check for None first, then set the STATUS that tells the customer nothing matched"

// runtimeHint suggests a fix for the runtime errors plans cause most.
func runtimeHint(msg string) string {
	switch {
	case strings.Contains(msg, "NoneType"):
		return HintNoneLookup
	case strings.Contains(msg, "not in dict") || strings.Contains(msg, "key "):
		return "use row.get(\"field\") or check `\"field\" in row` first; the schema lists every field"
	case strings.Contains(msg, "has no ."):
		return "only the methods in the helper reference exist"
	case strings.Contains(msg, "unknown binary op"):
		return "convert the operands first, for example float(x) or str(x)"
	}
	return ""
}

// plainGlobals converts a program's final globals (only those named, when names is not nil) to
// plain Go values, leaving out functions and anything else that is not data.
func plainGlobals(globals starlark.StringDict, names []string) map[string]any {
	if names != nil {
		selected := make(starlark.StringDict, len(names))
		for _, name := range names {
			if v, ok := globals[name]; ok {
				selected[name] = v
			}
		}
		globals = selected
	}
	out := make(map[string]any, len(globals))
	for name, v := range globals {
		switch v := v.(type) {
		case starlark.Callable:
			continue
		case starlark.Float:
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				out[name] = builtins.FloatRepr(f)
				continue
			}
		}
		if g, err := builtins.ToGo(v); err == nil {
			out[name] = finite(g)
		}
	}
	return out
}

// finite replaces NaN and infinities inside a converted value by their names, so a result can
// always be encoded as JSON.
func finite(v any) any {
	switch v := v.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return builtins.FloatRepr(v) // "inf", as Python prints it
		}
	case []any:
		for i, x := range v {
			v[i] = finite(x)
		}
	case map[string]any:
		for k, x := range v {
			v[k] = finite(x)
		}
	}
	return v
}

// capture keeps the first max bytes of a run's print output.
type capture struct {
	b       strings.Builder
	max     int
	dropped int
}

func (c *capture) print(_ *starlark.Thread, msg string) {
	room := c.max - c.b.Len()
	if room <= 0 {
		c.dropped += len(msg) + 1
		return
	}
	if len(msg)+1 > room {
		c.b.WriteString(msg[:room])
		c.dropped += len(msg) + 1 - room
		return
	}
	c.b.WriteString(msg)
	c.b.WriteByte('\n')
}

// text returns the output, with a visible marker when some was cut.
func (c *capture) text() (string, bool) {
	if c.dropped == 0 {
		return c.b.String(), false
	}
	return c.b.String() + fmt.Sprintf("\n…[output truncated: %d more bytes]\n", c.dropped), true
}
