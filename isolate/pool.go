package isolate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/table"
)

// Defaults for Options. Each applies when the corresponding field is zero.
const (
	// DefaultWarm is the number of started, idle workers the pool keeps ready.
	DefaultWarm = 1
	// DefaultOverhead is the memory a worker may map beyond twice its run's budget: the Go
	// runtime's own structures, the interpreter and the rows it receives, in bytes.
	DefaultOverhead = 64 << 20
	// DefaultKillGrace is how long past a run's timeout the pool waits for the worker to report
	// before it kills it.
	DefaultKillGrace = 500 * time.Millisecond
	// DefaultStartTimeout is how long a new worker may take to report ready.
	DefaultStartTimeout = 10 * time.Second
	// DefaultWorkerGOMAXPROCS is the GOMAXPROCS of a worker whose Options.Env does not set it: a
	// plan runs on one goroutine, and the garbage collector gets one more processor.
	DefaultWorkerGOMAXPROCS = 2
)

// Diagnostic codes of isolated runs, in addition to the sandbox's.
const (
	// CodeWorker is a worker that crashed, was killed from outside or broke the protocol.
	CodeWorker = "worker-failed"
)

// Options configure a Pool. Only Command is required; the zero value of every other field is
// its documented default.
type Options struct {
	// Command starts a worker process: the program and its arguments. The process must call
	// WorkerMain with its standard input and output. The CLI passes its own executable and its
	// hidden worker command; tests pass the test binary.
	Command []string
	// Env is the worker's whole environment ("KEY=value" entries). The parent's environment is
	// not inherited. GOMAXPROCS is DefaultWorkerGOMAXPROCS unless Env sets it.
	Env []string
	// Warm is how many idle workers the pool keeps started (DefaultWarm when 0).
	Warm int
	// MaxWorkers is the most worker processes alive at once, idle or busy; runs beyond it wait
	// for one. 0 means max(Warm, runtime.NumCPU()).
	MaxWorkers int
	// Overhead is the memory, in bytes, a worker may map beyond twice its run's budget
	// (DefaultOverhead when 0). The hard bound of a run's worker is its data segment at start
	// plus 2×Limits.MaxMemory plus Overhead.
	Overhead int64
	// KillGrace is how long past a run's timeout the pool waits before it kills the worker
	// (DefaultKillGrace when 0).
	KillGrace time.Duration
	// StartTimeout is how long a new worker may take to report ready (DefaultStartTimeout when
	// 0).
	StartTimeout time.Duration
	// RowCache is the memory, in bytes, the pool's workers may keep the rows they received in
	// between calls and runs, all together, so that rows a worker holds cross again as their
	// numbers (DefaultRowCache when 0; negative: none). One worker may take it all. What a
	// worker holds is added to its memory limits, and the pool keeps the parent's maps of those
	// rows alive while the worker holds them.
	RowCache int64
	// NoNetworkNamespace, when set, starts workers in the parent's network namespace. They are
	// still denied sockets by their seccomp filter where the kernel has one.
	NoNetworkNamespace bool
}

// Pool runs plans in warm worker processes under OS limits. It implements sandbox.Runner and is
// safe for concurrent use; each run has a worker to itself. A worker is reused for the next run
// when its run ended normally (ok, check_failed, runtime_error) and discarded after any limit,
// crash or protocol failure; discarded workers are replaced in the background.
type Pool struct {
	opts     Options
	netns    bool     // workers start in a new network namespace
	warnings []string // what could not be applied, found at start-up

	idle  chan *proc    // started workers waiting for a run
	slots chan struct{} // one token per live worker (starting, idle or busy)
	done  chan struct{} // closed by Close

	mu       sync.Mutex
	live     map[*proc]struct{}
	starting int
	closed   bool
	bg       sync.WaitGroup // background starts

	// noRowCache turns the workers' row caches off (benchmarks of the cold path).
	noRowCache bool
	// rowBudget bounds the workers' row caches together (Options.RowCache).
	rowBudget *rowBudget

	stats poolStats // counts for Stats

	schemaMu      sync.Mutex
	schemaViews   []*table.Schema // the schemas behind schemaJSON
	schemaNames   []string
	schemaHelpers string
	schemaJSON    string
}

var _ sandbox.Runner = (*Pool)(nil)

