// Package cli implements the starplan commands: flags, IO streams, exit codes and rendering.
// Logic that is not about the command line belongs in the packages above it (sandbox, store,
// engine); a command parses its options, calls them, and renders what they return.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/isolate"
	"github.com/starplan/starplan/store"
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

	ExitInterrupted = 130 // Ctrl-C or SIGTERM stopped the command (128 + SIGINT, as shells report it)
)

// exitError carries an exit code and an optional hint out of a command, and the errcode of its
// condition when the exit code alone does not name it (see codeOf).
type exitError struct {
	code   int
	err    error
	hint   string
	reason string
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that Main exits with code, printing hint as "Try: ...".
func withCode(code int, err error, hint string) error {
	return &exitError{code: code, err: err, hint: hint}
}

// withReason names the condition of err, an error of withCode (or any other, which then exits
// as a usage error), for the "code" of its JSON error: one of the errcode constants, as the
// server says it.
func withReason(reason string, err error) error {
	var ee *exitError
	if !errors.As(err, &ee) {
		return &exitError{code: ExitUsage, err: err, hint: "starplan --help", reason: reason}
	}
	tagged := *ee
	tagged.reason = reason
	return &tagged
}

// silentExit ends a command with a code after it has printed everything itself.
type silentExit int

func (s silentExit) Error() string { return fmt.Sprintf("exit %d", int(s)) }

// Command is the starplan program: the process's streams, and Ctrl-C (or SIGTERM) cancelling
// the command through its context, so workers are stopped and the audit log is flushed before
// it exits with ExitInterrupted. A second Ctrl-C kills at once.
func Command(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // the next signal gets the default action
	}()
	return MainContext(ctx, args, System())
}

// Main runs the starplan command line and returns the process exit code.
func Main(args []string, ios IOStreams) int { return MainContext(context.Background(), args, ios) }

// endOf is the exit code, hint and error a command's error ends the process with: a command
// that ctx cancelled exits with ExitInterrupted and no hint (what it was doing is moot), unless it
// says itself what the interruption left (an ExitInterrupted error of its own, with a hint).
func endOf(ctx context.Context, err error) (code int, hint string, _ error) {
	var ee *exitError
	switch {
	case ctx.Err() != nil && errors.As(err, &ee) && ee.code == ExitInterrupted:
		return ExitInterrupted, ee.hint, errors.New("interrupted")
	case ctx.Err() != nil:
		return ExitInterrupted, "", errors.New("interrupted")
	case errors.As(err, &ee):
		return ee.code, ee.hint, ee.err
	}
	return ExitUsage, "starplan --help", err // flag parsing and argument validation
}

// MainContext is Main under ctx: a command that ctx cancels exits with ExitInterrupted.
func MainContext(ctx context.Context, args []string, ios IOStreams) int {
	ios.args = args
	ios.ctx = ctx
	root := newRoot(ios)
	root.SetArgs(args)
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.Err)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var silent silentExit
	printed := errors.As(err, &silent) // the command printed its result itself
	if printed && ctx.Err() == nil {
		return int(silent)
	}
	code, hint, cause := endOf(ctx, err)
	fmt.Fprintf(ios.Err, "Error: %s\n", safeBlock(cause.Error(), "  "))
	if hint != "" {
		fmt.Fprintf(ios.Err, "Try: %s\n", safeBlock(hint, "  "))
	}
	if wantsJSON(cmd, args) && !printed {
		writeJSON(ios.Out, errorDocument{Error: errorBody{Code: codeOf(err, code), ExitCode: code, Message: cause.Error(), Hint: hint}})
	}
	return code
}

// exitNames name the conditions of the exit codes in JSON errors, where codeOf knows no more.
var exitNames = map[int]string{
	ExitInternal: errcode.Internal, ExitUsage: errcode.BadRequest, ExitRejected: errcode.Rejected, ExitContract: errcode.Contract,
	ExitConflict: errcode.Conflict, ExitModel: errcode.Model, ExitInterrupted: errcode.Interrupted,
}

// codeOf is the "code" of a JSON error: the condition err names (withReason), else the one its
// type says (a missing store, a store in use), else the one of its exit code. The codes are
// the server's for the same conditions (internal/errcode).
func codeOf(err error, exit int) string {
	var (
		ee      *exitError
		noStore *store.NoStoreError
		inUse   *store.InUseError
	)
	switch {
	case exit == ExitInterrupted:
		return errcode.Interrupted
	case errors.As(err, &ee) && ee.reason != "":
		return ee.reason
	case errors.As(err, &noStore):
		return errcode.NoStore
	case errors.As(err, &inUse):
		return errcode.StoreInUse
	}
	return exitNames[exit]
}

