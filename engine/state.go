package engine

// Run states: where a run stands in its review. The CLI's `runs --state`, the server's
// RunDocument.State and GET /v1/runs?state=, and the review page all name them so.
const (
	StatePending  = "pending"  // accepted, with changes waiting for apply
	StateApplied  = "applied"  // its changes were written
	StateRejected = "rejected" // a reviewer rejected it
	StateConflict = "conflict" // its apply found that the data moved; nothing was written
	StateDone     = "done"     // accepted, with nothing to change (a question answered)
	StateFailed   = "failed"   // the plan was refused: check, runtime, a limit, the contract
	// StateExpired is a pending run older than the domain's approval.pending_ttl: it can only be
	// rejected or run again (listings show it so; the index keeps it with the pending runs).
	StateExpired = "expired"
)

// States lists the run states, for validation and documentation.
var States = []string{StatePending, StateApplied, StateRejected, StateConflict, StateDone, StateFailed}

// StateOf is the state of a run with this result and, if a reviewer decided on it, decision.
func StateOf(res *Result, decision *Decision) string {
	return stateOf(res.Applied, decision != nil, res.Pending, res.Outcome)
}

func stateOf(applied, rejected, pending bool, outcome Outcome) string {
	switch {
	case applied:
		return StateApplied
	case rejected:
		return StateRejected
	case pending:
		return StatePending
	case outcome == OutcomeConflict:
		return StateConflict
	case outcome == OutcomeOK:
		return StateDone
	}
	return StateFailed
}
