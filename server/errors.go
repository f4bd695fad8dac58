package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/errcode"
)

// Error codes of the API. They are stable; clients may match on them. Their values are defined
// once, in internal/errcode, which the CLI's --json errors use too: one condition, one code.
const (
	CodeBadRequest       = errcode.BadRequest   // the body is not the JSON the endpoint takes
	CodeUnauthorized     = errcode.Unauthorized // no or a wrong bearer token
	CodeForbidden        = errcode.Forbidden    // a loopback server reached under a foreign host name
	CodeNotFound         = errcode.NotFound     // no such endpoint
	CodeUnknownRun       = errcode.UnknownRun   // no run with this id
	CodeMethod           = errcode.Method
	CodeTooLarge         = errcode.TooLarge       // the request body exceeds Options.MaxBody
	CodeDigestMismatch   = errcode.DigestMismatch // apply with a digest that is not the run's
	CodeNotApplicable    = errcode.NotApplicable  // the run has nothing to apply (failed, read-only)
	CodeRejected         = errcode.RunRejected    // the run was rejected; it can no longer be applied
	CodeDeclined         = errcode.Declined       // MCP: the person did not confirm the apply; the run is still pending
	CodeAlreadyApplied   = errcode.AlreadyApplied // reject of a run that was applied
	CodeInternal         = errcode.Internal       // starplan itself failed
	CodeUnavailable      = errcode.Unavailable    // the server is draining
	CodeTooManyStreams   = errcode.TooManyStreams // GET /v1/events beyond Options.MaxSubscribers
	CodeBadLimits        = errcode.BadLimits
	CodeNotReplayable    = errcode.NotReplayable    // the record holds no whole program to run again
	CodeModel            = errcode.Model            // the model could not be reached or answered badly
	CodeReplan           = errcode.Replan           // asking the model again after a rejection failed
	CodeForbiddenRole    = errcode.ForbiddenRole    // the credential's role lacks the operation's right
	CodeApprovalRequired = errcode.ApprovalRequired // the domain's approval rules refuse this apply
	CodeRunExpired       = errcode.RunExpired       // the run waited past the domain's pending_ttl
	CodeRunChanged       = errcode.RunChanged       // other servers kept writing the run while this apply decided; repeat it
)

// Error is the one error shape of the API, sent as {"error": {"code", "message", "hint"}} with
// Status as the HTTP status. MCP tools return the same fields as a tool error.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// toolHint, when set, replaces Hint for a caller over MCP: it names tools (show_run,
	// list_runs) where Hint names HTTP paths.
	toolHint string
}

// withToolHint sets the hint an MCP caller reads in place of Hint, and returns e.
func (e *Error) withToolHint(hint string) *Error {
	e.toolHint = hint
	return e
}

// forTools is e as an MCP tool reports it: its hint for tools when it has one.
func (e *Error) forTools() *Error {
	if e.toolHint == "" {
		return e
	}
	c := *e
	c.Hint, c.toolHint = e.toolHint, ""
	return &c
}

func (e *Error) Error() string {
	if e.Hint == "" {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s (try: %s)", e.Code, e.Message, e.Hint)
}

// ErrorBody is the JSON body of an error response.
type ErrorBody struct {
	Error *Error `json:"error"`
}

func errorf(status int, code, hint, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// internal describes a failure of starplan itself.
func internal(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error(),
		Hint:     "try again; GET /v1/runs/{id} says whether a run was applied",
		toolHint: "try again; show_run says whether a run was applied"}
}

// asError turns any error of an operation into an *Error.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return internal(err)
}

// unknownRun is the error of an id the audit log does not hold, or nil when err is another one.
func unknownRun(err error) *Error {
	var re *engine.RunError
	if !errors.As(err, &re) {
		return nil
	}
	return &Error{Status: http.StatusNotFound, Code: CodeUnknownRun, Message: err.Error(), Hint: "GET /v1/runs lists the runs", toolHint: "list_runs lists the runs"}
}

// subjectRefused is the error of a run refused for the subject it names (engine.SubjectError):
// 403 subject-mismatch for a subject the caller's token is not pinned to, 400 subject-invalid
// for one that cannot be an id; nil when err is another one.
func subjectRefused(err error) *Error {
	var se *engine.SubjectError
	if !errors.As(err, &se) {
		return nil
	}
	status := http.StatusBadRequest
	if se.Code == engine.CodeSubjectMismatch {
		status = http.StatusForbidden
	}
	return &Error{Status: status, Code: se.Code, Message: se.Problem, Hint: se.Hint}
}

// changedMeanwhile is the error of a decision the engine gave up because other servers on the
// store kept writing the run's record while it decided (their approvals; engine.RunError of
// errcode.RunChanged): 409 run-changed, nothing of it recorded, the caller looks at the run
// again and repeats it; nil when err is another one.
func changedMeanwhile(err error) *Error {
	var re *engine.RunError
	if !errors.As(err, &re) || re.Code != CodeRunChanged {
		return nil
	}
	return &Error{Status: http.StatusConflict, Code: CodeRunChanged, Message: err.Error(),
		Hint:     "look at the run again (GET /v1/runs/" + re.ID + ") and repeat the decision if it still stands",
		toolHint: "look at the run again (show_run with run_id " + re.ID + ") and repeat the decision if it still stands"}
}
