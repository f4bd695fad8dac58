package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/diffview"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/table"
)

// runsOptions are the options of `starplan runs` and `starplan runs show`.
type runsOptions struct {
	JSON  bool
	Limit int
	State string // --state: only runs in this state
	Since string // --since: only runs at most this old (30d, 12h) or since this date
	Diff  string // runs show --diff: only the run's changes, as markdown or json
	RunID string

	// Cursor is --cursor: list from a previous page's next_cursor ("" from the newest), and
	// print {runs, next_cursor} as JSON.
	Cursor string
	paged  bool // --cursor was given
}

// timeLayout is how people see a time: local, with its zone, so that two machines' listings
// compare.
const timeLayout = "2006-01-02 15:04:05 MST"

func newRunsCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &runsOptions{}
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the audit log of runs, newest first",
		Example: `  starplan runs --state pending
  starplan runs --since 7d --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.paged = cmd.Flags().Changed("cursor")
			return runRuns(ios, g, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the list as JSON")
	cmd.Flags().IntVar(&opts.Limit, "limit", 20, "how many runs to list (0: all)")
	cmd.Flags().StringVar(&opts.State, "state", "", "only runs in this state: "+strings.Join(engine.States, ", "))
	cmd.Flags().StringVar(&opts.Since, "since", "", "only runs since an age (30d, 12h) or a date (2026-11-01)")
	cmd.Flags().StringVar(&opts.Cursor, "cursor", "", `page through the log: list from the previous page's next_cursor ("" from the newest run); JSON is then {runs, next_cursor}`)
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
	show.Flags().StringVar(&opts.Diff, "diff", "", "print only the run's changes: markdown (for a review comment) or json (with the changed fields)")
	_ = show.RegisterFlagCompletionFunc("diff", cobra.FixedCompletions([]string{"markdown", "json"}, cobra.ShellCompDirectiveNoFileComp))
	replay := &cobra.Command{
		Use:   "replay RUN_ID",
		Short: "Run a recorded run again (its program, request, limits and now()) and say whether it gives the same result",
		Long: `Run a recorded run's program again, with its recorded request, limits and now(), against the
store as it is now, and compare the outcome, STATUS, answer, output and changes with the record.
Nothing is recorded or written. Exit 0 when identical, 5 when something differs (the data the run
read has changed since, or starplan itself has). A run that was applied exits 0 when it differs:
its own apply changed the data it read, and the report notes so.`,
		Example: "  starplan runs replay r_0123456789",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.RunID = args[0]
			return runRunsReplay(cmd.Context(), ios, g, opts)
		},
	}
	replay.Flags().BoolVar(&opts.JSON, "json", false, "print the report (with the replay's result) as JSON")
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Verify the audit log's hash chain and name the first record that does not match; exit 1 when one does not",
		Long: `Verify the audit log's hash chain: every entry's hash and its link to the entry before, the
chain's head, and that every run record is byte for byte what its last entry chained (a record
edited after it was written, added outside starplan or removed other than by prune does not
match). Prints the head's hash: keep it elsewhere to tell a rewritten chain later. Exit 0 when
everything matches, 1 when anything does not.`,
		Example: `  starplan runs verify
  starplan runs verify --json | jq .head_sha256`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRunsVerify(ios, g, opts) },
	}
	verify.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON")
	cmd.AddCommand(throughServer(show), throughServer(replay), throughServer(newRunsPruneCmd(ios, g)), throughServer(verify))
	return throughServer(cmd)
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
reviewers' decisions about it. AGE is a number of days (30d) or a Go
duration (12h, 90m); it must be positive. Pending runs are kept, since applying them needs
their record, unless --pending is given.

