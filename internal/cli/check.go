package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
)

// checkOptions are the options of `starplan check`.
type checkOptions struct {
	File   string
	JSON   bool
	Domain string // --domain DIR: check against that domain, not the store's
}

func newCheckCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check FILE|-",
		Short: "Check a plan or a model reply without running it",
		Long: `Extract the program from a model reply (or take a bare program), rewrite the Python-isms that
have an exact Starlark meaning, and check it statically against the store's domain (the
built-in inventory domain when there is no store), or against the domain in --domain DIR, which
needs no store. Prints every finding with its line, column,
code and a hint; exits 3 when there is any.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			return runCheck(cmd.Context(), ios, g, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the findings and rewrites as JSON")
	cmd.Flags().StringVar(&opts.Domain, "domain", "", "check against the domain in this directory (no store is opened or made)")
	return cmd
}

// checkReport is the JSON document of `starplan check --json`.
type checkReport struct {
	OK          bool               `json:"ok"`
	Program     string             `json:"program"`
	Diagnostics diag.List          `json:"diagnostics"`
	Rewrites    []pycompat.Rewrite `json:"rewrites"`
}

func runCheck(ctx context.Context, ios IOStreams, g *globalOptions, opts *checkOptions) error {
	src, err := readPlan(ctx, ios, opts.File)
	if err != nil {
		return err
	}
	var env *sandbox.Env
	if opts.Domain != "" {
		env, err = domainEnv(ios, opts.Domain)
	} else {
		env, err = planEnv(ios, g)
	}
	if err != nil {
		return err
	}
	c := env.Check(src, sandbox.Limits{})
	rep := checkReport{OK: c.Program != nil, Program: c.Extracted, Diagnostics: nonNil(c.Diagnostics), Rewrites: nonNilRewrites(c.Rewrites)}
	if opts.JSON {
		if err := writeJSON(ios.Out, rep); err != nil {
			return err
		}
	} else {
		printRewrites(ios.Out, opts.File, c.Rewrites)
		printDiagnostics(ios.Out, opts.File, c.Diagnostics)
		if rep.OK {
			fmt.Fprintf(ios.Out, "%s: ok\n", safe(opts.File))
		}
	}
	if !rep.OK {
		return silentExit(ExitRejected)
	}
	return nil
}

// printDiagnostics prints one finding per line, "file:line:col: code: message", and its hint.
func printDiagnostics(w io.Writer, file string, ds diag.List) {
	file = safe(file)
	for _, d := range ds {
		pos := file
		if d.Line > 0 {
			pos = fmt.Sprintf("%s:%d:%d", file, d.Line, d.Col)
		}
		fmt.Fprintf(w, "%s: %s: %s\n", pos, safe(d.Code), safeBlock(d.Message, "    "))
		if d.Hint != "" {
			fmt.Fprintf(w, "    Try: %s\n", safeBlock(d.Hint, "         "))
		}
	}
}

// printRewrites lists what pycompat changed, so a reader knows the program that ran.
func printRewrites(w io.Writer, file string, rws []pycompat.Rewrite) {
	for _, r := range rws {
		fmt.Fprintf(w, "%s:%d: rewrote %s:\n    - %s\n    + %s\n", safe(file), r.Line, safe(r.Rule), safeBlock(r.Before, "      "), safeBlock(r.After, "      "))
	}
}

// writeJSON writes v as an indented JSON document. The characters encoding/json leaves raw that
// a terminal would act on (C1 controls, bidi overrides, ...) are written as \u escapes
// (termsafe.JSON): the document decodes to the same values, and `--json` on a terminal is safe.
func writeJSON(w io.Writer, v any) error {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return withCode(ExitInternal, fmt.Errorf("encoding JSON: %w", err), "")
	}
	if _, err := io.WriteString(w, termsafe.JSON(sb.String())); err != nil {
		return withCode(ExitInternal, fmt.Errorf("writing JSON: %w", err), "")
	}
	return nil
}

func nonNil(ds diag.List) diag.List {
	if ds == nil {
		return diag.List{}
	}
	return ds
}

func nonNilRewrites(r []pycompat.Rewrite) []pycompat.Rewrite {
	if r == nil {
		return []pycompat.Rewrite{}
	}
	return r
}
