package store

// The backend-neutral steps of a run's Pending: made from a stage (NewPending, AddTable),
// checked against the schemas before an apply (CheckPending), and the change set and conflicts
// an apply reports (AddChange, AddPredConflicts). Each backend reads, locks and writes its own.

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/starplan/starplan/table"
)

// NewPending starts the Pending of a run of domain; the stage adds each of its tables with
// AddTable, in name order.
func NewPending(domain string) *Pending {
	return &Pending{Domain: domain, Writes: []PendingWrite{}, Reads: []PendingRead{}}
}

// AddTable adds what the run did to one table: writes, its final state of each row it wrote (in
// any order: AddTable sorts them by key, in place); preds, its predicate reads, or when all a
// read of the whole table at version allVer instead; and reads, the rows it read by key with the
// version each was at (0: absent). A write that ends where it started (inserted then removed, or
// updated back to its old values) becomes a read of the row at the version the run saw, and a
// row read at the version the run then replaced is left to its write.
func (p *Pending) AddTable(name string, writes []PendingWrite, preds []PendingRead, all bool, allVer int64, reads map[any]int64) {
	slices.SortFunc(writes, func(a, b PendingWrite) int { return table.CompareKeys(a.Key, b.Key) })
	written := make(map[any]int64, len(writes))
	for _, w := range writes {
		noop := (w.Before == nil && w.Row == nil) || (w.Before != nil && w.Row != nil && EqualRows(w.Before, w.Row))
		if noop {
			p.Reads = append(p.Reads, PendingRead{Table: name, Key: w.Key, Version: w.Base})
		} else {
			p.Writes = append(p.Writes, w)
		}
		written[w.Key] = w.Base
	}
	if all {
		p.Reads = append(p.Reads, PendingRead{Table: name, All: true, Version: allVer})
	} else {
		p.Reads = append(p.Reads, preds...)
	}
	keys := make([]any, 0, len(reads))
	for k, v := range reads {
		if base, ok := written[k]; ok && base == v {
			continue
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return table.CompareKeys(keys[i], keys[j]) < 0 })
	for _, k := range keys {
		p.Reads = append(p.Reads, PendingRead{Table: name, Key: k, Version: reads[k]})
	}
}

// CheckedWrite is a write of a Pending checked against its table's schema (CheckPending).
type CheckedWrite struct {
	Schema *Schema
	Key    any       // of the key field's kind
	Row    table.Row // validated, carrying Key; nil: remove the row
	Base   int64
}

// CheckedRead is a read of a Pending checked against its table's schema: of a row (Key), of the
// whole table (All) or a predicate (Pred, in the backend's form P).
type CheckedRead[P any] struct {
	Schema  *Schema
	Key     any
	All     bool
	Version int64
	Pred    *P
}

// CheckPending checks p against a store of domain with schemas: known tables, keys of the key
// field's kind, rows that validate and carry their key, no row written twice. pred checks a
// predicate read into the backend's form.
func CheckPending[P any](p *Pending, domain string, schemas map[string]*Schema, pred func(*Schema, PendingRead) (P, error)) ([]CheckedWrite, []CheckedRead[P], error) {
	if p.Domain != "" && p.Domain != domain {
		return nil, nil, fmt.Errorf("the pending run is for the %s domain; this store holds %s", p.Domain, domain)
	}
	writes := make([]CheckedWrite, 0, len(p.Writes))
	seen := map[[2]any]bool{}
	for _, w := range p.Writes {
		sc := schemas[w.Table]
		if sc == nil {
			return nil, nil, fmt.Errorf("pending write: unknown table %q", w.Table)
		}
		k, err := sc.NormKey(FromJSON(w.Key))
		if err != nil {
			return nil, nil, fmt.Errorf("pending write: %w", err)
		}
		if seen[[2]any{w.Table, k}] {
			return nil, nil, fmt.Errorf("pending write: %s row %s is written twice", w.Table, table.FormatValue(k))
		}
		seen[[2]any{w.Table, k}] = true
		cw := CheckedWrite{Schema: sc, Key: k, Base: w.Base}
		if w.Row != nil {
			if cw.Row, err = sc.ValidateRow(w.Row); err != nil {
				return nil, nil, fmt.Errorf("pending write: %w", err)
			}
			if cw.Row[sc.Key] != k {
				return nil, nil, fmt.Errorf("pending write: %s row %s carries key %s", w.Table, table.FormatValue(k), table.FormatValue(cw.Row[sc.Key]))
			}
		}
		writes = append(writes, cw)
	}
	reads := make([]CheckedRead[P], 0, len(p.Reads))
	for _, r := range p.Reads {
		sc := schemas[r.Table]
		if sc == nil {
			return nil, nil, fmt.Errorf("pending read: unknown table %q", r.Table)
		}
		cr := CheckedRead[P]{Schema: sc, All: r.All, Version: r.Version}
		switch {
		case r.Pred != "" && !r.All:
			pc, err := pred(sc, r)
			if err != nil {
				return nil, nil, err
			}
			cr.Pred = &pc
		case !r.All:
			k, err := sc.NormKey(FromJSON(r.Key))
			if err != nil {
				return nil, nil, fmt.Errorf("pending read: %w", err)
			}
			cr.Key = k
		}
		reads = append(reads, cr)
	}
	return writes, reads, nil
}

// AddChange adds to cs the change a checked write makes to table sc's row key: from before (nil:
// none) to row (nil: removed). A row written with its committed values changes nothing.
func AddChange(cs table.ChangeSet, sc *Schema, key any, before, row table.Row) {
	tc := cs[sc.Name]
	if tc == nil {
		tc = &table.TableChanges{Key: sc.Key, Inserted: []table.Row{}, Updated: []table.Update{}, Deleted: []table.Row{}}
		cs[sc.Name] = tc
	}
	switch {
	case before == nil && row != nil:
		tc.Inserted = append(tc.Inserted, row)
	case before != nil && row == nil:
		tc.Deleted = append(tc.Deleted, before)
	case before != nil:
		if f := ChangedFields(before, row); len(f) > 0 {
			tc.Updated = append(tc.Updated, table.NewUpdate(key, before, row, f))
		}
	}
}

// AddPredConflicts adds the conflicts of predicate reads, preds, to those of rows, conflicts: a
// moved row says more than a read it also changed, so a table's predicate reads are reported only
// when none of its rows is.
func AddPredConflicts(conflicts, preds []Conflict) []Conflict {
	for _, c := range preds {
		if !slices.ContainsFunc(conflicts, func(x Conflict) bool { return x.Table == c.Table }) {
			conflicts = append(conflicts, c)
		}
	}
	return conflicts
}

// ConflictChecker is a Store that can tell, without writing anything or waiting for a commit
// under way, whether ApplyPending of p would find a conflict now: the *ConflictError it would
// return, nil when nothing p depended on has moved (ApplyPending still checks everything again,
// and may still conflict), or another error, such as p not fitting the schemas, which the
// caller leaves to ApplyPending. An apply that conflicts writes nothing, so its caller may
// answer the conflict found here, as of this check, without waiting for its turn to commit
// (issue 32: most applies of a busy ledger conflict, and each waited for the commits before it).
// When ctx carries an *ApplySteps, the check is appended to it (StepCheck).
type ConflictChecker interface {
	Conflicts(ctx context.Context, p *Pending) error
}
