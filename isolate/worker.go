package isolate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/starplan/starplan/builtins/tables"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/table"
)

// Exit codes of a worker, which the pool reads when a worker ends in the middle of a run.
const (
	exitOK        = 0
	exitCPU       = 3 // the processor time limit (RLIMIT_CPU) was reached
	exitProtocol  = 4 // the pool sent something the worker does not understand
	exitTransport = 5 // the pipe to the pool broke in the middle of a run
	exitMemory    = 6 // the Go runtime's memory passed the run's ceiling
)

// confinedEnv marks a worker's second start on Linux, with its process id. A worker starts
// twice: the first start sheds what only an exec sheds from every thread (the capability
// bounding set, descriptors it inherited) and re-executes itself; the second serves runs (see
// confine).
const confinedEnv = "STARPLAN_WORKER_CONFINED"

// maxPoolFrame is the largest message a worker accepts from the pool, in bytes. The pool's
// largest messages are the rows of a search; a view holding more than this in one answer is
// refused with a clear error rather than read.
const maxPoolFrame = 1 << 30

// WorkerMain is the whole life of a sandbox worker process: it confines itself (see confine and
// the seccomp filter in seccomp_linux.go) and applies the static OS limits, reports ready on out, then runs the plans the pool sends on in, one at a time, until
// in ends. It returns the process's exit code. Every table call of a plan travels to the pool on
// out and its answer comes back on in; the worker holds no database handle.
//
// The CLI's hidden worker command calls it with the process's standard streams and exits with
// its result: os.Exit(isolate.WorkerMain(os.Stdin, os.Stdout)). Nothing else in the worker
// process may write to out. The process must have been started by a Pool.
func WorkerMain(in io.Reader, out io.Writer) int {
	warnings := confine() // on Linux, the first start re-executes itself here
	warnings = append(warnings, applyStaticLimits()...)
	exitOnCPULimit()
	w := &worker{c: newConn(in, out, maxPoolFrame)}
	// What the worker opens, it opens before its system call filter denies opening files: its
	// /proc/self/status (read by dataSegment) and the local time zone.
	vm := w.dataSegment()
	_ = time.Local.String()
	if err := installWorkerFilter(); err != nil {
		warnings = append(warnings, fmt.Sprintf("system calls: no seccomp filter, so sockets, files and processes are not denied (%v)", err))
	}
	w.c.enc.ready(ready{Warnings: warnings, VMData: vm, GoTotal: goTotal()})
	if err := w.c.send(); err != nil {
		return exitTransport
	}
	for {
		typ, d, err := w.c.recv()
		if errors.Is(err, io.EOF) {
			return exitOK
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "starplan sandbox worker: reading from the pool: %v\n", err)
			return exitTransport
		}
		if typ != msgRun {
			fmt.Fprintf(os.Stderr, "starplan sandbox worker: unexpected message %d\n", typ)
			return exitProtocol
		}
		m := d.run()
		if d.err != nil {
			fmt.Fprintf(os.Stderr, "starplan sandbox worker: %v\n", d.err)
			return exitProtocol
		}
		res := w.run(m)
		w.c.enc.done(done{Res: res, VMData: w.dataSegment()})
		if err := w.c.send(); err != nil {
			return exitTransport
		}
	}
}

// exitOnCPULimit makes the process exit with exitCPU when the kernel signals that it passed its
// soft RLIMIT_CPU (the Go runtime ignores SIGXCPU otherwise).
func exitOnCPULimit() {
	cpu := make(chan os.Signal, 1)
	signal.Notify(cpu, syscall.SIGXCPU)
	go func() {
		<-cpu
		os.Exit(exitCPU)
	}()
}

// worker is the state a worker keeps between runs: the environment of the last set of schemas
// (building one costs more than a run). Each run gets a fresh thread and predeclared names from
// the sandbox; nothing of a run's own survives it.
type worker struct {
	c       *conn
	schemas string // the envSpec the environment was built from
	helpers string // its helpers
	env     *sandbox.Env
	tables  map[string]*table.Schema // the schemas of env's tables, by name
	goLimit int64                    // the Go runtime's soft memory limit now
	limits  runLimits                // the OS limits in force
	watch   memoryWatch

	// The data segment as last read, and the runtime's memory and thread count then.
	vm, vmGo  int64
	vmThreads int
}

