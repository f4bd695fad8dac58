// Package diag defines the one shape of every finding that a user or a model must act on: a
// Diagnostic with a stage, a stable code, a position in the program, a message and a hint.
//
// It is a leaf package with no dependencies, so every stage (sandbox, contracts, engine) can
// report findings without importing the others. Plain Go errors are for failures of starplan
// itself, never for problems with a plan.
package diag

import (
	"fmt"
	"strings"
)

// Stage names where in the data flow a diagnostic was produced.
type Stage string

// The stages, in data-flow order.
const (
	StageExtract  Stage = "extract"
	StagePycompat Stage = "pycompat"
	StageCheck    Stage = "check"
	StageRun      Stage = "run"
	StageContract Stage = "contract"
	StageApply    Stage = "apply"
	StageModel    Stage = "model" // the planning loop: the model never produced a valid plan
)

// Diagnostic is one finding. Line and Col are 1-based positions in the extracted program (not in
// the model's reply); 0 means the finding has no position. Code is a stable constant that tools
// and tests may match on; Message says what is wrong and Hint what to write instead.
type Diagnostic struct {
	Stage   Stage  `json:"stage"`
	Code    string `json:"code"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// String renders the diagnostic on one line, as "3:5: code: message (hint)".
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", d.Line, d.Col)
	}
	fmt.Fprintf(&b, "%s: %s", d.Code, d.Message)
	if d.Hint != "" {
		fmt.Fprintf(&b, " (hint: %s)", d.Hint)
	}
	return b.String()
}

// List is a slice of diagnostics with helpers for the common questions.
type List []Diagnostic

// Has reports whether any diagnostic carries the given code.
func (l List) Has(code string) bool {
	for _, d := range l {
		if d.Code == code {
			return true
		}
	}
	return false
}

// String renders one diagnostic per line.
func (l List) String() string {
	lines := make([]string, len(l))
	for i, d := range l {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}
