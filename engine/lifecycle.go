package engine

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
)

// The lifecycle of a run has one home: this file. The engine tells its observers (Options.Observe,
// Engine.Observe) each step of every run as it happens, whatever the transport that asked for it
// (the CLI, the server's HTTP and MCP, an embedding program); the server's event stream and the
// history a run document carries are built from the same events (StreamEvent).

// EventType is a step of a run's lifecycle.
type EventType string

// The steps of a run, in the order they happen. A dry run is started, then checked, ran (when the
// check passed), contract (when it ran to the end), and ends with exactly one verdict: pending,
// done or failed. A pending run later gets one of applied, conflict or rejected (a run that
// conflicted may also be rejected after).
const (
	EventStarted  EventType = "started"  // a run began; it has its id
	EventChecked  EventType = "checked"  // the reply was extracted, rewritten and checked: Codes are the check's findings
	EventRan      EventType = "ran"      // the plan ran: Steps, Limit (when one stopped it), Outcome
	EventContract EventType = "contract" // the output contract and the policy were checked: Codes are the rules broken
	EventPending  EventType = "pending"  // verdict: accepted, with changes waiting for an apply (Digest, RowsWritten)
	EventDone     EventType = "done"     // verdict: accepted, with nothing to change
	EventFailed   EventType = "failed"   // verdict: refused (Outcome, Codes); or, with Err, starplan itself failed
	EventApplied  EventType = "applied"  // a pending run's changes were written
	EventConflict EventType = "conflict" // an apply found the data moved (or broke a rule against it now); nothing was written
	EventRejected EventType = "rejected" // a reviewer rejected the run (Feedback)
)

// Event is one step of a run's lifecycle, as an Observer hears it. Fields that do not apply to a
// step are zero.
type Event struct {
	Type  EventType
	Time  time.Time // by the engine's clock (Options.Now)
	RunID string
	// Origin is who made the run (exec, ask, serve:http, ...) for the steps of a run, and who
	// decided for applied, conflict and rejected.
	Origin string
	// Domain is the name of the engine's domain (started).
	Domain string
	// ParentRunID is the run a model's attempt repairs or replans (ModelCall.ParentRunID).
	ParentRunID string
	// Model is the model call that wrote the run's plan (started, for a run of ask): model,
	// attempt, tokens and latency; nil for a plan that came without one.
	Model   *ModelCall
	Outcome Outcome
	// State is the run's state once it has one: the verdict's (pending, done, failed) and after
	// (applied, conflict, rejected).
	State string
	// Duration is the wall time of the step's phase: for checked and ran together the runner's
	// (it extracts, checks and runs in one call, a worker's wait included; ran carries the whole
	// and checked 0, unless the check failed and there is no ran), for contract the contract and
	// policy check, for a verdict the whole dry run, for applied and conflict the apply's commit
	// or refusal.
	Duration time.Duration
	// Diff is the time the change set took to make (contract): each changed row before and
	// after, the diff a review shows, made just before the contract's check.
	Diff time.Duration
	// Phases are the runner's phases inside its call (checked, ran): extraction, a worker's
	// wait, rewrite, check and the run itself, in that order from the call's start.
	Phases sandbox.Phases
	Steps  uint64        // ran and the verdict: the interpreter's steps
	Limit  sandbox.Limit // the limit that stopped the run, if one did
	// RowsWritten is how many rows the run changes (contract, the verdict, applied).
	RowsWritten int
	// Scans is how many kinds of read walked a table because no index answered (ran).
	Scans int
	// RowsRead is how many rows the run's reads took from the store (ran).
	RowsRead int
	// Codes are the codes of the step's diagnostics (check findings, the runtime error, rules
	// broken, conflicts), in the run's order.
	Codes []string
	// Message is the first diagnostic's message (a refusal, a conflict) or Err's text.
	Message  string
	Digest   string // the verdict and applied: the digest of the change set (Digest)
	Feedback string // rejected: the reviewer's feedback
	// By names the principal (access.Principal's name) who proposed the run (started), whose
	// approval applied it (applied; "" when a rule did) or who rejected it (rejected).
	By string
	// Rule is the auto-approval rule that let an applied run through without a person.
	Rule string
	// ApplySteps are the apply's steps inside the store (applied, conflict): its conflict
	// checks, the domain's rules and the commit, in order (store.ApplySteps), timed from the
	// apply's start; nil when no observer listened.
	ApplySteps []ApplyStep
	// Err is set on failed when starplan itself failed (the store, the audit log): the run has
	// no verdict, and a pending run stays pending after a failed apply.
	Err error
}