// dataSegment is the worker's data segment (VmData), in bytes. Reading it costs tens of
// microseconds, so it is read again only when the runtime's memory grew by a mebibyte or it
// started a thread since the last reading; nothing else in the worker maps memory.
func (w *worker) dataSegment() int64 {
	g := goTotal()
	threads, _ := runtime.ThreadCreateProfile(nil)
	if w.vm == 0 || g > w.vmGo+1<<20 || threads != w.vmThreads {
		w.vm, w.vmGo, w.vmThreads = vmData(), g, threads
	}
	return w.vm
}

func (w *worker) run(m *runMsg) *sandbox.Result {
	began := time.Now()
	if err := w.limits.apply(m.DataLimit, m.CPUSeconds); err != nil {
		return workerFailure(fmt.Errorf("the worker could not limit itself: %w", err))
	}
	if m.GoLimit != w.goLimit {
		debug.SetMemoryLimit(m.GoLimit)
		w.goLimit = m.GoLimit
	}
	w.watch.start(m.MemCeiling)
	defer w.watch.stop()
	if m.Schemas == "" && w.env == nil {
		return workerFailure(errors.New("the pool sent no schemas to a worker without any"))
	}
	if m.Schemas != "" && m.Schemas != w.schemas {
		var spec envSpec
		if err := json.Unmarshal([]byte(m.Schemas), &spec); err != nil {
			return workerFailure(fmt.Errorf("decoding the view's schemas: %w", err))
		}
		env, ds := sandbox.NewDomainEnv(spec.Schemas, spec.Helpers)
		if len(ds) > 0 {
			return workerFailure(fmt.Errorf("the domain's helpers: %s", ds))
		}
		w.env, w.schemas, w.helpers, w.tables = env, m.Schemas, spec.Helpers, tableSchemas(env)
	}
	setup := time.Since(began)
	res := w.env.Run(context.Background(), m.request(newRemoteView(w.c, m.Names, w.tables), w.helpers))
	res.Phases.Setup = setup
	return res
}

// request is the job the pool was given, as the worker runs it: over view, the worker's remote
// view of the pool's, with the helpers the worker's environment was built with.
func (m *runMsg) request(view table.View, helpers string) sandbox.Request {
	req := m.Job
	req.View, req.Helpers = view, helpers
	return req
}

// memoryMetrics are what debug.SetMemoryLimit counts: everything the runtime has mapped, less
// what it has returned to the kernel.
var memoryMetrics = []string{"/memory/classes/total:bytes", "/memory/classes/heap/released:bytes"}