// NewPool starts a pool and its first worker, so that a bad Command or a kernel that refuses
// every limit is reported now rather than at the first run. It returns an error when no worker
// can be started. What the workers could not apply is in Warnings.
func NewPool(opts Options) (*Pool, error) {
	if len(opts.Command) == 0 {
		return nil, errors.New("isolate: Options.Command is required (the program that runs isolate.WorkerMain)")
	}
	if opts.Warm <= 0 {
		opts.Warm = DefaultWarm
	}
	if opts.MaxWorkers <= 0 {
		opts.MaxWorkers = max(opts.Warm, runtime.NumCPU())
	}
	opts.Warm = min(opts.Warm, opts.MaxWorkers)
	if opts.Overhead <= 0 {
		opts.Overhead = DefaultOverhead
	}
	if opts.RowCache == 0 {
		opts.RowCache = DefaultRowCache
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if !slices.ContainsFunc(opts.Env, func(s string) bool { return strings.HasPrefix(s, "GOMAXPROCS=") }) {
		opts.Env = append(slices.Clip(opts.Env), fmt.Sprintf("GOMAXPROCS=%d", DefaultWorkerGOMAXPROCS))
	}
	if raceExit != "" && !slices.ContainsFunc(opts.Env, func(s string) bool { return strings.HasPrefix(s, "GORACE=") }) {
		opts.Env = append(slices.Clip(opts.Env), raceExit)
	}
	p := &Pool{
		opts:  opts,
		netns: netnsSupported && !opts.NoNetworkNamespace,
		idle:  make(chan *proc, opts.MaxWorkers),
		slots: make(chan struct{}, opts.MaxWorkers),
		done:  make(chan struct{}),
		live:  map[*proc]struct{}{},

		rowBudget: &rowBudget{limit: opts.RowCache},
	}
	p.slots <- struct{}{}
	w, err := p.start()
	if err != nil && p.netns && namespaceRefused(err) {
		p.netns = false
		p.warnings = append(p.warnings, fmt.Sprintf("network: no network namespace for workers (%v); they rely on the seccomp filter", err))
		w, err = p.start()
	}
	if err != nil {
		<-p.slots
		return nil, err
	}
	if !p.netns && !opts.NoNetworkNamespace && !netnsSupported {
		p.warnings = append(p.warnings, "network: workers share the parent's network namespace on "+runtime.GOOS)
	}
	p.warnings = append(p.warnings, w.warnings...)
	p.idle <- w
	p.fill()
	return p, nil
}

// Warnings lists, once per pool, the limits and confinements its workers could not apply (for
// example "no seccomp filter against sockets: ..."). The CLI prints them once at start-up. Nil
// means every limit applies.
func (p *Pool) Warnings() []string { return slices.Clone(p.warnings) }

// Close stops every worker, idle or busy (a busy worker's run ends as a runtime_error), and
// waits for background starts to end. A closed pool's runs fail at once. Close is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	live := make([]*proc, 0, len(p.live))
	for w := range p.live {
		live = append(live, w)
	}
	p.mu.Unlock()
	// Idle workers end on their own when their input ends; busy ones are killed.
	idle := map[*proc]bool{}
	for {
		select {
		case w := <-p.idle:
			idle[w] = true
			w.toWorker.Close()
			continue
		default:
		}
		break
	}
	for _, w := range live {
		if !idle[w] {
			w.kill(killClosed)
		}
	}
	p.bg.Wait()
	grace := time.After(time.Second)
	for _, w := range live {
		select {
		case <-w.exited:
		case <-grace:
		}
		p.discard(w, killClosed)
		<-w.exited
	}
	return nil
}

// proc is one worker process.
type proc struct {
	cmd      *exec.Cmd
	c        *conn
	toWorker *os.File // the worker's standard input
	fromW    *os.File // its standard output
	stderr   *headBuffer
	exited   chan struct{} // closed when the process has been waited for
	warnings []string
	vmData0  int64       // data segment when it reported ready, in bytes
	goTotal0 int64       // the Go runtime's memory when it reported ready, in bytes
	vmData   int64       // data segment after its last run, in bytes
	schemas  string      // the schemas the worker has, as last sent
	deadline *time.Timer // kills the worker at its run's deadline; armed only during a run

	kills *[len(killReasons)]atomic.Uint64 // the pool's kill counts, by reason (Stats)

	mu  sync.Mutex
	why killReason // why the pool killed it; "" while it has not
}

