package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins/tables"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Runner executes one plan against a staged view. InProcess runs it in this process; an
// isolated runner runs it in a worker process with OS limits.
type Runner interface {
	Run(ctx context.Context, job Job) *sandbox.Result
}

// Job is one plan execution as a Runner sees it.
type Job struct {
	Reply string
	// Bare says Reply is the program itself (sandbox.Request.Bare): runners must not extract.
	Bare   bool
	Inputs map[string]any
	Limits sandbox.Limits
	View   table.View // the run's staged view; the runner must route every table call to it
	Now    time.Time  // the run's fixed timestamp (now())
	// Globals names the final globals the result must carry (nil: all).
	Globals []string
	// Helpers is the source of the domain's helpers (helpers.star; "" for none): a runner that
	// builds its own environment from the view's schemas (NewEnv) builds it with them.
	Helpers string
}

// Options configure an Engine. The zero value is valid: in-process runs, default limits, the
// wall clock.
type Options struct {
	// Limits are the defaults of every run; a request's non-zero fields override them.
	Limits sandbox.Limits
	// Now is the clock; it fixes each run's now() and the audit log's times.
	Now func() time.Time
	// Runner executes plans; nil means in process.
	Runner Runner
	// Observe, when set, is told every step of every run (see Observer; Engine.Observe adds
	// more). Nil costs a run nothing but one atomic load per step.
	Observe Observer
}

// Engine runs plans against one store. It is safe for concurrent use. Close flushes the audit
// log; an engine must be closed before its store.
type Engine struct {
	st      *store.Store
	env     *sandbox.Env
	helpers string // the domain's helpers.star, for runners that build their own environment
	policy  *contracts.Domain
	// planTools are what a JSON step plan may call.
	planTools []string
	// runLimits is the policy's blast radius of a run, as the store enforces it.
	runLimits store.RunLimits
	opts      Options
	runner    Runner
	audit     *auditLog
	// applyMu serialises applies (see Apply); runs go on concurrently.
	applyMu sync.Mutex
	// indexBuilt is how many records New read to build the audit log's index (runindex.go).
	indexBuilt int
	// decodes counts the records a listing or a prune decoded (for tests: they are O(their page,
	// their cut), not O(the log)).
	decodes atomic.Int64
	// retention is how long a server prunes settled runs after (SetRetention); 0: never.
	retention atomic.Int64
	// obs are the observers of the runs' lifecycle (lifecycle.go).
	obs observers
}

// New returns an engine over st, with the contract and policy of the store's domain.
func New(st *store.Store, opts Options) (*Engine, error) {
	policy, err := contracts.FromDefinition(st.Domain().Name, st.Domain().Definition)
	if err != nil {
		return nil, fmt.Errorf("loading the contract of domain %s: %w", st.Domain().Name, err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := bindInvariants(policy, st.Domain().Definition[InvariantsFile]); err != nil {
		return nil, fmt.Errorf("loading the rules of domain %s: %w", st.Domain().Name, err)
	}
	env, err := EnvOf(st)
	if err != nil {
		return nil, err
	}
	l := policy.Limits.WithDefaults()
	e := &Engine{
		runLimits: store.RunLimits{HelperCalls: l.HelperCalls, RowsRead: l.RowsRead,
			RowsWritten: l.RowsWritten, RowsWrittenPerTable: l.RowsWrittenPerTable},
		st:      st,
		env:     env,
		helpers: st.Domain().Definition[sandbox.HelpersFile],
		policy:  policy,
		opts:    opts,
		audit:   newAuditLog(st),
	}
	if opts.Observe != nil {
		e.Observe(opts.Observe)
	}
	e.planTools = planTools(e.env.Registry())
	e.runner = opts.Runner
	if e.runner == nil {
		e.runner = InProcess(e.env)
	}
	if err := e.ensureIndex(context.Background()); err != nil {
		e.audit.close()
		return nil, err
	}
	return e, nil
}

// Close writes the audit records not yet written and stops the audit writer. It does not close
// the store.
func (e *Engine) Close() error { return e.audit.close() }

// Env returns the environment plans run in: the language builtins and the store's tables.
func (e *Engine) Env() *sandbox.Env { return e.env }

// Policy returns the output contract and mutation policy runs are checked against.
func (e *Engine) Policy() *contracts.Domain { return e.policy }

// Store returns the engine's store.
func (e *Engine) Store() *store.Store { return e.st }

// Schemas returns the schemas of the store's tables, in name order.
func Schemas(st *store.Store) []*table.Schema {
	var out []*table.Schema
	for _, name := range st.Names() {
		if s, ok := st.Schema(name); ok {
			out = append(out, s)
		}
	}
	return out
}

// NewEnv returns the environment of plans over tables with the given schemas and the domain's
// helpers (the source of its helpers.star; "" for none). The diagnostics are the helpers'
// problems, positioned in that file; the environment is nil when there are any.
func NewEnv(schemas []*table.Schema, helpers string) (*sandbox.Env, diag.List) {
	base := tables.Registry(schemas)
	env := sandbox.NewEnv(base)
	if helpers == "" {
		return env, nil
	}
	reg, ds := env.LoadHelpers(helpers)
	if len(ds) > 0 {
		return nil, ds
	}
	return sandbox.NewEnv(base, reg), nil
}

// EnvOf returns the environment of plans over st: its tables and its domain's helpers.
func EnvOf(st *store.Store) (*sandbox.Env, error) {
	env, ds := NewEnv(Schemas(st), st.Domain().Definition[sandbox.HelpersFile])
	if len(ds) > 0 {
		return nil, fmt.Errorf("loading the helpers of domain %s: %s: %s", st.Domain().Name, sandbox.HelpersFile, ds[0])
	}
	return env, nil
}

// InProcess returns a Runner that runs plans in this process, bounded by the sandbox's
// in-process guards. Its memory bound is not hard (see package sandbox).
func InProcess(env *sandbox.Env) Runner { return inProcess{env} }

type inProcess struct{ env *sandbox.Env }

func (r inProcess) Run(ctx context.Context, job Job) *sandbox.Result {
	return r.env.Run(ctx, sandbox.Request{
		Reply:   job.Reply,
		Bare:    job.Bare,
		Inputs:  job.Inputs,
		Limits:  job.Limits,
		Bind:    func(th *starlark.Thread) { tables.Bind(th, job.View, job.Now) },
		Globals: job.Globals,
	})
}

// limits merges a request's limits over the engine's defaults.
func (e *Engine) limits(l sandbox.Limits) sandbox.Limits {
	d := e.opts.Limits
	if l.MaxSteps != 0 {
		d.MaxSteps = l.MaxSteps
	}
	if l.Timeout != 0 {
		d.Timeout = l.Timeout
	}
	if l.MaxOutput != 0 {
		d.MaxOutput = l.MaxOutput
	}
	if l.MaxMemory != 0 {
		d.MaxMemory = l.MaxMemory
	}
	if l.MaxProgram != 0 {
		d.MaxProgram = l.MaxProgram
	}
	if l.MaxNesting != 0 {
		d.MaxNesting = l.MaxNesting
	}
	return d
}