// goTotal is the Go runtime's memory as debug.SetMemoryLimit counts it, in bytes.
func goTotal() int64 {
	s := make([]metrics.Sample, len(memoryMetrics))
	for i, n := range memoryMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// memoryWatchInterval is how often a running worker compares its memory with its ceiling: in
// processor time where the worker has a processor-time timer (Linux), else in wall-clock time.
const memoryWatchInterval = time.Millisecond

// memoryWatch stops the process with exitMemory as soon as the runtime's memory passes the
// run's ceiling. One builtin call can allocate without ever returning to the interpreter; this
// exit is the clean path, and RLIMIT_DATA, somewhat higher, is the hard one. (Go 1.26's
// collector may dereference nil rather than report a refused allocation, so exiting first also
// keeps the pool's diagnosis exact.)
//
// On Linux the check runs at every memoryWatchInterval of the worker's processor time (an
// ITIMER_VIRTUAL signal, armed once for the worker's life): memory grows only as fast as the
// worker computes, an idle worker gets no signal, and a run costs no timer, goroutine or
// wake-up of its own. (A Go timer armed per run woke an idle thread of the worker at every run's
// start.) Elsewhere a goroutine ticks in wall-clock time while a run lasts.
type memoryWatch struct {
	ceiling atomic.Int64 // the run's ceiling in bytes; 0 while no run is in progress
	once    sync.Once
	ticks   bool          // the processor-time signal is armed
	quit    chan struct{} // ends the ticking goroutine of the run in progress (without ticks)
	mu      sync.Mutex    // serialises checks
	samples []metrics.Sample
}

// start watches a run whose ceiling is ceiling, in bytes.
func (w *memoryWatch) start(ceiling int64) {
	w.once.Do(func() {
		w.samples = make([]metrics.Sample, len(memoryMetrics))
		for i, n := range memoryMetrics {
			w.samples[i].Name = n
		}
		w.ticks = processorTicks(memoryWatchInterval, w.check)
	})
	w.ceiling.Store(max(ceiling, 1))
	if !w.ticks {
		w.quit = make(chan struct{})
		go func(quit chan struct{}) {
			t := time.NewTicker(memoryWatchInterval)
			defer t.Stop()
			for {
				select {
				case <-quit:
					return
				case <-t.C:
					w.check()
				}
			}
		}(w.quit)
	}
}

// stop ends the watch of the run.
func (w *memoryWatch) stop() {
	w.ceiling.Store(0)
	if w.quit != nil {
		close(w.quit)
		w.quit = nil
	}
}

// check compares the runtime's memory with the ceiling of the run in progress, if any.
func (w *memoryWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	ceiling := w.ceiling.Load()
	if ceiling == 0 {
		return
	}
	metrics.Read(w.samples)
	if used := int64(w.samples[0].Value.Uint64() - w.samples[1].Value.Uint64()); used > ceiling {
		fmt.Fprintf(os.Stderr, "starplan sandbox worker: out of memory: the runtime holds %d bytes, over the run's ceiling of %d\n", used, ceiling)
		os.Exit(exitMemory)
	}
}

// workerFailure is the result of a run the worker could not start.
func workerFailure(err error) *sandbox.Result {
	return &sandbox.Result{
		Outcome: sandbox.OutcomeRuntimeError,
		Diagnostics: diag.List{{
			Stage: diag.StageRun, Code: CodeWorker, Message: err.Error(),
			Hint: "this is a fault of starplan's sandbox worker, not of the plan; run it again or run in process",
		}},
	}
}

// remoteView is the worker's table.View: every call goes to the pool, which owns the run's
// staged view. Dict filters travel as they are and run in the pool, so only matching rows cross
// the pipe. A function filter (table.Query.Match) cannot cross: the worker fetches the rows that
// the rest of the query selects, once, and filters them itself. The pool then records all those
// rows as read, not only the matches, so an apply conflicts on changes to rows the filter
// rejected: more conservative than in process, never less safe. A write with a function filter
// is resolved to keys in the worker and sent as a keyed write ({key: {"$in": [...]}}).
type remoteView struct {
	c      *conn
	names  []string
	tables map[string]*remoteTable
}

// tableSchemas are the schemas of env's tables, by name.
func tableSchemas(env *sandbox.Env) map[string]*table.Schema {
	byName := map[string]*table.Schema{}
	for _, h := range env.Registry() {
		if tv, ok := h.Value.(*tables.TableValue); ok {
			byName[tv.Schema().Name] = tv.Schema()
		}
	}
	return byName
}

// newRemoteView is the view of a run over the tables names, of which byName has the schemas.
func newRemoteView(c *conn, names []string, byName map[string]*table.Schema) *remoteView {
	v := &remoteView{c: c, names: names, tables: make(map[string]*remoteTable, len(names))}
	for _, n := range names {
		if s := byName[n]; s != nil {
			v.tables[n] = &remoteTable{c: c, name: n, schema: s}
		}
	}
	return v
}

func (v *remoteView) Names() []string { return v.names }

func (v *remoteView) Table(name string) (table.Table, bool) {
	t, ok := v.tables[name]
	return t, ok
}

// remoteTable is one table of a remoteView.
type remoteTable struct {
	c      *conn
	name   string
	schema *table.Schema
}

// roundTrip sends one call and returns the pool's answer. A broken pipe ends the worker: the
// pool is gone or has given up on this run.
func (t *remoteTable) roundTrip(c *call) (*answer, error) {
	c.table = t.name
	if err := t.c.enc.call(c); err != nil {
		return nil, err // a value that cannot cross: the plan's error
	}
	if err := t.c.send(); err != nil {
		os.Exit(exitTransport)
	}
	a := t.recvAnswer(c.op)
	if a.more {
		a.rows, a.err = t.recvParts(a)
	}
	return a, a.err
}

// recvParts reads the further parts of a search's answer, first being the first part, and
// returns every row in order.
func (t *remoteTable) recvParts(first *answer) ([]table.Row, error) {
	rows := make([]table.Row, 0, first.total)
	rows = append(rows, first.rows...)
	for a := first; a.more; {
		a = t.recvAnswer(opFind)
		if a.err != nil {
			return nil, a.err // the pool could not encode a later part
		}
		rows = append(rows, a.rows...)
	}
	return rows, nil
}

// recvAnswer reads one part of the answer to a call.
func (t *remoteTable) recvAnswer(op byte) *answer {
	typ, d, err := t.c.recv()
	if err != nil {
		os.Exit(exitTransport)
	}
	if typ != msgReply {
		fmt.Fprintf(os.Stderr, "starplan sandbox worker: unexpected message %d during a call\n", typ)
		os.Exit(exitProtocol)
	}
	a := d.answer(op, &t.c.rows)
	if d.err != nil {
		fmt.Fprintf(os.Stderr, "starplan sandbox worker: %v\n", d.err)
		os.Exit(exitProtocol)
	}
	return a
}

func (t *remoteTable) Schema() *table.Schema { return t.schema }

// Len is the number of rows the run sees. table.Table.Len has no error: a failure of the pool
// ends the worker (see roundTrip), and a value error cannot happen.
func (t *remoteTable) Len() int {
	a, err := t.roundTrip(&call{op: opLen})
	if err != nil {
		return 0
	}
	return a.n
}

// candidates fetches the rows q selects without its function filter.
func (t *remoteTable) candidates(q table.Query) ([]table.Row, error) {
	lim := q.Limit
	if q.Match != nil {
		lim = 0
	}
	a, err := t.roundTrip(&call{op: opFind, where: q.Where, limit: lim, reverse: q.Reverse})
	if err != nil {
		return nil, err
	}
	return a.rows, nil
}

// filter applies q's function filter and limit to rows, in place.
func filter(rows []table.Row, q table.Query) ([]table.Row, error) {
	if q.Match == nil {
		return rows, nil
	}
	out := rows[:0]
	for _, r := range rows {
		ok, err := q.Match(r)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
			if q.Limit > 0 && len(out) == q.Limit {
				break
			}
		}
	}
	return out, nil
}