// killReason says why the pool killed a worker.
type killReason string

const (
	killTimeout  killReason = "timeout"
	killCancel   killReason = "cancel"
	killOversize killReason = "oversize"
	killClosed   killReason = "closed"
	killDiscard  killReason = "discard"
	killBroken   killReason = "broken"
)

// killReasons are the reasons Stats counts, in its order.
var killReasons = [...]killReason{killTimeout, killCancel, killOversize, killClosed, killDiscard, killBroken}

// kill stops the process (once) and records why; a later reason does not replace the first,
// and only the first is counted.
func (w *proc) kill(why killReason) {
	w.mu.Lock()
	first := w.why == ""
	if first {
		w.why = why
	}
	w.mu.Unlock()
	if first && w.kills != nil {
		w.kills[slices.Index(killReasons[:], why)].Add(1)
	}
	_ = w.cmd.Process.Kill() // fails only when it has already exited
}

func (w *proc) reason() killReason {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.why
}

// start starts one worker and waits for it to report ready. The caller holds a slot for it.
func (p *Pool) start() (*proc, error) {
	cmd := exec.Command(p.opts.Command[0], p.opts.Command[1:]...)
	cmd.Env = p.opts.Env
	cmd.SysProcAttr = spawnAttr(p.netns)
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("isolate: starting a worker: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("isolate: starting a worker: %w", err)
	}
	w := &proc{cmd: cmd, toWorker: inW, fromW: outR, stderr: &headBuffer{max: 8 << 10}, exited: make(chan struct{}), kills: &p.stats.kills}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, w.stderr
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("isolate: starting a worker (%s): %w", strings.Join(p.opts.Command, " "), err)
	}
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(w.exited)
	}()
	p.mu.Lock()
	p.live[w] = struct{}{}
	closed, cache := p.closed, !p.noRowCache && p.opts.RowCache > 0
	p.mu.Unlock()
	if closed {
		p.forget(w, killClosed)
		return nil, errClosed
	}
	w.c = newConn(w.fromW, w.toWorker, 1<<20)
	if cache {
		w.c.sent = newRowCache(p.opts.RowCache, p.rowBudget)
	}
	t := time.AfterFunc(p.opts.StartTimeout, func() { w.kill(killTimeout) })
	typ, d, err := w.c.recv()
	t.Stop()
	if err == nil && typ != msgReady {
		err = fmt.Errorf("it sent message %d before ready", typ)
	}
	var r ready
	if err == nil {
		r = d.ready()
		err = d.err
	}
	if err != nil {
		p.forget(w, killBroken)
		<-w.exited
		msg := fmt.Sprintf("isolate: the worker %s did not start (%v; %s)", strings.Join(p.opts.Command, " "), err, w.cmd.ProcessState)
		if line := stderrLine(w.stderr.String()); line != "" {
			msg += ": " + line
		}
		return nil, errors.New(msg)
	}
	w.warnings, w.vmData0, w.vmData, w.goTotal0 = r.Warnings, r.VMData, r.VMData, r.GoTotal
	p.stats.started.Add(1)
	return w, nil
}

var errClosed = errors.New("isolate: the pool is closed")

// forget kills a worker, closes its pipes and drops it from the live set. It reports whether
// the worker was live (each worker is forgotten once).
func (p *Pool) forget(w *proc, why killReason) bool {
	w.kill(why)
	p.mu.Lock()
	_, ok := p.live[w]
	delete(p.live, w)
	p.mu.Unlock()
	if ok {
		w.toWorker.Close()
		w.fromW.Close()
		if why != killClosed && w.c != nil {
			// The worker's rows are gone with it. (Close forgets busy workers from its own
			// goroutine, and a closed pool keeps no rows: it leaves the record alone.)
			w.c.sent.drop()
		}
	}
	return ok
}

// discard forgets a worker, frees its slot and starts a replacement in the background when
// fewer than Warm are ready.
func (p *Pool) discard(w *proc, why killReason) {
	if p.forget(w, why) {
		if why != killClosed {
			p.stats.discarded.Add(1)
		}
		<-p.slots
		p.fill()
	}
}

