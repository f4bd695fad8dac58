// Package cli implements the starplan commands: flags, IO streams, exit codes and rendering.
// Logic that is not about the command line belongs in the packages above it (sandbox, store,
// engine); a command parses its options, calls them, and renders what they return.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes. They are documented in the README and stable.
const (
	ExitOK       = 0 // the command did what was asked (a plan ran and satisfied its contract)
	ExitInternal = 1 // starplan itself failed (I/O, a corrupt store, a bug)
	ExitUsage    = 2 // the command line was wrong
	ExitRejected = 3 // the plan was rejected: extraction, check, runtime error or a limit
	ExitContract = 4 // the plan ran but broke the output contract or the mutation policy
	ExitConflict = 5 // applying failed because the data changed since the dry run
	ExitModel    = 6 // the model could not be reached or never produced a valid plan
)

// exitError carries an exit code and an optional hint out of a command.
type exitError struct {
	code int
	err  error
	hint string
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that Main exits with code, printing hint as "Try: ...".
func withCode(code int, err error, hint string) error {
	return &exitError{code: code, err: err, hint: hint}
}

// silentExit ends a command with a code after it has printed everything itself.
type silentExit int

func (s silentExit) Error() string { return fmt.Sprintf("exit %d", int(s)) }

// Main runs the starplan command line and returns the process exit code.
func Main(args []string, ios IOStreams) int {
	root := newRoot(ios)
	root.SetArgs(args)
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.Err)
	err := root.ExecuteContext(context.Background())
	if err == nil {
		return ExitOK
	}
	var silent silentExit
	if errors.As(err, &silent) {
		return int(silent)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintf(ios.Err, "Error: %s\n", safeBlock(ee.err.Error(), "  "))
		if ee.hint != "" {
			fmt.Fprintf(ios.Err, "Try: %s\n", safeBlock(ee.hint, "  "))
		}
		return ee.code
	}
	// Anything else comes from flag parsing or argument validation.
	fmt.Fprintf(ios.Err, "Error: %s\nTry: starplan --help\n", safeBlock(err.Error(), "  "))
	return ExitUsage
}

// globalOptions are the flags every command shares.
type globalOptions struct {
	DB        string // --db DIR
	InProcess bool   // --in-process: run plans in this process instead of isolated workers

	// create is set for the command being run when it may create a missing store (see
	// createsStore); every other command fails on one.
	create bool
}

// createsStoreAnnotation marks a command that creates a missing store, seeded with the demo
// data, as a newcomer's first command does. The rest only open one: a read never creates state.
const createsStoreAnnotation = "starplan/creates-store"

// createsStore marks cmd with createsStoreAnnotation and returns it.
func createsStore(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[createsStoreAnnotation] = "true"
	return cmd
}

func newRoot(ios IOStreams) *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "starplan",
		Short: "Run model-written plans safely against an embedded database",
		Long: `starplan runs a plan that a model wrote (a short Starlark program) with nothing but
whitelisted database helpers, under step, time and memory limits. It checks the output contract,
shows what the plan would change as before/after diffs, and applies only approved runs, atomically.

Exit codes: 0 ok, 1 internal error, 2 usage error, 3 plan rejected, 4 contract violation,
5 conflict on apply, 6 model unavailable.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if f := cmd.Flag("db"); f != nil && f.Changed && g.DB == "" {
				return withCode(ExitUsage, errors.New("--db is empty"), "pass --db DIR, or leave --db out to use $STARPLAN_DB or the default store")
			}
			g.create = cmd.Annotations[createsStoreAnnotation] != ""
			return nil
		},
	}
	root.PersistentFlags().StringVar(&g.DB, "db", "", "store directory (default $STARPLAN_DB, else $XDG_DATA_HOME/starplan, else ~/.local/share/starplan)")
	root.PersistentFlags().BoolVar(&g.InProcess, "in-process", false, "run plans in this process instead of isolated worker processes (a weaker memory bound, a faster start)")
	root.AddCommand(
		newDemoCmd(ios, g),
		// The commands that run plans create a missing store; db init, seed and import decide
		// for themselves (db.go).
		createsStore(newAskCmd(ios, g)),
		newEvalCmd(ios, g),
		createsStore(newExecCmd(ios, g)),
		newApplyCmd(ios, g),
		newRunsCmd(ios, g),
		newCheckCmd(ios, g),
		newRunCmd(ios, g),
		newDBCmd(ios, g),
		createsStore(newServeCmd(ios, g)),
		newWorkerCmd(ios),
	)
	return root
}

// readSource reads a plan or reply from a file, or from In when the name is "-".
func readSource(ios IOStreams, name string) (string, error) {
	if name == "-" {
		b, err := io.ReadAll(ios.In)
		if err != nil {
			return "", withCode(ExitInternal, fmt.Errorf("reading standard input: %w", err), "")
		}
		return string(b), nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return "", withCode(ExitUsage, fmt.Errorf("cannot read %s: %w", name, errors.Unwrap(err)), "give the path of a plan file, or - to read standard input")
	}
	return string(b), nil
}
