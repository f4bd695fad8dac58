package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
//
// Rejections commit in groups (issue 32: one commit, and one disk sync, per rejection made
// every decision of a busy server wait in line for the apply lock): a rejection queues itself,
// then takes the apply lock; whoever holds it takes every rejection queued, checks each in
// turn against the log as the earlier ones leave it, and writes them all in one transaction,
// answering none before that commit (its sync) is done. So each rejection is decided exactly
// as it would be alone, in the order they were taken: a second rejection of a run in the same
// group waits for the next group, where it finds the first's decision. A commit that fails
// fails every rejection of its group and writes none of them.
func (e *Engine) RejectWith(ctx context.Context, runID string, opts RejectOptions) (d *Decision, recorded bool, err error) {
	r := &rejection{ctx: ctx, runID: runID, opts: opts}
	e.rejections.mu.Lock()
	e.rejections.queue = append(e.rejections.queue, r)
	e.rejections.mu.Unlock()
	// Under the apply lock: a rejection and an apply of the same run must not both succeed.
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	for !r.done { // taken by an earlier holder of the lock, or left for the next group
		if !e.rejectionQueued(r) {
			// Taken by a holder that never answered it: it panicked (a server goes on).
			return nil, false, fmt.Errorf("rejecting run %s: the rejection was taken for a commit that stopped with a panic; nothing was recorded by it, try again", runID)
		}
		e.rejectQueuedLocked()
	}
	return r.d, r.recorded, r.err
}

// rejectionQueued reports whether r waits in the queue, not taken for a group yet.
func (e *Engine) rejectionQueued(r *rejection) bool {
	e.rejections.mu.Lock()
	defer e.rejections.mu.Unlock()
	return slices.Contains(e.rejections.queue, r)
}

// rejection is a RejectWith waiting in the engine's queue (Engine.rejections). Its answer is
// set, and done, under the apply lock.
type rejection struct {
	ctx   context.Context
	runID string
	opts  RejectOptions
	rec   *RunRecord // the run's record as the rejection writes it (rejectCheck)
	by    string
	// wasPending: rejectCheck read the run pending (decidedElsewhere); tries: the times its
	// group was found decided elsewhere
	wasPending bool
	tries      int

	done     bool
	d        *Decision
	recorded bool
	err      error
}

func (r *rejection) answer(d *Decision, recorded bool, err error) {
	r.d, r.recorded, r.err, r.done = d, recorded, err, true
}

// rejectQueuedLocked decides every queued rejection: those that need a commit in one group
// (commitRejections). The caller holds applyMu.
func (e *Engine) rejectQueuedLocked() {
	e.commitRejections(e.takeRejectionsLocked(""))
}

// takeRejectionsLocked takes the queued rejections, answers those that write nothing and
// returns the others, each checked as a rejection alone is (rejectCheck), for one commit. A
// rejection of a run already taken, or of run except, stays queued, for the next group. The
// caller holds applyMu.
func (e *Engine) takeRejectionsLocked(except string) []*rejection {
	e.rejections.mu.Lock()
	queued := e.rejections.queue
	e.rejections.queue = nil
	e.rejections.mu.Unlock()
	var group, later []*rejection
	taken := map[string]bool{}
	if except != "" {
		taken[except] = true
	}
	for _, r := range queued {
		if taken[r.runID] {
			later = append(later, r)
			continue
		}
		if e.rejectCheck(r) {
			group = append(group, r)
			taken[r.runID] = true
		}
	}
	e.requeueRejections(later)
	return group
}

// rejectCheck is a rejection's checks before its commit: it answers r and returns false when
// the rejection writes nothing (an unknown run, one applied, one rejected already); otherwise
// it makes r's decision and record and returns true. The caller holds applyMu.
func (e *Engine) rejectCheck(r *rejection) bool {
	if err := r.ctx.Err(); err != nil {
		r.answer(nil, false, err)
		return false
	}
	runID, feedback, by := r.runID, r.opts.Feedback, orLocal(r.opts.By)
	rec, err := e.decisionRecord(runID) // its last version: the rejection's commit writes the queue first
	if err != nil {
		r.answer(nil, false, err)
		return false
	}
	if d, ok, err := e.Decision(runID); err != nil || ok {
		r.answer(d, false, err)
		return false
	}
	if rec.Applied {
		r.answer(nil, false, &RunError{ID: runID, Problem: fmt.Sprintf("was already applied at %s; it cannot be rejected", rec.AppliedAt.Format("2006-01-02 15:04:05")), Hint: "starplan runs show " + runID})
		return false
	}
	if len(feedback) > MaxFeedback {
		feedback = clipped(feedback, MaxFeedback)
	}
	r.d = &Decision{RunID: runID, Decision: DecisionRejected, Feedback: feedback, Origin: r.opts.Origin, By: by.Name, Time: e.opts.Now()}
	rec.RejectedBy = by.Name
	wasPending := rec.Pending
	if rec.Pending {
		rec.Pending, rec.Writes = false, nil
		rec.ApplyError = "rejected by the reviewer"
	}
	r.rec, r.by, r.wasPending = rec, by.Name, wasPending
	return true
}

