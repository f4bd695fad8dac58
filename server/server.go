package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/telemetry"
	"github.com/starplan/starplan/tokens"
)

// Defaults of Options. Each applies when the field is zero.
const (
	// DefaultMaxBody is the largest request body accepted, in bytes (a program is at most
	// sandbox.DefaultMaxProgram; a model's reply may carry prose around it).
	DefaultMaxBody = 1 << 20
	// DefaultEventBacklog is how many recent events the server keeps for clients that reconnect.
	DefaultEventBacklog = 1024
	// DefaultEventBacklogBytes bounds the same backlog in bytes (about: an event's text and a
	// fixed part per event); the oldest events make room.
	DefaultEventBacklogBytes = 4 << 20
	// DefaultMaxSubscribers is how many /v1/events streams (open review pages, clients) may be
	// open at once; one more is refused with 503 (too-many-streams).
	DefaultMaxSubscribers = 64
	// DefaultListLimit and MaxListLimit bound GET /v1/runs.
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Origins of runs and decisions made through the server, as the audit log records them.
const (
	OriginHTTP = "serve:http"
	OriginMCP  = "serve:mcp"
)

// Options configure a Server. The zero value is valid except for Token, which HTTP requires.
type Options struct {
	// Token is the bearer token every HTTP request must carry (Authorization: Bearer TOKEN). An
	// empty token refuses every HTTP request; stdio MCP needs none.
	Token string
	// MaxBody bounds request bodies, in bytes (DefaultMaxBody when 0).
	MaxBody int64
	// EventBacklog is how many recent events are kept for Last-Event-ID (DefaultEventBacklog
	// when 0).
	EventBacklog int
	// EventBacklogBytes bounds the backlog in bytes (DefaultEventBacklogBytes when 0).
	EventBacklogBytes int
	// MaxSubscribers bounds the event streams open at once (DefaultMaxSubscribers when 0).
	MaxSubscribers int
	// Now is the clock of events; nil means time.Now.
	Now func() time.Time
	// Version is reported to MCP clients as the server's version.
	Version string
	// Model, when set, writes plans for POST /v1/ask and is asked again, with the reviewer's
	// feedback, when a run it wrote is rejected (engine.Replan, at most engine.MaxReplans times
	// per question). Without it, /v1/ask answers no-model and a rejection only records.
	Model engine.Model
	// MaxRepairs is engine.AskRequest.MaxRepairs for the model's plans (0: the engine's default).
	MaxRepairs int
	// MaxConns bounds the HTTP connections held at once (DefaultMaxConns when 0), MaxUnauthConns
	// those of them that have not yet carried a credential (DefaultMaxUnauthConns) and
	// MaxUnauthConnsPerAddr those from one client address (DefaultMaxUnauthConnsPerAddr). They
	// hold on a listener wrapped by Listener (conns.go).
	MaxConns, MaxUnauthConns, MaxUnauthConnsPerAddr int
	// HeaderTimeout is how long a connection of HTTPServer has to send a request's headers
	// (DefaultHeaderTimeout when 0).
	HeaderTimeout time.Duration
	// Log receives what the HTTP server reports: connections refused or closed to keep to the
	// bounds (one line per interval, with counts) and net/http's own errors. Nil reports nothing.
	Log *log.Logger
	// NoElicit stops apply_run from asking the person to confirm through MCP elicitation when
	// the client supports it: the digest alone approves, as for clients without elicitation.
	NoElicit bool
	// Telemetry is told each HTTP request once answered (its route by the operation's name,
	// never the path) and each apply refused by role or rule (package telemetry counts and logs
	// them). Runs reach telemetry through the engine's observers, not through the server.
	Telemetry telemetry.Hooks
	// Retention, when positive, is how long the audit log keeps settled runs (every state but
	// pending): the server prunes older ones every RetentionInterval, and at once through Retain.
	// 0 keeps every run.
	Retention time.Duration
}

// Server serves one engine to many clients at once. Create it with New; it is safe for
// concurrent use. Drain ends the event streams before an http.Server shuts down; the caller
// closes the engine after that.
type Server struct {
	eng    *engine.Engine
	opts   Options
	events *broker
	mcp    *mcp.Server
	// sessions are the review page's logins (auth.go).
	sessions *sessions
	// tokens are the store's named tokens (package tokens); the legacy token is Options.Token.
	tokens *tokens.Keeper
	// pageURL is the review page's address (SetPageURL), for links to a run.
	pageURL atomic.Pointer[string]
	// conns counts the connections of Listener (conns.go).
	conns *connLimiter

	retention retention // the audit log's pruning (retention.go)

	drainOnce sync.Once
	draining  chan struct{} // closed by Drain

	// bg is the context of work a request leaves running (replanning); Drain cancels it and
	// waits for background. bgMu orders starting such work against Drain.
	bg         context.Context
	stopBG     context.CancelFunc
	background sync.WaitGroup
	bgMu       sync.Mutex
	bgClosed   bool

	// stopObserving ends the server's observation of the engine's runs (Drain).
	stopObserving func()
	// relay carries events to and from the other servers on the store (relay.go); nil when
	// the store is this server's alone.
	relay *relay
}

// New returns a server over eng.
func New(eng *engine.Engine, opts Options) (*Server, error) {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.EventBacklog <= 0 {
		opts.EventBacklog = DefaultEventBacklog
	}
	if opts.EventBacklogBytes <= 0 {
		opts.EventBacklogBytes = DefaultEventBacklogBytes
	}
	if opts.MaxSubscribers <= 0 {
		opts.MaxSubscribers = DefaultMaxSubscribers
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for _, d := range []struct {
		v   *int
		def int
	}{{&opts.MaxConns, DefaultMaxConns}, {&opts.MaxUnauthConns, DefaultMaxUnauthConns}, {&opts.MaxUnauthConnsPerAddr, DefaultMaxUnauthConnsPerAddr}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = DefaultHeaderTimeout
	}
	if opts.Log == nil {
		opts.Log = log.New(io.Discard, "", 0)
	}
	limits := brokerLimits{Events: opts.EventBacklog, Bytes: opts.EventBacklogBytes, Subscribers: opts.MaxSubscribers}
	s := &Server{eng: eng, opts: opts, events: newBroker(limits, opts.Now), sessions: newSessions(opts.Now), draining: make(chan struct{})}
	s.conns = newConnLimiter(opts)
	s.tokens = tokens.New(eng.Store(), opts.Now)
	s.bg, s.stopBG = context.WithCancel(context.Background())
	m, err := s.newMCP()
	if err != nil {
		return nil, err
	}
	s.mcp = m
	s.relay = s.startRelay()
	s.stopObserving = eng.Observe(s.observe)
	eng.SetRetention(opts.Retention)
	s.startRetention()
	return s, nil
}

// Drain starts the shutdown: event streams end (clients see the stream close) and later events
// are dropped; requests in flight go on. Call it before http.Server.Shutdown, which waits for
// them. It is safe to call more than once.
func (s *Server) Drain() {
	s.drainOnce.Do(func() {
		close(s.draining)
		s.bgMu.Lock()
		s.bgClosed = true // no background work starts from here on
		s.bgMu.Unlock()
		s.stopBG()
		s.background.Wait() // a replan's model call ends with its context
		s.stopObserving()
		s.relay.close()
		s.events.close()
	})
}

// CheckRequest is the body of POST /v1/check and the input of the check_plan tool.
type CheckRequest struct {
	Reply    string    `json:"reply,omitempty" jsonschema:"a model's reply holding the plan in one <execute_python> block; give reply, program or plan_json"`
	Program  string    `json:"program,omitempty" jsonschema:"the plan as a bare Starlark program; give reply, program or plan_json"`
	PlanJSON *StepPlan `json:"plan_json,omitempty" jsonschema:"the plan as JSON steps, as plan-and-execute planners write them; give reply, program or plan_json"`
}

// StepPlan is a JSON step plan (package planjson): steps that each call one tool, compiled to a
// program that runs like any other. GET /v1/describe lists the tools.
type StepPlan struct {
	Steps []PlanStep `json:"steps" jsonschema:"the steps, each naming its result; they run in dependency order"`
	// raw is the plan as the client sent it: compiled from these bytes, numbers keep their
	// digits (10.0 stays a float, 9007199254740993 stays exact) and unknown fields are refused.
	raw json.RawMessage
}

// UnmarshalJSON keeps the bytes of the plan beside its decoded steps.
func (p *StepPlan) UnmarshalJSON(b []byte) error {
	type plain StepPlan
	var v plain
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = StepPlan(v)
	p.raw = append(json.RawMessage(nil), b...)
	return nil
}

// PlanStep is one step of a StepPlan.
type PlanStep struct {
	ID        string   `json:"id" jsonschema:"the name of the step's result (lower case letters, digits, _)"`
	Tool      string   `json:"tool" jsonschema:"a table method (inventory_tbl.get), a domain helper (now), or respond (sets status and answer_text)"`
	Args      any      `json:"args,omitempty" jsonschema:"a list of positional arguments or an object of keyword arguments; {\"$ref\": \"id.field\"} is an earlier result, {\"$expr\": \"...\"} an expression"`
	DependsOn []string `json:"depends_on,omitempty" jsonschema:"ids of steps this one must follow"`
}

// CheckReport is what a check found: every problem at once, and the Python-isms rewritten.
type CheckReport struct {
	OK          bool               `json:"ok" jsonschema:"true when the plan passed the check and would run"`
	Program     string             `json:"program" jsonschema:"the program as extracted from the reply, before rewrites"`
	Diagnostics diag.List          `json:"diagnostics"`
	Rewrites    []pycompat.Rewrite `json:"rewrites"`
}

// RunRequest is the body of POST /v1/runs and the input of the run_plan tool.
type RunRequest struct {
	Reply    string    `json:"reply,omitempty" jsonschema:"a model's reply holding the plan in one <execute_python> block; give reply, program or plan_json"`
	Program  string    `json:"program,omitempty" jsonschema:"the plan as a bare Starlark program; give reply, program or plan_json"`
	PlanJSON *StepPlan `json:"plan_json,omitempty" jsonschema:"the plan as JSON steps, as plan-and-execute planners write them; it is compiled to a program, kept with the run"`
	Request  string    `json:"request,omitempty" jsonschema:"the customer's request the plan answers, verbatim; plans read it as user_request"`
	Limits   *Limits   `json:"limits,omitempty" jsonschema:"lower limits for this run; each may only be lower than the server's default"`
	Subject  string    `json:"subject,omitempty" jsonschema:"who the run acts for (a customer or member id); helpers and rules read it with run_subject(); a token pinned to a subject acts for it and may name no other"`
}

// Limits are a run's own limits. Zero fields keep the default; a field may lower its default,
// never raise it.
type Limits struct {
	MaxSteps  uint64 `json:"max_steps,omitempty" jsonschema:"interpreter steps"`
	TimeoutMS int64  `json:"timeout_ms,omitempty" jsonschema:"wall time in milliseconds"`
	MaxOutput int    `json:"max_output,omitempty" jsonschema:"bytes of print output kept"`
	MaxMemory int64  `json:"max_memory,omitempty" jsonschema:"bytes the run may allocate"`
}

// ApplyRequest is the body of POST /v1/runs/{id}/apply.
type ApplyRequest struct {
	Digest string `json:"digest" jsonschema:"the digest of the run's change set, as its dry run returned it"`
}

// RejectRequest is the body of POST /v1/runs/{id}/reject.
type RejectRequest struct {
	Feedback string `json:"feedback" jsonschema:"why the run was rejected, for the planner that wrote it"`
}

// Run states, as RunDocument.State and GET /v1/runs?state= name them: the engine's.
const (
	StatePending  = engine.StatePending
	StateApplied  = engine.StateApplied
	StateRejected = engine.StateRejected
	StateConflict = engine.StateConflict
	StateDone     = engine.StateDone
	StateFailed   = engine.StateFailed
)

// States lists the run states, for validation and documentation.
var States = engine.States

// RunDocument is a run as every run endpoint and tool returns it: the engine's one document of a
// run (engine.Document), which `starplan runs show --json` prints too.
type RunDocument = engine.Document

// RunList is the answer of GET /v1/runs and list_runs: summaries, newest first, and the size of
// the whole audit log (every run, whatever the state and limit asked for).
type RunList struct {
	Runs []RunSummary `json:"runs"`
	// Count is how many runs the audit log holds.
	Count int `json:"count" jsonschema:"how many runs the audit log holds, in every state"`
	// Bytes is the stored size of the audit log's records (their JSON).
	Bytes int64 `json:"bytes" jsonschema:"the stored size of every run record of the audit log, in bytes"`
	// States counts the runs of each state, as the audit log keeps them.
	States map[string]int `json:"states" jsonschema:"how many runs the audit log holds in each state"`
	// NextCursor lists the next page (GET /v1/runs?cursor=, list_runs' cursor); empty on the
	// last page.
	NextCursor string `json:"next_cursor,omitempty" jsonschema:"pass it as cursor to list the next page; absent on the last page"`
	// Unreadable names the records in the store that do not decode (damage; starplan db check
	// reports them); the list holds the others.
	Unreadable []string `json:"unreadable,omitempty" jsonschema:"ids of audit records that are damaged and cannot be read; starplan db check reports them"`
	// Subject is set when the caller's token is pinned to a subject: the list holds that
	// subject's runs only, and Count, Bytes and States are zero (they count every subject's).
	Subject string `json:"subject,omitempty" jsonschema:"set when the caller's token is pinned to this subject: the list holds its runs only, and count, bytes and states are 0 (they would count every subject's); a page may hold fewer runs than the limit and still have a next_cursor"`
}

// RunSummary is one line of the run list, with its state.
type RunSummary = engine.RunSummary

// Check extracts, rewrites and checks a plan without running it.
func (s *Server) Check(req CheckRequest) (*CheckReport, error) {
	src, plan, err := source(req.Reply, req.Program, req.PlanJSON)
	if err != nil {
		return nil, err
	}
	if plan != nil {
		program, ds := s.eng.CompilePlan(plan)
		if len(ds) > 0 {
			return &CheckReport{Diagnostics: ds, Rewrites: []pycompat.Rewrite{}}, nil
		}
		src = program
	}
	c := s.eng.Env().Check(src, sandbox.Limits{})
	rep := &CheckReport{OK: c.Program != nil, Program: c.Extracted, Diagnostics: c.Diagnostics, Rewrites: c.Rewrites}
	if rep.Diagnostics == nil {
		rep.Diagnostics = diag.List{}
	}
	if rep.Rewrites == nil {
		rep.Rewrites = []pycompat.Rewrite{}
	}
	return rep, nil
}

// source is what the engine takes the program from: a reply or a bare program (src), or a JSON
// step plan (plan), exactly one of them.
func source(reply, program string, steps *StepPlan) (src string, plan []byte, err error) {
	given := 0
	for _, set := range []bool{reply != "", program != "", steps != nil} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return "", nil, errorf(http.StatusBadRequest, CodeBadRequest, "send one of reply (a model's reply), program (a bare program) or plan_json (JSON steps)", "more than one of reply, program and plan_json is set")
	case steps != nil && steps.raw != nil:
		return "", steps.raw, nil
	case steps != nil:
		b, err := json.Marshal(steps)
		if err != nil {
			return "", nil, errorf(http.StatusBadRequest, CodeBadRequest, "args hold JSON values", "plan_json cannot be encoded: %v", err)
		}
		return "", b, nil
	case reply != "":
		return reply, nil, nil
	case program != "":
		return program, nil, nil
	}
	return "", nil, errorf(http.StatusBadRequest, CodeBadRequest, `send {"program": "..."}, {"reply": "..."} or {"plan_json": {"steps": [...]}}`, "none of reply, program and plan_json is set")
}

// sandboxLimits converts a request's limits, refusing any that would raise a default.
func sandboxLimits(l *Limits) (sandbox.Limits, error) {
	if l == nil {
		return sandbox.Limits{}, nil
	}
	refuse := func(name string, v any, max int64) error {
		return errorf(http.StatusBadRequest, CodeBadLimits, fmt.Sprintf("leave %s out for the default, or give 1..%d", name, max),
			"limits.%s is %v; a run may lower a limit, never raise it above the default %d", name, v, max)
	}
	if l.MaxSteps > sandbox.DefaultMaxSteps {
		return sandbox.Limits{}, refuse("max_steps", l.MaxSteps, sandbox.DefaultMaxSteps)
	}
	for _, c := range []struct {
		name   string
		v, max int64
	}{
		{"timeout_ms", l.TimeoutMS, sandbox.DefaultTimeout.Milliseconds()},
		{"max_output", int64(l.MaxOutput), sandbox.DefaultMaxOutput},
		{"max_memory", l.MaxMemory, sandbox.DefaultMaxMemory},
	} {
		if c.v < 0 || c.v > c.max {
			return sandbox.Limits{}, refuse(c.name, c.v, c.max)
		}
	}
	return sandbox.Limits{
		MaxSteps: l.MaxSteps, Timeout: time.Duration(l.TimeoutMS) * time.Millisecond,
		MaxOutput: l.MaxOutput, MaxMemory: l.MaxMemory,
	}, nil
}

// newRequestID ties a run's started event to its finished one: "q_" and 8 random hex digits.
func newRequestID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "q_" + hex.EncodeToString(b[:])
}

