package engine

import (
	"fmt"

	"github.com/starplan/starplan/diag"
)

// A result is bounded whatever the plan or the reply did: the parts a plan controls (its
// diagnostics' messages, answer_text, STATUS, the program) are cut to these sizes, and
// Result.Truncated names what was cut. Stdout has its own limit (sandbox.Limits.MaxOutput) and
// the changes are bounded by the domain's run limits.
const (
	// MaxDiagnostics is the most diagnostics a result lists; the last one then says how many
	// more there were.
	MaxDiagnostics = 100
	// MaxMessage is the most bytes of a diagnostic's message or hint.
	MaxMessage = 2 << 10
	// MaxAnswer is the most bytes of answer_text and of STATUS a result carries.
	MaxAnswer = 4 << 10
	// MaxProgram is the most bytes of the program a result carries: a larger one was refused by
	// the check (program-too-large), so what was run is never cut.
	MaxProgram = 256 << 10
	// MaxRepairQuote is the most bytes of a failed reply that Ask sends back to the model; the
	// program it quotes with line numbers is cut at half of it.
	MaxRepairQuote = 64 << 10
)

// CodeMoreDiagnostics is the code of the diagnostic that stands for those a result left out.
const CodeMoreDiagnostics = "more-diagnostics"

// bound cuts what the plan controls to the sizes above and records what it cut.
func (r *Result) bound() {
	cut := func(what string) {
		for _, t := range r.Truncated {
			if t == what {
				return
			}
		}
		r.Truncated = append(r.Truncated, what)
	}
	var c bool
	if r.Diagnostics, c = capDiagnostics(r.Diagnostics); c {
		cut("diagnostics")
	}
	for i := range r.Diagnostics {
		d := &r.Diagnostics[i]
		var c1, c2 bool
		d.Message, c1 = clip(d.Message, MaxMessage)
		d.Hint, c2 = clip(d.Hint, MaxMessage)
		if c1 || c2 {
			cut("diagnostic messages")
		}
	}
	if r.AnswerText, c = clip(r.AnswerText, MaxAnswer); c {
		cut("answer_text")
	}
	if r.Status, c = clip(r.Status, MaxAnswer); c {
		cut("status")
	}
	if r.Program, c = clip(r.Program, MaxProgram); c {
		cut("program")
	}
}

// capDiagnostics keeps at most MaxDiagnostics diagnostics, the last of which then says how many
// more there were; cut reports whether it left any out.
func capDiagnostics(ds diag.List) (_ diag.List, cut bool) {
	n := len(ds)
	if n <= MaxDiagnostics {
		return ds, false
	}
	kept := ds[: MaxDiagnostics-1 : MaxDiagnostics-1]
	return append(kept, diag.Diagnostic{
		Stage: ds[MaxDiagnostics-1].Stage, Code: CodeMoreDiagnostics,
		Message: fmt.Sprintf("and %d more diagnostics, left out", n-len(kept)),
		Hint:    "fix the ones listed first: later ones often follow from them",
	}), true
}

// clip cuts s to at most max bytes, at a UTF-8 boundary, with a marker that says how long it
// was; cut reports whether it did.
func clip(s string, max int) (_ string, cut bool) {
	if len(s) <= max {
		return s, false
	}
	i := max
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		i--
	}
	return fmt.Sprintf("%s… [cut: %d bytes in all]", s[:i], len(s)), true
}

func clipped(s string, max int) string {
	s, _ = clip(s, max)
	return s
}
