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
starplan db init --domain DIR makes a store of it.`,
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
	// Only the store's own domain is read through a running server: a directory is the client's.
	show.Annotations = map[string]string{throughServerAnnotation: throughWithoutArgs}
	cmd.AddCommand(check, show)
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
