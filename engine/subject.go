package engine

import (
	"fmt"

	"github.com/starplan/starplan/access"
)

// Codes of a SubjectError.
const (
	CodeSubjectInvalid  = "subject-invalid"  // the subject cannot name anyone (access.CheckSubject)
	CodeSubjectMismatch = "subject-mismatch" // the proposer is pinned to another subject
)

// SubjectError is a run refused before it ran because of the subject it names: one that cannot
// be an id, or another than the one its proposer's credential is pinned to. Nothing is recorded.
type SubjectError struct {
	Code    string
	Problem string
	Hint    string
}

func (e *SubjectError) Error() string { return e.Problem }

// subjectOf resolves the subject req acts for: the one its proposer is pinned to, when it has
// one (a request may repeat it, never name another), else the one it names.
func subjectOf(req Request) (string, error) {
	if err := access.CheckSubject(req.Subject); err != nil {
		return "", &SubjectError{Code: CodeSubjectInvalid, Problem: err.Error(), Hint: "give the subject's id, such as a member id"}
	}
	s, ok := access.SubjectFor(orLocal(req.By), req.Subject)
	if !ok {
		return "", &SubjectError{Code: CodeSubjectMismatch,
			Problem: fmt.Sprintf("%s may act only for subject %q, not for %q", orLocal(req.By).Name, req.By.Subject, req.Subject),
			Hint:    fmt.Sprintf("leave the subject out or name %q; a run for another subject needs that subject's credential", req.By.Subject)}
	}
	return s, nil
}