// Run dry-runs a plan: the result document, with the digest of the changes it would make. A run
// that changes data stays pending until Apply.
func (s *Server) Run(ctx context.Context, req RunRequest, origin string) (*RunDocument, error) {
	return s.run(ctx, req, origin, nil)
}

// observer is told the events of one call as they are published (an MCP call's progress); nil
// tells no one. It runs on the call's goroutine, never under the broker's lock.
type observer func(Event)

func (s *Server) run(ctx context.Context, req RunRequest, origin string, obs observer) (*RunDocument, error) {
	src, plan, err := source(req.Reply, req.Program, req.PlanJSON)
	if err != nil {
		return nil, err
	}
	limits, err := sandboxLimits(req.Limits)
	if err != nil {
		return nil, err
	}
	// The engine tells the run's events (observe), with this call's request id and observer.
	doc, err := s.eng.RunDocument(withCall(ctx, newRequestID(), obs), engine.Request{Reply: src, PlanJSON: plan, UserRequest: req.Request, Limits: limits, Origin: origin, By: principal(ctx), Subject: req.Subject})
	if err != nil {
		if e := subjectRefused(err); e != nil {
			return nil, e
		}
		return nil, internal(err)
	}
	if err := s.relay.flush(s.eng, doc.RunID); err != nil {
		return nil, internal(err)
	}
	return doc, nil
}

