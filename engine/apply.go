package engine

import (
	"context"
	"fmt"

	"github.com/starplan/starplan/store"
)

// Apply applies a pending run: every change it staged, in one atomic step, after checking that
// nothing it read or changed has moved since its dry run. A run whose data moved ends as a
// conflict (Outcome conflict, one diagnostic per moved row) and writes nothing; it cannot be
// applied later. Unknown runs, runs already applied and runs with nothing to apply are
// *RunError values.
func (e *Engine) Apply(ctx context.Context, runID string) (*Result, error) {
	// One apply at a time: two callers applying the same run must not both read it as pending.
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	rec, err := e.Record(runID)
	if err != nil {
		return nil, err
	}
	switch {
	case rec.Applied:
		return nil, &RunError{ID: runID, Problem: fmt.Sprintf("was already applied at %s", rec.AppliedAt.Format("2006-01-02 15:04:05")), Hint: "starplan runs show " + runID}
	case rec.ApplyError != "":
		return nil, &RunError{ID: runID, Problem: "cannot be applied: " + rec.ApplyError, Hint: "run the plan again against the current data"}
	case !rec.Pending || rec.Writes == nil:
		return nil, &RunError{ID: runID, Problem: fmt.Sprintf("has nothing to apply (outcome %s, %d changed rows)", rec.Outcome, rec.Changes.Rows()), Hint: "only accepted runs that change data wait for apply"}
	}
	res := rec.Result()
	if err := e.applyRecord(ctx, rec, res); err != nil {
		return nil, err
	}
	return res, nil
}

// applyRecord writes a run's changes together with its audit record (marked applied) in one
// atomic step. On a conflict it records why and sets res to the conflict outcome.
func (e *Engine) applyRecord(ctx context.Context, rec *RunRecord, res *Result) error {
	at := e.opts.Now()
	rec.Pending, rec.Applied, rec.AppliedAt = false, true, &at
	err := e.st.ApplyPending(ctx, rec.Writes, store.SysDoc{Collection: auditCollection, ID: rec.ID, Value: rec})
	if err == nil {
		res.Pending, res.Applied = false, true
		return nil
	}
	rec.Applied, rec.AppliedAt = false, nil
	ds, ok := conflictDiagnostics(err)
	if !ok {
		rec.Pending = true
		e.audit.add(rec) // still pending: the run stays in the log and can be applied later
		return fmt.Errorf("applying run %s: %w", rec.ID, err)
	}
	rec.ApplyError = err.Error()
	rec.Outcome, rec.Diagnostics = OutcomeConflict, ds
	e.audit.add(rec)
	res.Outcome, res.Diagnostics, res.Pending, res.Applied = OutcomeConflict, ds, false, false
	return nil
}
