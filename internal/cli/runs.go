package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/table"
)

// runsOptions are the options of `starplan runs` and `starplan runs show`.
type runsOptions struct {
	JSON  bool
	Limit int
	RunID string
}

func newRunsCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &runsOptions{}
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the audit log of runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRuns(ios, g, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the list as JSON")
	cmd.Flags().IntVar(&opts.Limit, "limit", 20, "how many runs to list (0: all)")
	show := &cobra.Command{
		Use:   "show RUN_ID",
		Short: "Show everything the audit log holds about a run",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.RunID = args[0]
			return runRunsShow(ios, g, opts)
		},
	}
	show.Flags().BoolVar(&opts.JSON, "json", false, "print the audit record as JSON")
	cmd.AddCommand(show)
	return cmd
}

func runRuns(ios IOStreams, g *globalOptions, opts *runsOptions) error {
	return withEngine(ios, g, func(e *engine.Engine) error {
		runs, err := e.Runs()
		if err != nil {
			return engineError(err)
		}
		if opts.Limit > 0 && len(runs) > opts.Limit {
			runs = runs[:opts.Limit]
		}
		if opts.JSON || !ios.OutTTY {
			if runs == nil {
				runs = []engine.RunSummary{}
			}
			return writeJSON(ios.Out, runs)
		}
		if len(runs) == 0 {
			fmt.Fprintln(ios.Out, "no runs yet")
			return nil
		}
		rows := make([]table.Row, len(runs))
		for i, r := range runs {
			state := ""
			switch {
			case r.Applied:
				state = "applied"
			case r.Pending:
				state = "pending"
			}
			rows[i] = table.Row{
				"run": r.ID, "time": r.Time.Local().Format("2006-01-02 15:04:05"), "origin": r.Origin,
				"outcome": string(r.Outcome), "status": r.Status, "rows": int64(r.ChangedRows), "state": state,
				"request": r.Request,
			}
		}
		printTable(ios.Out, []string{"run", "time", "origin", "outcome", "status", "rows", "state", "request"}, rows, 48)
		return nil
	})
}

func runRunsShow(ios IOStreams, g *globalOptions, opts *runsOptions) error {
	return withEngine(ios, g, func(e *engine.Engine) error {
		rec, err := e.Record(opts.RunID)
		if err != nil {
			return engineError(err)
		}
		if opts.JSON || !ios.OutTTY {
			return writeJSON(ios.Out, rec)
		}
		w := ios.Out
		p := painter(ios.Color())
		fmt.Fprintf(w, "%s %s  %s  (%s)\n", p.paint(ansiBold, "Run"), safe(rec.ID), rec.Time.Local().Format("2006-01-02 15:04:05"), safe(rec.Origin))
		if rec.Request != "" {
			fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "Request:"), safe(rec.Request))
		}
		if rec.Model != nil {
			fmt.Fprintf(w, "%s %s, attempt %d, %d+%d tokens, %.0f ms\n", p.paint(ansiBold, "Model:"), safe(rec.Model.Model), rec.Model.Attempt, rec.Model.PromptTokens, rec.Model.CompletionTokens, rec.Model.LatencyMS)
		}
		state := "not applied"
		switch {
		case rec.Applied:
			state = "applied " + rec.AppliedAt.Local().Format("2006-01-02 15:04:05")
		case rec.Pending:
			state = "pending: starplan apply " + rec.ID
		case rec.ApplyError != "":
			state = "apply failed: " + safe(rec.ApplyError)
		}
		fmt.Fprintf(w, "%s %s, %d steps, %.2f ms; %s\n", p.paint(ansiBold, "Outcome:"), rec.Outcome, rec.Steps, rec.DurationMS, state)
		if rec.Program != "" {
			fmt.Fprintln(w, p.paint(ansiBold, "Program:"))
			for i, line := range strings.Split(strings.TrimRight(rec.Program, "\n"), "\n") {
				fmt.Fprintf(w, "  %3d  %s\n", i+1, safeLine(line))
			}
		} else {
			fmt.Fprintln(w, p.paint(ansiBold, "Reply (no program found):"))
			reply := strings.ReplaceAll(strings.TrimSpace(rec.Reply), "\r\n", "\n")
			fmt.Fprintf(w, "  %s\n", safeBlock(reply, "  "))
		}
		printRewrites(ios.Out, "line", rec.Rewrites)
		return renderResult(ios, rec.Result(), schemaMap(e))
	})
}
