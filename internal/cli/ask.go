package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/evals"
	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/telemetry"
)

// modelOptions are the flags that choose and configure the model.
type modelOptions struct {
	Model      string
	BaseURL    string
	Timeout    time.Duration
	MaxRepairs int
}

func (m *modelOptions) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&m.Model, "model", "", "model name (default $STARPLAN_MODEL, else "+llm.DefaultModel+")")
	cmd.Flags().StringVar(&m.BaseURL, "base-url", "", "OpenAI-compatible endpoint (default $OPENAI_BASE_URL, else OpenAI)")
	cmd.Flags().DurationVar(&m.Timeout, "timeout", 0, fmt.Sprintf("per-request timeout of the model call (default %s)", llm.DefaultTimeout))
	cmd.Flags().IntVar(&m.MaxRepairs, "max-repairs", engine.DefaultMaxRepairs, "how many times a failed plan is sent back for a correction")
}

// client builds the model client from the environment and the flags.
func (m *modelOptions) client(ios IOStreams) (*llm.Client, error) {
	cfg := llm.ConfigFromEnv(ios.Getenv)
	if m.Model != "" {
		cfg.Model = m.Model
	}
	if m.BaseURL != "" {
		cfg.BaseURL = m.BaseURL
	}
	if m.Timeout > 0 {
		cfg.Timeout = m.Timeout
	}
	if telemetry.TracesConfigured(ios.Getenv) { // a client span per model request (otelhttp), in the global provider StartTracing sets
		cfg.HTTPClient = &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport)}
	}
	c, err := llm.New(cfg)
	if err != nil {
		err = withCode(ExitModel, err, "set OPENAI_API_KEY (and OPENAI_BASE_URL for a local server such as Ollama), or pass --base-url")
		var ce *llm.ConfigError
		if errors.As(err, &ce) {
			err = withReason(errcode.NoModel, err)
		}
		return nil, err
	}
	return c, nil
}

func (m *modelOptions) repairs() int {
	if m.MaxRepairs == 0 {
		return -1 // --max-repairs 0 means none; Ask reads 0 as the default
	}
	return m.MaxRepairs
}

// askOptions are the options of `starplan ask`.
type askOptions struct {
	modelOptions
	Question string
	Subject  string
	Apply    bool
	JSON     bool
	ShowPlan bool
	Timings  bool
}

func newAskCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &askOptions{}
	cmd := &cobra.Command{
		Use:   "ask QUESTION",
		Short: "Answer an inventory question with a model-written plan (changes are reviewed first)",
		Long: `Ask a model to answer the question by writing a plan, run it safely, and print the answer and
STATUS. A failed plan is sent back with its diagnostics for a correction (--max-repairs). For a
change, the diff is shown and, on a terminal, you are asked to apply it; otherwise the run stays
pending ('starplan apply RUN_ID') unless --apply is given.

The model is any OpenAI-compatible chat endpoint: OPENAI_API_KEY, OPENAI_BASE_URL (OpenAI,
Ollama, vLLM, llama.cpp server, LM Studio) and STARPLAN_MODEL, or the flags below.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Question = args[0]
			return runAsk(cmd.Context(), ios, g, opts)
		},
	}
	opts.register(cmd)
	cmd.Flags().StringVar(&opts.Subject, "subject", "", "the id of the subject the run acts for (helpers and rules read it with run_subject())")
	cmd.Flags().BoolVar(&opts.Apply, "apply", false, "apply the changes at once if the plan is accepted")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the result document (with the attempts) as JSON")
	cmd.Flags().BoolVar(&opts.ShowPlan, "show-plan", false, "print the plan the model wrote, with its rewrites")
	cmd.Flags().BoolVar(&opts.Timings, "timings", false, timingsFlag+"; an ask's attempts add up")
	return cmd
}

func runAsk(ctx context.Context, ios IOStreams, g *globalOptions, opts *askOptions) error {
	client, err := opts.client(ios)
	if err != nil {
		return err
	}
	var review string
	err = withEngine(ios, g, func(e *engine.Engine) error {
		// While the model thinks, other commands on the store run through this process.
		stopHosting := hostWhileWaiting(ios, e)
		defer stopHosting()
		var t *timer
		actx := ctx
		if opts.Timings {
			var stop func()
			t = &timer{}
			actx, stop = t.start(ctx, e)
			defer stop()
		}
		var model engine.Model = client
		if telemetry.TracesConfigured(ios.Getenv) { // a failed call leaves no run: its span of its own
			model = telemetry.TraceModel(nil, client.Model(), client)
		}
		res, err := e.Ask(actx, model, engine.AskRequest{Question: opts.Question, Subject: opts.Subject, Apply: opts.Apply, MaxRepairs: opts.repairs(),
			Waiting: askWaiting(ios, client.Model())})
		if err != nil {
			var me *engine.ModelError
			if errors.As(err, &me) {
				return withCode(ExitModel, err, "check OPENAI_BASE_URL, OPENAI_API_KEY and STARPLAN_MODEL (or --base-url, --model)")
			}
			return engineError(err)
		}
		human := !opts.JSON && ios.OutTTY
		if human && opts.ShowPlan {
			printPlan(ios, res)
		}
		if human && len(res.Attempts) > 1 {
			printAttempts(ios, res.Attempts)
		}
		review, err = finishRun(ctx, ios, e, res, opts.JSON, t)
		var silent silentExit
		if errors.As(err, &silent) && res.Diagnostics.Has(engine.CodeNoValidPlan) {
			return silentExit(ExitModel)
		}
		return err
	})
	if err != nil || review == "" {
		return err
	}
	return approveRun(ctx, ios, g, review)
}

// printAttempts says how many times the model repaired its plan and, for each attempt that
// failed, why: its outcome and first diagnostic (the rest are in the JSON document).
func printAttempts(ios IOStreams, attempts []engine.Attempt) {
	repairs := len(attempts) - 1
	fmt.Fprintf(ios.Out, "(%d attempts: the model repaired its plan %d %s)\n", len(attempts), repairs, plural(repairs, "time", "times"))
	p := painter(ios.Color())
	for i, a := range attempts {
		if a.Outcome == engine.OutcomeOK {
			continue
		}
		why := ""
		if len(a.Diagnostics) > 0 {
			d := a.Diagnostics[0]
			pos := ""
			if d.Line > 0 {
				pos = fmt.Sprintf("line %d:%d: ", d.Line, d.Col)
			}
			why = fmt.Sprintf(": %s%s: %s", pos, p.paint(ansiRed, safe(d.Code)), safe(d.Message))
			if n := len(a.Diagnostics) - 1; n > 0 {
				why += fmt.Sprintf(" (and %d more)", n)
			}
		}
		fmt.Fprintf(ios.Out, "  attempt %d: %s%s\n", i+1, a.Outcome, why)
	}
}

// printPlan prints the program of a run with its line numbers, marking the rewritten lines.
func printPlan(ios IOStreams, res *engine.Result) {
	p := painter(ios.Color())
	rewritten := map[int]string{}
	for _, r := range res.Rewrites {
		rewritten[r.Line] = r.Rule
	}
	fmt.Fprintln(ios.Out, p.paint(ansiBold, "Plan:"))
	for i, line := range strings.Split(strings.TrimRight(res.Program, "\n"), "\n") {
		mark := ""
		if rule, ok := rewritten[i+1]; ok {
			mark = p.paint(ansiDim, "  # rewritten: "+safe(rule))
		}
		fmt.Fprintf(ios.Out, "  %3d  %s%s\n", i+1, safeLine(line), mark)
	}
}

// evalOptions are the options of `starplan eval`.
type evalOptions struct {
	modelOptions
	File        string
	JSON        bool
	Concurrency int
	Domain      string // the directory each case's store is made of; "": the inventory
}

func newEvalCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval FILE.jsonl",
		Short: "Measure a model on a suite of requests, each against a fresh store",
		Long: `Run every request of a suite (one JSON object per line: request, status, stock_after,
transaction_amounts, balance_after; testdata/eval/lab-requests.jsonl is the lab's) through ask,
each against its own freshly seeded temporary store, apply it, and compare the STATUS, the stock,
the transactions added and the balance with the expectations. Reports the pass rate, the
first-try pass rate, repairs used, contract violations, latency and tokens. With --domain DIR each
store is made of that domain (as db init --domain makes it) and a case checks its STATUS and the
rows it lists in rows_after (testdata/eval/library-requests.jsonl is the library's).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			return runEval(cmd.Context(), ios, g, opts)
		},
	}
	opts.register(cmd)
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON")
	cmd.Flags().IntVar(&opts.Concurrency, "concurrency", 4, "how many requests run at once")
	cmd.Flags().StringVar(&opts.Domain, "domain", "", "the directory of the domain each store is made of (default: the built-in inventory domain)")
	return cmd
}

