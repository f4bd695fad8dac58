package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Apply applies a pending run: every change it staged, in one atomic step, after checking that
// nothing it read or changed has moved since its dry run. A run whose data moved ends as a
// conflict (Outcome conflict, one diagnostic per moved row) and writes nothing; it cannot be
// applied later. Unknown runs, runs already applied and runs with nothing to apply are
// *RunError values; a run that already ended in a conflict is one too, carrying the conflict's
// Result, so every transport answers each apply of it as the first (RunError.Result).
func (e *Engine) Apply(ctx context.Context, runID string) (*Result, error) {
	return e.ApplyAs(ctx, runID, "")
}

// ApplyAs is Apply from origin ("apply", "serve:http", ...), which the run's record keeps with
// the apply or the conflict it found, by the local user.
func (e *Engine) ApplyAs(ctx context.Context, runID, origin string) (*Result, error) {
	return e.ApplyWith(ctx, runID, ApplyOptions{Origin: origin})
}

// ApplyWith is Apply by opts.By, under the domain's approval rules (contracts.Approval): the
// run is applied when By's approval completes those it needs, or when an auto rule lets the
// change set being committed through (the result names it); an approval that does not complete
// them is recorded and the result still pending (Result.ApprovedBy, ApprovalsNeeded). A refused
// apply is an *ApprovalError (errcode.ApprovalRequired, errcode.RunExpired) and changes nothing.
// On a store servers share, an apply whose run another server kept writing meanwhile (their
// approvals) is a *RunError of errcode.RunChanged and changes nothing (changedElsewhere).
func (e *Engine) ApplyWith(ctx context.Context, runID string, opts ApplyOptions) (*Result, error) {
	origin, by := opts.Origin, orLocal(opts.By)
	// One apply at a time: two callers applying the same run must not both read it as pending.
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	for tries := 0; ; tries++ {
		rec, err := e.decisionRecord(runID) // its last version: the apply's commit writes the queue first
		if err != nil {
			return nil, err
		}
		if err := settled(rec); err != nil {
			return nil, err
		}
		res := rec.Result()
		// rec is this apply's own copy, dropped on an error; what an error queued (applyRecord:
		// a failure of starplan's own) is a snapshot (auditLog.add) that keeps who tried.
		rec.ApplyOrigin, _ = clipJSON(origin, maxRecordName)
		err = e.decideApply(ctx, rec, res, by)
		if !errors.Is(err, errDecidedElsewhere) {
			if err != nil {
				return nil, err
			}
			return res, nil
		}
		// Another server wrote the run's record after this apply read it, and left it pending
		// (an approval; its own failed apply): nothing of this apply was written. It decides
		// again on the run as stored now, as an apply made then would (the other's approval
		// may complete those the run needs with this one, or make this one a duplicate), a few
		// times (maxDecideTries, as a rejection group): under a stream of such writes it
		// answers that the run keeps changing, a refusal the caller can repeat. The queue is
		// written first, as for a rejection group: a record of it that the other's write made
		// stale is dropped there, so the next read is the store's.
		if tries >= maxDecideTries {
			return nil, changedElsewhere(runID, tries+1)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := e.audit.flush(); err != nil {
			return nil, err
		}
	}
}

// changedElsewhere is the refusal of a decision on run id that found, at each of its tries,
// that another server had written the run's record since it read it (errDecidedElsewhere),
// leaving the run undecided: nothing of the decision is recorded, and the caller may look at
// the run again and repeat it (errcode.RunChanged).
func changedElsewhere(id string, tries int) *RunError {
	return &RunError{ID: id, Code: errcode.RunChanged,
		Problem: fmt.Sprintf("changed on another server while this decision was made (%d tries); nothing of it was recorded", tries),
		Hint:    "look at the run again (starplan runs show " + id + ") and repeat the decision if it still stands"}
}

// settled is the error of applying rec, a run's record as read from the store, when the run can
// no longer be applied: already applied, ended in a conflict or failed, or with nothing to
// apply; nil while it waits for apply.
func settled(rec *RunRecord) error {
	switch {
	case rec.Applied:
		return &RunError{ID: rec.ID, Problem: fmt.Sprintf("was already applied at %s", rec.AppliedAt.Format("2006-01-02 15:04:05")), Hint: "starplan runs show " + rec.ID}
	case rec.ApplyError != "" && rec.Outcome == OutcomeConflict:
		return &RunError{ID: rec.ID, Problem: "cannot be applied: " + rec.ApplyError, Hint: "run the plan again against the current data",
			Result: rec.Result()}
	case rec.ApplyError != "":
		return &RunError{ID: rec.ID, Problem: "cannot be applied: " + rec.ApplyError, Hint: "run the plan again against the current data"}
	case !rec.Pending || rec.Writes == nil:
		return &RunError{ID: rec.ID, Problem: fmt.Sprintf("has nothing to apply (outcome %s, %s)", rec.Outcome, changedRows(rec.Changes.Rows())), Hint: "only accepted runs that change data wait for apply"}
	}
	return nil
}

// settledElsewhere is settled of the run's record as the store holds it now, read after an
// apply of it wrote nothing: another engine on the same store (a second server on one
// PostgreSQL database) may have applied it, or found its conflict, meanwhile; its record must
// then stay as it is. nil when the store holds no record of the run (a run applied right after
// its dry run), or one still pending, or none that reads.
//
// Reading after the failed apply is enough: an apply writes the rows and the run's record in
// one transaction, and finds a conflict only against data committed before its own check. So
// when this engine's apply conflicted because the other one applied the run, that apply and
// its record are committed before this read; and when the data moved for another reason, the
// other engine's apply of the run, checking after it, conflicts too (versions only grow) and
// writes the same conflict.
//
// The store is read without writing this engine's queue first (Record would): what the queue
// holds of the run is this engine's own, never a settled version (the caller holds applyMu and
// found the run pending), so it cannot tell whether another engine settled it; and a commit
// here, a disk sync under applyMu, made every conflicting apply hold up every other apply and
// rejection (issue 32). Nor is it read while the queue still holds the run's first record:
// nothing of the run is in the store for another engine to have applied, and a miss would
// verify the whole audit log against its digest (bolt's GetSys, once per open).
//
// A run whose record this engine read (read: rec.chainRead), neither in the store nor queued
// here, was pruned by another server since (prune --pending): its *RunError, so that the apply
// neither writes nor queues the record again (the prune's checkpoint counts it removed).
func (e *Engine) settledElsewhere(id string, read bool) error {
	if e.audit.unwritten(id) {
		return nil
	}
	stored, err := e.storedRecord(id)
	var re *RunError
	if errors.As(err, &re) && read && e.sharedStore() && !e.queuedHere(id) {
		re.Problem += " (pruned meanwhile)"
		return re
	}
	if err != nil {
		return nil
	}
	return settled(stored)
}

// applyRecord writes a run's changes together with its audit record (marked applied) in one
// atomic step. On a conflict it records why and sets res to the conflict outcome.
//
// The policy is checked again inside the apply, against the committed rows the changes join: a
// dry run that was valid against the data of its moment is refused when the data moved so that
// its changes would now break a rule (two sales that each continue the ledger from the same last
// row, a balance the plan wrote without reading the ledger).
//
// by is who applies; with auto, the domain's auto rules must let the change set through (in
// verify, on the changes being committed), or the apply writes nothing and returns an
// *autoRefusal with the run as it was.
//
// approvals are the run's approvals with this one: the record's ApprovedBy when the apply
// commits or finds a conflict. An apply that writes nothing for another reason leaves the
// approvals as they were, so that the approver can apply the run again.
func (e *Engine) applyRecord(ctx context.Context, rec *RunRecord, res *Result, by access.Principal, auto bool, approvals []string) error {
	at := e.opts.Now()
	began := time.Now()
	approvedBefore := rec.ApprovedBy
	rec.Pending, rec.Applied, rec.AppliedAt, rec.ApprovedBy = false, true, &at, approvals
	globals := map[string]any{contracts.AnswerGlobal: rec.AnswerText, contracts.StatusGlobal: rec.Status}
	verify := func(cs table.ChangeSet, c store.Committed) error {
		ds, err := e.policy.Check(contracts.Input{Globals: globals, Changes: cs, Committed: c, Deadline: time.Now().Add(invariantsTime), Subject: rec.Subject})
		if err != nil {
			return fmt.Errorf("checking the policy at apply: %w", err)
		}
		if len(ds) > 0 {
			return &policyError{ds}
		}
		if auto {
			rule, err := e.autoCheck(cs)
			if err != nil {
				return err
			}
			rec.AutoApprovedByRule = rule
		}
		return nil
	}
	// A settled run's writes are dead weight in the log: the record written with the data has
	// none, and neither has the record of a conflict (it can never be applied).
	writes, needed := rec.Writes, rec.ApprovalsNeeded
	rec.Writes = nil
	if rec.ApprovalsNeeded == 1 {
		rec.ApprovalsNeeded = 0 // shown while awaiting, or when more than one was needed
	}
	event, who := ChainApproved, func() string { return by.Name }
	if auto {
		event, who = ChainAutoApproved, func() string { return rec.AutoApprovedByRule }
	}
	var steps store.ApplySteps // the store's steps, timed for the observers (telemetry's spans)
	stepsCtx := func() context.Context {
		steps.Steps = steps.Steps[:0] // the last attempt's (see chain.write)
		if e.observed() {
			return store.WithApplySteps(ctx, &steps)
		}
		return ctx
	}
	// A run whose data moved is answered before the commit's turn: the store's check finds the
	// conflict its commit would (under applyMu no other apply commits meanwhile), and a
	// conflict writes nothing, so it needs neither the audit writer nor a commit. On a busy
	// ledger most applies conflict, and each waited for the commits under way (issue 32).
	err := e.conflicts(stepsCtx(), writes)
	if err == nil {
		// The rejections waiting for the apply lock ride in this apply's commit (one sync for
		// all: issue 32), each checked first as it would be alone; they concern other runs, so
		// they and the apply are decided as in either order one at a time. When the apply
		// writes nothing, they commit on their own.
		// On a store several servers share, rejections do not ride: one another server decided
		// meanwhile would fail the apply with it (decidedElsewhere).
		var rejections []*rejection
		if !e.sharedStore() {
			rejections = e.takeRejectionsLocked(rec.ID)
		}
		links, decisions := rejectionDocs(rejections)
		links = append([]link{{doc: recordDoc(rec, false), event: event, by: who, read: rec.chainRead}}, links...)
		err = e.audit.writeWith(at, links, func(docs []store.SysDoc) error {
			// A rejection on another server, committed before this commit took the chain's
			// lock: the run is not applied (settledElsewhere answers with its record below).
			if err := e.decidedElsewhere(rec.ID, false, rec.chainRead); err != nil {
				return err
			}
			return e.st.ApplyPending(stepsCtx(), writes, verify, append(decisions, docs...)...)
		})
		if err == nil {
			e.answerRejections(rejections, nil)
		} else {
			e.commitRejections(rejections)
		}
	}
	if err == nil {
		res.Pending, res.Applied = false, true
		res.Who = rec.Who
		if e.observed() {
			dg, _ := Digest(rec.Changes)
			e.emit(ctx, Event{Type: EventApplied, RunID: rec.ID, Origin: rec.ApplyOrigin, Outcome: res.Outcome, State: StateApplied,
				Duration: time.Since(began), RowsWritten: rec.ChangedRows, Digest: dg, By: rec.appliedBy(), Rule: rec.AutoApprovedByRule,
				ApplySteps: applySteps(began, steps.Steps)})
		}
		return nil
	}
	rec.Applied, rec.AppliedAt, rec.AutoApprovedByRule, rec.ApprovalsNeeded = false, nil, "", needed
	var refused *autoRefusal
	if errors.As(err, &refused) {
		rec.Pending, rec.Writes, rec.ApprovedBy = true, writes, approvedBefore
		return refused
	}
	ds, ok := applyDiagnostics(err)
	if serr := e.settledElsewhere(rec.ID, rec.chainRead != ""); serr != nil {
		// Applied (or found in conflict) by another engine on the store while this one tried:
		// its record stands, and this apply answers as any later one would.
		rec.Pending, rec.Writes, rec.ApprovedBy = true, writes, approvedBefore
		return serr
	}
	if errors.Is(err, errDecidedElsewhere) && rec.chainRead != "" {
		// Another engine wrote the run's record since it was read and left it pending (its
		// approval, its failed apply): not a failure of this apply, which wrote nothing and
		// queues nothing (a record of it would go over the other's); ApplyWith decides again.
		rec.Pending, rec.Writes, rec.ApprovedBy = true, writes, approvedBefore
		return err
	}
	if !ok {
		rec.Pending, rec.Writes, rec.ApprovedBy = true, writes, approvedBefore
		rec.chainEvent, rec.chainBy = ChainRecorded, by.Name
		e.audit.add(rec) // still pending: the run stays in the log and can be applied later
		err = fmt.Errorf("applying run %s: %w", rec.ID, err)
		if e.observed() {
			e.emit(ctx, Event{Type: EventFailed, RunID: rec.ID, Origin: rec.ApplyOrigin, Outcome: rec.Outcome, State: StatePending,
				Duration: time.Since(began), Message: err.Error(), Err: err, ApplySteps: applySteps(began, steps.Steps)})
		}
		return err
	}
	if len(e.reading) > 0 {
		for i := range ds {
			if ds[i].Code == CodeConflict {
				ds[i].Hint += fmt.Sprintf("; the run's reads include those of the domain's rules that read the data (%s), so a run whose plan read nothing that moved can conflict", strings.Join(e.reading, ", "))
			}
		}
	}
	rec.ApplyError, rec.ConflictAt = err.Error(), &at
	rec.Outcome, rec.Diagnostics = OutcomeConflict, ds
	rec.bound() // one diagnostic per moved row, and an error that may list them
	rec.chainEvent, rec.chainBy = ChainConflict, by.Name
	e.audit.add(rec)
	res.Outcome, res.Pending, res.Applied = OutcomeConflict, false, false
	var cut bool
	if res.Diagnostics, cut = capDiagnostics(ds); cut {
		res.Truncated = addCut(res.Truncated, "diagnostics")
	}
	if e.observed() {
		e.emit(ctx, Event{Type: EventConflict, RunID: rec.ID, Origin: rec.ApplyOrigin, Outcome: OutcomeConflict, State: StateConflict,
			Duration: time.Since(began), RowsWritten: rec.ChangedRows, Codes: codes(ds), Message: firstMessage(ds), ApplySteps: applySteps(began, steps.Steps)})
	}
	return nil
}

// conflicts is the store's conflict check of writes before an apply commits
// (store.ConflictChecker): the *ConflictError the apply would find, or nil (nothing found,
// another error, or a store that cannot check apart: the apply checks everything itself).
func (e *Engine) conflicts(ctx context.Context, writes *store.Pending) error {
	cc, ok := e.st.(store.ConflictChecker)
	if !ok {
		return nil
	}
	if err := cc.Conflicts(ctx, writes); errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// policyError is a policy violation found inside an apply: the run's changes break a rule against
// the data as committed now. The diagnostics are the rules' own, at the apply stage.
type policyError struct{ ds diag.List }

func (e *policyError) Error() string {
	return fmt.Sprintf("apply refused: against the data as it is now, %s; nothing was written", e.ds[0].Message)
}

// applyDiagnostics describes why an apply wrote nothing, when the reason is the data: a row or a
// read that moved (CodeConflict, one per moved row) or a rule the changes would now break (the
// rule's code). ok is false for failures of starplan itself.
func applyDiagnostics(err error) (diag.List, bool) {
	if ds, ok := conflictDiagnostics(err); ok {
		return ds, true
	}
	var pe *policyError
	if !errors.As(err, &pe) {
		return nil, false
	}
	ds := make(diag.List, len(pe.ds))
	for i, d := range pe.ds {
		d.Stage = diag.StageApply
		d.Message = "against the data as it is now (it changed since the dry run): " + d.Message + "; nothing was written"
		d.Hint = "run the plan again against the current data; " + d.Hint
		ds[i] = d
	}
	return ds, true
}

// changedRows is "1 changed row" or "n changed rows".
func changedRows(n int) string {
	if n == 1 {
		return "1 changed row"
	}
	return fmt.Sprintf("%d changed rows", n)
}