// commitRejections writes the decisions and records of group, rejections checked by
// rejectCheck, in one transaction, and answers each: all recorded, or all failed with the
// commit's error. The caller holds applyMu.
func (e *Engine) commitRejections(group []*rejection) {
	if len(group) == 0 {
		return
	}
	links, decisions := rejectionDocs(group)
	// The commit is the group's, not one caller's to cancel: each was checked as it was taken.
	ctx := context.WithoutCancel(group[0].ctx)
	err := e.audit.writeWith(group[len(group)-1].d.Time, links, func(chained []store.SysDoc) error {
		for _, r := range group {
			if err := e.decidedElsewhere(r.runID, r.wasPending, r.rec.chainRead); err != nil {
				return err
			}
		}
		return e.st.PutSysDocs(ctx, append(decisions, chained...)...)
	})
	tries := 0
	for _, r := range group {
		tries = max(tries, r.tries)
	}
	if errors.Is(err, errDecidedElsewhere) && tries < maxDecideTries {
		// Another server settled a run of the group after its checks: the group goes back to
		// the front of the queue, to be checked again, as if taken after that decision (a few
		// times: a record this engine still queues may keep differing from the store's). The
		// queue is written first (a commit, in this rare case only): a record of it that the
		// other's decision made stale is dropped there (chain.withoutStaleRewrites), so the
		// next check reads the run's record as the store holds it, not that one again.
		if ferr := e.audit.flush(); ferr != nil {
			e.answerRejections(group, ferr)
			return
		}
		for _, r := range group {
			r.tries++
		}
		e.requeueRejections(group)
		return
	}
	if errors.Is(err, errDecidedElsewhere) {
		e.answerLostRejections(group)
		return
	}
	e.answerRejections(group, err)
}

// answerLostRejections answers a group that lost to other servers' writes maxDecideTries times
// more. Only a run another server wrote since its check is refused for it, and as its check
// answers now: a run applied meanwhile (on the last try) answers already applied, one rejected
// there that decision, one that only changed errcode.RunChanged (changedElsewhere). The others,
// whose runs nobody touched, lost for a neighbour's: they go back to the front of the queue as
// a group of their own, checked and tried afresh (rvlate: they were refused, told their run
// had changed on another server). When no run is found changed (it changed back), the whole
// group is refused as it lost. The caller holds applyMu.
func (e *Engine) answerLostRejections(group []*rejection) {
	if ferr := e.audit.flush(); ferr != nil { // as before a try: read the runs as stored
		e.answerRejections(group, ferr)
		return
	}
	var untouched, changed []*rejection
	for _, r := range group {
		if len(group) > 1 && e.decidedElsewhere(r.runID, r.wasPending, r.rec.chainRead) == nil {
			untouched = append(untouched, r)
		} else {
			changed = append(changed, r)
		}
	}
	if len(changed) == 0 {
		e.answerRejections(group, errDecidedElsewhere)
		return
	}
	for _, r := range changed {
		tries := r.tries
		if e.rejectCheck(r) {
			r.answer(nil, false, changedElsewhere(r.runID, tries+1))
		}
	}
	for _, r := range untouched {
		r.tries = 0 // each such requeue leaves out a run: the group ends in as many
	}
	e.requeueRejections(untouched)
}

// requeueRejections puts rs back at the front of the rejection queue, in their order, to be
// taken (and checked) before the rejections queued after them. rs is not kept: a group is a
// slice of the queue it was taken from, which appending to it would write over.
func (e *Engine) requeueRejections(rs []*rejection) {
	if len(rs) == 0 {
		return
	}
	e.rejections.mu.Lock()
	e.rejections.queue = slices.Concat(rs, e.rejections.queue)
	e.rejections.mu.Unlock()
}

// maxDecideTries is how many times a rejection group is checked again after another server
// decided one of its runs (errDecidedElsewhere) before its rejections fail with that error, and
// how many times an apply or an approval is decided again (ApplyWith) before it answers
// changedElsewhere.
const maxDecideTries = 3

