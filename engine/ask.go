package engine

import (
	"context"
	"fmt"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/prompts"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
)

// DefaultMaxRepairs is how many times Ask sends a failed plan's diagnostics back to the model
// for a corrected plan.
const DefaultMaxRepairs = 2

// CodeNoValidPlan is the diagnostic Ask adds when every attempt failed.
const CodeNoValidPlan = "no-valid-plan"

// Model is what Ask needs from a model: one chat completion. *llm.Client implements it.
type Model interface {
	Complete(ctx context.Context, msgs []llm.Message) (llm.Reply, error)
}

// AskRequest is one question for Ask.
type AskRequest struct {
	// Question is the customer's request, in their words.
	Question string
	// Apply applies an accepted plan's changes at once instead of keeping the run pending.
	Apply bool
	// MaxRepairs bounds the corrections asked for after a failed attempt; 0 means
	// DefaultMaxRepairs and a negative value means none.
	MaxRepairs int
	// Limits override the engine's default limits where non-zero.
	Limits sandbox.Limits
	// Waiting, when set, is called before each model call with the attempt's number and the
	// most there can be, and done is called when the call has returned (a progress display).
	Waiting func(attempt, most int) (done func())
	// By is who asks, recorded as each attempt's proposed_by (Request.By).
	By access.Principal
	// Subject is who the question is asked for (Request.Subject).
	Subject string
}

// ModelError is a failure to get a reply from the model (unreachable, refused, timed out,
// malformed). The CLI reports it with exit code 6. Its text quotes what the model's endpoint
// answered, cut like a diagnostic's message (MaxMessage): an endpoint that answers a megabyte of
// error text does not make every message, response and event that carries it a megabyte.
type ModelError struct {
	Attempt int
	Err     error
}

func (e *ModelError) Error() string {
	return clipped(fmt.Sprintf("model call %d failed: %v", e.Attempt, e.Err), MaxMessage)
}

func (e *ModelError) Unwrap() error { return e.Err }

// Ask plans with a model: it sends the code-as-plan prompt and the question, runs the reply,
// and when the run fails (extraction, check, runtime, limits or contract) sends the
// diagnostics back for a corrected plan, at most MaxRepairs times. Every attempt runs on its own
// fresh staged view and is recorded in the audit log; nothing reaches the store unless the
// accepted attempt is applied. The result is the last attempt's, with every attempt listed.
func (e *Engine) Ask(ctx context.Context, model Model, req AskRequest) (*Result, error) {
	system, err := e.SystemPrompt()
	if err != nil {
		return nil, err
	}
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: system},
		{Role: llm.RoleUser, Content: prompts.User(req.Question)},
	}
	return e.plan(ctx, model, req, msgs, "", 0)
}

// plan asks model for a plan from msgs, runs each reply, and sends failures back for a repair,
// at most req.MaxRepairs times. parent is the run the first attempt follows (a rejected run, for
// a replan) and replan how many rejections led here.
func (e *Engine) plan(ctx context.Context, model Model, req AskRequest, msgs []llm.Message, parent string, replan int) (*Result, error) {
	// A subject the asker may not act for is refused before the model is asked.
	if _, err := subjectOf(Request{By: req.By, Subject: req.Subject}); err != nil {
		return nil, err
	}
	repairs := req.MaxRepairs
	if repairs == 0 {
		repairs = DefaultMaxRepairs
	}
	var attempts []Attempt
	var res *Result
	for n := 1; ; n++ {
		done := func() {}
		if req.Waiting != nil {
			done = req.Waiting(n, max(repairs, 0)+1)
		}
		reply, err := model.Complete(ctx, msgs)
		done()
		if err != nil {
			return nil, &ModelError{Attempt: n, Err: err}
		}
		call := &ModelCall{
			Model: reply.Model, Attempt: n, PromptTokens: reply.PromptTokens, CompletionTokens: reply.CompletionTokens,
			LatencyMS: float64(reply.Latency.Microseconds()) / 1000, ParentRunID: parent, Replan: replan,
		}
		res, err = e.Run(ctx, Request{Reply: reply.Content, UserRequest: req.Question, Limits: req.Limits, Apply: req.Apply, Origin: "ask", Model: call, By: req.By, Subject: req.Subject})
		if err != nil {
			return nil, err
		}
		attempts = append(attempts, Attempt{
			RunID: res.RunID, Outcome: res.Outcome, Diagnostics: res.Diagnostics, Model: reply.Model,
			PromptTokens: reply.PromptTokens, CompletionTokens: reply.CompletionTokens, LatencyMS: call.LatencyMS,
		})
		if !repairable(res.Outcome) || n > repairs {
			break
		}
		parent = res.RunID
		quoted := clipped(reply.Content, MaxRepairQuote) // the model need not read a flood back
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, Content: quoted},
			llm.Message{Role: llm.RoleUser, Content: prompts.Repair(clipped(res.Program, MaxRepairQuote/2), res.Diagnostics, string(res.Outcome))},
		)
	}
	res.Attempts = attempts
	if repairable(res.Outcome) {
		res.Diagnostics = append(res.Diagnostics, diag.Diagnostic{
			Stage: diag.StageModel, Code: CodeNoValidPlan,
			Message: noValidPlan(len(attempts), res.Outcome),
			Hint:    "rephrase the question, raise --max-repairs, or try a stronger model (--model)",
		})
	}
	return res, nil
}

// repairable reports whether a failed run is worth sending back to the model.
func repairable(o Outcome) bool {
	switch o {
	case OutcomeCheckFailed, OutcomeRuntimeError, OutcomeLimitExceeded, OutcomeContractViolation:
		return true
	}
	return false
}

// SystemPrompt renders the code-as-plan prompt for the store as it is now: its schemas, row
// counts and a few sample rows, the helpers the sandbox provides, and the domain's contract.
func (e *Engine) SystemPrompt() (string, error) {
	infos, err := prompts.TablesOf(e.st.StageFor(context.Background(), store.RunLimits{}))
	if err != nil {
		return "", err
	}
	return prompts.System(prompts.Input{Tables: infos, Registry: e.env.Registry(), Policy: e.policy, Definition: e.st.Domain().Definition})
}

// noValidPlan is the message of an ask whose every attempt failed.
func noValidPlan(attempts int, last Outcome) string {
	if attempts == 1 {
		return fmt.Sprintf("the model produced no valid plan in its one attempt, which ended as %s", last)
	}
	return fmt.Sprintf("the model produced no valid plan in %d attempts; the last one ended as %s", attempts, last)
}
