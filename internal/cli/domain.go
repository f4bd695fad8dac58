package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/opener"
)

func newDomainCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "domain",
		Short: "Check or explain a domain directory (tables, policy, prompt notes)",
		Long: `A domain is one directory, and nothing about it lives anywhere else:

` + domainFileList() + `
starplan db init --domain DIR makes a store of it; starplan domain upgrade DIR records a new
version of it in a store; --domain DIR on check, exec, run, describe and prompt tries it without
a store.

The kinds of policy.json's rules ({"name", "doc", "kind", "params"}; parameters in brackets are
optional):

` + contracts.KindText(),
		Example: `  starplan domain check ./library
  starplan db init --domain ./library --db ./library-store
  starplan --db ./library-store domain show`,
	}
	var asJSON bool
	check := &cobra.Command{
		Use:     "check DIR",
		Aliases: []string{"validate"},
		Short:   "Check a domain directory as a whole; list every problem, exit 2 when there is one",
		Example: `  starplan domain check ./library`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dom, err := loadDomainDir(ios, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(ios.Out, "%s: domain %s, %s, no problems found\n", safe(args[0]), safe(dom.Name), fmt.Sprintf("%d %s", len(dom.Tables), plural(len(dom.Tables), "table", "tables")))
			return nil
		},
	}
	show := &cobra.Command{
		Use:   "show [DIR]",
		Short: "Explain a domain: its tables and fields, its contract and rules (default: the store's)",
		Example: `  starplan domain show ./library
  starplan domain show --json > definition.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				dom, err := loadDomainDir(ios, args[0])
				if err != nil {
					return err
				}
				return showDomain(ios, dom, asJSON)
			}
			return withStore(ios, g, opener.Options{}, func(o openedStore) error {
				return showDomain(ios, o.st.Domain(), asJSON)
			})
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print the domain's definition files as JSON")
	var expire bool
	upgrade := &cobra.Command{
		Use:   "upgrade DIR",
		Short: "Record a new version of the store's domain: every row must fit it; pending runs must be settled (or --expire-pending)",
		Long: `Replace the domain definition a store recorded at db init with the directory's, a new version of
the same domain (an edited helpers.star, policy.json, a new field or table...). The directory is
checked as a whole first; then every row the store holds must be valid under the new schemas:
otherwise each offender is listed (table, key, field) and nothing changes. Runs still pending were
made under the old definition: the upgrade is refused while there are any, unless
--expire-pending rejects them with it. The new definition, its seed (the one db seed restores) and
an entry of the audit chain naming the definition's SHA-256 and who upgraded are written in one
commit. It needs the store to itself: stop a server holding it first.`,
		Example: `  starplan domain upgrade ./library --db ./library-store
  starplan domain upgrade ./library --expire-pending`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDomainUpgrade(cmd, ios, g, args[0], expire, asJSON)
		},
	}
	upgrade.Flags().BoolVar(&expire, "expire-pending", false, "reject the runs still pending (made under the old definition) with the upgrade")
	upgrade.Flags().BoolVar(&asJSON, "json", false, "print the upgrade's report as JSON")
	// Only the store's own domain is read through a running server: a directory is the client's.
	show.Annotations = map[string]string{throughServerAnnotation: throughWithoutArgs}
	cmd.AddCommand(check, show, upgrade)
	return cmd
}

func domainFileList() string {
	var b strings.Builder
	for _, f := range engine.DomainFiles {
		fmt.Fprintf(&b, "  %-13s %s\n", f.Name, f.Doc)
	}
	return b.String()
}

// loadDomainDir reads and checks the domain in dir; every problem is printed, and the error
// says how many there were.
func loadDomainDir(ios IOStreams, dir string) (*store.Domain, error) {
	return loadDomainDirFor(ios, dir, "")
}

// loadDomainDirFor is loadDomainDir for a command that would have made something of the domain:
// its error adds outcome, what the command did not do (such as "no store was created").
func loadDomainDirFor(ios IOStreams, dir, outcome string) (*store.Domain, error) {
	path := ios.path(dir)
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		return nil, withCode(ExitUsage, fmt.Errorf("%s is not a directory", dir), "give the directory that holds the domain's domain.json")
	}
	dom, errs := engine.LoadDomain(os.DirFS(path))
	if len(errs) == 0 {
		return dom, nil
	}
	for _, err := range errs {
		fmt.Fprintf(ios.Err, "%s: %s\n", safe(dir), safe(err.Error()))
	}
	what := "1 problem"
	if len(errs) != 1 {
		what = fmt.Sprintf("%d problems", len(errs))
	}
	if outcome != "" {
		outcome = "; " + outcome
	}
	return nil, withCode(ExitUsage, errors.New(what+" in the domain "+dir+outcome),
		"correct the files named above; starplan domain --help lists what each holds")
}

// showDomain prints a domain for people, or its definition files as JSON.
func showDomain(ios IOStreams, dom *store.Domain, asJSON bool) error {
	if asJSON {
		return writeJSON(ios.Out, dom.Definition)
	}
	p := painter(ios.Color())
	fmt.Fprintf(ios.Out, "%s  %s\n", p.paint(ansiBold, "Domain "+safe(dom.Name)), safe(dom.Doc))
	for _, t := range dom.Tables {
		fmt.Fprintln(ios.Out, strings.TrimRight(fmt.Sprintf("\n%s (key %s)  %s", p.paint(ansiBold, safe(t.Name)), safe(t.Key), safe(t.Doc)), " "))
		for _, f := range t.Fields {
			fmt.Fprintln(ios.Out, strings.TrimRight(fmt.Sprintf("  %-26s %-10s %s", safe(f.Name), safe(string(f.Type)), safe(f.Doc)), " "))
		}
	}
	policy, err := contracts.FromDefinition(dom.Name, dom.Definition)
	if err != nil {
		return withCode(ExitInternal, err, "")
	}
	fmt.Fprintf(ios.Out, "\n%s  STATUS is one of %s; only %q may change data\n", p.paint(ansiBold, "Contract"),
		safe(strings.Join(policy.Contract.Statuses, ", ")), safe(policy.Contract.WriteStatus))
	fmt.Fprintln(ios.Out, p.paint(ansiBold, "Rules"))
	for _, r := range policy.Describe() {
		if r.Kind != "contract" {
			fmt.Fprintf(ios.Out, "  %-32s %s\n", safe(r.Name), safe(r.Doc))
		}
	}
	return nil
}

// runDomainUpgrade records the domain in dir as the store's new definition (Engine.UpgradeDomain).
func runDomainUpgrade(cmd *cobra.Command, ios IOStreams, g *globalOptions, dir string, expire, asJSON bool) error {
	dom, err := loadDomainDirFor(ios, dir, "nothing was changed")
	if err != nil {
		return err
	}
	return withEngine(ios, g, func(e *engine.Engine) error {
		rep, err := e.UpgradeDomain(cmd.Context(), dom, engine.UpgradeOptions{ExpirePending: expire, Origin: originCLI})
		var (
			rows    *store.UpgradeError
			pending *engine.PendingRunsError
			other   *store.DomainError
		)
		switch {
		case errors.As(err, &rows):
			return withCode(ExitUsage, err, rows.Hint())
		case errors.As(err, &pending):
			return withCode(ExitUsage, err, pending.Hint())
		case errors.As(err, &other):
			return withCode(ExitUsage, fmt.Errorf("the store holds the %s domain and %s holds %s: an upgrade is a new version of the same domain; nothing was changed", other.Holds, dir, other.Wanted),
				"make a store of the other domain with starplan db init --domain "+dir+" --db NEWDIR")
		case err != nil:
			return engineError(err)
		}
		if asJSON {
			return writeJSON(ios.Out, rep)
		}
		fmt.Fprintf(ios.Out, "upgraded the store's %s domain to the definition in %s (sha256 %s)\n", safe(rep.Domain), safe(dir), rep.Definition[:12])
		if len(rep.Expired) > 0 {
			fmt.Fprintf(ios.Out, "expired %s: %s\n", counted(len(rep.Expired), "pending run", "pending runs"), strings.Join(rep.Expired, ", "))
		}
		return nil
	})
}
