package diffview

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/starplan/starplan/table"
)

// MaxHeadline is the most characters (runes) a Headline has. A change set whose line would be
// longer keeps the rows that fit and ends with "; … N more rows".
const MaxHeadline = 160

// Bounds of the parts of a Headline.
const (
	// headlineValue is the most characters one value (a key, a field's old or new value) takes;
	// a longer one is cut and ends with "…".
	headlineValue = 24
	// headlineFields is how many changed fields of an updated row are named; the rest are
	// counted ("+2 fields").
	headlineFields = 3
	// headlineCols is how many values of an inserted or deleted row follow its key.
	headlineCols = 2
)

// Headline is a change set in one line of what changes, row by row, so that a reviewer scanning
// a queue sees which rows a run touches and how: "SG002 Wayfarer: quantity_in_stock 6→3;
// +TXN002 Alice 285.0". Tables are in name order and each table's rows as Cells lays them out
// (inserted, updated, deleted):
//
//   - an updated row is its key, the value of its first indexed field when that did not change
//     (its name, say), then each changed field with its old and new value ("price 95.0→90.0"), a
//     changed long text as "edited", at most three fields and then how many more;
//   - an inserted row is "+" and its key, a deleted row "-" and its key, then two of its values
//     (indexed fields first, then its first number, then its first short text), in column order.
//
// A string that is one word is shown bare, any other as Python's repr ('Walk-in customer'), so a
// value cannot pass for a separator; control and format characters are escaped (\x1b, \u202e),
// so the line is safe on a terminal; each value is cut at 24 characters and the line at
// MaxHeadline. Only opts.Schemas is read (for the column order and the indexed fields). An
// empty change set is "".
func Headline(cs table.ChangeSet, opts Options) string {
	total := 0
	for _, s := range sections(cs) {
		total += len(s.tc.Inserted) + len(s.tc.Updated) + len(s.tc.Deleted)
	}
	var parts []string
	length := 0 // runes in parts, with their separators
	add := func(p string) bool {
		parts = append(parts, p)
		length += utf8.RuneCountInString(p) + 2
		return length <= MaxHeadline+2 // past it, no later row can be shown
	}
	for _, s := range sections(cs) {
		schema := opts.Schemas[s.name]
		for _, r := range s.tc.Inserted {
			if !add("+" + wholeRowLine(r, schema, s.tc.Key)) {
				return bounded(parts, total, MaxHeadline)
			}
		}
		for _, u := range s.tc.Updated {
			if !add(updatedLine(u, schema, s.tc.Key)) {
				return bounded(parts, total, MaxHeadline)
			}
		}
		for _, r := range s.tc.Deleted {
			if !add("-" + wholeRowLine(r, schema, s.tc.Key)) {
				return bounded(parts, total, MaxHeadline)
			}
		}
	}
	return bounded(parts, total, MaxHeadline)
}

// bounded joins the first parts of total with "; " in at most max runes: all of them when they
// fit, else as many as fit together with "… N more rows" counting the others. A first part that
// does not fit even alone is cut.
func bounded(parts []string, total, max int) string {
	if all := strings.Join(parts, "; "); len(parts) == total && utf8.RuneCountInString(all) <= max {
		return all
	}
	more := func(n int) string { return "… " + strconv.Itoa(n) + " more rows" }
	kept, n := 0, 0 // parts kept, and their runes with separators
	for kept < len(parts) {
		width := utf8.RuneCountInString(parts[kept])
		if kept > 0 {
			width += 2 // "; "
		}
		need := n + width
		if rest := total - kept - 1; rest > 0 {
			need += 2 + utf8.RuneCountInString(more(rest))
		}
		if need > max {
			break
		}
		kept, n = kept+1, n+width
	}
	switch {
	case kept == total:
		return strings.Join(parts, "; ")
	case kept == 0 && total == 1:
		return clipRunes(parts[0], max)
	case kept == 0:
		tail := "; " + more(total-1)
		return clipRunes(parts[0], max-utf8.RuneCountInString(tail)) + tail
	}
	return strings.Join(parts[:kept], "; ") + "; " + more(total-kept)
}

