package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/errcode"
)

// AskRequest is the body of POST /v1/ask: a customer's request for the configured model to
// plan.
type AskRequest struct {
	Request string `json:"request" jsonschema:"the customer's request, verbatim"`
	Subject string `json:"subject,omitempty" jsonschema:"who the run acts for (a customer or member id); a token pinned to a subject acts for it and may name no other"`
}

// CodeNoModel is the error of /v1/ask on a server started without a model.
const CodeNoModel = errcode.NoModel

// Ask has the configured model write a plan for the request (engine.Ask: repairs included) and
// returns the last attempt's run as a dry run, like POST /v1/runs. Without Options.Model it is an
// *Error.
func (s *Server) Ask(ctx context.Context, req AskRequest, origin string) (*RunDocument, error) {
	if s.opts.Model == nil {
		return nil, errorf(http.StatusNotImplemented, CodeNoModel, "start starplan serve with a model (OPENAI_API_KEY, OPENAI_BASE_URL, STARPLAN_MODEL), or send a plan to POST /v1/runs", "this server has no model to ask")
	}
	if req.Request == "" {
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, `send {"request": "..."}`, "the request is empty")
	}
	// The engine tells each attempt's events (observe), with this call's request id; a model
	// that fails before any attempt ran is this call's own failed event.
	qid := newRequestID()
	res, err := s.eng.Ask(withCall(ctx, qid, nil), s.opts.Model, engine.AskRequest{Question: req.Request, MaxRepairs: s.opts.MaxRepairs, By: principal(ctx), Subject: req.Subject})
	if e := subjectRefused(err); e != nil {
		return nil, e
	}
	if err != nil {
		code, status := CodeInternal, http.StatusInternalServerError
		var me *engine.ModelError
		if errors.As(err, &me) {
			code, status = CodeModel, http.StatusBadGateway
		}
		s.events.publish(Event{Type: EventFailed, RequestID: qid, Origin: origin, Code: code, Message: err.Error()})
		return nil, &Error{Status: status, Code: code, Message: err.Error(), Hint: "check the model's endpoint and key"}
	}
	doc, err := s.Show(res.RunID)
	if doc != nil {
		// The audit record keeps the last attempt's run; the answer lists every model round, as
		// `starplan ask --json` prints them.
		doc.Attempts = res.Attempts
	}
	return doc, err
}

// replan asks the model for a new plan after a reviewer rejected a run the model wrote, in the
// background: the rejection answers at once, and the new run arrives on the event stream
// ("replanning", then the new run's started and finished with parent_run_id, or "failed"). Drain
// waits for it.
func (s *Server) replan(id, feedback, origin string) {
	if s.opts.Model == nil {
		return
	}
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgClosed {
		return // draining: the rejection is recorded; nobody would hear of the new plan
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		s.events.publish(Event{Type: EventReplanning, RunID: id, Origin: origin, Feedback: feedback})
		if _, err := s.eng.Replan(s.bg, s.opts.Model, id, engine.AskRequest{MaxRepairs: s.opts.MaxRepairs}); err != nil {
			s.events.publish(Event{Type: EventFailed, RunID: id, Origin: origin, Code: CodeReplan, Message: err.Error()})
		}
	}()
}

func (s *Server) handleAsk(w http.ResponseWriter, r *http.Request) {
	var req AskRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	doc, err := s.Ask(r.Context(), req, OriginHTTP)
	respond(w, http.StatusOK, doc, err)
}