The oldest runs go first, in steps of at most ` + fmt.Sprint(engine.PruneBatch) + ` runs: each step is one transaction that
removes its runs and writes the audit log's checkpoint that excuses them, so a prune stopped
part way (killed, disk full) leaves the steps done complete and nothing of the rest, and runs
verify still passes.

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
			if rep != nil && rep.Removed > 0 { // the steps done stand: say what they removed
				if opts.JSON || !ios.OutTTY {
					writeJSON(ios.Out, rep)
				} else {
					fmt.Fprintf(ios.Out, "Removed %d %s older than %s before the error, in %d complete %s.\n", rep.Removed, plural(rep.Removed, "run", "runs"),
						opts.OlderThan, rep.Steps, plural(rep.Steps, "step", "steps"))
				}
			}
			return runsError(err)
		}
		if opts.JSON || !ios.OutTTY {
			return writeJSON(ios.Out, rep)
		}
		fmt.Fprintf(ios.Out, "Removed %d %s older than %s (before %s), %s of records.\n", rep.Removed, plural(rep.Removed, "run", "runs"),
			opts.OlderThan, rep.Before.Local().Format(timeLayout), builtins.FormatBytes(rep.Bytes))
		if rep.KeptPending > 0 {
			fmt.Fprintf(ios.Out, "Kept %d pending %s older than that: apply %s (starplan apply RUN_ID), or prune with --pending.\n",
				rep.KeptPending, plural(rep.KeptPending, "run", "runs"), plural(rep.KeptPending, "it", "them"))
		}
		fmt.Fprintln(ios.Out, "The store's file does not shrink: its freed pages are reused for later records.")
		return nil
	})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func runRuns(ios IOStreams, g *globalOptions, opts *runsOptions) error {
	if opts.State != "" && !slices.Contains(engine.States, opts.State) {
		return withCode(ExitUsage, fmt.Errorf("--state %q is not a run state", opts.State), "use one of "+strings.Join(engine.States, ", "))
	}
	var since time.Time
	if opts.Since != "" {
		var err error
		if since, err = parseSince(opts.Since, time.Now()); err != nil {
			return withCode(ExitUsage, err, "give an age such as --since 7d or 12h, or a date such as 2026-11-01")
		}
	}
	return withEngine(ios, g, func(e *engine.Engine) error {
		page, err := e.ListRuns(engine.ListOptions{State: opts.State, Limit: opts.Limit, Cursor: opts.Cursor, Since: since})
		var unreadable *engine.UnreadableError
		var badCursor *engine.CursorError
		if errors.As(err, &badCursor) {
			return withCode(ExitUsage, err, badCursor.Hint())
		}
		if err != nil && !errors.As(err, &unreadable) {
			return engineError(err)
		}
		// Records that do not decode are left out of the list, which is printed; the command
		// then fails naming them.
		done := func() error {
			if unreadable != nil {
				return runsError(unreadable)
			}
			return nil
		}
		// The page only is read; the log's size and counts are kept by its index.
		runs, size, total := page.Runs, page.Bytes, page.Count
		matched := total // runs of the state, or every run; unknown (-1) with --since
		if opts.State != "" {
			matched = page.States[opts.State]
		}
		if !since.IsZero() {
			matched = -1
		}
		if opts.JSON || !ios.OutTTY {
			var v any = runs
			if opts.paged {
				v = struct {
					Runs       []engine.RunSummary `json:"runs"`
					NextCursor string              `json:"next_cursor,omitempty"`
				}{runs, page.NextCursor}
			}
			if err := writeJSON(ios.Out, v); err != nil {
				return err
			}
			return done()
		}
		if len(runs) == 0 {
			if total == 0 {
				fmt.Fprintln(ios.Out, "no runs yet")
			} else {
				fmt.Fprintf(ios.Out, "no runs match; the audit log holds %d\n", total)
			}
			return done()
		}
		rows := make([]table.Row, len(runs))
		cols := []string{"run", "time", "origin", "state", "outcome", "status", "rows", "request"}
		for i, r := range runs {
			rows[i] = table.Row{
				"run": r.ID, "time": r.Time.Local().Format(timeLayout), "origin": r.Origin,
				"outcome": string(r.Outcome), "status": r.Status, "rows": int64(r.ChangedRows), "state": r.State,
				"request": r.Request, "subject": r.Subject,
			}
			if r.Subject != "" && !slices.Contains(cols, "subject") {
				cols = slices.Insert(cols, len(cols)-1, "subject") // only when a run acts for someone
			}
		}
		// The request, last, gets what the other columns leave of the terminal's width.
		printTableFit(ios.Out, cols, rows, 48, ios.Width)
		shown := fmt.Sprintf("%d %s", len(runs), plural(len(runs), "run", "runs"))
		if len(runs) < total {
			shown = fmt.Sprintf("%d of %d runs shown", len(runs), total)
			if matched > len(runs) && matched < total {
				shown += fmt.Sprintf(" (%d match; --limit 0 lists them all)", matched)
			}
		}
		fmt.Fprintf(ios.Out, "%s; the audit log holds %s of records (starplan runs prune --older-than 30d removes old ones)\n", shown, builtins.FormatBytes(size))
		if page.NextCursor != "" {
			fmt.Fprintf(ios.Out, "next page: the same command with --cursor %s\n", page.NextCursor)
		}
		return done()
	})
}

