package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/starplan/starplan/diffview"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/table"
)

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

// renderResult prints a run's result for people: the answer and STATUS, the plan's output,
// what went wrong (with what to do), and the changes it staged.
func renderResult(ios IOStreams, res *engine.Result, schemas map[string]*table.Schema) error {
	w := ios.Out
	p := painter(ios.Color())
	switch res.Outcome {
	case engine.OutcomeOK:
		fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "STATUS:"), res.Status)
		fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "Answer:"), res.AnswerText)
	default:
		fmt.Fprintf(w, "%s %s", p.paint(ansiRed+ansiBold, "Rejected:"), res.Outcome)
		if res.Limit != "" {
			fmt.Fprintf(w, " (%s limit)", res.Limit)
		}
		fmt.Fprintln(w)
	}
	if n := len(res.Rewrites); n > 0 {
		fmt.Fprintln(w, p.paint(ansiDim, fmt.Sprintf("(%d Python-isms rewritten to Starlark; starplan runs show %s lists them)", n, res.RunID)))
	}
	if res.Stdout != "" {
		fmt.Fprintln(w, p.paint(ansiBold, "Output:"))
		for _, line := range strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	for _, d := range res.Diagnostics {
		pos := ""
		if d.Line > 0 {
			pos = fmt.Sprintf("line %d:%d: ", d.Line, d.Col)
		}
		fmt.Fprintf(w, "  %s%s: %s\n", pos, p.paint(ansiRed, d.Code), d.Message)
		if d.Hint != "" {
			fmt.Fprintf(w, "    Try: %s\n", d.Hint)
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
		fmt.Fprintln(w, p.paint(ansiBold, label))
		if err := diffview.Terminal(w, res.Changes, diffview.Options{Color: ios.Color(), Schemas: schemas}); err != nil {
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

// printTable prints rows as aligned columns, cutting cells wider than maxCell.
func printTable(w io.Writer, fields []string, rows []table.Row, maxCell int) {
	cells := make([][]string, len(rows)+1)
	cells[0] = fields
	for i, r := range rows {
		line := make([]string, len(fields))
		for j, f := range fields {
			s := fmt.Sprint(r[f])
			if v, ok := r[f].(float64); ok {
				s = fmt.Sprintf("%.2f", v)
			}
			if r[f] == nil {
				s = ""
			}
			if len([]rune(s)) > maxCell {
				s = string([]rune(s)[:maxCell-1]) + "…"
			}
			line[j] = s
		}
		cells[i+1] = line
	}
	widths := make([]int, len(fields))
	for _, line := range cells {
		for j, c := range line {
			widths[j] = max(widths[j], len([]rune(c)))
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
				b.WriteString(strings.Repeat(" ", widths[j]-len([]rune(c))))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}