// fill starts workers in the background until Warm are idle or starting, as slots allow.
func (p *Pool) fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.idle)+p.starting < p.opts.Warm {
		select {
		case p.slots <- struct{}{}:
		default:
			return
		}
		p.starting++
		p.bg.Add(1)
		go func() {
			defer p.bg.Done()
			w, err := p.start()
			p.mu.Lock()
			p.starting--
			p.mu.Unlock()
			if err != nil {
				<-p.slots
				return
			}
			p.release(w)
		}()
	}
}

// release returns a worker to the idle set, or discards it when the pool is closed.
func (p *Pool) release(w *proc) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.discard(w, killClosed)
		return
	}
	p.idle <- w // never blocks: idle holds at most MaxWorkers, one per slot
}

// acquire returns a worker whose data segment fits under dataLimit: an idle one, or a new one
// when a slot is free; otherwise it waits.
func (p *Pool) acquire(ctx context.Context, fits func(*proc) bool) (*proc, error) {
	for {
		var w *proc
		select {
		case w = <-p.idle:
		default:
			select {
			case w = <-p.idle:
			case p.slots <- struct{}{}:
				w, err := p.start()
				if err != nil {
					<-p.slots
					return nil, err
				}
				return w, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-p.done:
				return nil, errClosed
			}
		}
		if fits(w) {
			p.fill()
			return w, nil
		}
		p.discard(w, killDiscard) // it has mapped more than this run may use
	}
}

// Run runs job's plan in a worker. It never panics and never returns nil: a worker that fails
// gives a Result with outcome limit_exceeded (memory when it ran out of its OS memory limit,
// time when it was killed at its deadline or ran out of processor time) or runtime_error (a
// crash, a kill from outside, a cancelled context, a closed pool), with a diagnostic that says
// which. A reply without exactly one program ends check_failed, as in process, without a
// worker. Every table call of the plan is served from job.View in this goroutine.
func (p *Pool) Run(ctx context.Context, job sandbox.Request) *sandbox.Result {
	start := time.Now()
	// The parent extracts the program once, here. A reply without exactly one program needs no
	// worker: its result is the extraction's diagnostics, as in process. Every failure below
	// reports this program instead of extracting again after the worker died, which cost the
	// parent a second pass over a reply that had just taken a worker down (issue 10: 200,000
	// distinct blocks), outside any limit.
	program, ds := job.Reply, diag.List(nil)
	if !job.Bare {
		program, ds = sandbox.Extract(job.Reply)
	}
	extracted := time.Now()
	if len(ds) > 0 {
		return &sandbox.Result{Outcome: sandbox.OutcomeCheckFailed, Diagnostics: ds, Duration: extracted.Sub(start),
			Phases: sandbox.Phases{Extract: extracted.Sub(start)}}
	}
	// The worker gets the program, bare: it would extract the same program again, and its
	// result is the same (Env.Run checks a bare program as it checks an extracted one).
	job.Reply, job.Bare = program, true
	job.Limits = job.Limits.Effective(sandbox.Limits{})
	budget, timeout := job.Limits.MaxMemory, job.Limits.Timeout
	if err := ctx.Err(); err != nil {
		// Do not spend a worker on a run that is over before it starts.
		res := limitFailure(program, sandbox.LimitTime, "time limit exceeded: the run's deadline passed before it started", budget, timeout)
		if errors.Is(err, context.Canceled) {
			res = failure(program, "", errors.New("the run was cancelled before it started"))
			res.Diagnostics[0].Code, res.Diagnostics[0].Hint = sandbox.CodeCancelled, ""
		}
		res.Duration, res.Phases.Extract = time.Since(start), extracted.Sub(start)
		return res
	}
	// What a worker may map: its start, the rows it keeps between runs, twice the budget and
	// the runtime's overhead.
	dataLimit := func(w *proc) int64 { return w.vmData0 + w.c.sent.allowance() + 2*budget + p.opts.Overhead }
	// A worker whose row cache is stale is replaced rather than emptied: until the first rows
	// list of the run told it to, it would still hold the rows, beyond limits that no longer
	// count them.
	w, err := p.acquire(ctx, func(w *proc) bool { return !w.c.sent.startRun() && w.vmData <= dataLimit(w) })
	// The parent's phases: its extraction and the wait for a worker; the worker times the rest.
	parent := sandbox.Phases{Extract: extracted.Sub(start), Wait: time.Since(extracted)}
	if err != nil {
		res := failure(program, "", err)
		if errors.Is(err, context.DeadlineExceeded) {
			res = limitFailure(program, sandbox.LimitTime, "time limit exceeded: no sandbox worker was free before the deadline", budget, timeout)
		} else if errors.Is(err, context.Canceled) {
			res.Diagnostics[0].Code, res.Diagnostics[0].Message = sandbox.CodeCancelled, "the run was cancelled while waiting for a sandbox worker"
		}
		res.Duration, res.Phases = time.Since(start), parent
		return res
	}
	m, err := p.runMsg(job)
	if err != nil {
		p.release(w)
		res := failure(program, "", err)
		res.Duration, res.Phases = time.Since(start), parent
		return res
	}
	// Three bounds, from soft to hard, all 2×budget above where the worker started: the Go
	// runtime's soft limit (the collector works hard from there), the ceiling at which the
	// worker exits with exitMemory, and the kernel's RLIMIT_DATA. The data segment also counts
	// thread stacks and runtime reservations that the runtime's own total does not.
	kept := w.c.sent.allowance() // exactly the rows the worker holds

	m.GoLimit = w.goTotal0 + kept + 2*budget + p.opts.Overhead/4
	m.MemCeiling = w.goTotal0 + kept + 2*budget + p.opts.Overhead/2
	m.DataLimit = dataLimit(w)
	m.CPUSeconds = int64(2*timeout/time.Second) + 2
	if m.Schemas == w.schemas {
		m.Schemas = "" // the worker has them
	}
	p.stats.busy.Add(1)
	res := p.runOn(ctx, w, job, program, m, budget, timeout)
	p.stats.busy.Add(-1)
	res.Duration = time.Since(start)
	res.Phases.Extract, res.Phases.Wait = parent.Extract, parent.Wait
	return res
}