// errDecidedElsewhere is a decision's commit refused because another engine on a store that
// several share decided the run after this one checked it.
var errDecidedElsewhere = errors.New("the run was decided by another server meanwhile")

// sharedStore reports whether other processes may decide runs on the store too (servers that
// share a PostgreSQL database: store.SysSerializer). Their decisions are ordered by the lock
// on the audit log's chain, which every decision's commit holds (chain.write), not by applyMu.
func (e *Engine) sharedStore() bool {
	_, ok := e.st.(store.SysSerializer)
	return ok
}

// decidedElsewhere is errDecidedElsewhere when, on a shared store, run id was rejected (a
// decision is stored) or applied since this engine read it, or, when it read the run pending
// (wasPending), settled in any way, or its record is no longer the one this engine read (read:
// the hash of its bytes, RunRecord.chainRead; another server's approval, conflict or failed
// apply; the decision's entry would chain a read that is not the run's last, and its record
// drop the other's): another server's decision, committed before this one's commit took the
// chain's lock. It runs inside a decision's chained write, under that lock, so
// no other server decides between this read and the commit (issue 32 review: an apply on one
// server and a rejection on another of the same run both succeeded). nil on a store one
// process holds alone, and for a run the store holds nothing of yet: this engine's own, still
// queued (written in this very commit), or one decided as it runs (read empty: it read no
// record; nor for a record read from this engine's queue, which this commit writes first). A
// run whose record the decision read (read) that is neither stored nor queued here was pruned
// by another server since: errDecidedElsewhere too, so that the decision does not
// write its record back (the prune's checkpoint counts it removed: runs verify and db check
// would report the log damaged for good) and finds the run gone when checked again.
func (e *Engine) decidedElsewhere(id string, wasPending bool, read string) error {
	if !e.sharedStore() {
		return nil
	}
	if _, ok, err := e.Decision(id); err != nil || ok {
		if err != nil {
			return err
		}
		return errDecidedElsewhere
	}
	stored, err := e.storedRecordFor(id, true)
	var re *RunError
	if errors.As(err, &re) {
		if read != "" && !e.queuedHere(id) {
			return errDecidedElsewhere // pruned by another server since it was read
		}
		return nil // not in the store: this engine's own, still queued
	}
	if err != nil {
		return err
	}
	if stored.Applied || (wasPending && !stored.Pending) {
		return errDecidedElsewhere
	}
	if read != "" && stored.chainRead != read && !e.queuedHere(id) {
		return errDecidedElsewhere
	}
	return nil
}

// queuedHere reports whether this engine's audit log holds a record of run id not yet in the
// store (the batch being written, or the queue: auditLog.tail).
func (e *Engine) queuedHere(id string) bool {
	for _, q := range e.audit.tail() {
		if q.rec.ID == id {
			return true
		}
	}
	return false
}

// rejectionDocs are the chained records and the decisions that group's commit writes.
func rejectionDocs(group []*rejection) (links []link, decisions []store.SysDoc) {
	for _, r := range group {
		decisions = append(decisions, store.SysDoc{Collection: decisionCollection, ID: r.runID, Value: r.d})
		// The record is written again even when unchanged: its index entry moves to
		// "rejected" in the transaction of the decision.
		by := r.by
		links = append(links, link{doc: recordDoc(r.rec, true), event: ChainRejected, by: func() string { return by }, read: r.rec.chainRead})
	}
	return links, decisions
}

// answerRejections answers each rejection of a group whose commit returned err.
func (e *Engine) answerRejections(group []*rejection, err error) {
	for _, r := range group {
		if errors.Is(err, errDecidedElsewhere) {
			// Checked again maxDecideTries times, and each time another server had written a
			// run of the group since: a refusal the caller can act on, as a lost apply's is.
			r.answer(nil, false, changedElsewhere(r.runID, r.tries+1))
			continue
		}
		if err != nil {
			r.answer(nil, false, fmt.Errorf("recording the rejection of run %s: %w", r.runID, err))
			continue
		}
		if e.observed() {
			e.emit(r.ctx, Event{Type: EventRejected, Time: r.d.Time, RunID: r.runID, Origin: r.opts.Origin, Outcome: r.rec.Outcome, State: StateRejected,
				RowsWritten: r.rec.ChangedRows, Feedback: r.d.Feedback, By: r.by})
		}
		r.answer(r.d, true, nil)
	}
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
