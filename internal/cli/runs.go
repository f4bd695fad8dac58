package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	cmd.AddCommand(show, newRunsPruneCmd(ios, g))
	return cmd
}

// pruneOptions are the options of `starplan runs prune`.
type pruneOptions struct {
	JSON      bool
	OlderThan string // an age: a Go duration (90m, 12h) or whole days (30d)
	Pending   bool
}

func newRunsPruneCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &pruneOptions{}
	cmd := &cobra.Command{
		Use:   "prune --older-than AGE",
		Short: "Remove old runs from the audit log",
		Long: `Remove from the audit log every run older than AGE (its apply, else its run, counts), with the
reviewers' decisions about it, in one transaction. AGE is a number of days (30d) or a Go
duration (12h, 90m); it must be positive. Pending runs are kept, since applying them needs
their record, unless --pending is given.

The store's file does not shrink: bbolt keeps the freed pages and reuses them for later
records, so pruning stops the file from growing rather than making it smaller.`,
		Example: "  starplan runs prune --older-than 30d",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			age, err := parseAge(opts.OlderThan)
			if err != nil {
				return withCode(ExitUsage, err, "give an age such as --older-than 30d, 12h or 90m")
			}
			return runRunsPrune(cmd.Context(), ios, g, opts, age)
		},
	}
	cmd.Flags().StringVar(&opts.OlderThan, "older-than", "", "remove runs older than this: 30d, 12h, 90m (required)")
	cmd.Flags().BoolVar(&opts.Pending, "pending", false, "remove old pending runs too; they can then never be applied")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print what was removed as JSON")
	return cmd
}

// parseAge reads an age: whole days with a d suffix (30d), or a Go duration (12h, 1h30m). It
// must be positive.
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("--older-than is required")
	}
	var age time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n > int(time.Duration(1<<63-1)/(24*time.Hour)) {
			return 0, fmt.Errorf("--older-than %q: a number of days is whole, as in 30d", s)
		}
		age = time.Duration(n) * 24 * time.Hour
	} else {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("--older-than %q: not an age (30d, 12h, 90m)", s)
		}
		age = d
	}
	if age <= 0 {
		return 0, fmt.Errorf("--older-than %s: the age must be positive (0 would remove every run)", s)
	}
	return age, nil
}

func runRunsPrune(ctx context.Context, ios IOStreams, g *globalOptions, opts *pruneOptions, age time.Duration) error {
	return withEngine(ios, g, func(e *engine.Engine) error {
		rep, err := e.Prune(ctx, engine.PruneOptions{OlderThan: age, Pending: opts.Pending})
		if err != nil {
			return engineError(err)
		}
		if opts.JSON || !ios.OutTTY {
			return writeJSON(ios.Out, rep)
		}
		fmt.Fprintf(ios.Out, "Removed %d %s older than %s (before %s), %s of records.\n", rep.Removed, plural(rep.Removed, "run", "runs"),
			opts.OlderThan, rep.Before.Local().Format("2006-01-02 15:04:05"), humanBytes(rep.Bytes))
		if rep.KeptPending > 0 {
			fmt.Fprintf(ios.Out, "Kept %d pending %s older than that: apply %s (starplan apply RUN_ID), or prune with --pending.\n",
				rep.KeptPending, plural(rep.KeptPending, "run", "runs"), plural(rep.KeptPending, "it", "them"))
		}
		fmt.Fprintln(ios.Out, "The store's file does not shrink: its freed pages are reused for later records.")
		return nil
	})
}

// humanBytes renders a size in bytes for people: 512 B, 3.4 KiB, 12.0 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func runRuns(ios IOStreams, g *globalOptions, opts *runsOptions) error {
	return withEngine(ios, g, func(e *engine.Engine) error {
		runs, err := e.Runs()
		if err != nil {
			return engineError(err)
		}
		total, size := len(runs), int64(0)
		for _, r := range runs {
			size += int64(r.Bytes)
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
		shown := fmt.Sprintf("%d %s", total, plural(total, "run", "runs"))
		if len(runs) < total {
			shown = fmt.Sprintf("%d of %d runs shown", len(runs), total)
		}
		fmt.Fprintf(ios.Out, "%s; the audit log holds %s of records (starplan runs prune --older-than 30d removes old ones)\n", shown, humanBytes(size))
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
		if rec.ReplySHA256 != "" && rec.ReplyBytes > len(rec.Reply) {
			fmt.Fprintf(w, "%s %s in all, sha256 %s; the log keeps its start\n", p.paint(ansiBold, "Reply:"), humanBytes(int64(rec.ReplyBytes)), safe(rec.ReplySHA256))
		}
		if len(rec.Truncated) > 0 {
			fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "Cut to stay bounded:"), safe(strings.Join(rec.Truncated, ", ")))
		}
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