// runMsg builds the run message of job, without its limits.
func (p *Pool) runMsg(job sandbox.Request) (*runMsg, error) {
	if job.View == nil {
		return nil, errors.New("isolate: the job has no view")
	}
	names := job.View.Names()
	schemas := make([]*table.Schema, 0, len(names))
	for _, n := range names {
		t, ok := job.View.Table(n)
		if !ok {
			return nil, fmt.Errorf("isolate: the view lists table %q but has none", n)
		}
		schemas = append(schemas, t.Schema())
	}
	p.schemaMu.Lock()
	defer p.schemaMu.Unlock()
	if !slices.Equal(schemas, p.schemaViews) || !slices.Equal(names, p.schemaNames) || job.Helpers != p.schemaHelpers {
		b, err := json.Marshal(envSpec{Schemas: schemas, Helpers: job.Helpers})
		if err != nil {
			return nil, fmt.Errorf("isolate: encoding the schemas: %w", err)
		}
		p.schemaViews, p.schemaNames, p.schemaHelpers, p.schemaJSON = schemas, names, job.Helpers, string(b)
	}
	return &runMsg{Job: job, Schemas: p.schemaJSON, Names: names}, nil
}

// runOn runs one plan on w, serving its table calls, and returns w to the pool or discards it.
// program is the one Run extracted, for the result of a run the worker does not finish.
func (p *Pool) runOn(ctx context.Context, w *proc, job sandbox.Request, program string, m *runMsg, budget int64, timeout time.Duration) *sandbox.Result {
	if err := w.c.enc.run(m); err != nil {
		p.release(w)
		return failure(program, "", fmt.Errorf("the run's inputs cannot be sent to the worker: %w", err))
	}
	w.c.max = int(max(2*budget, 64<<20))
	// The deadline is one timer for the worker's life, armed for each run.
	if w.deadline == nil {
		w.deadline = time.AfterFunc(timeout+p.opts.KillGrace, func() { w.kill(killTimeout) })
	} else {
		w.deadline.Reset(timeout + p.opts.KillGrace)
	}
	deadline := w.deadline
	defer deadline.Stop()
	stop := func() bool { return true }
	if ctx.Done() != nil { // a context that can end
		stop = context.AfterFunc(ctx, func() {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				w.kill(killTimeout)
			} else {
				w.kill(killCancel)
			}
		})
	}
	defer stop()
	if err := w.c.send(); err != nil {
		return p.failed(w, program, m, err, budget, timeout)
	}
	if m.Schemas != "" {
		w.schemas = m.Schemas // the worker has them now
	}
	for {
		typ, d, err := w.c.recv()
		if err != nil {
			var tl *errTooLarge
			if errors.As(err, &tl) {
				w.kill(killOversize)
			}
			return p.failed(w, program, m, err, budget, timeout)
		}
		switch typ {
		case msgCall:
			c := d.call()
			if d.err != nil {
				w.kill(killBroken)
				return p.failed(w, program, m, d.err, budget, timeout)
			}
			p.stats.calls.Add(1)
			if c.op == opInsert || c.op == opUpdate || c.op == opRemove {
				w.c.sent.wrote = true
			}
			if err := w.c.reply(c.op, serve(job.View, c, w.c)); err != nil {
				return p.failed(w, program, m, err, budget, timeout)
			}
		case msgDone:
			dn := d.done()
			if d.err != nil {
				w.kill(killBroken)
				return p.failed(w, program, m, d.err, budget, timeout)
			}
			// The run is over: a deadline that fires from now on must not blame it.
			stopped := deadline.Stop()
			stopped = stop() && stopped
			if !stopped || w.reason() != "" || dn.Res.Outcome == sandbox.OutcomeLimitExceeded {
				p.discard(w, killDiscard)
			} else {
				w.vmData = dn.VMData
				p.release(w)
			}
			return dn.Res
		default:
			w.kill(killBroken)
			return p.failed(w, program, m, fmt.Errorf("unexpected message %d", typ), budget, timeout)
		}
	}
}

