package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
)

// Request is one run of a plan.
type Request struct {
	// Reply is a model's reply or a bare program.
	Reply string
	// PlanJSON is a JSON step plan (package planjson), in place of Reply: it is compiled to the
	// program that runs and is kept with the run, and recorded as the run's reply. A plan that
	// does not compile ends as check_failed with a diagnostic per problem.
	PlanJSON json.RawMessage
	// UserRequest is the customer's request; plans read it as user_request.
	UserRequest string
	// Limits override the engine's default limits where non-zero.
	Limits sandbox.Limits
	// Apply applies an accepted run's changes at once instead of keeping it pending.
	Apply bool
	// Origin says which command or caller made the run ("exec", "ask", "demo", ...), for the
	// audit log.
	Origin string
	// Model describes the model call that produced Reply, for the audit log; empty otherwise.
	Model *ModelCall
	// By is who proposes the run (its record's proposed_by); the zero value is the local user
	// (access.Local). With Apply, the run is applied at once only when By may approve it alone
	// or an auto rule lets it through (see ApplyWith); otherwise it stays pending.
	By access.Principal
	// Subject is who the run acts for ("" for nobody): the plan, the domain's helpers and its
	// starlark rules read it with run_subject(), it is recorded with the run (RunRecord.Subject)
	// and a replay or an apply uses it again. A domain may require one for writes
	// (contracts.SubjectPolicy).
	Subject string

	// bare says Reply is a program starplan made or recorded (a compiled JSON plan, a replay),
	// run as it is, without extraction.
	bare bool
	// id is the run's id, set by Run; a request without one (a replay) is not a run.
	id string
}

// ModelCall is what the audit log keeps about the model call behind a reply.
type ModelCall struct {
	Model            string  `json:"model"`
	Attempt          int     `json:"attempt"` // 1 for the first reply, 2 after one repair, ...
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	LatencyMS        float64 `json:"latency_ms"`
	ParentRunID      string  `json:"parent_run_id,omitempty"` // the run this attempt repairs, or replans after its rejection
	// Replan is how many reviewer rejections led to this attempt: 0 for the question's own
	// attempts, 1 for a plan asked for after the first rejection, ...
	Replan int `json:"replan,omitempty"`
}

// Run executes a plan against a staged view of the store and returns its result. The error is
// for failures of starplan itself (the store, the audit log); every problem with the plan is in
// the Result.
func (e *Engine) Run(ctx context.Context, req Request) (*Result, error) {
	res, _, err := e.run(ctx, req)
	return res, err
}

// RunDocument is Run answered with the run's document (Document): the result, the digest of its
// changes, its state and what the audit log keeps about its making, as Show gives it later
// (without the history, which is the answer's own).
func (e *Engine) RunDocument(ctx context.Context, req Request) (*Document, error) {
	res, rec, err := e.run(ctx, req)
	if err != nil {
		return nil, err
	}
	doc, err := DocumentOf(res)
	if err != nil {
		return nil, err
	}
	t := rec.Time
	doc.Request, doc.Origin, doc.Time, doc.AppliedAt, doc.Made = rec.Request, rec.Origin, &t, rec.AppliedAt, madeOf(rec)
	doc.Subject = rec.Subject
	return doc, nil
}

// run is Run, with the run's record as queued for the audit log (read it only).
func (e *Engine) run(ctx context.Context, req Request) (*Result, *RunRecord, error) {
	if req.Reply != "" && len(req.PlanJSON) > 0 {
		return nil, nil, errors.New("engine: a request has a Reply or a PlanJSON, not both")
	}
	subject, err := subjectOf(req)
	if err != nil {
		return nil, nil, err
	}
	req.Subject = subject
	start := e.opts.Now()
	began := time.Now() // the wall clock, for the verdict's duration
	id := newRunID()
	var parent string
	if req.Model != nil {
		parent = req.Model.ParentRunID
	}
	observed := e.observed()
	var trace traceNote
	if observed {
		e.emit(context.WithValue(ctx, traceNoteKey{}, &trace), Event{Type: EventStarted, RunID: id, Origin: req.Origin, Domain: e.st.Domain().Name, ParentRunID: parent, By: orLocal(req.By).Name, Model: req.Model})
	}
	req, res := e.compilePlan(req, id)
	var pending *store.Pending
	if res == nil {
		var err error
		req.id = id
		if res, pending, err = e.evaluate(ctx, req, start); err != nil {
			if observed {
				e.emit(ctx, Event{Type: EventFailed, RunID: id, Origin: req.Origin, ParentRunID: parent, Message: err.Error(), Err: err})
			}
			return nil, nil, err
		}
	} else if observed {
		e.emit(ctx, Event{Type: EventChecked, RunID: id, Origin: req.Origin, Outcome: res.Outcome, Codes: codes(res.Diagnostics)})
	}
	res.TraceID = trace.get()
	rec := newRecord(res, req, start, pending)
	if pending != nil {
		rec.ApprovalsNeeded = e.policy.Approval.Required()
	}
	if pending != nil && req.Apply {
		e.applyMu.Lock()
		defer e.applyMu.Unlock()
		if observed {
			e.emit(ctx, verdictEvent(res, req.Origin, parent, time.Since(began)))
		}
		rec.ApplyOrigin = rec.Origin // applied by whoever ran it, with no review between
		err := e.decideApply(ctx, rec, res, orLocal(req.By))
		var refused *ApprovalError
		if errors.As(err, &refused) {
			rec.ApplyOrigin = ""
			e.audit.add(rec) // not applied: the run waits for approval
			res.Who = rec.Who
			return res, rec, nil
		}
		if err != nil {
			return nil, nil, err // applyRecord has queued the still-pending record
		}
		return res, rec, nil
	}
	e.audit.add(rec)
	res.Who = rec.Who
	if observed { // once the record is queued
		e.emit(ctx, verdictEvent(res, req.Origin, parent, time.Since(began)))
	}
	return res, rec, nil
}