// ApplyStep is a step of an apply inside the store: Step is store.StepCheck (the conflict check),
// store.StepVerify (the domain's rules against the committed rows) or store.StepCommit; it began
// Offset after the apply did and took Duration. Result is how it ended: ok, conflict (the data
// moved, or a rule refused the change against it now: the apply's conflict) or error.
type ApplyStep struct {
	Step     string
	Offset   time.Duration
	Duration time.Duration
	Result   string
}

// applySteps are steps timed from began, for an event.
func applySteps(began time.Time, steps []store.ApplyStep) []ApplyStep {
	if len(steps) == 0 {
		return nil
	}
	out := make([]ApplyStep, len(steps))
	for i, s := range steps {
		out[i] = ApplyStep{Step: s.Step, Offset: s.Start.Sub(began), Duration: s.End.Sub(s.Start), Result: "ok"}
		if s.Err != nil {
			out[i].Result = "error"
			var pe *policyError
			if errors.Is(s.Err, store.ErrConflict) || errors.As(s.Err, &pe) {
				out[i].Result = "conflict"
			}
		}
	}
	return out
}

// Verdict reports whether the event ends a dry run (pending, done, or failed without Err).
func (ev Event) Verdict() bool {
	return ev.Type == EventPending || ev.Type == EventDone || ev.Type == EventFailed && ev.Err == nil
}

// Observer is told every step of every run. It is called synchronously, in order, on the
// goroutine of the call that made the step (Run, Apply, Reject...), with that call's context (so
// a tracer can find the caller's span, a server the request's own values). An observer must not
// block: the run waits for it. One that may be slow hands the event on (see Buffered); the
// server's event broker never blocks (a stream that falls behind is cut off and reconnects with
// Last-Event-ID). An observer must not call the engine back on the same run. It may keep the
// event; it must not change Codes.
type Observer func(ctx context.Context, ev Event)

// observers holds the engine's observers; the list is replaced, never changed, so emitting reads
// it without a lock. A nil pointer means none: each step then costs one atomic load.
type observers struct {
	mu   sync.Mutex // orders Observe and its stop
	list atomic.Pointer[[]*Observer]
}

// Observe adds an observer to the engine's, after Options.Observe; stop removes it (an event
// being told may still reach it). Observers added while runs go on hear the steps after.
func (e *Engine) Observe(f Observer) (stop func()) {
	p := &f
	e.obs.mu.Lock()
	defer e.obs.mu.Unlock()
	var list []*Observer
	if old := e.obs.list.Load(); old != nil {
		list = append(list, *old...)
	}
	list = append(list, p)
	e.obs.list.Store(&list)
	return func() {
		e.obs.mu.Lock()
		defer e.obs.mu.Unlock()
		old := e.obs.list.Load()
		if old == nil {
			return
		}
		var list []*Observer
		for _, q := range *old {
			if q != p {
				list = append(list, q)
			}
		}
		if len(list) == 0 {
			e.obs.list.Store(nil)
			return
		}
		e.obs.list.Store(&list)
	}
}

// observed reports whether anyone listens; callers skip building events otherwise.
func (e *Engine) observed() bool { return e.obs.list.Load() != nil }

// emit tells every observer ev, stamped with the engine's time.
func (e *Engine) emit(ctx context.Context, ev Event) {
	list := e.obs.list.Load()
	if list == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = e.opts.Now()
	}
	for _, f := range *list {
		(*f)(ctx, ev)
	}
}

// codes lists the codes of ds, nil for none.
func codes(ds diag.List) []string {
	if len(ds) == 0 {
		return nil
	}
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Code
	}
	return out
}

// verdictEvent is the event that ends the dry run of res.
func verdictEvent(res *Result, origin, parent string, took time.Duration) Event {
	ev := Event{RunID: res.RunID, Origin: origin, ParentRunID: parent, Outcome: res.Outcome, State: StateOf(res, nil),
		Duration: took, Steps: res.Steps, Limit: res.Limit, RowsWritten: res.Changes.Rows(), Codes: codes(res.Diagnostics)}
	ev.Digest, _ = Digest(res.Changes) // a change set that does not encode never got this far
	switch ev.State {
	case StatePending:
		ev.Type = EventPending
	case StateDone:
		ev.Type = EventDone
	default:
		ev.Type, ev.Message = EventFailed, firstMessage(res.Diagnostics)
	}
	return ev
}

func firstMessage(ds diag.List) string {
	if len(ds) == 0 {
		return ""
	}
	return ds[0].Message
}

