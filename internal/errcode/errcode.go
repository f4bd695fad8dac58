// Package errcode names the conditions starplan fails on, as the stable code strings that both
// the HTTP API's error documents ({"error": {"code", ...}}, server/) and the CLI's --json
// errors (internal/cli) carry, so that a script matches one code whether it drives the server or
// the command line. It holds names only: which HTTP status or exit code goes with a code, and
// which error is which condition, stay with the server and the CLI.
//
// A code's value is part of the public contract (the README lists them); never change one.
package errcode

// Conditions that the server and the CLI both meet.
const (
	BadRequest = "bad-request" // the request (HTTP body, query; a command line) is not what the operation takes
	UnknownRun = "unknown-run" // no run with this id in the audit log
	Conflict   = "conflict"    // an apply found that the data moved since the dry run; nothing was written (engine.CodeConflict)
	// ApprovalRequired: the domain's approval rules refuse this apply (a proposer with no auto
	// rule that lets the run through, one's own run under four eyes); the run still waits.
	ApprovalRequired = "approval-required"
	RunExpired       = "run-expired"       // the run waited longer than the domain's pending_ttl; reject it or run it again
	Forbidden        = "forbidden"         // the operation is refused here (a foreign host name; a command a server does not run for a client)
	Internal         = "internal"          // starplan itself failed
	Model            = "model-unavailable" // the model could not be reached or answered badly
	NoModel          = "no-model"          // no model is configured (no OPENAI_API_KEY, a server started without one)
	// RunChanged: on a store servers share, other servers kept writing the run's record (their
	// approvals) while this decision was made, and the run is still undecided; nothing of this
	// decision was recorded: look at the run again and repeat it.
	RunChanged = "run-changed"
)

// Conditions of the HTTP API only.
const (
	Unauthorized   = "unauthorized" // no or a wrong bearer token
	NotFound       = "not-found"    // no such endpoint
	Method         = "method-not-allowed"
	TooLarge       = "body-too-large"     // the request body exceeds the server's limit
	DigestMismatch = "digest-mismatch"    // apply with a digest that is not the run's
	NotApplicable  = "not-applicable"     // the run has nothing to apply (failed, read-only)
	RunRejected    = "run-rejected"       // a reviewer rejected the run; it can no longer be applied
	Declined       = "apply-declined"     // MCP: the person did not confirm the apply; the run is still pending
	AlreadyApplied = "already-applied"    // reject of a run that was applied
	Unavailable    = "shutting-down"      // the server is draining
	TooManyStreams = "too-many-streams"   // GET /v1/events beyond the server's MaxSubscribers
	BadLimits      = "limits-not-allowed" // limits beyond what the server allows
	NotReplayable  = "not-replayable"     // the record holds no whole program to run again
	Replan         = "replan-failed"      // asking the model again after a rejection failed
	ForbiddenRole  = "forbidden-role"     // the credential's role lacks the right the operation needs
)

// Conditions of the command line only: a server always has its store, and reports a plan's
// failure in the run's document, not as an error.
const (
	NoStore     = "no-store"     // no store where the command looks (--db, $STARPLAN_DB, the default)
	StoreInUse  = "store-in-use" // another process holds the store's lock
	Rejected    = "rejected"     // the plan was rejected: no program, the check, a runtime error or a limit (exit 3)
	Contract    = "contract"     // the plan broke the output contract or the mutation policy (exit 4)
	Interrupted = "interrupted"  // Ctrl-C or SIGTERM stopped the command (exit 130)
)
