package contracts

import (
	"context"
	"fmt"
)

// CodeSubjectRequired is the diagnostic of a run that changes data in a domain whose writes
// require a subject, without naming one.
const CodeSubjectRequired = "subject-required"

// SubjectPolicy says what a domain asks of the subject a run acts for (policy.json "subject").
// The zero value asks nothing: a run may name a subject or not. Which rows a subject may touch is
// a starlark rule, which reads it with run_subject().
type SubjectPolicy struct {
	// RequiredForWrites refuses a run that stages changes without a subject: the domain's
	// writes are always made on someone's behalf.
	RequiredForWrites bool `json:"required_for_writes,omitempty"`
}

// subjectItem is the contract item of SubjectPolicy, checked after the output contract.
var subjectItem = contractItem{
	name: "subject_required_for_writes",
	doc: func(*Contract) string {
		return "a run that changes data must name the subject it acts for (--subject, or a token pinned to one)"
	},
	check: func(p *pass) {
		if p.subjectPolicy.RequiredForWrites && p.in.Subject == "" && !p.in.Changes.Empty() {
			p.reportf(CodeSubjectRequired,
				"name the subject the run acts for: --subject ID on exec or ask, \"subject\" in the request, or a token pinned to one",
				"this domain's writes require a subject, and the run changes %s without naming one", changedTables(p))
		}
	},
}

func changedTables(p *pass) string {
	ts := p.in.Changes.Tables()
	if len(ts) == 1 {
		return ts[0]
	}
	return fmt.Sprintf("%d tables", len(ts))
}

type subjectCtxKey struct{}

// withSubject returns ctx carrying the subject of the run a starlark rule checks.
func withSubject(ctx context.Context, subject string) context.Context {
	return context.WithValue(ctx, subjectCtxKey{}, subject)
}

// SubjectOf returns the subject of the run an Invariant is called for (Input.Subject), or "".
func SubjectOf(ctx context.Context) string {
	s, _ := ctx.Value(subjectCtxKey{}).(string)
	return s
}
