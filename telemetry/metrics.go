package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/isolate"
	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
)

// Metrics are starplan's metrics of one engine and its server: runs, phases, applies, the audit
// log, the worker pool, the model and the HTTP requests. Metrics.Observe is an engine.Observer
// (every transport's runs reach it); the server tells it its requests and refused applies
// (Hooks); Model wraps the model client. Counting is an atomic add; the audit log and the
// pool are read only when the metrics are written (a scrape). It is safe for concurrent use.
type Metrics struct {
	opts MetricsOptions
	reg  *Registry

	runs, applies, limited, http, modelErrors, modelTokens *CounterVec
	phases, httpTime, modelTime                            *HistogramVec

	// The fixed series a run's steps count, found once.
	phase   map[string]*Histogram
	applied map[string]*Counter

	scrape sync.Mutex      // one scrape at a time: the audit log is read once per scrape
	audit  *engine.RunPage // the audit log as the current scrape read it; nil when it failed
}

// MetricsOptions configure Metrics. The zero value is valid: no domain label, no pool, no
// audit log (their families are present and empty).
type MetricsOptions struct {
	// Domain is the engine's domain, the domain label of runs.
	Domain string
	// Pool reads the worker pool (isolate.Pool.Stats); nil when plans run in process.
	Pool func() isolate.Stats
	// Audit reads the audit log's counts (engine.Engine.RunStats), once per scrape.
	Audit func() (*engine.RunPage, error)
}

// Phases of a run, as the phase label of starplan_phase_duration_seconds names them.
const (
	PhaseCheck    = "check"    // extract, rewrite and check, when the check failed (else it is in run)
	PhaseRun      = "run"      // the runner's whole call: check, a worker's wait, the run
	PhaseDiff     = "diff"     // the change set, each changed row before and after (before contract)
	PhaseContract = "contract" // the output contract and the policy
	PhaseDryRun   = "dry_run"  // a dry run from its start to its verdict
	PhaseApply    = "apply"    // an apply's commit, or the conflict it found
	// An apply's steps in the store (engine.Event.ApplySteps), each time one ran: its conflict
	// check, the domain's rules against the committed rows, its commit.
	PhaseApplyCheck  = "apply_check"
	PhaseApplyPolicy = "apply_policy"
	PhaseApplyCommit = "apply_commit"
	// The runner's phases inside check and run (engine.Event.Phases), each time it happened:
	// finding the program in the reply, waiting for a free worker (isolated runs), the text
	// checks and Python-ism rewrite, the static check (parse, checks, guards, compile; a lookup
	// when the check cache answered), and the plan's interpretation.
	PhaseExtract     = "extract"
	PhaseWorkerWait  = "worker_wait"
	PhaseWorkerSetup = "worker_setup"
	PhaseRewrite     = "rewrite"
	PhaseStaticCheck = "static_check"
	PhaseExecute     = "execute"
)

// Results of an apply, as the result label of starplan_applies_total names them.
const (
	ApplyApplied     = "applied"      // the changes were written
	ApplyConflict    = "conflict"     // the data moved, or a rule refused the changes against it now
	ApplyRefusedRole = "refused_role" // the caller's role may not apply it (forbidden-role)
	ApplyRefusedRule = "refused_rule" // the domain's approval rules refused it (approval-required: four eyes, no auto rule)
	ApplyExpired     = "expired"      // it waited longer than the domain's pending_ttl (run-expired)
)

// Error codes of refused applies (the server's), as Refusal.Code carries them.
const (
	codeForbiddenRole    = "forbidden-role"
	codeApprovalRequired = "approval-required"
	codeRunExpired       = "run-expired"
)

