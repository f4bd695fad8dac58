package engine

import (
	"context"
	"fmt"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/prompts"
)

// MaxReplans bounds how many times reviewers' rejections of one question's plans ask the model
// again: a question's chain of plans ends after this many replans.
const MaxReplans = 3

// Replan asks model for a new plan after a reviewer rejected run runID, which Ask made: the
// model sees the customer's request, the plan it wrote, and the reviewer's feedback (as recorded
// by Reject). The new plan goes through Ask's loop (repairs included); its runs link to the
// rejected one (ModelCall.ParentRunID) and count the replan (ModelCall.Replan). A run that was
// not rejected, was not accepted (a failed attempt), did not come from a model, or ends a chain
// of MaxReplans is a *RunError: so one question costs at most (MaxReplans+1) × (repairs+1)
// model calls, however many of its runs are rejected.
func (e *Engine) Replan(ctx context.Context, model Model, runID string, req AskRequest) (*Result, error) {
	rec, err := e.Record(runID)
	if err != nil {
		return nil, err
	}
	d, rejected, err := e.Decision(runID)
	if err != nil {
		return nil, err
	}
	switch {
	case !rejected:
		return nil, &RunError{ID: runID, Problem: "was not rejected, so there is no feedback to plan again from", Hint: "reject it with feedback first"}
	case rec.Outcome != OutcomeOK:
		// Only the accepted end of a chain of attempts is replanned: the failed attempts before
		// it were repaired already, and replanning each would multiply the model calls.
		return nil, &RunError{ID: runID, Problem: fmt.Sprintf("ended as %s, an attempt its chain already repaired; only an accepted plan is planned again", rec.Outcome), Hint: "reject the accepted run of the chain"}
	case rec.Model == nil:
		return nil, &RunError{ID: runID, Problem: "did not come from a model (origin " + rec.Origin + "), so there is none to ask again", Hint: "send a new plan instead"}
	case rec.Model.Replan >= MaxReplans:
		return nil, &RunError{ID: runID, Problem: fmt.Sprintf("ends a chain of %d replans, the most one question gets", MaxReplans), Hint: "ask the question again, or write the plan"}
	}
	system, err := e.SystemPrompt()
	if err != nil {
		return nil, err
	}
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: system},
		{Role: llm.RoleUser, Content: prompts.User(rec.Request)},
		{Role: llm.RoleAssistant, Content: clipped(rec.Reply, MaxRepairQuote)},
		{Role: llm.RoleUser, Content: prompts.Rejected(d.Feedback)},
	}
	req.Question, req.Subject = rec.Request, rec.Subject
	// The new plan answers the question of the run's proposer, whoever asked for it again: it
	// is theirs (proposed_by), so four eyes hold across a replan (a reviewer who rejects their
	// own run cannot approve the model's next plan as if someone else had proposed it). A
	// proposer's role is all the name needs: the run is only proposed.
	if rec.ProposedBy != "" {
		req.By = access.Principal{Name: rec.ProposedBy, Role: access.Proposer, Subject: rec.Subject}
	}
	return e.plan(ctx, model, req, msgs, runID, rec.Model.Replan+1)
}