// updatedLine is an updated row's part of a Headline.
func updatedLine(u table.Update, schema *table.Schema, key string) string {
	var b strings.Builder
	b.WriteString(headValue(u.Key))
	changed := make(map[string]bool, len(u.Fields))
	for _, f := range u.Fields {
		changed[f] = true
	}
	if schema != nil {
		for _, f := range schema.Indexes {
			if v, ok := u.After[f]; ok && f != key && !changed[f] && isShortScalar(v) {
				b.WriteString(" " + headValue(v) + ":")
				break
			}
		}
	}
	names := map[string]bool{}
	for _, f := range u.Fields {
		names[f] = true
	}
	var steps []string
	for _, f := range columns(schema, key, names) {
		if ps := changedPaths(u, f); ps != nil {
			for _, p := range ps {
				steps = append(steps, changeStep(p.Path, p.Before, p.HadBefore, p.After, p.HasAfter))
			}
			continue
		}
		old, hadOld := u.Before[f]
		new, hasNew := u.After[f]
		steps = append(steps, changeStep(f, old, hadOld, new, hasNew))
	}
	for i, s := range steps {
		if i == headlineFields && len(steps) > headlineFields+1 {
			b.WriteString(" +" + strconv.Itoa(len(steps)-i) + " fields")
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(" " + s)
	}
	return b.String()
}

// changeStep is one changed field or path: "quantity_in_stock 6→3", "notes edited", "tags[2]
// +'new'", "address.zip -'12345'".
func changeStep(path string, old any, hadOld bool, new any, hasNew bool) string {
	path = clipRunes(escape(path, false), headlineValue)
	switch {
	case hadOld && hasNew && (isLong(old) || isLong(new)):
		return path + " edited"
	case hadOld && hasNew:
		a, b := showPair(old, new)
		return path + " " + headText(a, old) + "→" + headText(b, new)
	case hadOld:
		return path + " -" + headValue(old)
	}
	return path + " +" + headValue(new)
}

// wholeRowLine is an inserted or deleted row's part of a Headline, without its sign: the key and
// headlineCols of its values.
func wholeRowLine(r table.Row, schema *table.Schema, key string) string {
	names := map[string]bool{}
	rowFields(names, []table.Row{r})
	cols := columns(schema, key, names)
	// Indexed fields first, then the first number, then the first short text, then the others.
	firstNumber, firstText := "", ""
	for _, f := range cols {
		if v := r[f]; f != key && isShortScalar(v) {
			if isNumber(v) && firstNumber == "" {
				firstNumber = f
			} else if !isNumber(v) && firstText == "" {
				firstText = f
			}
		}
	}
	rank := func(f string) int {
		switch {
		case f == key || !isShortScalar(r[f]):
			return -1
		case schema != nil && slices.Contains(schema.Indexes, f):
			return 0
		case f == firstNumber:
			return 1
		case f == firstText:
			return 2
		}
		return 3
	}
	var picked []string
	for want := 0; want <= 3 && len(picked) < headlineCols; want++ {
		for _, f := range cols {
			if rank(f) == want && len(picked) < headlineCols {
				picked = append(picked, f)
			}
		}
	}
	out := headValue(r[key])
	for _, f := range cols { // in column order
		if slices.Contains(picked, f) {
			out += " " + headValue(r[f])
		}
	}
	return out
}

// isShortScalar reports whether v is worth naming a row by: a number or a string that is not
// long text, not None, not a list or object.
func isShortScalar(v any) bool {
	switch v := v.(type) {
	case string:
		return v != "" && !isLong(v)
	case int, int64, float64, float32:
		return true
	}
	return false
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, int64, float64, float32:
		return true
	}
	return false
}

// headValue shows v in a Headline: a one-word string bare, any other string as its repr, other
// values as show does; cut at headlineValue.
func headValue(v any) string { return headText(show(v), v) }

// headText is headValue of v already shown as s (by show, or as a repr by showPair).
func headText(s string, v any) string {
	if str, ok := v.(string); ok && s == show(str) && (!oneWord(s) || strings.IndexByte(s, '\n') >= 0) {
		var sb strings.Builder
		repr(&sb, v)
		s = sb.String()
	}
	return clipRunes(s, headlineValue)
}

// oneWord reports whether s can stand bare in a Headline: no space, and none of the characters
// the line uses to separate its parts.
func oneWord(s string) bool {
	return !strings.ContainsAny(s, " \u00a0;,:'\"\\→…+") && !strings.HasPrefix(s, "-")
}

// clipRunes cuts s to max runes, the last of them "…", when it is longer.
func clipRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}
