package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/starplan/starplan/engine"
)

// Error codes of the API. They are stable; clients may match on them.
const (
	CodeBadRequest     = "bad-request"  // the body is not the JSON the endpoint takes
	CodeUnauthorized   = "unauthorized" // no or a wrong bearer token
	CodeForbidden      = "forbidden"    // a loopback server reached under a foreign host name
	CodeNotFound       = "not-found"    // no such endpoint
	CodeUnknownRun     = "unknown-run"  // no run with this id
	CodeMethod         = "method-not-allowed"
	CodeTooLarge       = "body-too-large"   // the request body exceeds Options.MaxBody
	CodeDigestMismatch = "digest-mismatch"  // apply with a digest that is not the run's
	CodeNotApplicable  = "not-applicable"   // the run has nothing to apply (failed, read-only)
	CodeRejected       = "run-rejected"     // the run was rejected; it can no longer be applied
	CodeDeclined       = "apply-declined"   // MCP: the person did not confirm the apply; the run is still pending
	CodeAlreadyApplied = "already-applied"  // reject of a run that was applied
	CodeInternal       = "internal"         // starplan itself failed
	CodeUnavailable    = "shutting-down"    // the server is draining
	CodeTooManyStreams = "too-many-streams" // GET /v1/events beyond Options.MaxSubscribers
	CodeBadLimits      = "limits-not-allowed"
	CodeNotReplayable  = "not-replayable"    // the record holds no whole program to run again
	CodeModel          = "model-unavailable" // the model could not be reached or answered badly
	CodeReplan         = "replan-failed"     // asking the model again after a rejection failed
)

// Error is the one error shape of the API, sent as {"error": {"code", "message", "hint"}} with
// Status as the HTTP status. MCP tools return the same fields as a tool error.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
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
		Hint: "try again; GET /v1/runs/{id} says whether a run was applied"}
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
	return &Error{Status: http.StatusNotFound, Code: CodeUnknownRun, Message: err.Error(), Hint: "GET /v1/runs lists the runs"}
}
