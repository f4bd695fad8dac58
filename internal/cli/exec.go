package cli

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/engine"
)

// execOptions are the options of `starplan exec`.
type execOptions struct {
	File    string
	Request string
	Subject string
	Apply   bool
	JSON    bool
	Domain  string // --domain DIR: run on a temporary store of that domain (or on --db made from it)
	Timings bool
}

func newExecCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &execOptions{}
	cmd := &cobra.Command{
		Use:   "exec FILE|-",
		Short: "Run a plan or model reply against the store (a dry run unless approved)",
		Long: `Run a plan, or a model reply holding one, against a staged view of the store. Prints the
answer and STATUS, the plan's output and the changes it would make. A run that changes data is
a dry run: on a terminal you are asked to apply it; otherwise it stays pending and
'starplan apply RUN_ID' applies it. --apply applies at once. Piped or with --json, prints the
result document. With --domain DIR, the plan runs on a temporary store made from that domain
directory (seeded with its seed.json, removed at the end: nothing is kept), or on the store --db
names, made from it when missing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			return runExec(cmd.Context(), ios, g, opts)
		},
	}
	addDomainFlag(cmd, &opts.Domain)
	cmd.Flags().StringVar(&opts.Request, "request", "", "the customer request the plan answers (user_request)")
	cmd.Flags().StringVar(&opts.Subject, "subject", "", "the id of the subject the run acts for (helpers and rules read it with run_subject())")
	cmd.Flags().BoolVar(&opts.Apply, "apply", false, "apply the changes at once if the plan is accepted")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the result document as JSON")
	cmd.Flags().BoolVar(&opts.Timings, "timings", false, timingsFlag)
	return cmd
}

func runExec(ctx context.Context, ios IOStreams, g *globalOptions, opts *execOptions) error {
	src, err := readPlan(ctx, ios, opts.File)
	if err != nil {
		return err
	}
	var review string
	err = withDomainEngine(ios, g, opts.Domain, func(e *engine.Engine, scratch bool) error {
		var t *timer
		rctx := ctx
		if opts.Timings {
			var stop func()
			t = &timer{}
			rctx, stop = t.start(ctx, e)
			defer stop()
		}
		res, err := e.Run(rctx, engine.Request{Reply: src, UserRequest: opts.Request, Subject: opts.Subject, Apply: opts.Apply, Origin: "exec"})
		if err != nil {
			return engineError(err)
		}
		if scratch {
			ios := ios
			ios.scratch = opts.Domain
			_, err = finishRun(ctx, ios, e, res, opts.JSON, t)
			return err
		}
		review, err = finishRun(ctx, ios, e, res, opts.JSON, t)
		return err
	})
	if err != nil || review == "" {
		return err
	}
	return approveRun(ctx, ios, g, review)
}

// timingsFlag is the help of exec's and ask's --timings.
const timingsFlag = "print the run's phase durations (check, run, diff, contract, dry run, apply, model, and the runner's); with --json, as its timings object"

// finishRun prints a run's result and ends with the run's exit code. exec and ask share it. A
// pending run on a terminal is not decided here: its id is returned, for approveRun to ask
// about once the store is closed. t, when set, adds the run's timings (--timings).
func finishRun(ctx context.Context, ios IOStreams, e *engine.Engine, res *engine.Result, asJSON bool, t *timer) (review string, err error) {
	var tm *timings
	if t != nil {
		tm = t.result(res)
	}
	if asJSON || !ios.OutTTY {
		var doc any = res
		if tm != nil {
			doc = struct {
				*engine.Result
				Timings *timings `json:"timings"`
			}{res, tm}
		}
		if err := writeJSON(ios.Out, doc); err != nil {
			return "", err
		}
		return "", silentExit(outcomeExit(res.Outcome))
	}
	if err := renderResult(ios, res, schemaMap(e)); err != nil {
		return "", err
	}
	if tm != nil {
		tm.print(ios)
	}
	if n := len(res.Rewrites); n > 0 {
		p := painter(ios.Color())
		fmt.Fprintln(ios.Out, p.paint(ansiDim, fmt.Sprintf("(%d Python-isms rewritten to Starlark; starplan runs show %s lists them)", n, res.RunID)))
	}
	if res.Pending && ios.scratch != "" {
		fmt.Fprintf(ios.Out, "not kept: the run was made on a temporary store of %s, which is removed now (pass --db DIR to keep the store and its pending run)\n", safe(ios.scratch))
		return "", silentExit(outcomeExit(res.Outcome))
	}
	if res.Pending {
		if !ios.InTTY {
			fmt.Fprintf(ios.Out, "pending: starplan apply %s\n", res.RunID)
			return "", silentExit(outcomeExit(res.Outcome))
		}
		return res.RunID, nil
	}
	return "", silentExit(outcomeExit(res.Outcome))
}

// approveRun asks the person whether to apply a pending run, and applies it if they say yes.
// The store is closed while they decide, so other commands and servers can use it meanwhile;
// the apply then checks, as every apply does, that nothing the run depended on has moved.
func approveRun(ctx context.Context, ios IOStreams, g *globalOptions, runID string) error {
	if !confirm(ios, "Apply these changes? [y/N] ") {
		fmt.Fprintf(ios.Out, "Not applied. To apply later: starplan apply %s\n", runID)
		return nil
	}
	// A server may have taken the store while the person decided: then apply through it.
	through := ios
	through.args = []string{"apply", runID}
	if code, relayed, err := relayCommand(ctx, through, g); relayed {
		if err != nil {
			return err
		}
		return silentExit(code)
	}
	return withEngine(ios, g, func(e *engine.Engine) error {
		applied, err := e.ApplyAs(ctx, runID, originCLI)
		if err != nil {
			return engineError(err)
		}
		return reportApply(ios, e, applied)
	})
}

// reportApply prints the outcome of an apply.
func reportApply(ios IOStreams, e *engine.Engine, res *engine.Result) error {
	p := painter(ios.Color())
	if res.Applied {
		fmt.Fprintf(ios.Out, "%s run %s: %d rows written.\n", p.paint(ansiGreen+ansiBold, "Applied"), res.RunID, res.Changes.Rows())
		return nil
	}
	if err := renderResult(ios, res, schemaMap(e)); err != nil {
		return err
	}
	return silentExit(outcomeExit(res.Outcome))
}

// confirm asks a yes/no question on the terminal; anything but y or yes is no.
func confirm(ios IOStreams, question string) bool {
	fmt.Fprint(ios.Out, question)
	line, _ := bufio.NewReader(ios.In).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes"
}
