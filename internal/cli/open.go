package cli

import (
	"errors"
	"fmt"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
)

// storeDir resolves --db, then $STARPLAN_DB, then the user's data directory.
func storeDir(ios IOStreams, g *globalOptions) (string, error) {
	if g.DB != "" {
		return g.DB, nil
	}
	if env := ios.Getenv("STARPLAN_DB"); env != "" {
		return env, nil
	}
	if xdg := ios.Getenv("XDG_DATA_HOME"); xdg != "" {
		return xdg + "/starplan", nil
	}
	if home := ios.Getenv("HOME"); home != "" {
		return home + "/.local/share/starplan", nil
	}
	return "", withCode(ExitUsage, errors.New("cannot tell where the store lives: HOME is not set"), "pass --db DIR or set STARPLAN_DB")
}

// openStore opens (creating and seeding if new) the store the flags name.
func openStore(ios IOStreams, g *globalOptions) (*store.Store, error) {
	dir, err := storeDir(ios, g)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(dir, store.Options{Stderr: ios.Err})
	if err != nil {
		var inUse *store.InUseError
		if errors.As(err, &inUse) {
			return nil, withCode(ExitInternal, err, inUse.Hint())
		}
		return nil, withCode(ExitInternal, err, "check that "+dir+" is a starplan store you can write to, or pass --db DIR")
	}
	return st, nil
}

// withEngine opens the store and an engine over it, calls fn, and closes both, reporting the
// first error.
func withEngine(ios IOStreams, g *globalOptions, fn func(*engine.Engine) error) (err error) {
	st, err := openStore(ios, g)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); err == nil && cerr != nil {
			err = withCode(ExitInternal, fmt.Errorf("closing the store: %w", cerr), "")
		}
	}()
	e, stop, err := startEngine(ios, g, st)
	if err != nil {
		return err
	}
	defer stop()
	defer func() {
		cerr := e.Close() // flushes the audit log
		if cerr == nil {
			return
		}
		var silent silentExit
		if err == nil || errors.As(err, &silent) && int(silent) == ExitOK {
			err = withCode(ExitInternal, cerr, "the runs may be missing from starplan runs; check that the store's disk is writable")
			return
		}
		// The command already failed: say what else went wrong, keep its exit code.
		fmt.Fprintf(ios.Err, "Error: %s\n", safeBlock(cerr.Error(), "  "))
	}()
	return fn(e)
}

// startEngine starts an engine over st with the runner the flags ask for (isolated workers by
// default). stop releases the workers; the caller closes the engine, then the store.
func startEngine(ios IOStreams, g *globalOptions, st *store.Store) (*engine.Engine, func(), error) {
	pool, run, err := runner(ios, g)
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		if pool != nil {
			pool.Close()
		}
	}
	e, err := engine.New(st, engine.Options{Runner: run})
	if err != nil {
		stop()
		return nil, nil, withCode(ExitInternal, err, "")
	}
	return e, stop, nil
}

// engineError maps the engine's errors to exit codes and hints.
func engineError(err error) error {
	var re *engine.RunError
	if errors.As(err, &re) {
		return withCode(ExitUsage, err, re.Hint)
	}
	return withCode(ExitInternal, err, "run the command again; starplan runs show RUN_ID says whether a run was applied")
}

// outcomeExit is the exit code of a run's outcome.
func outcomeExit(o engine.Outcome) int {
	switch o {
	case engine.OutcomeOK:
		return ExitOK
	case engine.OutcomeContractViolation:
		return ExitContract
	case engine.OutcomeConflict:
		return ExitConflict
	}
	return ExitRejected
}