// NewMetrics returns the metrics, every family registered.
func NewMetrics(opts MetricsOptions) *Metrics {
	r := NewRegistry()
	m := &Metrics{opts: opts, reg: r}
	m.runs = r.Counter("starplan_runs_total", "Dry runs that reached a verdict (and those starplan itself failed: outcome error), by outcome, origin and domain.", "outcome", "origin", "domain")
	m.phases = r.Histogram("starplan_phase_duration_seconds", "Wall time of a run's phases: check (only when it failed), run (check, worker wait and run), diff (the change set), contract, dry_run (the whole dry run), apply, and the apply's steps: apply_check (its conflict check), apply_policy, apply_commit; inside check and run the runner's own: extract, worker_wait and worker_setup (isolated runs), rewrite, static_check, execute.", DurationBuckets, "phase")
	m.phase = map[string]*Histogram{}
	for _, p := range []string{PhaseCheck, PhaseRun, PhaseDiff, PhaseContract, PhaseDryRun, PhaseApply, PhaseApplyCheck, PhaseApplyPolicy, PhaseApplyCommit,
		PhaseExtract, PhaseWorkerWait, PhaseWorkerSetup, PhaseRewrite, PhaseStaticCheck, PhaseExecute} {
		m.phase[p] = m.phases.With(p)
	}
	m.applies = r.Counter("starplan_applies_total", "Applies by result: applied, conflict, refused_role, refused_rule, expired (refusals: the server's).", "result")
	m.applied = map[string]*Counter{}
	for _, res := range []string{ApplyApplied, ApplyConflict, ApplyRefusedRole, ApplyRefusedRule, ApplyExpired} {
		m.applied[res] = m.applies.With(res)
	}
	m.limited = r.Counter("starplan_runs_limited_total", "Dry runs stopped by a limit, by limit (steps, time, memory).", "limit")
	r.GaugeFunc("starplan_runs_pending", "Runs waiting for an apply or a rejection, as the audit log's index counts them.", nil, func(emit func(float64, ...string)) {
		if m.audit != nil {
			emit(float64(m.audit.States[engine.StatePending]))
		}
	})
	r.GaugeFunc("starplan_audit_log_runs", "Runs the audit log holds, by state.", []string{"state"}, func(emit func(float64, ...string)) {
		if m.audit != nil {
			for state, n := range m.audit.States {
				emit(float64(n), state)
			}
		}
	})
	r.GaugeFunc("starplan_audit_log_bytes", "Stored size of the audit log's run records, in bytes.", nil, func(emit func(float64, ...string)) {
		if m.audit != nil {
			emit(float64(m.audit.Bytes))
		}
	})
	pool := func(f func(st isolate.Stats, emit func(float64, ...string))) func(func(float64, ...string)) {
		return func(emit func(float64, ...string)) {
			if opts.Pool != nil {
				f(opts.Pool(), emit)
			}
		}
	}
	r.GaugeFunc("starplan_worker_pool_size", "The most sandbox worker processes alive at once.", nil, pool(func(st isolate.Stats, emit func(float64, ...string)) {
		emit(float64(st.MaxWorkers))
	}))
	r.GaugeFunc("starplan_workers", "Sandbox worker processes alive now, by state (idle, busy, starting).", []string{"state"}, pool(func(st isolate.Stats, emit func(float64, ...string)) {
		emit(float64(st.Idle), "idle")
		emit(float64(st.Busy), "busy")
		emit(float64(max(st.Live-st.Idle-st.Busy, 0)), "starting")
	}))
	r.CounterFunc("starplan_worker_restarts_total", "Sandbox workers ended after a limit, a crash or a protocol failure, and replaced.", nil, pool(func(st isolate.Stats, emit func(float64, ...string)) {
		emit(float64(st.Discarded))
	}))
	r.CounterFunc("starplan_worker_kills_total", "Sandbox workers the pool killed, by reason: timeout, cancel, oversize, discard, broken, closed.", []string{"reason"}, pool(func(st isolate.Stats, emit func(float64, ...string)) {
		for reason, n := range st.Kills {
			emit(float64(n), reason)
		}
	}))
	m.modelTime = r.Histogram("starplan_model_request_duration_seconds", "Wall time of a model call, its retries included, by result (ok, error).", DurationBuckets, "result")
	m.modelTokens = r.Counter("starplan_model_tokens_total", "Tokens the model's endpoint reported, by kind (prompt, completion).", "kind")
	m.modelTokens.With("prompt")
	m.modelTokens.With("completion")
	m.modelTime.With("ok")
	m.modelTime.With("error")
	m.modelErrors = r.Counter("starplan_model_errors_total", "Model calls that failed, by kind: "+strings.Join(ModelErrorKinds, ", ")+".", "kind")
	for _, kind := range ModelErrorKinds {
		m.modelErrors.With(kind)
	}
	m.http = r.Counter("starplan_http_requests_total", "HTTP requests answered, by route (the operation's name; mcp, page, other) and status.", "route", "status")
	m.httpTime = r.Histogram("starplan_http_request_duration_seconds", "Wall time of HTTP requests, by route (an event stream's whole life).", DurationBuckets, "route")
	return m
}

// Observe counts a step of a run: it is an engine.Observer, and never blocks.
func (m *Metrics) Observe(_ context.Context, ev engine.Event) {
	switch {
	case ev.Verdict():
		m.runs.With(string(ev.Outcome), ev.Origin, m.opts.Domain).Inc()
		m.phase[PhaseDryRun].Observe(ev.Duration.Seconds())
		if ev.Limit != "" {
			m.limited.With(string(ev.Limit)).Inc()
		}
	case ev.Type == engine.EventFailed: // starplan itself failed (Err)
		if ev.State == "" { // a dry run; an apply's failure leaves the run pending, counted already
			m.runs.With("error", ev.Origin, m.opts.Domain).Inc()
		}
	case ev.Type == engine.EventChecked:
		if ev.Outcome == engine.OutcomeCheckFailed { // else the run's phases come with ran
			m.phase[PhaseCheck].Observe(ev.Duration.Seconds())
			m.runnerPhases(ev.Phases)
		}
	case ev.Type == engine.EventRan:
		m.phase[PhaseRun].Observe(ev.Duration.Seconds())
		m.runnerPhases(ev.Phases)
	case ev.Type == engine.EventContract:
		m.phase[PhaseDiff].Observe(ev.Diff.Seconds())
		m.phase[PhaseContract].Observe(ev.Duration.Seconds())
	case ev.Type == engine.EventApplied:
		m.applied[ApplyApplied].Inc()
		m.phase[PhaseApply].Observe(ev.Duration.Seconds())
		m.applySteps(ev)
	case ev.Type == engine.EventConflict:
		m.applied[ApplyConflict].Inc()
		m.phase[PhaseApply].Observe(ev.Duration.Seconds())
		m.applySteps(ev)
	}
}

