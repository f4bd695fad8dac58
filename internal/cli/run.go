package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/sandbox"
)

// runOptions are the options of `starplan run`.
type runOptions struct {
	File    string
	JSON    bool
	Request string
	Domain  string // --domain DIR: run against that domain's tables and helpers, as exec --domain
	Subject string // --subject ID: whom the run acts for, as exec --subject
}

func newRunCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run FILE|-",
		Short: "Run a plan in the sandbox with no database and print the result",
		Long: `Run a plan or model reply in the sandbox, with the language builtins only (no tables), and
print its outcome, output, answer and final globals. Use it to try the sandbox's limits and
Python compatibility; use exec to run a plan against the store. With --domain DIR, the plan runs
with that domain's tables (its seed.json) and helpers on a temporary store, exactly as
'starplan exec --domain DIR' runs it, and prints exec's result.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			if opts.Domain != "" {
				return runExec(cmd.Context(), ios, g, &execOptions{File: opts.File, Request: opts.Request, JSON: opts.JSON, Domain: opts.Domain, Subject: opts.Subject})
			}
			return runRun(cmd.Context(), ios, opts)
		},
	}
	addDomainFlag(cmd, &opts.Domain)
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the result document as JSON")
	cmd.Flags().StringVar(&opts.Request, "request", "", "the user_request the plan sees")
	cmd.Flags().StringVar(&opts.Subject, "subject", "", "the id of the subject the run acts for (the plan reads it with run_subject())")
	return cmd
}

func runRun(ctx context.Context, ios IOStreams, opts *runOptions) error {
	src, err := readPlan(ctx, ios, opts.File)
	if err != nil {
		return err
	}
	if err := access.CheckSubject(opts.Subject); err != nil {
		return withCode(ExitUsage, fmt.Errorf("--subject: %w", err), "give the id of whom the run acts for, such as M001")
	}
	env := sandbox.NewEnv(sandboxInputs())
	res := env.Run(ctx, sandbox.Request{Reply: src, Inputs: map[string]any{"user_request": opts.Request, sandbox.InputSubject: opts.Subject}})
	res.Diagnostics = nonNil(res.Diagnostics)
	res.Rewrites = nonNilRewrites(res.Rewrites)
	if opts.JSON {
		if err := writeJSON(ios.Out, res); err != nil {
			return err
		}
	} else {
		printRewrites(ios.Out, opts.File, res.Rewrites)
		if res.Stdout != "" {
			fmt.Fprint(ios.Out, safeBlock(res.Stdout, ""))
		}
		printDiagnostics(ios.Out, opts.File, res.Diagnostics)
		fmt.Fprintf(ios.Out, "outcome: %s", res.Outcome)
		if res.Limit != "" {
			fmt.Fprintf(ios.Out, " (%s limit)", res.Limit)
		}
		fmt.Fprintf(ios.Out, ", %d steps, %s\n", res.Steps, res.Duration.Round(1000))
		for _, name := range []string{"STATUS", "answer_text"} {
			if v, ok := res.Globals[name]; ok {
				fmt.Fprintf(ios.Out, "%s: %s\n", name, safeBlock(fmt.Sprint(v), "  "))
			}
		}
	}
	if res.Outcome != sandbox.OutcomeOK {
		return silentExit(ExitRejected)
	}
	return nil
}