// runError maps the error of an operation on run id (engineError), named errcode.UnknownRun
// when the audit log holds no such run: the engine refuses an unknown id with the *RunError it
// uses for its other refusals (already applied, nothing to apply), so the log is asked.
func runError(e *engine.Engine, id string, err error) error {
	mapped := engineError(err)
	var re *engine.RunError
	if errors.As(err, &re) {
		if _, rerr := e.Record(id); errors.As(rerr, &re) {
			return withReason(errcode.UnknownRun, mapped)
		}
	}
	return mapped
}

// runsError maps an error about the audit log to its exit code and hint: an unreadable record
// is the store's damage (exit 1), not a failure to run the command again.
func runsError(err error) error {
	var unreadable *engine.UnreadableError
	if errors.As(err, &unreadable) {
		return withCode(ExitInternal, err, unreadable.Hint())
	}
	return engineError(err)
}

// parseSince reads --since: an age before now (parseAge's forms: 30d, 12h) or a date
// (2006-01-02, local) or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, nil
	}
	age, err := parseAge(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: neither an age (7d, 12h) nor a date (2026-11-01)", s)
	}
	return now.Add(-age), nil
}

func runRunsShow(ios IOStreams, g *globalOptions, opts *runsOptions) error {
	if opts.Diff != "" && opts.Diff != "markdown" && opts.Diff != "json" {
		return withCode(ExitUsage, fmt.Errorf("--diff %q: the formats are markdown and json", opts.Diff), "leave --diff out for the whole record on a terminal")
	}
	return withEngine(ios, g, func(e *engine.Engine) error {
		doc, err := e.Show(opts.RunID)
		if err != nil {
			var unreadable *engine.UnreadableError
			if errors.As(err, &unreadable) {
				return runsError(err)
			}
			return runError(e, opts.RunID, err)
		}
		switch opts.Diff {
		case "markdown":
			return diffview.Markdown(ios.Out, doc.Changes, diffview.Options{Schemas: schemaMap(e)})
		case "json":
			return diffview.JSON(ios.Out, doc.Changes)
		}
		if opts.JSON || !ios.OutTTY {
			return writeJSON(ios.Out, doc) // the run's one document, as GET /v1/runs/{id} and show_run give it
		}
		w := ios.Out
		p := painter(ios.Color())
		fmt.Fprintf(w, "%s %s  %s  (%s)\n", p.paint(ansiBold, "Run"), safe(doc.RunID), doc.Time.Local().Format(timeLayout), safe(doc.Origin))
		if doc.Subject != "" {
			fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "Subject:"), safe(doc.Subject))
		}
		if doc.Request != "" {
			fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "Request:"), safe(doc.Request))
		}
		if doc.Model != nil {
			fmt.Fprintf(w, "%s %s, attempt %d, %d+%d tokens, %.0f ms\n", p.paint(ansiBold, "Model:"), safe(doc.Model.Model), doc.Model.Attempt, doc.Model.PromptTokens, doc.Model.CompletionTokens, doc.Model.LatencyMS)
		}
		fmt.Fprintf(w, "%s %s, %d steps, %.2f ms; %s\n", p.paint(ansiBold, "Outcome:"), doc.Outcome, doc.Steps, doc.DurationMS, stateText(doc))
		if doc.ReplySHA256 != "" && doc.ReplyBytes > len(doc.Reply) {
			fmt.Fprintf(w, "%s %s in all, sha256 %s; the log keeps its start\n", p.paint(ansiBold, "Reply:"), builtins.FormatBytes(int64(doc.ReplyBytes)), safe(doc.ReplySHA256))
		}
		if who := whoLine(e, doc); who != "" {
			fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "Who:"), safe(who))
		}
		if len(doc.Truncated) > 0 {
			fmt.Fprintf(w, "%s %s\n", p.paint(ansiBold, "Cut to stay bounded:"), safe(strings.Join(doc.Truncated, ", ")))
		}
		if doc.Program != "" {
			fmt.Fprintln(w, p.paint(ansiBold, "Program:"))
			for i, line := range strings.Split(strings.TrimRight(doc.Program, "\n"), "\n") {
				fmt.Fprintf(w, "  %3d  %s\n", i+1, safeLine(line))
			}
		} else {
			fmt.Fprintln(w, p.paint(ansiBold, "Reply (no program found):"))
			reply := strings.ReplaceAll(strings.TrimSpace(doc.Reply), "\r\n", "\n")
			fmt.Fprintf(w, "  %s\n", safeBlock(reply, "  "))
		}
		printRewrites(ios.Out, "line", doc.Rewrites)
		return renderResult(ios, &doc.Result, schemaMap(e))
	})
}

