package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/starplan/starplan/diffview"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/table"
)

// Everything a command prints for people that a plan, a model, a file or stored data chose
// (output, answers, STATUS, diagnostics, requests, programs, cells, file names, errors) goes
// through safe or safeBlock, on a terminal or not: no character of it can then act on a
// terminal (escape sequences, C1 controls, carriage returns, bidi overrides; termsafe.Escape),
// and each is shown escaped instead. JSON output is exact (writeJSON). The only escape sequences
// starplan writes are its own styles below.

// safe makes s printable on one line: every character a terminal acts on, a line break and a
// tab included, is shown escaped.
func safe(s string) string { return termsafe.Escape(s, 0) }

// safeBlock makes s printable as text of several lines: line breaks and tabs stay, everything
// else a terminal acts on is shown escaped, and each line after the first is indented by indent
// so that the text stays under its label.
func safeBlock(s, indent string) string {
	s = termsafe.Escape(s, termsafe.Text)
	if indent == "" {
		return s
	}
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}

// safeLine makes one line of a listing (a program, a plan's output) printable: tabs stay.
func safeLine(s string) string { return termsafe.Escape(s, termsafe.KeepTab) }

// ANSI styles, used only when IOStreams.Color allows.
const (
	ansiBold  = "\x1b[1m"
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

type painter bool

func (p painter) paint(style, s string) string {
	if !p {
		return s
	}
	return style + s + ansiReset
}

// scanNoteRows is how many rows a run's reads must walk on one filter before its result notes
// it: below that a walk costs less than noticing it.
const scanNoteRows = 10_000

// renderResult prints a run's result for people: the answer and STATUS, the plan's output,
// what went wrong (with what to do), and the changes it staged.
func renderResult(ios IOStreams, res *engine.Result, schemas map[string]*table.Schema) error {
	w := ios.Out
	p := painter(ios.Color())
	switch res.Outcome {
	case engine.OutcomeOK:
		fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "STATUS:"), safe(res.Status))
		fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "Answer:"), safeBlock(res.AnswerText, "        "))
	default:
		fmt.Fprintf(w, "%s %s", p.paint(ansiRed+ansiBold, "Rejected:"), res.Outcome)
		if res.Limit != "" {
			fmt.Fprintf(w, " (%s limit)", res.Limit)
		}
		fmt.Fprintln(w)
	}
	if res.Stdout != "" {
		fmt.Fprintln(w, p.paint(ansiBold, "Output:"))
		for _, line := range strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", safeLine(line))
		}
	}
	for _, d := range res.Diagnostics {
		pos := ""
		if d.Line > 0 {
			pos = fmt.Sprintf("line %d:%d: ", d.Line, d.Col)
		}
		fmt.Fprintf(w, "  %s%s: %s\n", pos, p.paint(ansiRed, safe(d.Code)), safeBlock(d.Message, "    "))
		if d.Hint != "" {
			fmt.Fprintf(w, "    Try: %s\n", safeBlock(d.Hint, "         "))
		}
	}
	for _, sc := range res.Scans {
		if sc.Rows >= scanNoteRows {
			fmt.Fprintf(w, "%s a read of %s filtered on %s walked %s (%s): an equality or $ieq on the key or on a field the table lists in \"indexes\" (domain.json) is answered without a walk\n",
				p.paint(ansiBold, "Note:"), safe(sc.Table), safe(strings.Join(sc.Fields, ", ")), counted(int(sc.Rows), "row", "rows"), counted(int(sc.Calls), "call", "calls"))
		}
	}
	if !res.Changes.Empty() {
		label := "Changes:"
		switch {
		case res.Applied:
			label = "Applied changes:"
		case res.Pending:
			label = "Changes (dry run, not applied):"
		case res.Outcome != engine.OutcomeOK:
			label = "Changes the plan tried (none applied):"
		}
		if res.Subject != "" {
			label = strings.TrimSuffix(label, ":") + ", on behalf of " + safe(res.Subject) + ":"
		}
		fmt.Fprintln(w, p.paint(ansiBold, label))
		if err := diffview.Terminal(w, res.Changes, diffview.Options{Color: ios.Color(), Width: ios.Width, Schemas: schemas}); err != nil {
			return withCode(ExitInternal, err, "")
		}
	}
	return nil
}

// schemaMap indexes an engine's schemas by table name, for the diff renderer.
func schemaMap(e *engine.Engine) map[string]*table.Schema {
	m := map[string]*table.Schema{}
	for _, s := range engine.Schemas(e.Store()) {
		m[s.Name] = s
	}
	return m
}

// printTable prints rows as aligned columns, cutting cells wider than maxCell. Cells are shown
// safe: a line break or an escape sequence in a value cannot break or restyle the table.
func printTable(w io.Writer, fields []string, rows []table.Row, maxCell int) {
	printTableFit(w, fields, rows, maxCell, 0)
}

// minLastCell is the fewest columns printTableFit leaves the last column on a narrow terminal:
// a line that wraps is better than a cell cut to nothing.
const minLastCell = 16

// printTableFit is printTable on a terminal width columns wide (0: unknown): the last column,
// free text such as a request, is cut to what the others leave of the width (at least
// minLastCell) instead of to maxCell.
func printTableFit(w io.Writer, fields []string, rows []table.Row, maxCell, width int) {
	cells := make([][]string, len(rows)+1)
	cells[0] = make([]string, len(fields))
	for j, f := range fields {
		cells[0][j] = safe(f)
	}
	for i, r := range rows {
		line := make([]string, len(fields))
		for j, f := range fields {
			s := safe(fmt.Sprint(r[f]))
			switch v := r[f].(type) {
			case float64:
				s = fmt.Sprintf("%.2f", v)
			case []any, map[string]any:
				s = safe(diffview.Value(v)) // as a plan writes it, floats with their fraction
			}
			if r[f] == nil {
				s = ""
			}
			if width <= 0 || j < len(fields)-1 {
				s = termsafe.Truncate(s, maxCell)
			}
			line[j] = s
		}
		cells[i+1] = line
	}
	widths := make([]int, len(fields))
	for _, line := range cells {
		for j, c := range line[:len(line)-1] {
			widths[j] = max(widths[j], termsafe.Width(c))
		}
	}
	if last := len(fields) - 1; width > 0 && last >= 0 {
		used := 2 * last // the separators
		for _, n := range widths[:last] {
			used += n
		}
		for _, line := range cells {
			line[last] = termsafe.Truncate(line[last], max(width-used, minLastCell))
		}
	}
	for _, line := range cells {
		var b strings.Builder
		for j, c := range line {
			if j > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if j < len(line)-1 {
				b.WriteString(strings.Repeat(" ", widths[j]-termsafe.Width(c)))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// counted is n and its noun, such as "1 row" or "2 rows".
func counted(n int, one, many string) string { return fmt.Sprintf("%d %s", n, plural(n, one, many)) }
