package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

// A domain without a store: check, exec, run, describe and prompt take --domain DIR, so a domain
// being written can be tried before any store is made of it. check needs no store at all; the
// others run on a temporary store made from the directory (seeded with its seed.json) and
// removed when the command ends, or, with --db, on that store: created from the directory when
// missing, and refused when it holds another definition (starplan domain upgrade records a new
// one). A command given --domain never goes through a server: the directory is the client's.

// addDomainFlag declares --domain DIR on cmd, into dir.
func addDomainFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "domain", "", "use the domain in this directory instead of the store's: a temporary store made from it (removed at the end) unless --db is given")
}

// domainGiven reports whether cmd was given --domain (such a command runs here, never in a server).
func domainGiven(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("domain")
	return f != nil && f.Changed
}

// domainEnv is the environment a plan is checked against for the domain in dir: its tables and
// helpers; no store is opened or made.
func domainEnv(ios IOStreams, dir string) (*sandbox.Env, error) {
	dom, err := loadDomainDirFor(ios, dir, "nothing was checked")
	if err != nil {
		return nil, err
	}
	env, ds := sandbox.NewDomainEnv(dom.Tables, dom.Definition[sandbox.HelpersFile])
	if len(ds) > 0 { // LoadDomain checked the helpers: this is a bug
		return nil, withCode(ExitInternal, fmt.Errorf("the helpers of %s do not check: %s", dir, ds), "")
	}
	return env, nil
}

// withDomainEngine is withEngine for a command that may name a domain directory: with dir
// empty it is withEngine; otherwise fn gets an engine over a temporary store made from the
// domain in dir, or over the store --db names (see openDomainStore). scratch tells fn's caller
// that the store is temporary: nothing fn leaves in it is kept.
func withDomainEngine(ios IOStreams, g *globalOptions, dir string, fn func(e *engine.Engine, scratch bool) error) (err error) {
	if dir == "" {
		return withEngine(ios, g, func(e *engine.Engine) error { return fn(e, false) })
	}
	dom, err := loadDomainDirFor(ios, dir, "nothing was run")
	if err != nil {
		return err
	}
	var st *bolt.Store
	scratch := g.DB == ""
	if scratch {
		tmp, err := os.MkdirTemp("", "starplan-domain-")
		if err != nil {
			return withCode(ExitInternal, fmt.Errorf("making a temporary store: %w", err), "set TMPDIR to a directory you can write to, or pass --db DIR")
		}
		defer os.RemoveAll(tmp)
		if st, err = bolt.Open(tmp, bolt.Options{Domain: dom}); err != nil {
			return withCode(ExitInternal, fmt.Errorf("making a temporary store of %s: %w", dir, err), "")
		}
	} else if st, err = openDomainStore(ios, g.DB, dir, dom); err != nil {
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
		if cerr := e.Close(); cerr != nil && !scratch {
			var silent silentExit
			if err == nil || errors.As(err, &silent) && int(silent) == ExitOK {
				err = withCode(ExitInternal, cerr, "the runs may be missing from starplan runs; check that the store's disk is writable")
				return
			}
			fmt.Fprintf(ios.Err, "Error: %s\n", safeBlock(cerr.Error(), "  "))
		}
	}()
	return fn(e, scratch)
}

// openDomainStore opens the store in db for the domain dom (read from dir): a missing store is
// made from it, seeded; an existing one must hold exactly dom's definition.
func openDomainStore(ios IOStreams, db, dir string, dom *store.Domain) (*bolt.Store, error) {
	st, err := bolt.Open(db, bolt.Options{MustExist: true})
	if errors.Is(err, store.ErrNoStore) {
		if st, err = bolt.Open(db, bolt.Options{Domain: dom, Stderr: ios.Err}); err != nil {
			return nil, storeError(db, err)
		}
		return st, nil
	}
	if err != nil {
		return nil, storeError(db, err)
	}
	if held := st.Domain(); held.Name != dom.Name || !maps.Equal(held.Definition, dom.Definition) {
		st.Close()
		what := "another version of it"
		if held.Name != dom.Name {
			what = "the " + held.Name + " domain"
		}
		return nil, withCode(ExitUsage, fmt.Errorf("the store at %s holds %s, not the domain in %s; nothing was run", db, what, dir),
			fmt.Sprintf("starplan domain upgrade %s --db %s records the new definition in the store; leave out --db to try the domain on a temporary store", dir, db))
	}
	return st, nil
}
