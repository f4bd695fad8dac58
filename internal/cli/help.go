package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/opener"
)

// examples are the Examples: sections of the commands' help, by command path. Every visible
// command has one (TestEveryCommandHasExamples); a command that sets its own keeps it.
var examples = map[string]string{
	"starplan": `  starplan demo
  starplan ask "Do you have any round sunglasses in stock that are under $100?"
  starplan exec plan.star && starplan runs`,
	"starplan demo": `  starplan demo`,
	"starplan ask": `  starplan ask "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses."
  starplan ask --show-plan --model gpt-4o-mini "Return 2 Aviator"
  OPENAI_BASE_URL=http://localhost:11434/v1 STARPLAN_MODEL=qwen2.5-coder:7b starplan ask "What is in stock?"`,
	"starplan eval": `  starplan eval testdata/eval/lab-requests.jsonl --concurrency 4
  starplan eval suite.jsonl --json > report.json`,
	"starplan exec": `  starplan exec --request "Purchase 3 Wayfarer for Alice" plan.star
  model-cli "..." | starplan exec --json -      # a model reply on standard input
  starplan exec --domain ./library lend.star    # a domain directory, on a temporary store`,
	"starplan apply": `  starplan apply r_0123456789`,
	"starplan runs show": `  starplan runs show r_0123456789 --json
  starplan runs show r_0123456789 --diff markdown   # paste into a review`,
	"starplan check": `  starplan check plan.star
  starplan check --json reply.txt
  starplan check --domain ./library lend.star`,
	"starplan run": `  starplan run testdata/adversarial/string_doubling.star
  echo 'answer_text = str(sum([1, 2, 3]))' | starplan run -
  starplan run --domain ./library lend.star`,
	"starplan db": `  starplan db dump
  starplan db export inventory --format csv --bom > inventory.csv`,
	"starplan db init":  `  starplan --db ./shop db init --empty`,
	"starplan db check": `  starplan db check --json`,
	"starplan db seed":  `  starplan db seed --force`,
	"starplan db dump":  `  starplan db dump --json > all.json`,
	"starplan db export": `  starplan db export inventory > inventory.json
  starplan db export transactions --format csv --bom > ledger.csv`,
	"starplan db import": `  starplan db import inventory inventory.csv
  starplan db import inventory stock.json --replace`,
	"starplan serve": `  starplan serve                                  # HTTP on 127.0.0.1:7410, token in the store
  starplan serve --listen 127.0.0.1:8080 --mcp-stdio`,
	"starplan docs":     `  starplan docs man ./man`,
	"starplan docs man": `  starplan docs man ./man && man ./man/starplan.1`,
}

// finishHelp gives every command its examples and the dynamic completions of its arguments and
// flags: run ids, table names, formats and states.
func finishHelp(root *cobra.Command, ios IOStreams, g *globalOptions) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if ex, ok := examples[c.CommandPath()]; ok && c.Example == "" {
			c.Example = ex
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	runIDs := func(state string) cobra.CompletionFunc {
		return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var ids []cobra.Completion
			_ = withEngineQuiet(ios, g, func(e *engine.Engine) error {
				// The newest hundred: a completion reads a page of the log, not all of it.
				page, err := e.ListRuns(engine.ListOptions{State: state, Limit: 100})
				if page != nil {
					for _, r := range page.Runs {
						ids = append(ids, cobra.CompletionWithDesc(r.ID, r.State+": "+r.Request))
					}
				}
				return err
			})
			return ids, cobra.ShellCompDirectiveNoFileComp
		}
	}
	tables := func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveDefault // import's FILE
		}
		var names []cobra.Completion
		for _, t := range store.Inventory().Tables {
			names = append(names, cobra.CompletionWithDesc(t.Name, t.Doc))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	fixed := func(values ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
	}
	for path, fn := range map[string]cobra.CompletionFunc{
		"starplan apply":       runIDs(engine.StatePending),
		"starplan runs show":   runIDs(""),
		"starplan runs replay": runIDs(""),
		"starplan db export":   tables,
		"starplan db import":   tables,
	} {
		find(root, path).ValidArgsFunction = fn
	}
	for path, flags := range map[string]map[string]cobra.CompletionFunc{
		"starplan db export": {"format": fixed("json", "csv")},
		"starplan db import": {"format": fixed("json", "csv")},
		"starplan runs":      {"state": fixed(engine.States...)},
		"starplan":           {"color": fixed("auto", "always", "never")},
	} {
		for name, fn := range flags {
			_ = find(root, path).RegisterFlagCompletionFunc(name, fn)
		}
	}
}

// find returns the command at path ("starplan db export"); the table above names only commands
// that exist, so a missing one is a programming error.
func find(root *cobra.Command, path string) *cobra.Command {
	c, _, err := root.Find(strings.Fields(path)[1:])
	if err != nil || c.CommandPath() != path {
		panic(fmt.Sprintf("cli: no command %q", path))
	}
	return c
}

// withEngineQuiet is withEngine for completions: it never creates a store, starts no worker
// and says nothing.
func withEngineQuiet(ios IOStreams, g *globalOptions, fn func(*engine.Engine) error) error {
	target, err := storeTarget(ios, g)
	if err != nil {
		return err
	}
	st, _, err := ios.storeOpener().Open(ios.context(), target, opener.Options{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	defer st.Close()
	e, err := engine.New(st, engine.Options{})
	if err != nil {
		return err
	}
	defer e.Close()
	return fn(e)
}

// newDocsCmd generates documentation from the commands themselves.
func newDocsCmd(ios IOStreams) *cobra.Command {
	docs := &cobra.Command{
		Use:   "docs",
		Short: "Generate documentation (man pages) from the commands",
		Args:  cobra.NoArgs,
	}
	man := &cobra.Command{
		Use:   "man DIR",
		Short: "Write a man page for every command into DIR (section 1)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return withCode(ExitInternal, err, "give a directory you can write to")
			}
			header := &doc.GenManHeader{Title: "STARPLAN", Section: "1", Source: "starplan " + version()}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			if err := doc.GenManTree(root, header, dir); err != nil {
				return withCode(ExitInternal, errors.Join(errors.New("writing the man pages"), err), "")
			}
			fmt.Fprintf(ios.Out, "wrote the man pages to %s (man %s/starplan.1)\n", safe(dir), safe(dir))
			return nil
		},
	}
	docs.AddCommand(man)
	return docs
}