// maxEvaluations is how many times evaluate runs a plan whose reads saw another run's commit land
// during it (see store.Stage.Moved) before it reports what it got.
const maxEvaluations = 3

// evaluate is a run up to its verdict: extract, check, run on a fresh staged view, the contract
// and the policy, and the diff. It writes nothing. pending is what applying the run would write,
// when the run is accepted and changes data. A plan that saw the data as of more than one moment
// (a commit landed while it ran) is run again, so its verdict is about one state of the data;
// observers then hear its phases (checked, ran, contract) once per evaluation.
func (e *Engine) evaluate(ctx context.Context, req Request, now time.Time) (res *Result, pending *store.Pending, err error) {
	for try := 1; ; try++ {
		var moved bool
		res, pending, moved, err = e.evaluateOnce(ctx, req, now)
		if err != nil || !moved || try == maxEvaluations || ctx.Err() != nil {
			return res, pending, err
		}
	}
}

func (e *Engine) evaluateOnce(ctx context.Context, req Request, now time.Time) (res *Result, pending *store.Pending, moved bool, err error) {
	began := time.Now() // the wall clock, for timing; now is the run's clock for now()
	limits := req.Limits.Effective(e.opts.Limits)
	// The store's work for the plan (scans, filters) runs in starplan, outside the sandbox's
	// counters: it stops with the run's time and is held to the domain's run limits.
	sctx, cancel := context.WithTimeoutCause(ctx, limits.Timeout, errTimeUp)
	defer cancel()
	rl := e.runLimits
	rl.StagedBytes = limits.MaxMemory
	stage := e.st.StageFor(sctx, rl)
	sres := e.runner.Run(ctx, sandbox.Request{
		Reply:   req.Reply,
		Bare:    req.bare,
		Inputs:  map[string]any{"user_request": req.UserRequest, sandbox.InputSubject: req.Subject},
		Limits:  limits,
		View:    stage,
		Now:     now,
		Globals: []string{contracts.AnswerGlobal, contracts.StatusGlobal},
		Helpers: e.helpers,
	})
	stageLimit(sres, stage, sctx)
	// A replay (or a test's evaluation) has no id: it is no run, and observers hear nothing of it.
	observed := req.id != "" && e.observed()
	id := req.id
	if id == "" {
		id = newRunID()
	}
	if observed {
		e.phases(ctx, req, id, sres, stage.Scans(), stage.RowsRead(), time.Since(began))
	}
	res = &Result{
		RunID:           id,
		Subject:         req.Subject,
		Outcome:         Outcome(sres.Outcome),
		Limit:           sres.Limit,
		Stdout:          sres.Stdout,
		StdoutTruncated: sres.StdoutTruncated,
		Diagnostics:     sres.Diagnostics,
		Rewrites:        sres.Rewrites,
		Steps:           sres.Steps,
		Program:         sres.Program,
		Scans:           stage.Scans(),
	}
	e.domainHints(res.Diagnostics)
	if res.Outcome == OutcomeOK {
		// Only a plan that ran to the end has an answer; a failed one's globals are half-set.
		res.Status, _ = sres.Globals[contracts.StatusGlobal].(string)
		res.AnswerText, _ = sres.Globals[contracts.AnswerGlobal].(string)
		diffing := time.Now()
		res.Changes = stage.ChangeSet()
		res.Changes.Attribute(sres.Via)
		checking := time.Now()
		ds, err := e.policy.Check(contracts.Input{Globals: sres.Globals, Changes: res.Changes, Committed: stage, Data: stage, Deadline: time.Now().Add(invariantsTime), Subject: req.Subject})
		if err != nil {
			return nil, nil, false, fmt.Errorf("checking the contract: %w", err)
		}
		if observed {
			e.emit(ctx, Event{Type: EventContract, RunID: id, Origin: req.Origin, Outcome: contractOutcome(ds), Duration: time.Since(checking),
				Diff: checking.Sub(diffing), RowsWritten: res.Changes.Rows(), Codes: codes(ds)})
		}
		if len(ds) > 0 {
			res.Outcome, res.Diagnostics = OutcomeContractViolation, ds
		} else if !res.Changes.Empty() {
			pending = stage.Pending()
			res.Pending = true
		}
	}
	res.DurationMS = float64(time.Since(began).Microseconds()) / 1000
	res.bound()
	res.normalize()
	return res, pending, stage.Moved(), nil
}