// Show returns a run as the audit log holds it (engine.Engine.Show).
func (s *Server) Show(id string) (*RunDocument, error) {
	doc, err := s.eng.Show(id)
	if err != nil {
		if e := unknownRun(err); e != nil {
			return nil, e
		}
		return nil, internal(err)
	}
	return doc, nil
}

// Apply applies a pending run's changes, once, if digest is the digest of its change set. An
// applied run is answered with its document as the first apply left it (applying is
// idempotent); a run whose data moved ends as a conflict (State conflict, Outcome conflict) and
// is answered the same way on every later apply. The error is an *Error for a wrong digest, an
// unknown run, a rejected run or one with nothing to apply, and for a run other servers on the
// store kept writing while this apply decided (409 run-changed: repeat it).
func (s *Server) Apply(ctx context.Context, id, digest, origin string) (*RunDocument, error) {
	return s.apply(ctx, id, digest, origin, nil)
}

// toApply is what Apply checks before it writes: the run's document, if digest is the digest of
// its changes. pending is true when the run waits for this apply; otherwise doc and err are
// Apply's answer.
func (s *Server) toApply(id, digest string) (doc *RunDocument, pending bool, err error) {
	doc, err = s.Show(id)
	if err != nil {
		return nil, false, err
	}
	if digest != doc.Digest {
		return nil, false, errorf(http.StatusPreconditionFailed, CodeDigestMismatch, "review the run again (GET /v1/runs/"+id+") and apply with the digest it shows",
			"the digest %q is not the digest of run %s's changes; nothing was written", clip(digest, 80), id).
			withToolHint("review the run again (show_run with run_id " + id + ") and apply with the digest it shows")
	}
	if done, err := settled(doc); done || err != nil {
		return doc, false, err
	}
	return doc, true, nil
}

