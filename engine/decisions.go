package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/starplan/starplan/store"
)

// decisionCollection is the store's system collection that holds reviewers' decisions, one
// document per run, keyed by the run id. Plans never see system collections.
const decisionCollection = "decisions"

// MaxFeedback is the most bytes of a rejection's feedback that are kept; the rest is cut.
const MaxFeedback = 8 << 10

// Decision is a reviewer's verdict on a run that was not applied: today only "rejected", with
// the reviewer's feedback (for a replanning model or a person reading the log).
type Decision struct {
	RunID    string `json:"run_id"`
	Decision string `json:"decision"` // DecisionRejected
	Feedback string `json:"feedback"`
	Origin   string `json:"origin"` // where it was decided: "serve:http", "serve:mcp", ...
	// By is who decided (access.Principal.Name).
	By   string    `json:"by,omitempty"`
	Time time.Time `json:"time"`
}

// DecisionRejected is the decision of a run a reviewer refused.
const DecisionRejected = "rejected"

// Reject records that a reviewer rejected a run, with their feedback. A pending run stops being
// pending: its writes are dropped in the same transaction, so no later Apply (from this process
// or the CLI) can apply it; Apply then reports the rejection. Rejecting a run already rejected
// returns the first decision unchanged, with recorded false. An unknown run or one already
// applied is a *RunError.
func (e *Engine) Reject(ctx context.Context, runID, feedback, origin string) (d *Decision, recorded bool, err error) {
	return e.RejectWith(ctx, runID, RejectOptions{Feedback: feedback, Origin: origin})
}

// RejectWith is Reject by opts.By (the local user when zero), whom the decision and the run's
// record name (rejected_by). Which principals may reject which runs is the caller's to check
// (access.Propose for one's own run, access.Approve for any).
func (e *Engine) RejectWith(ctx context.Context, runID string, opts RejectOptions) (d *Decision, recorded bool, err error) {
	feedback, origin, by := opts.Feedback, opts.Origin, orLocal(opts.By)
	// Under the apply lock: a rejection and an apply of the same run must not both succeed.
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	rec, err := e.readRecord(runID) // its last version: the rejection's commit writes the queue first
	if err != nil {
		return nil, false, err
	}
	if d, ok, err := e.Decision(runID); err != nil || ok {
		return d, false, err
	}
	if rec.Applied {
		return nil, false, &RunError{ID: runID, Problem: fmt.Sprintf("was already applied at %s; it cannot be rejected", rec.AppliedAt.Format("2006-01-02 15:04:05")), Hint: "starplan runs show " + runID}
	}
	if len(feedback) > MaxFeedback {
		feedback = clipped(feedback, MaxFeedback)
	}
	d = &Decision{RunID: runID, Decision: DecisionRejected, Feedback: feedback, Origin: origin, By: by.Name, Time: e.opts.Now()}
	rec.RejectedBy = by.Name
	if rec.Pending {
		rec.Pending, rec.Writes = false, nil
		rec.ApplyError = "rejected by the reviewer"
	}
	// The record is written again even when unchanged: its index entry moves to "rejected" in
	// the transaction of the decision.
	err = e.audit.writeWith(d.Time, []link{{doc: recordDoc(rec, true), event: ChainRejected, by: func() string { return by.Name }}}, func(chained []store.SysDoc) error {
		return e.st.PutSysDocs(ctx, append([]store.SysDoc{{Collection: decisionCollection, ID: runID, Value: d}}, chained...)...)
	})
	if err != nil {
		return nil, false, fmt.Errorf("recording the rejection of run %s: %w", runID, err)
	}
	if e.observed() {
		e.emit(ctx, Event{Type: EventRejected, Time: d.Time, RunID: runID, Origin: origin, Outcome: rec.Outcome, State: StateRejected,
			RowsWritten: rec.ChangedRows, Feedback: d.Feedback, By: by.Name})
	}
	return d, true, nil
}

// Decision returns the reviewer's decision on a run, if one was recorded.
func (e *Engine) Decision(runID string) (*Decision, bool, error) {
	var d Decision
	ok, err := e.st.GetSys(decisionCollection, runID, &d)
	if err != nil || !ok {
		return nil, false, err
	}
	return &d, true, nil
}

// Decisions returns every recorded decision, by run id.
func (e *Engine) Decisions() (map[string]*Decision, error) {
	recs, err := e.st.ListSys(decisionCollection)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Decision, len(recs))
	for _, raw := range recs {
		var d Decision
		if err := json.Unmarshal(raw.JSON, &d); err != nil {
			return nil, fmt.Errorf("decision %s is unreadable: %w", raw.ID, err)
		}
		out[d.RunID] = &d
	}
	return out, nil
}