// StreamEvent is a step of a run's lifecycle as the server streams it (/v1/events, MCP progress)
// and a run document records it (Document.Events): the steps a reviewer follows, in the API's
// vocabulary (StreamStarted, StreamFinished, ...). Event.Stream makes one from an Event, and a
// run's recorded history is made of the same (History), so the two cannot drift.
type StreamEvent struct {
	// ID numbers the events of one server process's stream; 0 in a run's recorded history.
	ID    int64     `json:"id,omitempty"`
	Type  string    `json:"type"`
	Time  time.Time `json:"time"`
	RunID string    `json:"run_id,omitempty"`
	// ParentRunID is the rejected run a replanned run follows (finished).
	ParentRunID string `json:"parent_run_id,omitempty"`
	// RequestID ties a request's events together on a server's stream (started to finished);
	// never recorded.
	RequestID string  `json:"request_id,omitempty"`
	Origin    string  `json:"origin,omitempty"`
	Outcome   Outcome `json:"outcome,omitempty"`
	State     string  `json:"state,omitempty"`
	Digest    string  `json:"digest,omitempty"`
	Rows      int     `json:"rows,omitempty"` // changed rows (finished, applied)
	Code      string  `json:"code,omitempty"` // failed: conflict, internal, ...
	Message   string  `json:"message,omitempty"`
	Feedback  string  `json:"feedback,omitempty"` // rejected
	By        string  `json:"by,omitempty"`       // who proposed (started), approved (applied) or rejected it
	Rule      string  `json:"rule,omitempty"`     // applied: the auto-approval rule that let it through
}

// The types of StreamEvent, in the order they happen.
const (
	StreamStarted  = "started"  // a run began
	StreamFinished = "finished" // a dry run ended: its outcome, state and digest
	StreamApplied  = "applied"  // a run's changes were written
	StreamRejected = "rejected" // a reviewer rejected a run, with feedback
	StreamFailed   = "failed"   // a run or an apply ended without a verdict or wrote nothing: Code says why
	// StreamReplanning: a reviewer rejected a run the model wrote; the model is asked again with
	// the feedback (a server's own step, not a run's: the engine never makes it).
	StreamReplanning = "replanning"
)

// Stream is ev as the API shows it, and false for the steps it does not show (checked, ran,
// contract: an observer has them).
func (ev Event) Stream() (StreamEvent, bool) {
	s := StreamEvent{Time: ev.Time, RunID: ev.RunID, Origin: ev.Origin, Outcome: ev.Outcome, State: ev.State, By: ev.By, Rule: ev.Rule}
	switch {
	case ev.Type == EventStarted:
		s.Type, s.Outcome, s.State = StreamStarted, "", ""
	case ev.Verdict():
		s.Type, s.ParentRunID, s.Digest, s.Rows = StreamFinished, ev.ParentRunID, ev.Digest, ev.RowsWritten
	case ev.Type == EventFailed: // with Err: starplan's own failure
		s.Type, s.Code, s.Message = StreamFailed, errcode.Internal, ev.Message
	case ev.Type == EventApplied:
		s.Type, s.Digest, s.Rows = StreamApplied, ev.Digest, ev.RowsWritten
	case ev.Type == EventConflict:
		s.Type, s.Code, s.Message = StreamFailed, CodeConflict, ev.Message
	case ev.Type == EventRejected:
		s.Type, s.Feedback = StreamRejected, ev.Feedback
	default:
		return StreamEvent{}, false
	}
	return s, true
}

