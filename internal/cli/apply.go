package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/engine"
)

// applyOptions are the options of `starplan apply`.
type applyOptions struct {
	RunID string
	JSON  bool
}

func newApplyCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &applyOptions{}
	cmd := &cobra.Command{
		Use:   "apply RUN_ID",
		Short: "Apply a pending run's changes atomically",
		Long: `Apply the changes of a pending run, all or nothing, after checking that every row it read or
changed is still as the dry run saw it. If the data moved, nothing is written and the exit code
is 5: run the plan again against the current data.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.RunID = args[0]
			return runApply(cmd.Context(), ios, g, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the result document as JSON")
	return cmd
}

// originCLI is who applied a run approved on the command line (apply, or [y/N] after exec or ask),
// as the run's record keeps it.
const originCLI = "cli"

func runApply(ctx context.Context, ios IOStreams, g *globalOptions, opts *applyOptions) error {
	return withEngine(ios, g, func(e *engine.Engine) error {
		res, err := e.ApplyAs(ctx, opts.RunID, originCLI)
		if err != nil {
			var re *engine.RunError
			if !errors.As(err, &re) || re.Result == nil {
				return runError(e, opts.RunID, err)
			}
			res = re.Result // the engine answers a conflicted run with its conflict
			// Every apply of a conflicted run answers as the first did: the conflict, exit 5.
			fmt.Fprintf(ios.Err, "Error: run %s already ended in a conflict: the data it depended on moved before its apply; nothing was written\n", safe(opts.RunID))
			fmt.Fprintf(ios.Err, "Try: starplan runs replay %s shows what the plan does with the data as it is now; run the plan again (exec, or ask again) for a new run to apply\n", safe(opts.RunID))
		}
		if opts.JSON || !ios.OutTTY {
			if err := writeJSON(ios.Out, res); err != nil {
				return err
			}
			return silentExit(outcomeExit(res.Outcome))
		}
		return reportApply(ios, e, res)
	})
}