// stateText says where a run stands, for people: its state (engine.StateOf) with what to do or
// what happened.
func stateText(doc *engine.Document) string {
	switch {
	case doc.State == engine.StateApplied:
		return "applied " + doc.AppliedAt.Local().Format(timeLayout)
	case doc.State == engine.StatePending:
		return "pending: starplan apply " + doc.RunID
	case doc.ApplyError != "":
		return "apply failed: " + safe(doc.ApplyError)
	}
	return "not applied"
}

func runRunsReplay(ctx context.Context, ios IOStreams, g *globalOptions, opts *runsOptions) error {
	return withEngine(ios, g, func(e *engine.Engine) error {
		rep, err := e.Replay(ctx, opts.RunID)
		if err != nil {
			mapped := runError(e, opts.RunID, err)
			var re *engine.RunError
			if errors.As(err, &re) && codeOf(mapped, ExitUsage) != errcode.UnknownRun {
				return withReason(errcode.NotReplayable, mapped) // the record holds no whole program
			}
			return mapped
		}
		code := ExitOK
		expected := false // the run's own apply moved the data it read
		if !rep.Identical {
			code = ExitConflict
			if rec, err := e.Record(opts.RunID); err == nil && rec.Applied {
				code, expected = ExitOK, true
				note := fmt.Sprintf("run %s was applied at %s: its own apply changed the data it read, so run again now it gives another result; that is expected, not a fault",
					rep.RunID, rec.AppliedAt.Local().Format(timeLayout))
				rep.Note = strings.TrimPrefix(rep.Note+"; "+note, "; ")
			}
		}
		if opts.JSON || !ios.OutTTY {
			if err := writeJSON(ios.Out, rep); err != nil {
				return err
			}
			return silentExit(code)
		}
		p := painter(ios.Color())
		if rep.Identical {
			fmt.Fprintf(ios.Out, "%s run %s, run again, gives the recorded result.\n", p.paint(ansiGreen+ansiBold, "Identical:"), safe(rep.RunID))
		} else if expected {
			fmt.Fprintf(ios.Out, "%s run %s, run again, differs from its record: %s\n", p.paint(ansiBold, "Differs, as expected:"), safe(rep.RunID), safe(strings.Join(rep.Differences, "; ")))
		} else {
			fmt.Fprintf(ios.Out, "%s run %s, run again, differs from its record: %s\n", p.paint(ansiRed+ansiBold, "Differs:"), safe(rep.RunID), safe(strings.Join(rep.Differences, "; ")))
		}
		if rep.Note != "" {
			fmt.Fprintln(ios.Out, p.paint(ansiDim, "("+safe(rep.Note)+")"))
		}
		return silentExit(code)
	})
}

