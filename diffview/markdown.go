package diffview

import (
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/starplan/starplan/table"
)

// Markdown writes cs as GitHub-flavoured Markdown, for a review comment or a report: per changed
// table a "### inventory: 2 updated" heading and one table whose first column says what happened
// to the row (inserted, updated, deleted). Inserted and deleted rows show every field; updated
// rows show the key and the changed cells as ~~old~~ → **new** (a changed list or object as the
// paths that changed, one per line: address.city: ~~Oslo~~ → **Bergen**), with long text (see LongCell)
// diffed word by word. Cell text is escaped so that it cannot break the table or add formatting:
// | and Markdown punctuation are backslash-escaped and line breaks become <br>. An empty change
// set is "No changes.". opts.Color and opts.Width are ignored.
//
// The document is built in memory and written in one call; the only error is the writer's.
func Markdown(w io.Writer, cs table.ChangeSet, opts Options) error {
	secs := sections(cs)
	if len(secs) == 0 {
		return writeAll(w, "No changes.\n")
	}
	var sb strings.Builder
	for i, s := range secs {
		if i > 0 {
			sb.WriteByte('\n')
		}
		tc, key := s.tc, s.tc.Key
		names := map[string]bool{key: true}
		rowFields(names, tc.Inserted)
		rowFields(names, tc.Deleted)
		for _, u := range tc.Updated {
			for _, f := range u.Fields {
				names[f] = true
			}
		}
		cols := columns(opts.Schemas[s.name], key, names)

		sb.WriteString("### " + mdEscape(s.summary()) + "\n\n| change |")
		for _, c := range cols {
			sb.WriteString(" " + mdEscape(c) + " |")
		}
		sb.WriteString("\n| --- |" + strings.Repeat(" --- |", len(cols)) + "\n")
		rows := func(verb string, rows []table.Row) {
			for _, r := range rows {
				sb.WriteString("| " + verb + mdVia(tc, r[key]) + " |")
				for _, c := range cols {
					if v, ok := r[c]; ok {
						sb.WriteString(" " + mdEscape(show(v)) + " |")
					} else {
						sb.WriteString(" |")
					}
				}
				sb.WriteByte('\n')
			}
		}
		rows("inserted", tc.Inserted)
		for _, u := range tc.Updated {
			changed := make(map[string]bool, len(u.Fields))
			for _, f := range u.Fields {
				changed[f] = true
			}
			sb.WriteString("| updated" + mdVia(tc, u.Key) + " |")
			for _, c := range cols {
				switch {
				case c == key:
					sb.WriteString(" " + mdEscape(show(u.Key)) + " |")
				case changed[c] && changedPaths(u, c) != nil:
					var parts []string
					for _, p := range changedPaths(u, c) {
						parts = append(parts, mdEscape(escape(p.Path, false))+": "+mdChange(absent(p.Before, p.HadBefore), absent(p.After, p.HasAfter)))
					}
					sb.WriteString(" " + strings.Join(parts, "<br>") + " |")
				case changed[c]:
					sb.WriteString(" " + mdChange(u.Before[c], u.After[c]) + " |")
				default:
					sb.WriteString(" |")
				}
			}
			sb.WriteByte('\n')
		}
		rows("deleted", tc.Deleted)
	}
	return writeAll(w, sb.String())
}

// mdChange shows one changed value: a word diff when both sides are strings and one is long
// text, else ~~old~~ → **new**.
func mdChange(old, new any) string {
	a, aok := old.(string)
	b, bok := new.(string)
	if !aok || !bok || !isLong(a) && !isLong(b) {
		sa, sb := showPair(old, new)
		return mdEmph("~~", sa) + " → " + mdEmph("**", sb)
	}
	var sb strings.Builder
	for _, c := range wordDiff(escape(a, true), escape(b, true)) {
		if c.Same != "" {
			sb.WriteString(mdEscape(c.Same))
			continue
		}
		lead, del, ins, trail := trimEdit(c)
		sb.WriteString(mdEscape(lead))
		if del != "" {
			sb.WriteString(mdEmph("~~", del))
		}
		if del != "" && ins != "" {
			sb.WriteByte(' ')
		}
		if ins != "" {
			sb.WriteString(mdEmph("**", ins))
		}
		sb.WriteString(mdEscape(trail))
	}
	return sb.String()
}

// mdEmph wraps the escaped s in a delimiter (~~ or **), keeping spaces at either end outside it
// as GitHub requires; text that is all spaces is quoted instead.
func mdEmph(delim, s string) string {
	core := strings.TrimSpace(s)
	if core == "" {
		return delim + mdEscape(`"`+s+`"`) + delim
	}
	i := strings.Index(s, core)
	return mdEscape(s[:i]) + delim + mdEscape(core) + delim + mdEscape(s[i+len(core):])
}

// mdEscape makes s safe inside a GitHub table cell: line breaks become <br>, and characters
// that could end the cell or start formatting (| \ ` * ~ [ ] < > &, and _ at a word edge) are
// backslash-escaped.
func mdEscape(s string) string {
	if !strings.ContainsAny(s, "\n|\\`*_~[]<>&") {
		return s
	}
	var sb strings.Builder
	prev := ' '
	for i, r := range s {
		switch r {
		case '\n':
			sb.WriteString("<br>")
		case '|', '\\', '`', '*', '~', '[', ']', '<', '>', '&':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case '_':
			next, _ := utf8.DecodeRuneInString(s[i+1:])
			if !wordRune(prev) || i+1 == len(s) || !wordRune(next) {
				sb.WriteByte('\\')
			}
			sb.WriteRune(r)
		default:
			sb.WriteRune(r)
		}
		prev = r
	}
	return sb.String()
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// mdVia is the note after a row's change naming the helper through which it was written.
func mdVia(tc *table.TableChanges, key any) string {
	if h := tc.RowVia(key); h != "" {
		return " by " + mdEscape(h)
	}
	return ""
}
