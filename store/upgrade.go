package store

import (
	"context"
	"fmt"
	"strings"
)

// DomainUpgrader is a Store whose recorded domain definition can be replaced by a new version of
// the same domain (starplan domain upgrade). store/bolt implements it.
type DomainUpgrader interface {
	// UpgradeDomain checks every row the store holds against dom's schemas and, when each one
	// fits, records dom's definition (and its seed as the store's kept seed; a dom without seed
	// rows leaves the store keeping none) with the documents extra, in one atomic commit.
	// It fails with a *UpgradeError listing the rows that do not fit, and writes nothing; with
	// a *DomainError when dom is another domain. After it returns nil the store serves only
	// Close: open it again to use the new definition.
	UpgradeDomain(ctx context.Context, dom *Domain, extra ...SysDoc) error
}

// RowProblem is one row (or table) that does not fit a new domain definition.
type RowProblem struct {
	Table   string `json:"table"`
	Key     string `json:"key,omitempty"`   // the row's key; empty for a problem of the whole table
	Field   string `json:"field,omitempty"` // the field; empty for a problem of the whole row
	Problem string `json:"problem"`
}

func (p RowProblem) String() string {
	where := p.Table
	if p.Key != "" {
		where += " row " + p.Key
	}
	if p.Field != "" {
		where += " field " + p.Field
	}
	return where + ": " + p.Problem
}

// MaxRowProblems is the most offenders an *UpgradeError lists; it counts the rest.
const MaxRowProblems = 100

// UpgradeError is the refusal of a definition some of the store's rows do not fit.
type UpgradeError struct {
	Problems []RowProblem
	More     int // offenders past MaxRowProblems, counted but not listed
}

func (e *UpgradeError) Error() string {
	n := len(e.Problems) + e.More
	lines := make([]string, 0, len(e.Problems)+1)
	for _, p := range e.Problems {
		lines = append(lines, "  "+p.String())
	}
	if e.More > 0 {
		lines = append(lines, fmt.Sprintf("  ... and %d more", e.More))
	}
	what := "rows or tables do not"
	if n == 1 {
		what = "row or table does not"
	}
	return fmt.Sprintf("%d %s fit the new definition; nothing was changed:\n%s", n, what, strings.Join(lines, "\n"))
}

// Hint says what to do about an *UpgradeError.
func (e *UpgradeError) Hint() string {
	return "change those rows under the current definition first (a plan, or starplan db import TABLE FILE --replace), or relax the new definition so that they fit, then upgrade again"
}