func (s *Server) apply(ctx context.Context, id, digest, origin string, obs observer) (*RunDocument, error) {
	if err := s.mayApply(ctx, id); err != nil {
		return nil, err
	}
	doc, pending, err := s.toApply(id, digest)
	if !pending {
		return doc, err
	}
	// The engine tells what the apply did (observe): applied, a conflict, or its own failure.
	_, err = s.eng.ApplyWith(withCall(ctx, "", obs), id, engine.ApplyOptions{Origin: origin, By: principal(ctx)})
	var re *engine.RunError
	var ae *engine.ApprovalError
	if errors.As(err, &ae) {
		return nil, s.refusedApproval(ctx, ae) // nothing was written
	}
	if e := changedMeanwhile(err); e != nil {
		return nil, e // nothing was written; the run is as the other servers left it
	}
	if err != nil && !errors.As(err, &re) {
		return nil, internal(err)
	}
	// Whatever happened (this apply, or another client's that came first), the log has the
	// outcome: answer from it, so every apply of a run gets the same document.
	doc, err = s.Show(id)
	if err != nil {
		return nil, err
	}
	if done, err := settled(doc); done || err != nil {
		return doc, err
	}
	if re == nil && len(doc.ApprovedBy) > 0 {
		// An approval short of the domain's required_approvals: recorded, the run waits for the next.
		return doc, nil
	}
	return nil, internal(fmt.Errorf("run %s is still %s after its apply", id, doc.State))
}