func runEval(ctx context.Context, ios IOStreams, g *globalOptions, opts *evalOptions) error {
	f, err := os.Open(opts.File)
	if err != nil {
		return withCode(ExitUsage, err, "give the path of a .jsonl suite such as testdata/eval/lab-requests.jsonl")
	}
	defer f.Close()
	cases, err := evals.Load(f)
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("%s: %w", opts.File, err), "each line is one JSON object with at least request and status")
	}
	var domain fs.FS
	if opts.Domain != "" {
		if _, err := loadDomainDir(ios, opts.Domain); err != nil {
			return err
		}
		domain = os.DirFS(ios.path(opts.Domain))
	}
	client, err := opts.client(ios)
	if err != nil {
		return err
	}
	pool, run, err := runner(ios, g)
	if err != nil {
		return err
	}
	if pool != nil {
		defer pool.Close()
	}
	// Progress goes to stderr when it is a terminal, also when the report is redirected.
	var progress func(evals.Progress)
	stopProgress := func() {}
	if ios.ErrTTY {
		var mu sync.Mutex
		last := evals.Progress{Total: len(cases)}
		t := startTicker(ios.Err, ios.dumbTerminal(), func(elapsed time.Duration) string {
			mu.Lock()
			defer mu.Unlock()
			return evalBar(last.Done, last.Total, last.Passed, elapsed)
		})
		stopProgress = t.Finish
		progress = func(p evals.Progress) {
			mu.Lock()
			last = p
			mu.Unlock()
		}
	}
	rep, err := evals.Run(ctx, cases, client, evals.Options{
		Concurrency: opts.Concurrency, MaxRepairs: opts.repairs(), Progress: progress, Engine: engine.Options{Runner: run},
		Domain: domain,
	})
	stopProgress()
	var unreachable *evals.UnreachableError
	if errors.As(err, &unreachable) {
		return withCode(ExitModel, err, "check OPENAI_BASE_URL, OPENAI_API_KEY and STARPLAN_MODEL (or --base-url, --model)")
	}
	if err != nil {
		return withCode(ExitInternal, err, "")
	}
	// Exit 6 when no case reached the model: the figures would describe nothing.
	code := ExitOK
	if rep.Total > 0 && rep.Errors == rep.Total {
		code = ExitModel
	}
	if opts.JSON || !ios.OutTTY {
		if err := writeJSON(ios.Out, rep); err != nil {
			return err
		}
		return silentExit(code)
	}
	defer func() {
		if code == ExitModel {
			fmt.Fprintln(ios.Err, "Error: every request failed to reach the model\nTry: check OPENAI_BASE_URL, OPENAI_API_KEY and STARPLAN_MODEL (or --base-url, --model)")
		}
	}()
	w := ios.Out
	p := painter(ios.Color())
	for _, c := range rep.Cases {
		mark := p.paint(ansiGreen, "pass")
		if !c.Pass {
			mark = p.paint(ansiRed, "FAIL")
		}
		fmt.Fprintf(w, "%s  %-8s %d attempt(s)  %6.0f ms  %s\n", mark, safe(c.ID), c.Attempts, c.LatencyMS, safe(c.Request))
		for _, f := range c.Failures {
			fmt.Fprintf(w, "        %s\n", safeBlock(f, "        "))
		}
	}
	fmt.Fprintf(w, "\npassed %d/%d (%.0f%%), first try %d/%d (%.0f%%)\n", rep.Passed, rep.Total, 100*rep.PassRate, rep.FirstTryPassed, rep.Total, 100*rep.FirstTryRate)
	fmt.Fprintf(w, "repairs used %d, contract violations %d, model errors %d\n", rep.RepairsUsed, rep.ContractViolations, rep.Errors)
	fmt.Fprintf(w, "latency p50 %.0f ms, p95 %.0f ms; tokens %d prompt + %d completion\n", rep.LatencyP50MS, rep.LatencyP95MS, rep.PromptTokens, rep.CompletionTokens)
	return silentExit(code)
}
