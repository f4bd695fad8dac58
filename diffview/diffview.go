// Package diffview renders a run's change set (table.ChangeSet) for people and for programs: an
// aligned terminal view with optional colour, GitHub-flavoured Markdown for review comments, a
// stable JSON document, the cells of a before/after table (Cells) for a page that builds its
// own markup, and one bounded line of what changes row by row (Headline) for a queue.
//
// It owns only presentation. It must not reach a store, run or inspect Starlark, or decide
// whether a change is allowed: it reads the change set it is given and nothing else, so the cost
// of rendering grows with the number of changed rows, never with the size of a table.
//
// Values are shown the way a Python programmer reads them: None, True, False, 80.0 (a float
// always has a decimal point), 23. In the people views, control and invisible format characters
// in strings (ANSI escapes, zero-width spaces, bidi overrides) are shown escaped (\x1b, \u200b)
// so that data written by a plan cannot restyle the view or hide a change from the reviewer.
package diffview

import (
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/starplan/starplan/table"
)

// DefaultWidth is the terminal width, in columns, used when Options.Width is 0.
const DefaultWidth = 100

// minWidth is the narrowest width the terminal view wraps to, in columns; a smaller
// Options.Width is raised to it.
const minWidth = 40

// LongCell is the length, in characters, above which a string cell counts as long text: a change
// to it is shown as a word diff, and a row holding one is laid out as a record (one field per
// line) instead of a grid row. A string with a line break is always long.
const LongCell = 40

// Options tune the people views. The zero value is plain text at DefaultWidth with columns in
// sorted order after the key.
type Options struct {
	// Color adds ANSI colour: removed values red, added values green. The CLI sets it when stdout
	// is a terminal and NO_COLOR is unset. Markdown ignores it.
	Color bool
	// Width is the terminal width in columns: a table section whose rows do not fit is laid out
	// as records, and long values are wrapped to it. 0 means DefaultWidth; values below 40 are
	// raised to 40. Markdown ignores it.
	Width int
	// Schemas, by table name, give the column order (the schema's field order, key first).
	// Fields a schema does not declare, and tables without a schema, are ordered by name after
	// the key field. Optional.
	Schemas map[string]*table.Schema
}

func (o Options) width() int {
	switch {
	case o.Width == 0:
		return DefaultWidth
	case o.Width < minWidth:
		return minWidth
	}
	return o.Width
}

// section is one table's changes, in the order the views show them.
type section struct {
	name string
	tc   *table.TableChanges
}

// sections lists the tables with changes, sorted by name. Nil entries are skipped.
func sections(cs table.ChangeSet) []section {
	var out []section
	for name, tc := range cs {
		if tc != nil && len(tc.Inserted)+len(tc.Updated)+len(tc.Deleted) > 0 {
			out = append(out, section{name, tc})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// summary is a table's heading: "inventory: 1 inserted, 2 updated".
func (s section) summary() string {
	var parts []string
	for _, p := range []struct {
		n    int
		verb string
	}{{len(s.tc.Inserted), "inserted"}, {len(s.tc.Updated), "updated"}, {len(s.tc.Deleted), "deleted"}} {
		if p.n > 0 {
			parts = append(parts, strconv.Itoa(p.n)+" "+p.verb)
		}
	}
	return s.name + ": " + strings.Join(parts, ", ")
}

// columns orders field names for display: the key first, then the schema's declared order, then
// the remaining names sorted.
func columns(schema *table.Schema, key string, names map[string]bool) []string {
	out := make([]string, 0, len(names))
	seen := make(map[string]bool, len(names))
	take := func(n string) {
		if names[n] && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	take(key)
	if schema != nil {
		for _, f := range schema.Fields {
			take(f.Name)
		}
	}
	rest := make([]string, 0, len(names))
	for n := range names {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// rowFields collects the field names of rows.
func rowFields(names map[string]bool, rows []table.Row) {
	for _, r := range rows {
		for f := range r {
			names[f] = true
		}
	}
}

// writeAll writes the rendered text in one call and reports the writer's error.
func writeAll(w io.Writer, s string) error {
	_, err := io.WriteString(w, s)
	return err
}