// History is a run's lifecycle as its audit record and decision keep it: the events the engine
// told its observers about it, rebuilt from what is stored, so that they outlive the process and
// cover runs made by any transport, in the order they happened. What the record does not keep
// is not rebuilt: the phases (checked, ran, contract), a failure of starplan itself, and (a
// server's own) replanning. digest is the digest of the run's changes.
func History(rec *RunRecord, d *Decision, digest string) []Event {
	ev := func(e Event) Event {
		e.RunID = rec.ID
		return e
	}
	took := time.Duration(rec.DurationMS * float64(time.Millisecond))
	verdict := ev(Event{Time: rec.Time.Add(took), Origin: rec.Origin, Outcome: rec.Outcome, Duration: took, Steps: rec.Steps,
		Limit: rec.Limit, RowsWritten: rec.ChangedRows, Digest: digest})
	if rec.Model != nil {
		verdict.ParentRunID = rec.Model.ParentRunID
	}
	// The state the run finished in: a conflict or an apply came later, and a conflict replaced
	// the outcome, which was ok when the run finished (only accepted runs wait for an apply).
	conflict := rec.ConflictAt != nil || rec.Outcome == OutcomeConflict // the latter: records from before ConflictAt
	switch {
	case rec.Applied || conflict || d != nil && rec.Outcome == OutcomeOK && rec.ChangedRows > 0:
		verdict.Type, verdict.Outcome, verdict.State = EventPending, OutcomeOK, StatePending
	default:
		verdict.State = stateOf(false, false, rec.Pending, rec.Outcome)
		switch verdict.State {
		case StatePending:
			verdict.Type = EventPending
		case StateDone:
			verdict.Type = EventDone
		default:
			verdict.Type, verdict.Codes, verdict.Message = EventFailed, codes(rec.Diagnostics), firstMessage(rec.Diagnostics)
		}
	}
	out := []Event{ev(Event{Type: EventStarted, Time: rec.Time, Origin: rec.Origin, ParentRunID: verdict.ParentRunID, By: rec.ProposedBy}), verdict}
	switch {
	case rec.AppliedAt != nil:
		out = append(out, ev(Event{Type: EventApplied, Time: *rec.AppliedAt, Origin: rec.ApplyOrigin, Outcome: rec.Outcome, State: StateApplied,
			Digest: digest, RowsWritten: rec.ChangedRows, By: rec.appliedBy(), Rule: rec.AutoApprovedByRule}))
	case conflict:
		at := verdict.Time // a record from before ConflictAt: the time is not known, only the order
		if rec.ConflictAt != nil {
			at = *rec.ConflictAt
		}
		out = append(out, ev(Event{Type: EventConflict, Time: at, Origin: rec.ApplyOrigin, Outcome: OutcomeConflict,
			State: StateConflict, Codes: codes(rec.Diagnostics), Message: firstMessage(rec.Diagnostics)}))
	}
	if d != nil {
		out = append(out, ev(Event{Type: EventRejected, Time: d.Time, Origin: d.Origin, Outcome: rec.Outcome,
			State: StateRejected, Feedback: d.Feedback, By: rec.RejectedBy}))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// streamHistory is History as the API shows it.
func streamHistory(rec *RunRecord, d *Decision, digest string) []StreamEvent {
	var out []StreamEvent
	for _, ev := range History(rec, d, digest) {
		if s, ok := ev.Stream(); ok {
			out = append(out, s)
		}
	}
	return out
}

// Buffered returns an observer that hands each event to f on a goroutine of its own, through a
// queue of size events (at least 1), so a slow f (an exporter, a log over the network) never holds
// a run up. When the queue is full the event is dropped, never waited for, and counted: stop
// ends the goroutine once the queue is told and returns how many were dropped. f gets each
// event with its call's context values but without its cancellation (the call may have ended).
func Buffered(f Observer, size int) (obs Observer, stop func() (dropped int64)) {
	if size < 1 {
		size = 1
	}
	type queued struct {
		ctx context.Context
		ev  Event
	}
	q := make(chan queued, size)
	done := make(chan struct{})
	var drops atomic.Int64
	var mu sync.RWMutex // held for reading while sending, so close never closes under a send
	closed := false
	go func() {
		defer close(done)
		for it := range q {
			f(it.ctx, it.ev)
		}
	}()
	obs = func(ctx context.Context, ev Event) {
		mu.RLock()
		defer mu.RUnlock()
		if closed {
			drops.Add(1)
			return
		}
		select {
		case q <- queued{context.WithoutCancel(ctx), ev}:
		default:
			drops.Add(1)
		}
	}
	var once sync.Once
	return obs, func() int64 {
		once.Do(func() {
			mu.Lock()
			closed = true
			mu.Unlock()
			close(q)
			<-done
		})
		return drops.Load()
	}
}

// appliedBy is the approver whose approval applied the run: the last of ApprovedBy; "" when an
// auto rule let it through.
func (w Who) appliedBy() string {
	if w.AutoApprovedByRule != "" || len(w.ApprovedBy) == 0 {
		return ""
	}
	return w.ApprovedBy[len(w.ApprovedBy)-1]
}

// traceNoteKey is the context key of the traceNote an observer of a run's started event fills.
type traceNoteKey struct{}

// traceNote is where NoteTraceID leaves a run's trace id for the engine to record.
type traceNote struct {
	mu sync.Mutex
	id string
}

func (n *traceNote) get() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.id
}

// NoteTraceID is how an observer tells the engine, while it is told a run's EventStarted, the W3C
// trace id the run's span belongs to (telemetry's tracing does): the engine records it with the
// run (Result.TraceID, RunRecord.TraceID, the run document's trace_id), so a run found in the
// audit log leads to its trace. Called at any other time, it does nothing.
func NoteTraceID(ctx context.Context, id string) {
	if n, ok := ctx.Value(traceNoteKey{}).(*traceNote); ok {
		n.mu.Lock()
		n.id = id
		n.mu.Unlock()
	}
}
