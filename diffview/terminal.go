package diffview

import (
	"io"
	"strings"

	"github.com/starplan/starplan/table"
)

// Terminal writes cs for a person at a terminal. Each changed table gets a heading with its
// counts ("inventory: 2 updated"), then its inserted rows (+, every field), updated rows (~, the
// key and the changed fields only, each as old → new) and deleted rows (-, every field):
//
//	inventory: 2 updated
//	    item_id  quantity_in_stock
//	  ~ SG001    23 → 21
//	  ~ SG002    6 → 5
//
// A changed list or object shows the paths that changed, one per line
// (address.city: Oslo → Bergen, lines[1].qty: 2 → 3; a side without the path shows (absent)).
// Rows are aligned in columns when they fit in opts.Width and hold no long text; otherwise each
// row is shown as a record, one field per line, with long values wrapped. A change to long text
// (see LongCell) is a word diff: removed words as [-…-], added words as {+…+}. With opts.Color,
// removed values are red and added values green. An empty change set is "no changes".
//
// The view is built in memory and written in one call; the only error is the writer's.
func Terminal(w io.Writer, cs table.ChangeSet, opts Options) error {
	secs := sections(cs)
	if len(secs) == 0 {
		return writeAll(w, "no changes\n")
	}
	v := termView{color: opts.Color, width: opts.width()}
	for i, s := range secs {
		if i > 0 {
			v.sb.WriteByte('\n')
		}
		var h text
		h.add(s.summary(), bold)
		for _, l := range wrap(h, v.width) {
			v.line(l)
		}
		schema := opts.Schemas[s.name]
		key := s.tc.Key
		if len(s.tc.Inserted) > 0 {
			v.block(rowEntries(s.tc, s.tc.Inserted, "+", added, schema, key))
		}
		if len(s.tc.Updated) > 0 {
			v.block(updateEntries(s.tc, s.tc.Updated, schema, key))
		}
		if len(s.tc.Deleted) > 0 {
			v.block(rowEntries(s.tc, s.tc.Deleted, "-", removed, schema, key))
		}
	}
	return writeAll(w, v.sb.String())
}

// entry is one row as the terminal shows it.
type entry struct {
	marker string
	st     style // of the marker and the key
	key    text
	cells  map[string]text // by field name, without the key
}

// entries are the rows of one kind of change in one table, with their columns in display order.
type entries struct {
	keyName string
	cols    []string // without the key
	rows    []entry
	long    bool // some cell holds long text
}

// byHelper is the note after a row's key naming the helper through which it was written.
func byHelper(tc *table.TableChanges, key any) string {
	if h := tc.RowVia(key); h != "" {
		return "  (by " + h + ")"
	}
	return ""
}

func rowEntries(tc *table.TableChanges, rows []table.Row, marker string, st style, schema *table.Schema, key string) entries {
	names := map[string]bool{}
	rowFields(names, rows)
	es := entries{keyName: key, cols: withoutKey(columns(schema, key, names), key)}
	for _, r := range rows {
		e := entry{marker: marker, st: st, cells: make(map[string]text, len(r))}
		e.key.add(show(r[key]), st)
		if by := byHelper(tc, r[key]); by != "" {
			e.key.add(by, plain)
		}
		for f, val := range r {
			if f == key {
				continue
			}
			var t text
			t.add(show(val), st)
			e.cells[f] = t
			es.long = es.long || isLong(val)
		}
		es.rows = append(es.rows, e)
	}
	return es
}

func updateEntries(tc *table.TableChanges, ups []table.Update, schema *table.Schema, key string) entries {
	names := map[string]bool{}
	for _, u := range ups {
		for _, f := range u.Fields {
			names[f] = true
		}
	}
	es := entries{keyName: key, cols: withoutKey(columns(schema, key, names), key)}
	for _, u := range ups {
		e := entry{marker: "~", st: plain, cells: make(map[string]text, len(u.Fields))}
		e.key.add(show(u.Key)+byHelper(tc, u.Key), plain)
		for _, f := range u.Fields {
			if f == key {
				continue
			}
			if ps := changedPaths(u, f); ps != nil {
				var t text
				for i, p := range ps {
					if i > 0 {
						t.add("\n", plain)
					}
					t.add(escape(p.Path, false)+": ", plain)
					t = append(t, changeText(absent(p.Before, p.HadBefore), absent(p.After, p.HasAfter))...)
				}
				e.cells[f] = t
				es.long = es.long || len(ps) > 1
				continue
			}
			old, new := u.Before[f], u.After[f]
			e.cells[f] = changeText(old, new)
			es.long = es.long || isLong(old) || isLong(new)
		}
		es.rows = append(es.rows, e)
	}
	return es
}