func (t *remoteTable) Find(q table.Query) ([]table.Row, error) {
	rows, err := t.candidates(q)
	if err != nil {
		return nil, err
	}
	return filter(rows, q)
}

func (t *remoteTable) Count(q table.Query) (int, error) {
	if q.Match == nil {
		a, err := t.roundTrip(&call{op: opCount, where: q.Where})
		if err != nil {
			return 0, err
		}
		return a.n, nil
	}
	q.Limit = 0
	rows, err := t.Find(q)
	return len(rows), err
}

func (t *remoteTable) Get(key any) (table.Row, bool, error) {
	a, err := t.roundTrip(&call{op: opGet, key: key})
	if err != nil {
		return nil, false, err
	}
	return a.row, a.row != nil, nil
}

func (t *remoteTable) Insert(row table.Row) (any, error) {
	a, err := t.roundTrip(&call{op: opInsert, row: row})
	if err != nil {
		return nil, err
	}
	return a.key, nil
}

// keyed turns a query with a function filter into the dict filter of the keys it matches.
func (t *remoteTable) keyed(q table.Query) (table.Query, error) {
	if q.Match == nil {
		return q, nil
	}
	rows, err := t.Find(table.Query{Where: q.Where, Match: q.Match, Limit: q.Limit})
	if err != nil {
		return table.Query{}, err
	}
	keys := make([]any, len(rows))
	for i, r := range rows {
		keys[i] = r[t.schema.Key]
	}
	return table.Query{Where: map[string]any{t.schema.Key: map[string]any{"$in": keys}}}, nil
}

func (t *remoteTable) Update(fields table.Row, q table.Query) (int, error) {
	if q.Match != nil {
		// The view checks the fields before it runs a filter; an update that matches no key
		// has it check them before the function runs here, so a bad field fails the same way.
		none := map[string]any{t.schema.Key: map[string]any{"$in": []any{}}}
		if _, err := t.roundTrip(&call{op: opUpdate, row: fields, where: none}); err != nil {
			return 0, err
		}
	}
	q, err := t.keyed(q)
	if err != nil {
		return 0, err
	}
	a, err := t.roundTrip(&call{op: opUpdate, row: fields, where: q.Where, limit: q.Limit})
	if err != nil {
		return 0, err
	}
	return a.n, nil
}

func (t *remoteTable) Remove(q table.Query) (int, error) {
	q, err := t.keyed(q)
	if err != nil {
		return 0, err
	}
	a, err := t.roundTrip(&call{op: opRemove, where: q.Where, limit: q.Limit})
	if err != nil {
		return 0, err
	}
	return a.n, nil
}