// errorDocument is what a --json caller gets on stdout when a command fails before it has a
// result to print: {"error": {"code", "exit_code", "message", "hint"}}. The same text goes to
// stderr for people.
type errorDocument struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code     string `json:"code"`
	ExitCode int    `json:"exit_code"`
	Message  string `json:"message"`
	Hint     string `json:"hint,omitempty"`
}

// wantsJSON reports whether the command was asked for --json, also when its flags did not parse
// (then cmd's flag set does not know, and the arguments are searched).
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup("json"); f != nil && f.Changed {
			return f.Value.String() == "true"
		}
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" {
			return true
		}
		if v, ok := strings.CutPrefix(a, "--json="); ok {
			b, err := strconv.ParseBool(v) // as the flag itself reads it
			return err == nil && b
		}
	}
	return false
}

// globalOptions are the flags every command shares.
type globalOptions struct {
	DB        string // --db DIR
	InProcess bool   // --in-process: run plans in this process instead of isolated workers

	// create is set for the command being run when it may create a missing store (see
	// createsStore); every other command fails on one.
	create bool
	// pool is the sandbox workers' pool runner started for the command, nil in process (serve's
	// metrics read it).
	pool *isolate.Pool
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
	color := "auto"
	ios.colorMode = &color
	root := &cobra.Command{
		Use:   "starplan",
		Short: "Run model-written plans safely against an embedded database",
		Long: `starplan runs a plan that a model wrote (a short Starlark program) with nothing but
whitelisted database helpers, under step, time and memory limits. It checks the output contract,
shows what the plan would change as before/after diffs, and applies only approved runs, atomically.

Exit codes: 0 ok, 1 internal error, 2 usage error, 3 plan rejected, 4 contract violation,
5 conflict on apply, 6 model unavailable, 130 interrupted.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			switch color {
			case "auto", "always", "never":
			default:
				return fmt.Errorf("--color is %q; use auto, always or never", color)
			}
			if f := cmd.Flag("db"); f != nil && f.Changed && g.DB == "" {
				return withCode(ExitUsage, errors.New("--db is empty"), "pass --db DIR, or leave --db out to use $STARPLAN_DB or the default store")
			}
			g.create = cmd.Annotations[createsStoreAnnotation] != ""
			through := (cmd.Annotations[throughServerAnnotation] == "yes" ||
				cmd.Annotations[throughServerAnnotation] == throughWithoutArgs && len(args) == 0) &&
				!domainGiven(cmd) // --domain DIR names the client's directory: run here
			switch {
			case ios.host != nil && !through:
				return withReason(errcode.Forbidden, relayRefusal(cmd))
			case ios.host == nil && through:
				// A server on the store holds its lock: run the command there.
				code, relayed, err := relayCommand(cmd.Context(), ios, g)
				if err != nil {
					return err
				}
				if relayed {
					return silentExit(code)
				}
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&color, "color", "auto", "colour in human output: auto (on a terminal, unless NO_COLOR is set or TERM=dumb), always or never")
	root.PersistentFlags().StringVar(&g.DB, "db", "", "the store: a directory, or a postgres:// URL (default $STARPLAN_DB, else $XDG_DATA_HOME/starplan, else ~/.local/share/starplan)")
	root.PersistentFlags().BoolVar(&g.InProcess, "in-process", false, "run plans in this process instead of isolated worker processes (a weaker memory bound, a faster start)")
	root.AddCommand(
		newDemoCmd(ios, g),
		// The commands that run plans create a missing store; db init, seed and import decide
		// for themselves (db.go).
		throughServer(createsStore(newAskCmd(ios, g))),
		newEvalCmd(ios, g),
		throughServer(createsStore(newExecCmd(ios, g))),
		throughServer(newApplyCmd(ios, g)),
		newRunsCmd(ios, g),
		throughServer(newCheckCmd(ios, g)),
		newRunCmd(ios, g),
		newDBCmd(ios, g),
		newDomainCmd(ios, g),
		throughServer(newDescribeCmd(ios, g)),
		throughServer(newPromptCmd(ios, g)),
		createsStore(newServeCmd(ios, g)),
		newTokenCmd(ios, g),
		newWorkerCmd(ios),
		newDocsCmd(ios),
	)
	finishHelp(root, ios, g)
	explainArgs(root) // after finishHelp: the errors quote the examples
	return root
}