func withoutKey(cols []string, key string) []string {
	if len(cols) > 0 && cols[0] == key {
		return cols[1:]
	}
	return cols
}

// changeText shows one changed value: a word diff when both sides are strings and one is long
// text, else "old → new".
func changeText(old, new any) text {
	var t text
	a, aok := old.(string)
	b, bok := new.(string)
	if !aok || !bok || !isLong(a) && !isLong(b) {
		sa, sb := showPair(old, new)
		t.add(sa, removed)
		t.add(" → ", plain)
		t.add(sb, added)
		return t
	}
	for _, c := range wordDiff(escape(a, true), escape(b, true)) {
		if c.Same != "" {
			t.add(c.Same, plain)
			continue
		}
		lead, del, ins, trail := trimEdit(c)
		t.add(lead, plain)
		if del != "" {
			t.add("[-"+del+"-]", removed)
		}
		if ins != "" {
			t.add("{+"+ins+"+}", added)
		}
		t.add(trail, plain)
	}
	return t
}

type termView struct {
	sb    strings.Builder
	color bool
	width int
}

func (v *termView) line(t text) {
	t.write(&v.sb, v.color)
	v.sb.WriteByte('\n')
}

// block shows es as a grid when it fits and holds no long text, else as records.
func (v *termView) block(es entries) {
	const gap = 2
	widths := make([]int, len(es.cols)+1)
	widths[0] = strWidth(es.keyName)
	for i, c := range es.cols {
		widths[i+1] = strWidth(c)
	}
	for _, e := range es.rows {
		widths[0] = max(widths[0], e.key.width())
		for i, c := range es.cols {
			widths[i+1] = max(widths[i+1], e.cells[c].width())
		}
	}
	total := 4 // "  + "
	for _, w := range widths {
		total += w + gap
	}
	if es.long || total-gap > v.width {
		v.records(es)
		return
	}

	var head text
	head.add("    ", plain)
	for i, name := range append([]string{es.keyName}, es.cols...) {
		head.add(pad(name, widths[i]+gap), dim)
	}
	v.line(head)
	for _, e := range es.rows {
		var t text
		t.add("  ", plain)
		t.add(e.marker+" ", e.st)
		t = append(t, e.key...)
		t.add(strings.Repeat(" ", widths[0]-e.key.width()+gap), plain)
		for i, c := range es.cols {
			cell := e.cells[c]
			t = append(t, cell...)
			t.add(strings.Repeat(" ", widths[i+1]-cell.width()+gap), plain)
		}
		v.line(t)
	}
}

// records shows each row as a marker line with its key, then one line per field with the value
// wrapped to the view's width. When the field names leave less than half of minWidth for the
// values, each value goes on the lines below its name instead.
func (v *termView) records(es entries) {
	nameWidth := 0
	for _, c := range es.cols {
		nameWidth = max(nameWidth, strWidth(c))
	}
	indent := 6 + nameWidth + 2
	stacked := v.width-indent < minWidth/2
	if stacked {
		indent = 8
	}
	for _, e := range es.rows {
		var t text
		t.add("  ", plain)
		t.add(e.marker+" ", e.st)
		v.line(append(t, e.key...))
		for _, c := range es.cols {
			cell, ok := e.cells[c]
			if !ok {
				continue
			}
			if stacked {
				var name text
				name.add("      "+c, plain)
				v.line(name)
			}
			for i, l := range wrap(cell, v.width-indent) {
				var t text
				if i == 0 && !stacked {
					t.add("      "+pad(c, nameWidth+2), plain)
				} else {
					t.add(strings.Repeat(" ", indent), plain)
				}
				v.line(append(t, l...))
			}
		}
	}
}

func pad(s string, n int) string {
	return s + strings.Repeat(" ", max(n-strWidth(s), 0))
}

// absentValue stands for the side of a path change that lacks the path.
type absentValue struct{}

// absent is v, or absentValue when the side does not have the path.
func absent(v any, has bool) any {
	if has {
		return v
	}
	return absentValue{}
}
