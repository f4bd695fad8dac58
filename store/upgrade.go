package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/starplan/starplan/table"
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

// UpgradeRowProblem checks one stored row of table sc.Name (key key) against sc, the table's
// schema in the new definition, as every backend's UpgradeDomain does: ok is false and p says
// why when the row does not validate, or when it validates only by converting a value (a float
// field made an int one), since the row would keep its old kind where it is stored, read back as
// it was and not as the schema says, and db check would not see it (review). row is not changed.
func UpgradeRowProblem(sc *Schema, key any, row table.Row) (p RowProblem, ok bool) {
	v, err := sc.ValidateRow(maps.Clone(row))
	if err == nil {
		f := convertedField(row, v)
		if f == "" {
			return RowProblem{}, true
		}
		return RowProblem{Table: sc.Name, Key: fmt.Sprint(key), Field: f, Problem: fmt.Sprintf(
			"%v is stored as %s, and the new definition stores %s there; a field's type cannot change under rows that hold it (export the table, upgrade without them, import them again)",
			row[f], kindName(row[f]), kindName(v[f]))}, false
	}
	p = RowProblem{Table: sc.Name, Key: fmt.Sprint(key), Problem: err.Error()}
	var fe *table.FieldError
	if errors.As(err, &fe) {
		p.Field, p.Problem = fe.Field, fe.Rule
		if fe.Field != "" && fe.Value != nil {
			p.Problem = fmt.Sprintf("%v %s", fe.Value, fe.Rule)
		}
	}
	return p, false
}

// convertedField returns the first field (by name) whose value validation changed, or "".
func convertedField(stored, valid table.Row) string {
	var names []string
	for k := range valid {
		if !reflect.DeepEqual(stored[k], valid[k]) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return names[0]
}

// kindName names a stored value's kind as a schema does.
func kindName(v any) string {
	switch v.(type) {
	case int64, int:
		return "int"
	case float64:
		return "float"
	case string:
		return "string"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	case nil:
		return "None"
	}
	return fmt.Sprintf("%T", v)
}
