package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// arguments say what each command's arguments are, by command path, for the error of a command
// line that gives too few or too many: cobra's "accepts 1 arg(s), received 0" says neither what
// to give nor how. Every command whose Use names an argument has an entry
// (TestEveryArgumentIsExplained).
var arguments = map[string]string{
	"starplan ask":            "QUESTION, the request in quotes",
	"starplan eval":           "FILE.jsonl, the suite of requests (testdata/eval/lab-requests.jsonl is the lab's)",
	"starplan exec":           "FILE, the plan to run (a .star file or a model's reply), or - to read it from standard input",
	"starplan apply":          "RUN_ID, the pending run to apply (starplan runs --state pending lists them)",
	"starplan check":          "FILE, the plan or reply to check, or - to read it from standard input",
	"starplan run":            "FILE, the program to run, or - to read it from standard input",
	"starplan runs show":      "RUN_ID, the run to show (starplan runs lists them)",
	"starplan runs replay":    "RUN_ID, the run to run again (starplan runs lists them)",
	"starplan db export":      "TABLE, the table to export (starplan describe lists them)",
	"starplan db import":      "TABLE FILE: the table to fill and the .json or .csv file to read",
	"starplan domain check":   "DIR, the domain directory to check (its domain.json and files)",
	"starplan domain show":    "at most DIR, the domain directory to show (none: the store's own domain)",
	"starplan domain upgrade": "DIR, the directory of the new version of the store's domain",
	"starplan docs man":       "DIR, the directory to write the man pages to",
	"starplan token create":   "NAME, the new token's name (letters, digits, '.', '_', '-')",
	"starplan token revoke":   "NAME, the token to revoke (starplan token list lists them)",
}

// explainArgs wraps the argument check of c and its subcommands, so that a command line with
// too few or too many arguments fails with exit 2 (usage), a sentence saying what to give, and
// an example of the command.
//
// A group of commands (db, domain, docs) given a word that is none of its commands says so and
// exits 2, where cobra would print its help and exit 0; given nothing, it prints its help.
func explainArgs(c *cobra.Command) {
	if c.HasParent() && !c.Runnable() && c.HasAvailableSubCommands() {
		c.Args = cobra.NoArgs
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return argsError(cmd, args, err)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		explainArgs(sub)
	}
}

// argsError is the usage error of cmd given args, which its argument check refused with err.
func argsError(cmd *cobra.Command, args []string, err error) error {
	path := cmd.CommandPath()
	hint := path + " --help"
	if ex := firstExample(cmd); ex != "" {
		hint = ex + "   (" + hint + " says more)"
	}
	got := "none"
	if len(args) > 0 {
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = fmt.Sprintf("%q", a)
		}
		got = fmt.Sprintf("%d: %s", len(args), strings.Join(quoted, " "))
	}
	what, ok := arguments[path]
	switch {
	case ok:
		return withCode(ExitUsage, fmt.Errorf("%s takes %s; it got %s", path, what, got), hint)
	case cmd.HasAvailableSubCommands() && len(args) > 0:
		// runs, db, domain: the first word was meant as a command of theirs.
		return withCode(ExitUsage, fmt.Errorf("%s has no command %q", path, args[0]), path+" --help lists its commands")
	}
	return withCode(ExitUsage, fmt.Errorf("%s takes no arguments; it got %s", path, got), hint)
}

// firstExample is the first line of cmd's examples, or "".
func firstExample(cmd *cobra.Command) string {
	line, _, _ := strings.Cut(strings.TrimSpace(cmd.Example), "\n")
	line, _, _ = strings.Cut(line, "  #") // a comment about the example
	return strings.TrimSpace(line)
}
