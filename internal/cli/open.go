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
	"github.com/starplan/starplan/store/opener"
	"github.com/starplan/starplan/telemetry"
)

// storeTarget resolves the store the command names: --db (a directory, or a URL such as
// postgres://…), else $STARPLAN_DB, else the default directory (bolt.DefaultDir) from the
// command's environment.
func storeTarget(ios IOStreams, g *globalOptions) (string, error) {
	if g.DB != "" {
		return g.DB, nil
	}
	target, err := bolt.DefaultDir(ios.Getenv)
	if err != nil {
		return "", withCode(ExitUsage, err, "pass --db DIR or set STARPLAN_DB")
	}
	return target, nil
}

// localDir is target's directory when it names a store of this machine (a path, not a URL):
// where a server keeps its socket, token and info files beside the store.
func localDir(target string) (string, bool) {
	if _, isURL := opener.Scheme(target); isURL {
		return "", false
	}
	return target, true
}

// storeOpener is the opener the command opens stores with: the built-in backends, unless a test
// gave its own.
func (s IOStreams) storeOpener() opener.Opener {
	if s.opener != nil {
		return *s.opener
	}
	return opener.Builtin()
}

// openedStore is a store a command opened, and what it says about it.
type openedStore struct {
	st      store.Store
	created bool   // the command's open made it
	name    string // how messages name it: its directory, or its URL without a password
}

// storeName is how messages name st, which target named: a local store's directory, else
// target without its password.
func storeName(st store.Store, target string) string {
	if l, ok := st.(store.Local); ok {
		return l.Dir()
	}
	return opener.Redact(target)
}

// openStore opens the store the flags name with opts (their Stderr is set here).
func openStore(ios IOStreams, g *globalOptions, opts opener.Options) (openedStore, error) {
	target, err := storeTarget(ios, g)
	if err != nil {
		return openedStore{}, err
	}
	opts.Stderr = ios.Err
	st, created, err := ios.storeOpener().Open(ios.context(), target, opts)
	if err != nil {
		return openedStore{}, storeError(opener.Redact(target), err)
	}
	return openedStore{st: st, created: created, name: storeName(st, target)}, nil
}

// storeError maps the store's errors to exit codes and hints: a missing store, or a --db no
// backend of this build opens, is a usage error (the command named a place that holds none); a
// damaged store, a full disk or a store in use exit 1. name is the store as messages name it.
func storeError(name string, err error) error {
	var (
		noStore *store.NoStoreError
		damaged *store.DamagedError
		write   *store.WriteError
		inUse   *store.InUseError
		domain  *store.DomainError
		missing *opener.MissingBackendError
		scheme  *opener.UnknownSchemeError
		// A PostgreSQL store's mapped tables that do not fit their SQL tables (pg.MappingError,
		// matched by its methods: this package does not import the backend).
		mapping interface {
			Mismatches() int
			Hint() string
		}
	)
	switch {
	case errors.As(err, &missing):
		return withCode(ExitUsage, err, missing.Hint())
	case errors.As(err, &scheme):
		return withCode(ExitUsage, err, scheme.Hint())
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
	case errors.As(err, &mapping):
		return withCode(ExitUsage, err, mapping.Hint())
	}
	if _, local := localDir(name); !local {
		return withCode(ExitInternal, err, "check that the database "+name+" answers and that you may write to it, or pass --db DIR")
	}
	return withCode(ExitInternal, err, "check that "+name+" is a starplan store you can write to, or pass --db DIR")
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
	o, err := openStore(ios, g, opener.Options{Create: g.create})
	if err != nil {
		return err
	}
	st := o.st
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
func startEngine(ios IOStreams, g *globalOptions, st store.Store) (*engine.Engine, func(), error) {
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
	if errors.As(err, &re) && re.Code != "" { // a refusal the server names too (errcode.RunChanged)
		return withReason(re.Code, withCode(ExitUsage, err, re.Hint))
	}
	if errors.As(err, &re) {
		return withCode(ExitUsage, err, re.Hint)
	}
	var se *engine.SubjectError
	if errors.As(err, &se) {
		return withCode(ExitUsage, err, se.Hint)
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

// storeDirOf is the directory of the store under e when it is a store of this machine
// (store.Local), where the server's socket, token and info files go.
func storeDirOf(e *engine.Engine) (string, bool) {
	l, ok := e.Store().(store.Local)
	if !ok {
		return "", false
	}
	return l.Dir(), true
}
