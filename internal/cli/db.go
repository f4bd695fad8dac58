package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// dbOptions are the options of the `starplan db` commands.
type dbOptions struct {
	Force   bool
	JSON    bool
	Format  string
	Replace bool
	Table   string
	File    string
}

func newDBCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &dbOptions{}
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Seed, dump, export and import the store's tables",
	}
	seed := &cobra.Command{
		Use:   "seed",
		Short: "Fill the store with the demo data (--force replaces existing data)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runDBSeed(cmd.Context(), ios, g, opts) },
	}
	seed.Flags().BoolVar(&opts.Force, "force", false, "replace the data the store holds")
	dump := &cobra.Command{
		Use:   "dump",
		Short: "Print every table",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runDBDump(ios, g, opts) },
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
	export.Flags().StringVar(&opts.Format, "format", "json", "json or csv")
	imp := &cobra.Command{
		Use:   "import TABLE FILE",
		Short: "Import rows from a CSV or JSON file; every row is validated first, one bad row imports nothing",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Table, opts.File = args[0], args[1]
			return runDBImport(cmd.Context(), ios, g, opts)
		},
	}
	imp.Flags().StringVar(&opts.Format, "format", "", "json or csv (default: from the file's extension)")
	imp.Flags().BoolVar(&opts.Replace, "replace", false, "make the table hold exactly the imported rows (default: upsert by key)")
	cmd.AddCommand(seed, dump, export, imp)
	return cmd
}

func withStore(ios IOStreams, g *globalOptions, fn func(*store.Store) error) (err error) {
	st, err := openStore(ios, g)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); err == nil && cerr != nil {
			err = withCode(ExitInternal, cerr, "")
		}
	}()
	return fn(st)
}

func runDBSeed(ctx context.Context, ios IOStreams, g *globalOptions, opts *dbOptions) error {
	return withStore(ios, g, func(st *store.Store) error {
		if st.Created() {
			return nil // Open seeded it and said so
		}
		if err := st.Seed(ctx, opts.Force); err != nil {
			if errors.Is(err, store.ErrNotEmpty) {
				return withCode(ExitUsage, err, "starplan db seed --force replaces the data (the audit log is kept)")
			}
			return withCode(ExitInternal, err, "")
		}
		fmt.Fprintf(ios.Err, "seeded %s with the demo data\n", st.Dir())
		return nil
	})
}

func runDBDump(ios IOStreams, g *globalOptions, opts *dbOptions) error {
	return withStore(ios, g, func(st *store.Store) error {
		if opts.JSON {
			return onTerminal(ios, store.JSON, st.Dump)
		}
		v := st.Stage()
		for i, name := range st.Names() {
			t, _ := v.Table(name)
			rows, err := t.Find(table.Query{})
			if err != nil {
				return withCode(ExitInternal, err, "")
			}
			if i > 0 {
				fmt.Fprintln(ios.Out)
			}
			fmt.Fprintf(ios.Out, "%s (%d rows)\n", safe(name), len(rows))
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
	format, err := parseFormat(opts.Format)
	if err != nil {
		return err
	}
	return withStore(ios, g, func(st *store.Store) error {
		err := onTerminal(ios, format, func(w io.Writer) error { return st.Export(w, opts.Table, format) })
		if err != nil {
			return withCode(ExitUsage, err, "the tables are: "+strings.Join(st.Names(), ", "))
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
	f, err := os.Open(opts.File)
	if err != nil {
		return withCode(ExitUsage, err, "give the path of a CSV or JSON file")
	}
	defer f.Close()
	mode := store.Upsert
	if opts.Replace {
		mode = store.Replace
	}
	return withStore(ios, g, func(st *store.Store) error {
		res, err := st.Import(ctx, opts.Table, f, format, mode)
		if err != nil {
			return withCode(ExitUsage, fmt.Errorf("%s: %w", opts.File, err), "fix the row named above and import again")
		}
		fmt.Fprintf(ios.Out, "imported %s into %s: %d inserted, %d updated, %d deleted, %d unchanged\n",
			safe(opts.File), safe(opts.Table), res.Inserted, res.Updated, res.Deleted, res.Unchanged)
		return nil
	})
}
