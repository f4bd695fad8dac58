package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
)

// ReplayReport says whether a recorded run, run again, gives what the audit log recorded.
type ReplayReport struct {
	RunID string `json:"run_id"`
	// Identical is true when the outcome, STATUS, answer_text, printed output and change set
	// are the recorded ones.
	Identical bool `json:"identical"`
	// Differences names what differs, recorded → replayed ("outcome: ok → conflict", "changes").
	Differences []string `json:"differences,omitempty"`
	// Note says what the comparison could not cover (a record that kept only part of a value).
	Note string `json:"note,omitempty"`
	// Result is the replay's own result. It is not recorded and never applied; its RunID is
	// empty.
	Result *Result `json:"result"`
}

// Replay runs a recorded run's program again, with its recorded request, limits and now(),
// against the store as it is now, and compares the result with the record: the audit trail is
// reproducible, not only stored. A run whose data has changed since (its own apply included)
// gives other changes; the report says what differs. Nothing is recorded or written.
func (e *Engine) Replay(ctx context.Context, id string) (*ReplayReport, error) {
	rec, err := e.Record(id)
	if err != nil {
		return nil, err
	}
	if slices.Contains(rec.Truncated, "program") {
		return nil, &RunError{ID: id, Problem: "its record keeps only the start of its program, so it cannot be run again"}
	}
	if rec.Program == "" {
		return nil, &RunError{ID: id, Problem: "it has no program (its reply held none), so there is nothing to run again"}
	}
	var limits sandbox.Limits
	if rec.Limits != nil {
		limits = *rec.Limits
	}
	res, _, err := e.evaluate(ctx, Request{Reply: rec.Program, bare: true, UserRequest: rec.Request, Subject: rec.Subject, Limits: limits, Origin: "replay"}, rec.Time)
	if err != nil {
		return nil, err
	}
	res.RunID = ""
	rep := &ReplayReport{RunID: id, Result: res}
	differ := func(what string, was, now any) {
		rep.Differences = append(rep.Differences, fmt.Sprintf("%s: %v → %v", what, was, now))
	}
	if rec.Outcome != res.Outcome {
		differ("outcome", rec.Outcome, res.Outcome)
	}
	if rec.Limit != res.Limit {
		differ("limit", quote(string(rec.Limit)), quote(string(res.Limit)))
	}
	if was, now := codesOf(rec.Diagnostics), codesOf(res.Diagnostics); was != now && !slices.Contains(rec.Truncated, "diagnostics") {
		differ("diagnostics", quote(was), quote(now))
	}
	if rec.Status != res.Status {
		differ("status", quote(rec.Status), quote(res.Status))
	}
	if rec.AnswerText != res.AnswerText && !slices.Contains(rec.Truncated, "answer_text") {
		rep.Differences = append(rep.Differences, "answer_text")
	}
	if rec.Stdout != res.Stdout && !slices.Contains(rec.Truncated, "stdout") {
		rep.Differences = append(rep.Differences, "stdout")
	}
	if slices.Contains(rec.Truncated, "changes") {
		rep.Note = "the record keeps only part of the changes; their row counts were compared"
		if was, now := rec.ChangedRows, res.Changes.Rows(); was != now {
			differ("changed rows", was, now)
		}
	} else if same, err := sameChanges(rec, res); err != nil {
		return nil, err
	} else if !same {
		rep.Differences = append(rep.Differences, "changes")
	}
	rep.Identical = len(rep.Differences) == 0
	return rep, nil
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// codesOf lists a run's diagnostic codes, for comparing two runs' findings (their messages may be
// cut in the record).
func codesOf(ds diag.List) string {
	codes := make([]string, len(ds))
	for i, d := range ds {
		codes[i] = d.Code
	}
	return strings.Join(codes, ", ")
}

// sameChanges compares two change sets by their JSON, which is how the record holds them.
func sameChanges(rec *RunRecord, res *Result) (bool, error) {
	a, err := json.Marshal(rec.Changes)
	if err != nil {
		return false, err
	}
	b, err := json.Marshal(res.Changes)
	if err != nil {
		return false, err
	}
	return bytes.Equal(a, b), nil
}