// settled answers an apply of a run that is no longer pending: the document for an applied or
// conflicting run, an *Error for the others. done is false for a pending run.
func settled(doc *RunDocument) (done bool, err error) {
	switch doc.State {
	case StatePending:
		return false, nil
	case StateApplied, StateConflict:
		return true, nil
	case engine.StateExpired:
		return true, errorf(http.StatusForbidden, CodeRunExpired, "reject it, or run the plan again for a new run",
			"run %s waited longer than the domain's pending_ttl; it can no longer be applied", doc.RunID)
	case StateRejected:
		return true, errorf(http.StatusConflict, CodeRejected, "run the plan again, or a corrected one, for a new run",
			"run %s was rejected; it cannot be applied", doc.RunID)
	}
	return true, errorf(http.StatusConflict, CodeNotApplicable, "only accepted runs that change data wait for apply",
		"run %s has nothing to apply (state %s, outcome %s)", doc.RunID, doc.State, doc.Outcome)
}

// Reject records a reviewer's rejection of a run, with feedback; a pending run can then never
// be applied. Rejecting a rejected run answers with the first decision.
func (s *Server) Reject(ctx context.Context, id, feedback, origin string) (*RunDocument, error) {
	if err := s.mayReject(ctx, id); err != nil {
		return nil, err
	}
	before, err := s.Show(id)
	if err != nil {
		return nil, err
	}
	if before.State == StateRejected {
		return before, nil
	}
	_, recorded, err := s.eng.RejectWith(withCall(ctx, "", nil), id, engine.RejectOptions{Feedback: feedback, Origin: origin, By: principal(ctx)}) // the engine tells the rejection (observe)
	if err != nil {
		if e := changedMeanwhile(err); e != nil {
			return nil, e
		}
		var re *engine.RunError
		if errors.As(err, &re) {
			return nil, &Error{Status: http.StatusConflict, Code: CodeAlreadyApplied, Message: err.Error(), Hint: "an applied run stays applied; run a plan that undoes it"}
		}
		return nil, internal(err)
	}
	doc, err := s.Show(id)
	if err != nil {
		return nil, err
	}
	if recorded { // not when another client's rejection came first
		if doc.Origin == "ask" && doc.Outcome == engine.OutcomeOK { // engine.Replan's rule: only an accepted plan
			s.replan(id, doc.Decision.Feedback, origin)
		}
	}
	return doc, nil
}

