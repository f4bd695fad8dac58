package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/telemetry"
)

// storeDir resolves --db, else bolt.DefaultDir from the command's environment.
func storeDir(ios IOStreams, g *globalOptions) (string, error) {
	if g.DB != "" {
		return g.DB, nil
	}
	dir, err := bolt.DefaultDir(ios.Getenv)
	if err != nil {
		return "", withCode(ExitUsage, err, "pass --db DIR or set STARPLAN_DB")
	}
	return dir, nil
}

// openStore opens the store the flags name with opts (their Stderr is set here).
func openStore(ios IOStreams, g *globalOptions, opts bolt.Options) (*bolt.Store, error) {
	dir, err := storeDir(ios, g)
	if err != nil {
		return nil, err
	}
	opts.Stderr = ios.Err
	st, err := bolt.Open(dir, opts)
	if err != nil {
		return nil, storeError(dir, err)
	}
	return st, nil
}

// storeError maps the store's errors to exit codes and hints: a missing store is a usage error
// (the command named a place that holds none); a damaged store, a full disk or a store in use
// exit 1.
func storeError(dir string, err error) error {
	var (
		noStore *store.NoStoreError
		damaged *store.DamagedError
		write   *store.WriteError
		inUse   *store.InUseError
		domain  *store.DomainError
	)
	switch {
	case errors.As(err, &noStore):
		return withCode(ExitUsage, err, noStore.Hint())
	case errors.As(err, &damaged):
		return withCode(ExitInternal, err, damaged.Hint())
	case errors.As(err, &write):
		return withCode(ExitInternal, err, write.Hint())
	case errors.As(err, &inUse):
		return inUseError(inUse)
	case errors.As(err, &domain):
		return withCode(ExitUsage, err, domain.Hint())
	}
	return withCode(ExitInternal, err, "check that "+dir+" is a starplan store you can write to, or pass --db DIR")
}

// withEngine opens the store and an engine over it, calls fn, and closes both, reporting the
// first error.
//
// The store is created (and seeded) when missing only for the commands marked createsStore.
//
// Inside `starplan serve`, running for a client (ios.host), it calls fn with the server's engine,
// which stays open.
func withEngine(ios IOStreams, g *globalOptions, fn func(*engine.Engine) error) (err error) {
	if ios.host != nil {
		return fn(ios.host.eng)
	}
	st, err := openStore(ios, g, bolt.Options{MustExist: !g.create})
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
func startEngine(ios IOStreams, g *globalOptions, st *bolt.Store) (*engine.Engine, func(), error) {
	pool, run, err := runner(ios, g)
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		if pool != nil {
			pool.Close()
		}
	}
	opts := engine.Options{Runner: run}
	tracing, err := telemetry.StartTracing(context.Background(), ios.Getenv) // nil unless OTEL_* ask for traces
	if err != nil {
		stop()
		return nil, nil, withCode(ExitUsage, err, "check the OTEL_EXPORTER_OTLP_* variables, or unset them")
	}
	if tracing != nil {
		opts.Observe = tracing.Observe
		release := stop
		stop = func() {
			release()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tracing.Shutdown(ctx); err != nil { // flushes the spans
				fmt.Fprintf(ios.Err, "Warning: exporting traces: %v\n", err)
			}
		}
	}
	e, err := engine.New(st, opts)
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
	var (
		damaged *store.DamagedError
		write   *store.WriteError
	)
	if errors.As(err, &damaged) {
		return storeError(filepath.Dir(damaged.Path), err)
	}
	if errors.As(err, &write) {
		return storeError(filepath.Dir(write.Path), err)
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

// storeOf is the store under e. The CLI makes engines only over the bbolt stores it opens
// (openStore), and needs what is particular to them: the directory (the relay's socket, the
// server's token and info files) and the file-level db commands.
func storeOf(e *engine.Engine) *bolt.Store { return e.Store().(*bolt.Store) }
