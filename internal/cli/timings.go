package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
)

// timings are the phase durations of the runs one exec or ask made (--timings), in
// milliseconds, from the engine's lifecycle events. An ask's attempts add up.
type timings struct {
	// CheckMS is the check (extract, rewrite, check) of a plan that failed it; a plan that passed
	// has its check in RunMS.
	CheckMS float64 `json:"check_ms"`
	// RunMS is the runner's whole call: the check, a worker's wait and the run.
	RunMS float64 `json:"run_ms"`
	// The runner's phases inside CheckMS and RunMS (sandbox.Phases): finding the program in the
	// reply, waiting for a free worker and its readying itself (isolated runs), the text checks and Python-ism rewrite,
	// the static check (parse, checks, guards, compile) and the plan's interpretation.
	ExtractMS     float64 `json:"extract_ms"`
	WorkerWaitMS  float64 `json:"worker_wait_ms"`
	WorkerSetupMS float64 `json:"worker_setup_ms"`
	RewriteMS     float64 `json:"rewrite_ms"`
	StaticCheckMS float64 `json:"static_check_ms"`
	ExecuteMS     float64 `json:"execute_ms"`
	// DiffMS is making the change set: each changed row before and after.
	DiffMS float64 `json:"diff_ms"`
	// ContractMS is the output contract and the policy.
	ContractMS float64 `json:"contract_ms"`
	// DryRunMS is each dry run from its start to its verdict (the phases above, the diff and the
	// audit record).
	DryRunMS float64 `json:"dry_run_ms"`
	// ApplyMS is the apply's commit, or the conflict it found (--apply).
	ApplyMS float64 `json:"apply_ms"`
	// ApplyCheckMS and ApplyCommitMS are the apply's conflict checks and its commit in the store
	// (the rest of ApplyMS is the domain's rules and the audit record's making).
	ApplyCheckMS  float64 `json:"apply_check_ms,omitempty"`
	ApplyCommitMS float64 `json:"apply_commit_ms,omitempty"`
	// ModelMS is the model's calls (ask), every attempt and retry.
	ModelMS float64 `json:"model_ms,omitempty"`
	// Runs counts the dry runs (an ask's attempts).
	Runs int `json:"runs"`
}

// timingKey marks the context of the call whose runs a timer collects.
type timingKey struct{}

// timer collects the timings of the runs made with its context.
type timer struct {
	mu sync.Mutex
	t  timings
}

// start returns ctx marked for t and starts collecting e's events of runs made with it; stop ends
// the collection. On a server's engine (a relayed command), other clients' runs are not counted.
func (t *timer) start(ctx context.Context, e *engine.Engine) (context.Context, func()) {
	ctx = context.WithValue(ctx, timingKey{}, t)
	stop := e.Observe(func(ctx context.Context, ev engine.Event) {
		if ctx.Value(timingKey{}) != t {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		ms := float64(ev.Duration.Microseconds()) / 1000
		switch {
		case ev.Verdict():
			t.t.DryRunMS += ms
			t.t.Runs++
		case ev.Type == engine.EventChecked:
			if ev.Outcome == engine.OutcomeCheckFailed { // else ran has the runner's call
				t.t.CheckMS += ms
				t.t.phases(ev.Phases)
			}
		case ev.Type == engine.EventRan:
			t.t.RunMS += ms
			t.t.phases(ev.Phases)
		case ev.Type == engine.EventContract:
			t.t.ContractMS += ms
			t.t.DiffMS += float64(ev.Diff.Microseconds()) / 1000
		case ev.Type == engine.EventApplied || ev.Type == engine.EventConflict:
			t.t.ApplyMS += ms
			for _, st := range ev.ApplySteps {
				switch st.Step {
				case store.StepCheck:
					t.t.ApplyCheckMS += float64(st.Duration) / float64(time.Millisecond)
				case store.StepCommit:
					t.t.ApplyCommitMS += float64(st.Duration) / float64(time.Millisecond)
				}
			}
		}
	})
	return ctx, stop
}

// phases adds a run's runner phases.
func (tm *timings) phases(ph sandbox.Phases) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	tm.ExtractMS += ms(ph.Extract)
	tm.WorkerWaitMS += ms(ph.Wait)
	tm.WorkerSetupMS += ms(ph.Setup)
	tm.RewriteMS += ms(ph.Rewrite)
	tm.StaticCheckMS += ms(ph.Check)
	tm.ExecuteMS += ms(ph.Run)
}

// result is what the timer collected, with the model's time from the run's attempts.
func (t *timer) result(res *engine.Result) *timings {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.t
	for _, a := range res.Attempts {
		out.ModelMS += a.LatencyMS
	}
	return &out
}

// print writes the timings as one line for people.
func (tm *timings) print(ios IOStreams) {
	ms := func(v float64) string {
		return (time.Duration(v * float64(time.Millisecond))).Round(10 * time.Microsecond).String()
	}
	line := fmt.Sprintf("timings: check %s, run %s, diff %s, contract %s, dry run %s", ms(tm.CheckMS), ms(tm.RunMS), ms(tm.DiffMS), ms(tm.ContractMS), ms(tm.DryRunMS))
	if tm.ApplyMS > 0 {
		line += ", apply " + ms(tm.ApplyMS)
		if tm.ApplyCheckMS > 0 || tm.ApplyCommitMS > 0 {
			line += " (conflict check " + ms(tm.ApplyCheckMS) + ", commit " + ms(tm.ApplyCommitMS) + ")"
		}
	}
	if tm.ModelMS > 0 {
		line += ", model " + ms(tm.ModelMS)
	}
	wait := ""
	if tm.WorkerWaitMS > 0 {
		wait = ", worker wait " + ms(tm.WorkerWaitMS) + ", worker setup " + ms(tm.WorkerSetupMS)
	}
	line += fmt.Sprintf("; in the runner: extract %s%s, rewrite %s, static check %s, execute %s",
		ms(tm.ExtractMS), wait, ms(tm.RewriteMS), ms(tm.StaticCheckMS), ms(tm.ExecuteMS))
	if tm.Runs > 1 {
		line += fmt.Sprintf(" (%d runs together)", tm.Runs)
	}
	p := painter(ios.Color())
	fmt.Fprintln(ios.Out, p.paint(ansiDim, line))
}
