package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Options configure an Engine. The zero value is valid: in-process runs, default limits, the
// wall clock.
type Options struct {
	// Limits are the defaults of every run; a request's non-zero fields override them.
	Limits sandbox.Limits
	// Now is the clock; it fixes each run's now() and the audit log's times.
	Now func() time.Time
	// Runner executes plans (an isolate.Pool runs them in worker processes); nil means in
	// process, on the engine's environment (Env).
	Runner sandbox.Runner
	// Observe, when set, is told every step of every run (see Observer; Engine.Observe adds
	// more). Nil costs a run nothing but one atomic load per step.
	Observe Observer
}

// Engine runs plans against one store. It is safe for concurrent use. Close flushes the audit
// log; an engine must be closed before its store.
type Engine struct {
	st      store.Store
	env     *sandbox.Env
	helpers string // the domain's helpers.star, for runners that build their own environment
	policy  *contracts.Domain
	// reading names the policy's rules that read the data: their reads are the run's, and a
	// conflict they cause says so.
	reading []string
	// planTools are what a JSON step plan may call.
	planTools []string
	// runLimits is the policy's blast radius of a run, as the store enforces it.
	runLimits store.RunLimits
	opts      Options
	runner    sandbox.Runner
	audit     *auditLog
	chain     *chain // the audit log's hash chain (chain.go)
	// applyMu serialises applies (see Apply); runs go on concurrently.
	applyMu sync.Mutex
	// rejections are the rejections waiting to be decided in one group (RejectWith).
	rejections struct {
		mu    sync.Mutex
		queue []*rejection
	}
	// indexBuilt is how many records New read to build the audit log's index (runindex.go).
	indexBuilt int
	// decodes counts the records a listing or a prune decoded (for tests: they are O(their page,
	// their cut), not O(the log)).
	decodes atomic.Int64
	// pruneBatch is the most runs one step of a prune removes (PruneBatch; tests make it small).
	pruneBatch int
	// pruneStepped, when set (by tests), runs between two steps of a prune, the chain unlocked.
	pruneStepped func()
	// retention is how long a server prunes settled runs after (SetRetention); 0: never.
	retention atomic.Int64
	// obs are the observers of the runs' lifecycle (lifecycle.go).
	obs observers
}

// New returns an engine over st, with the contract and policy of the store's domain.
func New(st store.Store, opts Options) (*Engine, error) {
	policy, err := contracts.FromDefinition(st.Domain().Name, st.Domain().Definition)
	if err != nil {
		return nil, fmt.Errorf("loading the contract of domain %s: %w", st.Domain().Name, err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	reading, err := bindInvariants(policy, st.Domain().Definition[InvariantsFile])
	if err != nil {
		return nil, fmt.Errorf("loading the rules of domain %s: %w", st.Domain().Name, err)
	}
	if err := bindNeedsPerson(policy, st.Domain().Definition[InvariantsFile]); err != nil {
		return nil, fmt.Errorf("loading the approval rules of domain %s: %w", st.Domain().Name, err)
	}
	chain, err := loadChain(context.Background(), st, opts.Now())
	if err != nil {
		return nil, err
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
		reading: reading,
		opts:    opts,
		audit:   newAuditLog(st, chain),
		chain:   chain,

		pruneBatch: PruneBatch,
	}
	if opts.Observe != nil {
		e.Observe(opts.Observe)
	}
	e.planTools = planTools(e.env.Registry())
	e.runner = opts.Runner
	if e.runner == nil {
		e.runner = e.env
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
func (e *Engine) Store() store.Store { return e.st }

// Schemas returns the schemas of the store's tables, in name order.
func Schemas(st store.Store) []*table.Schema {
	var out []*table.Schema
	for _, name := range st.Names() {
		if s, ok := st.Schema(name); ok {
			out = append(out, s)
		}
	}
	return out
}

// EnvOf returns the environment of plans over st: its tables and its domain's helpers.
func EnvOf(st store.Store) (*sandbox.Env, error) {
	env, ds := sandbox.NewDomainEnv(Schemas(st), st.Domain().Definition[sandbox.HelpersFile])
	if len(ds) > 0 {
		return nil, fmt.Errorf("loading the helpers of domain %s: %s: %s", st.Domain().Name, sandbox.HelpersFile, ds[0])
	}
	return env, nil
}
