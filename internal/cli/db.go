package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/opener"
	"github.com/starplan/starplan/table"
)

// dbOptions are the options of the `starplan db` commands.
type dbOptions struct {
	Force   bool
	JSON    bool
	Format  string // db import's --format
	Export  string // db export's --format (its own field: the two flags have different defaults)
	Replace bool
	Batch   int // db import --batch: records per commit (0: the whole file in one)
	Table   string
	File    string
	Empty   bool
	BOM     bool   // db export --bom: a UTF-8 byte order mark first, for spreadsheets
	Domain  string // db init --domain: the directory of the store's domain
}

func newDBCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &dbOptions{}
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Create, seed, check, dump, export and import the store",
		Long: `Create, seed, check, dump, export and import the store.

db init creates a store (seeded with the demo data, or empty with --empty); db seed creates one
seeded; db import into a missing store creates it empty, so that it holds exactly the imported
rows. db check, dump and export only read: on a missing store they say so and create nothing.`,
	}
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create a new store, seeded with the demo data (--empty: with empty tables)",
		Long: `Create a new store. It holds the built-in inventory domain, seeded with the demo data
(--empty: with empty tables), or the domain in the directory --domain names (with its seed.json,
if it has one). A domain directory is checked as a whole first (starplan domain check DIR), and a
broken one creates nothing. The store keeps its domain: later commands need no flag.`,
		Example: `  starplan db init --db ./shop
  starplan db init --domain ./library --db ./library-store`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDBInit(ios, g, opts) },
	}
	initCmd.Flags().BoolVar(&opts.Empty, "empty", false, "create the tables without the demo rows")
	initCmd.Flags().StringVar(&opts.Domain, "domain", "", "the directory of the domain the store holds (default: the built-in inventory domain)")
	check := &cobra.Command{
		Use:   "check",
		Short: "Verify the store's file, its rows and the domain's invariants; exit 1 when anything is wrong",
		Long: `Verify the store without changing it: the file (its size and meta pages), bbolt's page
consistency, the store's own record, that every row decodes and fits its table's schema, and the
domain's policy invariants over the committed rows (stock and the register balance never below
0, each transaction's balance = the previous balance + its amount). Exit 0 when it is sound,
1 when anything is wrong (or the check itself failed), 2 when there is no store.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDBCheck(cmd.Context(), ios, g, opts) },
	}
	check.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON")
	seed := &cobra.Command{
		Use:   "seed",
		Short: "Fill the store with the seed it was made from: the demo data, or its domain's seed.json (--force replaces existing data)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runDBSeed(cmd.Context(), ios, g, opts) },
	}
	seed.Flags().BoolVar(&opts.Force, "force", false, "replace the data the store holds")
	dump := &cobra.Command{
		Use:   "dump",
		Short: "Print every table",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runDBDump(cmd.Context(), ios, g, opts) },
	}
	dump.Flags().BoolVar(&opts.JSON, "json", false, "print JSON (the format of a domain's seed.json)")
	export := &cobra.Command{
		Use:   "export TABLE",
		Short: "Write one table as JSON or CSV to standard output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Table = args[0]
			return runDBExport(ios, g, opts)
		},
	}
	export.Flags().StringVar(&opts.Export, "format", "json", "json or csv")
	export.Flags().BoolVar(&opts.BOM, "bom", false, "start a CSV with a UTF-8 byte order mark, so that spreadsheet programs read its accents right")
	imp := &cobra.Command{
		Use:   "import TABLE FILE",
		Short: "Import rows from a CSV or JSON file; every row is validated first, one bad row imports nothing (with --batch: nothing from its batch on)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Table, opts.File = args[0], args[1]
			return runDBImport(cmd.Context(), ios, g, opts)
		},
	}
	imp.Flags().StringVar(&opts.Format, "format", "", "json or csv (default: from the file's extension)")
	imp.Flags().BoolVar(&opts.Replace, "replace", false, "make the table hold exactly the imported rows (default: upsert by key)")
	imp.Flags().IntVar(&opts.Batch, "batch", 0, "write every N records in a commit of their own, for files too large for one (e.g. 20000): memory holds a batch, not the file; a failed import keeps the batches before the failure and resumes when run again; every record needs its key")
	// A running server holds the store: seeding, reading and importing go through it; init and
	// check need the store's file to themselves.
	cmd.AddCommand(initCmd, throughServer(seed), check, throughServer(dump), throughServer(export), throughServer(imp))
	return cmd
}

// withStore opens the store with opts, calls fn and closes the store, reporting the first error.
// Inside `starplan serve`, running for a client, fn gets the server's store, which stays open.
func withStore(ios IOStreams, g *globalOptions, opts opener.Options, fn func(openedStore) error) (err error) {
	if ios.host != nil {
		st := ios.host.eng.Store()
		target, _ := storeTarget(ios, g)
		return fn(openedStore{st: st, name: storeName(st, target)})
	}
	o, err := openStore(ios, g, opts)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := o.st.Close(); err == nil && cerr != nil {
			err = withCode(ExitInternal, cerr, "")
		}
	}()
	return fn(o)
}

// notByBackend is the error of a command the store's backend cannot serve (it lacks the
// interface of package store the command needs).
func notByBackend(o openedStore, what string) error {
	return withCode(ExitUsage, fmt.Errorf("the store %s cannot %s: its backend does not implement it", o.name, what),
		"use starplan db export and db import to move the rows to a store in a directory (--db DIR), which can")
}

func runDBInit(ios IOStreams, g *globalOptions, opts *dbOptions) error {
	var dom *store.Domain
	if opts.Domain != "" {
		var err error
		if dom, err = loadDomainDirFor(ios, opts.Domain, "no store was created"); err != nil {
			return err
		}
	}
	return withStore(ios, g, opener.Options{Create: true, NoSeed: opts.Empty, Domain: dom}, func(o openedStore) error {
		if !o.created {
			upgrade := "starplan domain upgrade DIR --db " + o.name
			if opts.Domain != "" {
				upgrade = "starplan domain upgrade " + opts.Domain + " --db " + o.name
			}
			return withCode(ExitUsage, fmt.Errorf("a store already exists at %s; nothing was changed", o.name),
				upgrade+" records a new version of its domain and keeps its rows; pass --db DIR to create a store elsewhere")
		}
		return nil // Open said what it created
	})
}

// runDBSeed fills the store with the seed it was made from, creating it (with the demo data)
// when missing. A store that keeps no seed is left as it is.
func runDBSeed(ctx context.Context, ios IOStreams, g *globalOptions, opts *dbOptions) error {
	return withStore(ios, g, opener.Options{Create: true}, func(o openedStore) error {
		if o.created {
			return nil // Open seeded it and said so
		}
		st, ok := o.st.(store.Seeder)
		if !ok {
			return notByBackend(o, "be seeded again")
		}
		counts, err := st.SeedRows()
		if err == nil {
			err = st.Seed(ctx, opts.Force)
		}
		switch {
		case errors.Is(err, store.ErrNotEmpty):
			return withCode(ExitUsage, err, "starplan db seed --force replaces the data with the seed the store was made from (the audit log is kept)")
		case errors.Is(err, store.ErrNoSeed):
			return withCode(ExitUsage, fmt.Errorf("%w (it was made before stores kept their seed, or its domain has no seed.json); nothing was changed", err),
				"load the rows with starplan db import TABLE FILE --replace, or make a new store with starplan db init --domain DIR --db NEWDIR")
		case err != nil:
			return storeError(o.name, err)
		}
		n := 0
		for _, c := range counts {
			n += c
		}
		fmt.Fprintf(ios.Err, "seeded %s with %s\n", o.name, store.SeedWords(o.st.Domain().Name, n))
		return nil
	})
}

func runDBDump(ctx context.Context, ios IOStreams, g *globalOptions, opts *dbOptions) error {
	return withStore(ios, g, opener.Options{}, func(o openedStore) error {
		st := o.st
		if opts.JSON {
			ex, ok := st.(store.Exporter)
			if !ok {
				return notByBackend(o, "dump its tables as JSON")
			}
			return onTerminal(ios, store.JSON, ex.Dump)
		}
		v := st.StageFor(ctx, store.RunLimits{})
		for i, name := range st.Names() {
			t, _ := v.Table(name)
			rows, err := t.Find(table.Query{})
			if err != nil {
				return withCode(ExitInternal, err, "")
			}
			if i > 0 {
				fmt.Fprintln(ios.Out)
			}
			fmt.Fprintf(ios.Out, "%s (%s)\n", safe(name), counted(len(rows), "row", "rows"))
			printTable(ios.Out, t.Schema().FieldNames(), rows, 40)
		}
		return nil
	})
}

func parseFormat(s string) (store.Format, error) {
	switch strings.ToLower(s) {
	case "json":
		return store.JSON, nil
	case "csv":
		return store.CSV, nil
	}
	return "", withCode(ExitUsage, fmt.Errorf("unknown format %q", s), "use --format json or --format csv")
}

func runDBExport(ios IOStreams, g *globalOptions, opts *dbOptions) error {
	format, err := parseFormat(opts.Export)
	if err != nil {
		return err
	}
	if opts.BOM && format != store.CSV {
		return withCode(ExitUsage, errors.New("--bom is for CSV: JSON never starts with a byte order mark"), "add --format csv, or drop --bom")
	}
	return withStore(ios, g, opener.Options{}, func(o openedStore) error {
		st, ok := o.st.(store.Exporter)
		if !ok {
			return notByBackend(o, "export a table")
		}
		err := onTerminal(ios, format, func(w io.Writer) error {
			if _, known := o.st.Schema(opts.Table); known && opts.BOM {
				if _, err := io.WriteString(w, "\ufeff"); err != nil {
					return err
				}
			}
			return st.Export(w, opts.Table, format)
		})
		if err != nil {
			return withCode(ExitUsage, err, "the tables are: "+strings.Join(o.st.Names(), ", "))
		}
		return nil
	})
}

// onTerminal runs write, a writer of stored data in format, to Out. Piped or redirected, the
// bytes are exact; on a terminal, where a person reads them, the characters a terminal would act
// on are escaped: as \u escapes in JSON (the same values), visibly in CSV.
func onTerminal(ios IOStreams, format store.Format, write func(io.Writer) error) error {
	if !ios.OutTTY {
		return write(ios.Out)
	}
	var sb strings.Builder
	if err := write(&sb); err != nil {
		return err
	}
	s := termsafe.Escape(sb.String(), termsafe.Text)
	if format == store.JSON {
		s = termsafe.JSON(sb.String())
	}
	_, err := io.WriteString(ios.Out, s)
	return err
}

func runDBImport(ctx context.Context, ios IOStreams, g *globalOptions, opts *dbOptions) error {
	name := opts.Format
	if name == "" {
		name = strings.TrimPrefix(filepath.Ext(opts.File), ".")
	}
	format, err := parseFormat(name)
	if err != nil {
		return err
	}
	switch {
	case opts.Batch < 0:
		return withCode(ExitUsage, fmt.Errorf("--batch %d: want a number of records", opts.Batch), "give --batch the records per commit, e.g. --batch 20000")
	case opts.Batch > 0 && opts.Replace:
		return withCode(ExitUsage, errors.New("--replace cannot import in batches: the rows it deletes are known only once the whole file is read"), "drop --batch, or import with upsert (without --replace)")
	}
	f, err := ios.openInput(opts.File)
	if err != nil {
		return withCode(ExitUsage, err, "give the path of a CSV or JSON file")
	}
	defer f.Close()
	mode := store.Upsert
	if opts.Replace {
		mode = store.Replace
	}
	imported := fmt.Sprintf("imported %s into %s", safe(opts.File), safe(opts.Table))
	// Into a missing store, the import creates it empty: it then holds exactly the imported rows,
	// never the demo rows mixed in.
	return withStore(ios, g, opener.Options{Create: true, NoSeed: true}, func(o openedStore) error {
		if _, known := o.st.Schema(opts.Table); !known {
			return withCode(ExitUsage, fmt.Errorf("the store has no table %q", opts.Table), "import into one of its tables: "+strings.Join(o.st.Names(), ", "))
		}
		st, ok := o.st.(store.Importer)
		if !ok {
			return notByBackend(o, "import rows")
		}
		var res store.ImportResult
		if opts.Batch > 0 {
			res, err = st.ImportBatches(ctx, opts.Table, f, format, opts.Batch)
		} else {
			res, err = st.Import(ctx, opts.Table, f, format, mode)
		}
		if err != nil {
			return importFailed(ctx, ios, o, opts, imported, res, err)
		}
		fmt.Fprintf(ios.Out, "%s: %d inserted, %d updated, %d deleted, %d unchanged", imported, res.Inserted, res.Updated, res.Deleted, res.Unchanged)
		if opts.Batch > 0 {
			fmt.Fprintf(ios.Out, " (%s)", counted(res.Commits, "commit", "commits"))
		}
		fmt.Fprintln(ios.Out)
		return nil
	})
}

// importFailed is the error of a failed import. When a batched import committed batches before
// it failed, stdout says what they wrote and the error says it again with what was not written
// (the batch that failed and every one after it) and how to import the rest: both streams tell
// the same partial result, never "nothing was written".
func importFailed(ctx context.Context, ios IOStreams, o openedStore, opts *dbOptions, imported string, res store.ImportResult, err error) error {
	var (
		damaged *store.DamagedError
		write   *store.WriteError
		bad     store.PartialImport
	)
	records := res.Inserted + res.Updated + res.Unchanged // a batched import's records are each one of these
	written := res.Commits > 0 || (errors.As(err, &bad) && bad.Imported() > 0)
	if res.Commits > 0 {
		fmt.Fprintf(ios.Out, "%s, in part: %d inserted, %d updated, %d unchanged (%d %s); the records after the first %d were not imported\n",
			imported, res.Inserted, res.Updated, res.Unchanged, res.Commits, plural(res.Commits, "commit", "commits"), records)
	}
	rerun := "run the same import again: it finds the rows already written unchanged and goes on"
	switch {
	case errors.As(err, &write) && res.Commits > 0:
		// WriteError says that nothing was written, which is true of the commit that failed only.
		return withCode(ExitInternal,
			fmt.Errorf("importing %s: writing %s failed: %w; the first %d %s imported (in %d %s), the batch that failed and none after it",
				opts.File, write.Path, write.Err, records, plural(records, "record was", "records were"), res.Commits, plural(res.Commits, "commit", "commits")),
			"make room on the disk that holds "+write.Path+" (or raise its quota), then "+rerun)
	case errors.As(err, &damaged) || errors.As(err, &write):
		return storeError(o.name, fmt.Errorf("importing %s: %w", opts.File, err))
	case ctx.Err() != nil && written:
		return withCode(ExitInterrupted, err, "run the same import again to import the rest: it finds the rows already written unchanged and goes on")
	case written:
		return withCode(ExitUsage, fmt.Errorf("%s: %w", opts.File, err), "fix the rows named above and "+rerun)
	}
	return withCode(ExitUsage, fmt.Errorf("%s: %w", opts.File, err), "fix the rows named above and import again: nothing was written")
}

// runDBCheck verifies the store and prints what it found: a report for people, or JSON.
func runDBCheck(ctx context.Context, ios IOStreams, g *globalOptions, opts *dbOptions) error {
	target, err := storeTarget(ios, g)
	if err != nil {
		return err
	}
	chain := engine.NewChainVerifier()
	copts := chain.CheckOptions() // the audit log's records and hash chain
	copts.Invariants = stateInvariants
	rep, err := ios.storeOpener().Check(ctx, target, copts)
	if err != nil {
		return storeError(opener.Redact(target), err)
	}
	if rep.OK() {
		// The audit log's hash chain, once the documents it is made of read back.
		for _, p := range chain.Report().Problems {
			rep.Problems = append(rep.Problems, store.Problem{Check: checkChain, Message: p.Message})
		}
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
	fmt.Fprintf(ios.Out, "%s: %d bytes, last commit %d\n", safe(rep.File), rep.Size, rep.Seq)
	for _, t := range rep.Tables {
		fmt.Fprintf(ios.Out, "  %-14s %s\n", safe(t.Table), counted(int(t.Rows), "row", "rows"))
	}
	counts := "the row counts and digests, "
	if rep.Unverified != "" {
		counts = ""
		fmt.Fprintf(ios.Out, "Row counts and digests not verified: %s.\n", safe(rep.Unverified))
	}
	if rep.OK() {
		fmt.Fprintf(ios.Out, "No problems found: the file, every row and audit record, %sand the domain's invariants check out.\n", counts)
		return nil
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(ios.Out, "  %-7s %s\n", p.Check+":", safe(p.Message))
	}
	if rep.Omitted > 0 {
		fmt.Fprintf(ios.Out, "  ... and %d more\n", rep.Omitted)
	}
	what := "1 problem"
	if n := len(rep.Problems) + rep.Omitted; n != 1 {
		what = fmt.Sprintf("%d problems", n)
	}
	return withCode(ExitInternal, fmt.Errorf("%s found in %s", what, rep.File),
		"restore "+rep.File+" from a backup; a policy problem in the rows alone can also be corrected with starplan db export and db import --replace")
}

// checkChain is db check's name for a problem of the audit log's hash chain (engine.VerifyChain).
const checkChain = "chain"

// stateInvariants checks the committed rows against the state rules of the store's domain
// (contracts.Domain.CheckState), through the policy the engine checks every run with.
func stateInvariants(dom *store.Domain, rows table.ChangeSet) ([]string, error) {
	pol, err := contracts.FromDefinition(dom.Name, dom.Definition)
	if err != nil {
		return nil, err
	}
	ds, err := pol.CheckState(rows)
	if err != nil {
		return nil, err
	}
	msgs := make([]string, len(ds))
	for i, dg := range ds {
		msgs[i] = dg.Code + ": " + dg.Message
	}
	return msgs, nil
}