// List returns the runs in the given state (every run for ""), newest first, at most limit
// (DefaultListLimit when 0), from cursor (a previous page's NextCursor; "" for the newest). It
// reads the page's records only, through the audit log's index.
func (s *Server) List(state string, limit int, cursor string) (*RunList, error) {
	if state != "" && !contains(States, state) {
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "state is one of "+fmt.Sprint(States), "unknown state %q", clip(state, 40))
	}
	if limit < 0 || limit > MaxListLimit {
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("give a limit between 1 and %d", MaxListLimit), "limit %d is out of range", limit)
	}
	if limit == 0 {
		limit = DefaultListLimit
	}
	page, err := s.eng.ListRuns(engine.ListOptions{State: state, Limit: limit, Cursor: cursor})
	var unreadable *engine.UnreadableError
	var bad *engine.CursorError
	switch {
	case errors.As(err, &bad):
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, bad.Hint(), "%s", bad.Error())
	case err != nil && !errors.As(err, &unreadable):
		return nil, internal(err)
	}
	out := &RunList{Runs: page.Runs, Count: page.Count, Bytes: page.Bytes, States: page.States, NextCursor: page.NextCursor}
	if unreadable != nil {
		out.Unreadable = unreadable.IDs // listed apart: the others still list
	}
	return out, nil // Runs are newest first
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// clip cuts a caller's string quoted back in an error message to about n bytes, at a UTF-8
// boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		n--
	}
	return s[:n] + "…"
}