// reply sends the answer to a call: a search's rows in parts of findPart rows, each sent as
// soon as it is encoded. An answer that cannot be encoded is sent as the call's error.
func (c *conn) reply(op byte, a *answer) error {
	if op == opFind && a.err == nil {
		a.total, a.cache = len(a.rows), c.sent
		all := a.rows
		for len(all) > findPart {
			part := *a
			part.rows, part.more = all[:findPart], true
			c.sent.mark()
			if err := c.enc.answer(op, &part); err != nil {
				c.sent.rollback() // the worker never gets this part's rows
				return c.replyError(err)
			}
			if err := c.send(); err != nil {
				return err
			}
			all = all[findPart:]
		}
		a.rows = all
	}
	c.sent.mark()
	if err := c.enc.answer(op, a); err != nil {
		c.sent.rollback()
		return c.replyError(err)
	}
	return c.send()
}

// replyError answers a call with the error of encoding its answer.
func (c *conn) replyError(err error) error {
	c.enc.reset(msgReply)
	c.enc.error(fmt.Errorf("the view's answer cannot be sent to the worker: %w", err))
	return c.send()
}

// serve answers one table call from the run's view. A panic of the view becomes the call's
// error, as it would be a failed run in process.
func serve(v table.View, c *call, cn *conn) (a *answer) {
	a = &answer{}
	defer func() {
		if r := recover(); r != nil {
			a = &answer{err: fmt.Errorf("the staged view failed: %v", r)}
		}
	}()
	t, ok := v.Table(c.table)
	if !ok {
		a.err = fmt.Errorf("table %q is not in this run's database", c.table)
		return a
	}
	q := table.Query{Where: c.where, Limit: c.limit, Reverse: c.reverse}
	switch c.op {
	case opLen:
		a.n = t.Len()
	case opFind:
		a.rows, a.err = t.Find(q)
		a.shape = cn.shapeOf(t.Schema())
	case opCount:
		a.n, a.err = t.Count(q)
	case opGet:
		var found bool
		a.row, found, a.err = t.Get(c.key)
		if !found {
			a.row = nil
		}
	case opInsert:
		a.key, a.err = t.Insert(c.row)
	case opUpdate:
		a.n, a.err = t.Update(c.row, q)
	case opRemove:
		a.n, a.err = t.Remove(q)
	default:
		a.err = fmt.Errorf("unknown table operation %d", c.op)
	}
	return a
}

// shapeOf is shapeOf(s), made once per schema for the connection's life (a few entries: the
// tables of the domains its runs used).
func (c *conn) shapeOf(s *table.Schema) []string {
	if sh, ok := c.shapes[s]; ok {
		return sh
	}
	if c.shapes == nil || len(c.shapes) >= maxShapes {
		c.shapes = map[*table.Schema][]string{}
	}
	sh := shapeOf(s)
	c.shapes[s] = sh
	return sh
}

// maxShapes bounds a connection's shapes; past it they are made again.
const maxShapes = 64