// phases tells the observers the runner's phases of a run: checked, then ran when the check
// passed. The runner reports one duration for both (the worker's wait included); it is on ran,
// and both carry the runner's phases (sandbox.Phases) inside it.
func (e *Engine) phases(ctx context.Context, req Request, id string, sres *sandbox.Result, scans []store.Scan, rowsRead int, took time.Duration) {
	checked := Event{Type: EventChecked, RunID: id, Origin: req.Origin, Phases: sres.Phases}
	if sres.Outcome == sandbox.OutcomeCheckFailed {
		checked.Outcome, checked.Codes, checked.Duration = OutcomeCheckFailed, codes(sres.Diagnostics), took
		e.emit(ctx, checked)
		return
	}
	e.emit(ctx, checked)
	ran := Event{Type: EventRan, RunID: id, Origin: req.Origin, Outcome: Outcome(sres.Outcome), Duration: took,
		Steps: sres.Steps, Limit: sres.Limit, Scans: len(scans), RowsRead: rowsRead, Phases: sres.Phases}
	if sres.Outcome != sandbox.OutcomeOK {
		ran.Codes, ran.Message = codes(sres.Diagnostics), firstMessage(sres.Diagnostics)
	}
	e.emit(ctx, ran)
}

// contractOutcome is the outcome of a run that ran to its end, after its contract and policy.
func contractOutcome(ds diag.List) Outcome {
	if len(ds) > 0 {
		return OutcomeContractViolation
	}
	return OutcomeOK
}

// errTimeUp is the cause of a run's store context when the run's time is up.
var errTimeUp = errors.New("the run's time limit passed")

// stageLimit makes a run that crossed one of the store's bounds end as limit_exceeded naming
// it: a run limit of the domain, or the time limit reached inside a scan. The plan saw a failed
// call; in a worker that arrives as a runtime error, so the stage, which the parent holds, is
// what decides.
func stageLimit(res *sandbox.Result, stage store.Stage, sctx context.Context) {
	if res.Outcome == sandbox.OutcomeOK || res.Outcome == sandbox.OutcomeCheckFailed {
		return
	}
	var d diag.Diagnostic
	if len(res.Diagnostics) > 0 {
		d = res.Diagnostics[0]
	}
	d.Stage = diag.StageRun
	switch le := stage.Exceeded(); {
	case le != nil:
		res.Limit = sandbox.Limit(le.Limit)
		d.Code, d.Message, d.Hint = sandbox.CodeLimit, le.Error(), le.Hint()
	case res.Outcome == sandbox.OutcomeRuntimeError && errors.Is(context.Cause(sctx), errTimeUp):
		res.Limit = sandbox.LimitTime
		d.Code, d.Message = sandbox.CodeLimit, "the run's time limit passed while the store worked for the plan"
		d.Hint = "filter with where on fewer, indexed fields, or read fewer rows"
	default:
		return
	}
	res.Outcome = sandbox.OutcomeLimitExceeded
	res.Diagnostics = diag.List{d}
}

// newRunID returns a fresh run id: "r_", the time in milliseconds (12 hex digits) and 48 random
// bits (12 hex digits). Ids were once 40 random bits alone: two runs of a 1M-run log then
// shared an id with a chance of about 1 in 3, and the second run's record replaced the first's.
// Now two ids can only meet within one millisecond (1 in 2^48 for a pair there), and ids made
// one after another sort by time, so the audit index's ids are appended, not scattered.
func newRunID() string {
	return runIDAt(time.Now())
}

func runIDAt(t time.Time) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16) // 48 bits of milliseconds
	_, _ = rand.Read(b[6:])                                      // crypto/rand.Read never fails on supported platforms
	return "r_" + hex.EncodeToString(b[:])
}

// conflictDiagnostics describes an apply conflict, one diagnostic per moved row.
func conflictDiagnostics(err error) (diag.List, bool) {
	var ce *store.ConflictError
	if !errors.As(err, &ce) {
		return nil, false
	}
	ds := make(diag.List, len(ce.Conflicts))
	for i, c := range ce.Conflicts {
		ds[i] = diag.Diagnostic{Stage: diag.StageApply, Code: CodeConflict, Message: c.String() + "; nothing was written", Hint: ce.Hint()}
	}
	return ds, true
}

// domainHints puts the domain's own words into the sandbox's hints that need them (the STATUS
// to set), in place: the result and the model's repair message then say them.
func (e *Engine) domainHints(ds diag.List) {
	for i := range ds {
		if ds[i].Hint == sandbox.HintNoneLookup {
			ds[i].Hint = e.policy.Contract.NoneHint()
		}
	}
}
