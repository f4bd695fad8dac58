package cli

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// demoStep is one stop of the demo: an example plan and how its run must end.
type demoStep struct {
	Title   string
	File    string // in testdata/examples
	Outcome engine.Outcome
	Status  string
	Apply   bool // a dry run that the demo then applies
}

var demoSteps = []demoStep{
	{"The lab's lecture question: a read", "01_round_under_100.star", engine.OutcomeOK, "success", false},
	{"A purchase: dry run, review the diff, apply", "02_purchase_wayfarer.star", engine.OutcomeOK, "success", true},
	{"A two-item order: one transaction per item, all or nothing", "03_two_item_order.star", engine.OutcomeOK, "success", true},
	{"An order that fails on stock: nothing is written", "04_not_enough_stock.star", engine.OutcomeOK, "insufficient_stock", false},
	{"A hostile program, stopped by a limit", "05_hostile_memory_bomb.star", engine.OutcomeLimitExceeded, "", false},
}

func newDemoCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Walk through starplan on a fresh temporary store",
		Long: `Create a temporary store seeded with the demo data and run the example plans that ship with
starplan (hand-written, not model output): the lab's lecture question, a purchase (dry run,
diff, apply), a two-item order, an order that fails on stock, and a hostile program that a
limit stops. The temporary store is removed at the end; your own store is not touched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd.Context(), ios, g) },
	}
}

func runDemo(ctx context.Context, ios IOStreams, g *globalOptions) (err error) {
	dir, err := os.MkdirTemp("", "starplan-demo-")
	if err != nil {
		return withCode(ExitInternal, err, "")
	}
	defer os.RemoveAll(dir)
	st, err := bolt.Open(dir, bolt.Options{Stderr: ios.Err})
	if err != nil {
		return withCode(ExitInternal, err, "")
	}
	defer st.Close()
	e, stop, err := startEngine(ios, g, st)
	if err != nil {
		return err
	}
	defer stop()
	defer e.Close()

	p := painter(ios.Color())
	var failed []string
	for i, step := range demoSteps {
		src, err := fs.ReadFile(starplan.Examples, "testdata/examples/"+step.File)
		if err != nil {
			return withCode(ExitInternal, err, "")
		}
		request := exampleRequest(string(src))
		fmt.Fprintf(ios.Out, "\n%s\n", p.paint(ansiBold, fmt.Sprintf("== %d. %s", i+1, step.Title)))
		fmt.Fprintf(ios.Out, "Request: %s\n", safe(request))
		fmt.Fprintf(ios.Out, "%s\n", p.paint(ansiDim, "Plan: testdata/examples/"+step.File+" (a hand-written example, not model output)"))
		res, err := e.Run(ctx, engine.Request{Reply: string(src), UserRequest: request, Origin: "demo"})
		if err != nil {
			return withCode(ExitInternal, err, "")
		}
		if err := renderResult(ios, res, schemaMap(e)); err != nil {
			return err
		}
		if len(res.Rewrites) > 0 { // summed up here: the demo's store, and its audit log, go when it exits
			fmt.Fprintln(ios.Out, p.paint(ansiDim, "(Python-isms rewritten to Starlark: "+rewriteSummary(res.Rewrites)+")"))
		}
		if res.Outcome != step.Outcome || res.Status != step.Status || res.Pending != step.Apply {
			failed = append(failed, step.File)
		}
		if step.Apply && res.Pending {
			fmt.Fprintln(ios.Out, "Approved by the demo (starplan apply RUN_ID on your own store)")
			applied, err := e.ApplyAs(ctx, res.RunID, "demo")
			if err != nil {
				return engineError(err)
			}
			if err := reportApply(ios, e, applied); err != nil {
				return err
			}
		}
	}

	fmt.Fprintf(ios.Out, "\n%s\n", p.paint(ansiBold, "== The store afterwards"))
	v := st.Stage()
	for _, name := range st.Names() {
		t, _ := v.Table(name)
		rows, err := t.Find(table.Query{})
		if err != nil {
			return withCode(ExitInternal, err, "")
		}
		fields := t.Schema().FieldNames()
		if name == "inventory" {
			fields = []string{"item_id", "name", "quantity_in_stock", "price"}
		}
		fmt.Fprintf(ios.Out, "%s:\n", safe(name))
		printTable(ios.Out, fields, rows, 32)
	}
	fmt.Fprintf(ios.Out, "\nThe demo's store was temporary and is gone. To try these on a store of your own:\n"+
		"  go build -o starplan ./cmd/starplan\n"+
		"  ./starplan exec testdata/examples/02_purchase_wayfarer.star   # a dry run, then [y/N]\n"+
		"  ./starplan runs                                               # the audit log\n"+
		"  ./starplan --help\n")
	if len(failed) > 0 {
		return withCode(ExitInternal, fmt.Errorf("the demo did not behave as expected at %s", strings.Join(failed, ", ")), "run go test ./... to see what broke")
	}
	return nil
}

// exampleRequest returns the "# request:" line of an example plan.
func exampleRequest(src string) string {
	for _, line := range strings.Split(src, "\n") {
		if r, ok := strings.CutPrefix(line, "# request:"); ok {
			return strings.TrimSpace(r)
		}
	}
	return ""
}

// rewriteSummary counts rewrites by rule, in order of first use: "f-string ×4, is-none".
func rewriteSummary(rws []pycompat.Rewrite) string {
	var rules []string
	count := map[string]int{}
	for _, r := range rws {
		if count[r.Rule] == 0 {
			rules = append(rules, r.Rule)
		}
		count[r.Rule]++
	}
	parts := make([]string, len(rules))
	for i, rule := range rules {
		parts[i] = rule
		if n := count[rule]; n > 1 {
			parts[i] += fmt.Sprintf(" ×%d", n)
		}
	}
	return strings.Join(parts, ", ")
}