// shapeOf is the field order a table's rows are sent in: the key when the schema does not
// declare it as a field, then the fields.
func shapeOf(s *table.Schema) []string {
	shape := make([]string, 0, len(s.Fields)+1)
	if s.Key != "" && s.Field(s.Key) == nil {
		shape = append(shape, s.Key)
	}
	for _, f := range s.Fields {
		shape = append(shape, f.Name)
	}
	return shape
}

// failed ends a run whose worker stopped answering: it makes sure the process is gone, discards
// it, and says why the run failed, with the program Run extracted.
func (p *Pool) failed(w *proc, program string, m *runMsg, err error, budget int64, timeout time.Duration) *sandbox.Result {
	why := w.reason()
	if why == "" {
		// The pipe ended or broke: the worker is exiting on its own, or someone else killed it.
		// Give it a moment to be reaped so that its status and last words are known.
		select {
		case <-w.exited:
		case <-time.After(2 * time.Second):
			why = killBroken
		}
	}
	p.discard(w, killBroken)
	<-w.exited
	st, stderr := w.cmd.ProcessState, w.stderr.String()
	switch {
	case why == killTimeout:
		return limitFailure(program, sandbox.LimitTime, fmt.Sprintf("time limit of %s exceeded: the worker was stopped %s after it", timeout, p.opts.KillGrace), budget, timeout)
	case why == killOversize:
		return limitFailure(program, sandbox.LimitMemory, fmt.Sprintf("memory limit of %s exceeded: %v", builtins.FormatBytes(budget), err), budget, timeout)
	case why == killCancel:
		res := failure(program, "", errors.New("the run was cancelled"))
		res.Diagnostics[0].Code, res.Diagnostics[0].Hint = sandbox.CodeCancelled, ""
		return res
	case why == killClosed:
		return failure(program, "", errClosed)
	case why == "" && st.ExitCode() == exitCPU:
		return limitFailure(program, sandbox.LimitTime, fmt.Sprintf("processor time limit exceeded: the worker used more than %d s of processor time", m.CPUSeconds), budget, timeout)
	case why == "" && st.ExitCode() == exitMemory:
		return limitFailure(program, sandbox.LimitMemory, fmt.Sprintf("memory limit of %s exceeded: the worker's memory grew by more than %s (twice the budget plus overhead), and the worker was stopped", builtins.FormatBytes(budget), builtins.FormatBytes(m.MemCeiling-w.goTotal0)), budget, timeout)
	case why == "" && outOfMemory(stderr):
		return limitFailure(program, sandbox.LimitMemory, fmt.Sprintf("memory limit of %s exceeded: the kernel refused the worker more memory (its hard limit is %s over its start) and it stopped (%s)", builtins.FormatBytes(budget), builtins.FormatBytes(m.DataLimit-w.vmData0), stderrLine(stderr)), budget, timeout)
	case why == killBroken:
		return failure(program, stderrLine(stderr), fmt.Errorf("the sandbox worker broke the protocol and was stopped: %v", err))
	}
	return failure(program, stderrLine(stderr), fmt.Errorf("the sandbox worker %s", exitText(st)))
}

// outOfMemory reports whether a worker's last words say that the kernel refused it memory: the
// Go runtime's fatal errors for a refused heap or stack, a thread that could not be created
// (with cgo each thread's stack is an 8 MiB mapping that RLIMIT_DATA counts), the race
// detector's shadow memory refused (in -race builds, where it is several times the heap), or a nil
// dereference inside the runtime's collector, which is how Go 1.26's collector fails when an
// allocation of its own is refused.
func outOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "stack overflow",
		"pthread_create failed", "failed to create new OS thread",
		"failed to allocate"} { // the race detector's shadow memory, in -race builds
		if strings.Contains(stderr, s) {
			return true
		}
	}
	first, rest, _ := strings.Cut(stderr, "\n")
	return strings.HasPrefix(first, "SIGSEGV") && strings.Contains(rest, "addr=0x0") &&
		(strings.Contains(stderr, "runtime/mgc") || strings.Contains(stderr, "runtime/mheap"))
}

// exitText describes how a worker that the pool did not stop ended, for messages.
func exitText(st *os.ProcessState) string {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %s from outside starplan (another process, or the kernel's out-of-memory killer)", signalName(ws.Signal()))
	}
	switch st.ExitCode() {
	case exitTransport:
		return "lost its pipe to starplan and stopped"
	case exitProtocol:
		return "received a message it did not understand and stopped"
	case exitOK:
		return "stopped in the middle of a run"
	}
	return fmt.Sprintf("crashed (exit status %d)", st.ExitCode())
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGABRT:
		return "SIGABRT"
	}
	return s.String()
}