// whoLine says who proposed a run and who decided on it: "proposed by agent; approved by alice,
// bob (2 needed)".
func whoLine(e *engine.Engine, doc *engine.Document) string {
	rec := doc.Who
	expired := false
	if doc.Pending {
		if r, err := e.Record(doc.RunID); err == nil {
			expired = e.Expired(r)
		}
	}
	var parts []string
	if rec.ProposedBy != "" {
		parts = append(parts, "proposed by "+rec.ProposedBy)
	}
	needed := ""
	if rec.ApprovalsNeeded > 1 {
		needed = fmt.Sprintf(" (%d needed)", rec.ApprovalsNeeded)
	}
	switch {
	case rec.AutoApprovedByRule != "":
		parts = append(parts, "auto-approved by rule "+rec.AutoApprovedByRule)
	case len(rec.ApprovedBy) > 0:
		parts = append(parts, "approved by "+strings.Join(rec.ApprovedBy, ", ")+needed)
	case doc.Pending && expired:
		parts = append(parts, "expired waiting for approval")
	case doc.Pending:
		parts = append(parts, fmt.Sprintf("awaiting %s", plural(rec.ApprovalsNeeded, "1 approval", fmt.Sprintf("%d approvals", rec.ApprovalsNeeded))))
	}
	if rec.RejectedBy != "" {
		parts = append(parts, "rejected by "+rec.RejectedBy)
	}
	return strings.Join(parts, "; ")
}

// runRunsVerify verifies the audit log's hash chain and prints what it found.
func runRunsVerify(ios IOStreams, g *globalOptions, opts *runsOptions) error {
	return withEngine(ios, g, func(e *engine.Engine) error {
		rep, err := e.VerifyChain()
		if err != nil {
			return runsError(err)
		}
		if opts.JSON || !ios.OutTTY {
			if err := writeJSON(ios.Out, rep); err != nil {
				return err
			}
			if !rep.OK() {
				return silentExit(ExitInternal)
			}
			return nil
		}
		fmt.Fprintf(ios.Out, "%d %s, %d chain %s; head %d sha256 %s\n", rep.Records, plural(rep.Records, "record", "records"),
			rep.Entries, plural(rep.Entries, "entry", "entries"), rep.HeadSeq, rep.HeadHash)
		if rep.Unchained > 0 {
			fmt.Fprintf(ios.Out, "%d %s written before the chain began: not chained.\n", rep.Unchained, plural(rep.Unchained, "record was", "records were"))
		}
		if rep.OK() {
			fmt.Fprintln(ios.Out, "The chain and every record match.")
			return nil
		}
		for _, p := range rep.Problems {
			fmt.Fprintf(ios.Out, "  %s\n", safe(p.Message))
		}
		return withCode(ExitInternal, fmt.Errorf("the audit log does not match its hash chain: %s", rep.Problems[0].Message),
			"restore the store from a backup; starplan runs show RUN_ID shows the record as it is now")
	})
}