// runnerPhases observes the runner's phases of a run, those that happened.
func (m *Metrics) runnerPhases(ph sandbox.Phases) {
	for _, p := range [...]struct {
		name string
		d    time.Duration
	}{{PhaseExtract, ph.Extract}, {PhaseWorkerWait, ph.Wait}, {PhaseWorkerSetup, ph.Setup}, {PhaseRewrite, ph.Rewrite}, {PhaseStaticCheck, ph.Check}, {PhaseExecute, ph.Run}} {
		if p.d > 0 {
			m.phase[p.name].Observe(p.d.Seconds())
		}
	}
}

// stepPhases is the phase of each step of an apply in the store.
var stepPhases = map[string]string{store.StepCheck: PhaseApplyCheck, store.StepVerify: PhaseApplyPolicy, store.StepCommit: PhaseApplyCommit}

// applySteps observes the duration of each of an apply's steps in the store.
func (m *Metrics) applySteps(ev engine.Event) {
	for _, st := range ev.ApplySteps {
		if h := m.phase[stepPhases[st.Step]]; h != nil {
			h.Observe(st.Duration.Seconds())
		}
	}
}

// Request counts an HTTP request the server answered.
func (m *Metrics) Request(r Request) {
	m.http.With(r.Route, strconv.Itoa(r.Status)).Inc()
	m.httpTime.With(r.Route).Observe(r.Duration.Seconds())
}

// Refused counts an apply the server refused by role or rule.
func (m *Metrics) Refused(r Refusal) {
	switch r.Code {
	case codeForbiddenRole:
		m.applied[ApplyRefusedRole].Inc()
	case codeRunExpired:
		m.applied[ApplyExpired].Inc()
	default:
		m.applied[ApplyRefusedRule].Inc()
	}
}

// Model returns next with its calls measured: latency, tokens and errors by kind.
func (m *Metrics) Model(next engine.Model) engine.Model { return &measuredModel{next: next, m: m} }

type measuredModel struct {
	next engine.Model
	m    *Metrics
}

func (mm *measuredModel) Complete(ctx context.Context, msgs []llm.Message) (llm.Reply, error) {
	began := time.Now()
	rep, err := mm.next.Complete(ctx, msgs)
	took := time.Since(began)
	if err != nil {
		mm.m.modelTime.With("error").Observe(took.Seconds())
		mm.m.modelErrors.With(ModelErrorKind(err)).Inc()
		return rep, err
	}
	mm.m.modelTime.With("ok").Observe(took.Seconds())
	mm.m.modelTokens.With("prompt").Add(uint64(max(rep.PromptTokens, 0)))
	mm.m.modelTokens.With("completion").Add(uint64(max(rep.CompletionTokens, 0)))
	return rep, nil
}

// ModelErrorKinds are the kinds ModelErrorKind gives.
var ModelErrorKinds = []string{"unreachable", "auth", "model_not_found", "rate_limit", "timeout", "response", "too_large", "http", "cancelled", "other"}

// ModelErrorKind classifies a model call's error by its type (package llm's errors), for the
// kind label of starplan_model_errors_total.
func ModelErrorKind(err error) string {
	var (
		unreachable *llm.UnreachableError
		auth        *llm.AuthError
		notFound    *llm.ModelNotFoundError
		rate        *llm.RateLimitError
		timeout     *llm.TimeoutError
		response    *llm.ResponseError
		tooLarge    *llm.ReplyTooLargeError
		status      *llm.HTTPError
	)
	switch {
	case errors.As(err, &auth):
		return "auth"
	case errors.As(err, &notFound):
		return "model_not_found"
	case errors.As(err, &rate):
		return "rate_limit"
	case errors.As(err, &timeout):
		return "timeout"
	case errors.As(err, &tooLarge):
		return "too_large"
	case errors.As(err, &response):
		return "response"
	case errors.As(err, &status):
		return "http"
	case errors.As(err, &unreachable):
		return "unreachable"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "other"
}

// WriteText writes every family in the Prometheus text format, reading the audit log and the
// pool now.
func (m *Metrics) WriteText(w io.Writer) error {
	m.scrape.Lock()
	defer m.scrape.Unlock()
	m.audit = nil
	if m.opts.Audit != nil {
		if page, err := m.opts.Audit(); err == nil {
			m.audit = page
		}
	}
	return m.reg.WriteText(w)
}

// Handler serves the metrics in the Prometheus text format (GET /metrics of serve's
// --metrics-listen).
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			return
		}
		_ = m.WriteText(w)
	})
}