// stderrLine picks the line of a worker's standard error that says what went wrong: the Go
// runtime's "fatal error:" or "panic:" line, else the first line; "" when there is none.
func stderrLine(s string) string {
	var first string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "runtime:") {
			return line
		}
		if first == "" {
			first = line
		}
	}
	return first
}

// failure is the result of a run that failed for a reason other than a limit. program is the
// one Run extracted before the run started; detail is the worker's last words, appended to the
// message when not empty.
func failure(program, detail string, err error) *sandbox.Result {
	msg := err.Error()
	if detail != "" {
		msg += ": " + detail
	}
	return &sandbox.Result{
		Outcome: sandbox.OutcomeRuntimeError,
		Program: program,
		Diagnostics: diag.List{{
			Stage: diag.StageRun, Code: CodeWorker, Message: msg,
			Hint: "nothing was applied; the worker was replaced, so running the plan again is safe",
		}},
	}
}

// limitFailure is the result of a run whose worker was stopped by a limit. program is the one
// Run extracted before the run started.
func limitFailure(program string, limit sandbox.Limit, msg string, budget int64, timeout time.Duration) *sandbox.Result {
	hint := fmt.Sprintf("the plan needed more than %s of memory: build smaller values", builtins.FormatBytes(budget))
	if limit == sandbox.LimitTime {
		hint = fmt.Sprintf("the plan ran longer than %s: look for a loop that never ends or work that grows too fast", timeout)
	}
	return &sandbox.Result{
		Outcome: sandbox.OutcomeLimitExceeded,
		Limit:   limit,
		Program: program,
		Diagnostics: diag.List{{
			Stage: diag.StageRun, Code: sandbox.CodeLimit, Message: msg, Hint: hint,
		}},
	}
}

// headBuffer keeps the first max bytes written to it and discards the rest.
type headBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - h.b.Len(); room > 0 {
		h.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.String()
}

var _ io.Writer = (*headBuffer)(nil)

// poolStats are the counts behind Pool.Stats, kept with atomic adds.
type poolStats struct {
	started, discarded atomic.Uint64
	calls              atomic.Uint64
	busy               atomic.Int64
	kills              [len(killReasons)]atomic.Uint64
}

// Stats is a moment of a pool's life, for metrics: its bound, its workers and what happened to
// them since it started.
type Stats struct {
	// MaxWorkers is the most workers alive at once (Options.MaxWorkers as applied).
	MaxWorkers int
	// Live counts the worker processes alive now (starting, idle or busy); Idle those waiting
	// for a run; Busy those running a plan.
	Live, Idle, Busy int
	// Started counts the workers that reported ready; Discarded those the pool ended after a
	// limit, a crash, a protocol failure or a memory map grown too large for the next run (each
	// is replaced: a restart). A closed pool's workers are not discarded.
	Started, Discarded uint64
	// Calls counts the table calls the workers' plans made, each a round trip over a worker's
	// pipe: most of what isolation adds to a plan's time is one such exchange per call
	// (BenchmarkNewPlan/isolated in engine reports them per run as calls/op).
	Calls uint64
	// Kills counts the workers the pool killed, by reason: "timeout" (a run's time limit, or a
	// start that took too long), "cancel" (the run's caller gave up), "oversize" (a reply over
	// the protocol's bound), "discard" (grown too large), "broken" (a crash or a protocol
	// failure) and "closed" (the pool closed while it ran). Every reason is present.
	Kills map[string]uint64
}

// Stats returns the pool's counts now. It takes the pool's lock for a moment.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	live := len(p.live)
	p.mu.Unlock()
	st := Stats{MaxWorkers: p.opts.MaxWorkers, Live: live, Idle: len(p.idle), Busy: int(p.stats.busy.Load()),
		Started: p.stats.started.Load(), Discarded: p.stats.discarded.Load(), Calls: p.stats.calls.Load(), Kills: make(map[string]uint64, len(killReasons))}
	for i, r := range killReasons {
		st.Kills[string(r)] = p.stats.kills[i].Load()
	}
	return st
}
