package diffview

import (
	"strings"

	"github.com/starplan/starplan/table"
)

// TableCells is one table's changes laid out cell by cell, for a view that builds its own
// markup (the review page of `starplan serve`). Every text in it is shown the way the people
// views show values (None, True, 80.0; control and invisible characters escaped) and is plain
// text: the view must insert it as text, never as markup.
type TableCells struct {
	Table   string     `json:"table"`
	Key     string     `json:"key"`     // the table's key field
	Summary string     `json:"summary"` // "inventory: 1 inserted, 2 updated"
	Rows    []RowCells `json:"rows"`    // inserted, then updated, then deleted; each in key order
}

// Change kinds of a RowCells.
const (
	RowInserted = "inserted"
	RowUpdated  = "updated"
	RowDeleted  = "deleted"
)

// RowCells is one changed row.
type RowCells struct {
	Change string `json:"change"` // RowInserted, RowUpdated or RowDeleted
	Key    string `json:"key"`    // the row's key, shown
	// Via is the domain helper through which the row was written (table.TableChanges.Via);
	// absent for a row the plan wrote itself.
	Via   string `json:"via,omitempty"`
	Cells []Cell `json:"cells"`
}

// Cell is one field of a changed row, or one path inside a nested value ("address.city",
// "tags[0]", `meta["two words"]`). Before is absent for an inserted row or a path the row did
// not have; After is absent for a deleted row or a path it lost. An updated row lists every
// field, unchanged ones with Changed false, and a changed nested value by the paths that
// differ.
type Cell struct {
	Path    string  `json:"path"`
	Before  *string `json:"before,omitempty"`
	After   *string `json:"after,omitempty"`
	Changed bool    `json:"changed"`
	// Words is the word diff of a changed long text (see LongCell), in order: each step is text
	// both sides share (Same) or words removed (Del) and added (Ins) at that place.
	Words []Word `json:"words,omitempty"`
}

// Word is one step of a word diff.
type Word struct {
	Same string `json:"same,omitempty"`
	Del  string `json:"del,omitempty"`
	Ins  string `json:"ins,omitempty"`
}

// Cells lays cs out cell by cell: the tables with changes in name order, columns ordered as in
// the other views (the key, then opts.Schemas' order, then by name). Only opts.Schemas is read.
// Like the other views, its cost grows with the changed rows, never with a table's size.
func Cells(cs table.ChangeSet, opts Options) []TableCells {
	out := []TableCells{}
	for _, s := range sections(cs) {
		tc := TableCells{Table: s.name, Key: s.tc.Key, Summary: s.summary(), Rows: []RowCells{}}
		schema := opts.Schemas[s.name]
		for _, r := range s.tc.Inserted {
			rc := wholeRow(RowInserted, r, schema, s.tc.Key)
			rc.Via = s.tc.RowVia(r[s.tc.Key])
			tc.Rows = append(tc.Rows, rc)
		}
		for _, u := range s.tc.Updated {
			rc := updatedRow(u, schema, s.tc.Key)
			rc.Via = s.tc.RowVia(u.Key)
			tc.Rows = append(tc.Rows, rc)
		}
		for _, r := range s.tc.Deleted {
			rc := wholeRow(RowDeleted, r, schema, s.tc.Key)
			rc.Via = s.tc.RowVia(r[s.tc.Key])
			tc.Rows = append(tc.Rows, rc)
		}
		out = append(out, tc)
	}
	return out
}

// wholeRow lays out an inserted or deleted row: every field, nested values by path.
func wholeRow(change string, r table.Row, schema *table.Schema, key string) RowCells {
	names := map[string]bool{}
	rowFields(names, []table.Row{r})
	rc := RowCells{Change: change, Key: show(r[key]), Cells: []Cell{}}
	for _, f := range columns(schema, key, names) {
		for _, l := range table.Leaves(f, r[f]) {
			v := show(l.Value)
			c := Cell{Path: l.Path, Changed: true}
			if change == RowInserted {
				c.After = &v
			} else {
				c.Before = &v
			}
			rc.Cells = append(rc.Cells, c)
		}
	}
	return rc
}

// updatedRow lays out an updated row: every field; a changed scalar or long text as one cell, a
// changed nested value as the paths that differ.
func updatedRow(u table.Update, schema *table.Schema, key string) RowCells {
	names := map[string]bool{}
	rowFields(names, []table.Row{u.Before, u.After})
	changed := make(map[string]bool, len(u.Fields))
	for _, f := range u.Fields {
		changed[f] = true
	}
	rc := RowCells{Change: RowUpdated, Key: show(u.Key), Cells: []Cell{}}
	for _, f := range columns(schema, key, names) {
		old, hadOld := u.Before[f]
		new, hasNew := u.After[f]
		if !changed[f] {
			v := show(new)
			rc.Cells = append(rc.Cells, Cell{Path: f, Before: &v, After: &v})
			continue
		}
		if ps := changedPaths(u, f); ps != nil {
			for _, p := range ps {
				rc.Cells = append(rc.Cells, changeCell(p.Path, p.Before, p.HadBefore, p.After, p.HasAfter))
			}
			continue
		}
		rc.Cells = append(rc.Cells, changeCell(f, old, hadOld, new, hasNew))
	}
	return rc
}

// changeCell is one changed value; a word diff when both sides are strings and one is long.
func changeCell(path string, old any, hadOld bool, new any, hasNew bool) Cell {
	c := Cell{Path: path, Changed: true}
	switch {
	case hadOld && hasNew:
		a, b := showPair(old, new)
		c.Before, c.After = &a, &b
		sa, aok := old.(string)
		sb, bok := new.(string)
		if aok && bok && (isLong(sa) || isLong(sb)) {
			for _, ch := range wordDiff(escape(sa, true), escape(sb, true)) {
				c.Words = append(c.Words, Word(ch))
			}
		}
	case hadOld:
		a := show(old)
		c.Before = &a
	case hasNew:
		b := show(new)
		c.After = &b
	}
	return c
}

// pathChange is one path at which two nested values differ (table.ChangedPaths).
type pathChange = table.PathChange

// pathChanges lists the paths at which two nested values of a field differ, in path order: the
// one answer every view shows for a changed list or object ("address.city", "lines[1].qty").
// When they differ in no way a path shows, the field itself is the one path.
func pathChanges(field string, old, new any) []pathChange {
	if ps := table.ChangedPaths(field, old, new); len(ps) > 0 {
		return ps
	}
	return []pathChange{{Path: field, Before: old, After: new, HadBefore: true, HasAfter: true}}
}

// changedPaths is pathChanges for an update's changed field, or nil when the field's value is
// not nested on both sides (then the field itself is what changed).
func changedPaths(u table.Update, f string) []pathChange {
	old, hadOld := u.Before[f]
	new, hasNew := u.After[f]
	if hadOld && hasNew && table.IsNested(old) && table.IsNested(new) {
		return pathChanges(f, old, new)
	}
	return nil
}

// Summary is a change set in one line: each changed table's counts, in name order, joined by
// "; " ("inventory: 2 updated; transactions: 2 inserted"). An empty change set is "".
func Summary(cs table.ChangeSet) string {
	var parts []string
	for _, s := range sections(cs) {
		parts = append(parts, s.summary())
	}
	return strings.Join(parts, "; ")
}
