package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/server"
)

func newDescribeCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	var asJSON bool
	var domainDir string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Print what a planner needs to write a plan for this store: tables, helpers, contract, rules",
		Long: `Print what another planner needs to write a plan for the store: its tables with their fields
and types, every helper with its signature, the output contract and the rules in words. With
--json, the document GET /v1/describe answers (the same, plus limits, JSON Schemas and the plan
reference). With --domain DIR, describes that domain directory (its seed as the rows) without a
store.`,
		Example: `  starplan describe
  starplan describe --json | jq '.helpers[].signature'
  starplan describe --domain ./library`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDomainEngine(ios, g, domainDir, func(e *engine.Engine, _ bool) error {
				d, err := server.Describe(e, server.DefaultMaxBody)
				if err != nil {
					return withCode(ExitInternal, err, "")
				}
				if asJSON || !ios.OutTTY {
					return writeJSON(ios.Out, d)
				}
				printDescription(ios, d)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the description as JSON")
	addDomainFlag(cmd, &domainDir)
	return cmd
}

func printDescription(ios IOStreams, d *server.Description) {
	p := painter(ios.Color())
	fmt.Fprintf(ios.Out, "%s  %s\n", p.paint(ansiBold, "Domain "+safe(d.Domain)), safe(d.Doc))
	for _, t := range d.Tables {
		fmt.Fprintf(ios.Out, "\n%s  %s, key %s\n", p.paint(ansiBold, safe(t.Value)), plural(t.Rows, "1 row", fmt.Sprintf("%d rows", t.Rows)), safe(t.Key))
		for _, f := range t.Fields {
			line := fmt.Sprintf("  %-26s %-10s %s", safe(f.Name), safe(string(f.Type)), safe(f.Doc))
			fmt.Fprintln(ios.Out, strings.TrimRight(line, " "))
		}
	}
	fmt.Fprintf(ios.Out, "\n%s\n", p.paint(ansiBold, "Helpers"))
	for _, h := range d.Helpers {
		if h.Group == "language" || h.Group == "module" {
			continue // Starlark's own: the plan reference (starplan prompt) lists them
		}
		fmt.Fprintf(ios.Out, "  %s\n      %s\n", safe(h.Signature), safe(h.Doc))
	}
	fmt.Fprintf(ios.Out, "\n%s  STATUS is one of %s; only %q may change data\n", p.paint(ansiBold, "Contract"),
		safe(strings.Join(d.Contract.Statuses, ", ")), safe(d.Contract.WriteStatus))
	fmt.Fprintln(ios.Out, p.paint(ansiBold, "Rules"))
	for _, r := range d.Rules {
		fmt.Fprintf(ios.Out, "  %-32s %s\n", safe(r.Name), safe(r.Doc))
	}
	fmt.Fprintln(ios.Out, p.paint(ansiBold, "Approval"))
	for _, r := range d.Approval {
		fmt.Fprintf(ios.Out, "  %-32s %s\n", safe(r.Name), safe(r.Doc))
	}
}

func newPromptCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	var domainDir string
	cmd := &cobra.Command{
		Use:   "prompt",
		Short: "Print the system prompt exactly as ask sends it to the model",
		Long: `Print the system prompt exactly as starplan ask sends it for this store: the dialect, the
tables with their row counts and sample rows, the helpers, the contract, the policy and the
domain's example plan. With --domain DIR, the prompt for that domain directory (its seed as
the rows), without a store.`,
		Example: `  starplan prompt > system.txt
  starplan prompt --domain ./library`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDomainEngine(ios, g, domainDir, func(e *engine.Engine, _ bool) error {
				s, err := e.SystemPrompt()
				if err != nil {
					return withCode(ExitInternal, err, "")
				}
				if ios.OutTTY {
					s = safeBlock(s, "") // the prompt quotes the store's rows and the domain's text
				}
				_, err = io.WriteString(ios.Out, s)
				return err
			})
		},
	}
	addDomainFlag(cmd, &domainDir)
	return cmd
}
