package store

import (
	"context"
	"time"
)

// An apply's steps, timed for telemetry. ApplyPending of either backend does three things: it
// checks that nothing the pending change wrote or read has moved (the conflict check: the
// pending change checked against the schemas, the locks it waits for, every row and predicate
// read again), runs verify on the change set (the domain's rules against the committed rows),
// and commits (the writes, the extra documents, the sync). A caller that wants to know where an
// apply's time went puts an *ApplySteps in ApplyPending's context (WithApplySteps); the backend
// appends each step as it ends, in order. A step may repeat: bbolt checks once under its read
// lock before verify and again under its write lock after; PostgreSQL runs its transaction again
// after a deadlock. Without one in the context the backend times nothing.

// The steps of an apply (ApplyStep.Step).
const (
	StepCheck  = "check"  // the conflict check
	StepVerify = "verify" // verify, the domain's rules on the change set
	StepCommit = "commit" // the writes and their commit
)

// ApplyStep is one step of an apply: which, when it began and ended (time.Now's, so with the
// monotonic clock), and the error that ended the apply there (a *ConflictError for a check that
// found one, verify's refusal, a failure), nil when the step passed.
type ApplyStep struct {
	Step       string
	Start, End time.Time
	Err        error
}

// ApplySteps collects the steps of one ApplyPending call. It is not safe for concurrent use: one
// apply fills it, and its caller reads it after ApplyPending returns.
type ApplySteps struct {
	Steps []ApplyStep
}

type applyStepsKey struct{}

// WithApplySteps returns ctx carrying s, for ApplyPending to fill.
func WithApplySteps(ctx context.Context, s *ApplySteps) context.Context {
	return context.WithValue(ctx, applyStepsKey{}, s)
}

// ApplyStepsOf returns the ApplySteps in ctx, nil when there is none (its methods are then
// no-ops, and Begin does not read the clock).
func ApplyStepsOf(ctx context.Context) *ApplySteps {
	s, _ := ctx.Value(applyStepsKey{}).(*ApplySteps)
	return s
}

// Begin starts timing a step: the zero time when s is nil.
func (s *ApplySteps) Begin() time.Time {
	if s == nil {
		return time.Time{}
	}
	return time.Now()
}

// Done records step, begun at start (Begin), as ended now with err.
func (s *ApplySteps) Done(step string, start time.Time, err error) {
	if s == nil {
		return
	}
	s.Steps = append(s.Steps, ApplyStep{Step: step, Start: start, End: time.Now(), Err: err})
}
