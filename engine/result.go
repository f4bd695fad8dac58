package engine

import (
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Outcome is how a run ended. It extends the sandbox's outcomes with the two that only the
// engine can decide.
type Outcome string

// The outcomes of a run, in the order of the data flow.
const (
	OutcomeOK                        = Outcome(sandbox.OutcomeOK)
	OutcomeCheckFailed               = Outcome(sandbox.OutcomeCheckFailed)
	OutcomeRuntimeError              = Outcome(sandbox.OutcomeRuntimeError)
	OutcomeLimitExceeded             = Outcome(sandbox.OutcomeLimitExceeded)
	OutcomeContractViolation Outcome = "contract_violation"
	OutcomeConflict          Outcome = "conflict"
)

// CodeConflict is the diagnostic code of a row that moved between a run and its apply.
const CodeConflict = "conflict"

// Result is the one document every transport returns for a run: the Go API, `starplan exec
// --json`, `starplan ask --json` and any later server. Its fields are documented in the README
// ("The result document"); keep the two in step.
type Result struct {
	RunID string `json:"run_id"`
	// Subject is who the run acts for (Request.Subject); absent for nobody.
	Subject string `json:"subject,omitempty"`
	// TraceID is the W3C trace id of the run's span when traces are on (an observer gave it:
	// NoteTraceID); absent otherwise.
	TraceID         string             `json:"trace_id,omitempty"`
	Outcome         Outcome            `json:"outcome"`
	Status          string             `json:"status"`
	AnswerText      string             `json:"answer_text"`
	Stdout          string             `json:"stdout"`
	StdoutTruncated bool               `json:"stdout_truncated"`
	Diagnostics     diag.List          `json:"diagnostics"`
	Limit           sandbox.Limit      `json:"limit,omitempty"` // steps, time or memory, with limit_exceeded
	Rewrites        []pycompat.Rewrite `json:"rewrites"`
	Changes         table.ChangeSet    `json:"changes"` // what the plan staged (shown even when rejected)
	Pending         bool               `json:"pending"` // accepted changes wait for `starplan apply RUN_ID`
	Applied         bool               `json:"applied"`
	Steps           uint64             `json:"steps"`
	DurationMS      float64            `json:"duration_ms"`
	// Scans are the run's reads that walked a table because no index answered their filter,
	// with the rows they examined: where a domain should declare an index (store.Scan).
	Scans   []store.Scan `json:"scans,omitempty"`
	Program string       `json:"program"` // the extracted program, before rewrites
	// Attempts lists every model round of `ask` (the last one is this result); empty for exec.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Truncated names what the result cut to keep its size bounded ("diagnostics",
	// "diagnostic messages", "answer_text", "status", "program"; see MaxDiagnostics, ...). A
	// result read back from the audit log also names what its record cut (see RunRecord).
	Truncated []string `json:"truncated,omitempty"`
	// Who proposed the run and who decided on it (approval.go).
	Who
}

// Attempt is one model round of Ask: the reply, how its run ended, and what the call cost.
type Attempt struct {
	RunID            string    `json:"run_id"`
	Outcome          Outcome   `json:"outcome"`
	Diagnostics      diag.List `json:"diagnostics"`
	Model            string    `json:"model"`
	PromptTokens     int       `json:"prompt_tokens"`
	CompletionTokens int       `json:"completion_tokens"`
	LatencyMS        float64   `json:"latency_ms"`
}

// Accepted reports whether the plan ran and satisfied its contract.
func (r *Result) Accepted() bool { return r.Outcome == OutcomeOK }

// normalize replaces nil lists with empty ones, so the JSON document always has every field.
func (r *Result) normalize() {
	if r.Diagnostics == nil {
		r.Diagnostics = diag.List{}
	}
	if r.Rewrites == nil {
		r.Rewrites = []pycompat.Rewrite{}
	}
	if r.Changes == nil {
		r.Changes = table.ChangeSet{}
	}
}
