package isolate

import (
	"errors"
	"time"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/table"
)

// Message types: the first byte of every frame's payload.
//
// A worker says msgReady once when it has started. Then, per run: the pool sends msgRun; the
// worker answers every table call of the plan with a msgCall that the pool answers with a
// msgReply (strictly one at a time, so neither side ever writes while the other does); the run
// ends with the worker's msgDone.
const (
	msgReady byte = iota + 1
	msgRun
	msgCall
	msgReply
	msgDone
)

// Table operations of a msgCall, one per table.Table method.
const (
	opLen byte = iota + 1
	opFind
	opCount
	opGet
	opInsert
	opUpdate
	opRemove
)

// ready is what a worker reports when it has started.
type ready struct {
	warnings []string // limits the worker could not apply to itself
	vmData   int64    // its data segment (VmData) at start, in bytes
	goTotal  int64    // the Go runtime's memory at start, as debug.SetMemoryLimit counts it, in bytes
}

func (e *encoder) ready(r ready) {
	e.reset(msgReady)
	e.strings(r.warnings)
	e.varint(r.vmData)
	e.varint(r.goTotal)
}

func (d *decoder) ready() ready {
	return ready{warnings: d.strings(), vmData: d.varint(), goTotal: d.varint()}
}

// runMsg asks a worker to run one plan.
type runMsg struct {
	// schemas is the JSON of the environment's envSpec (the view's schemas in Names order and
	// the domain's helpers), or "" when the worker has it already; the worker keeps the
	// environment of the last one.
	schemas string
	names   []string
	reply   string
	bare    bool // reply is the program itself (sandbox.Request.Bare)
	inputs  map[string]any
	globals []string // the globals the result must carry (nil: all)
	limits  sandbox.Limits
	now     time.Time
	// dataLimit is the worker's data segment limit for the run, in bytes (RLIMIT_DATA).
	dataLimit int64
	// goLimit is the Go runtime's soft memory limit for the run, in bytes (debug.SetMemoryLimit).
	goLimit int64
	// memCeiling is the Go runtime's memory at which the worker stops itself with exitMemory,
	// in bytes: a clean exit before the kernel refuses memory somewhere in the runtime.
	memCeiling int64
	// cpuSeconds is the processor time the run may add to the worker's total, in seconds.
	cpuSeconds int64
}

func (e *encoder) run(m *runMsg) error {
	e.reset(msgRun)
	e.string(m.schemas)
	e.strings(m.names)
	e.string(m.reply)
	e.bool(m.bare)
	if err := e.value(m.inputs); err != nil {
		return err
	}
	e.bool(m.globals != nil)
	e.strings(m.globals)
	l := m.limits
	e.uvarint(l.MaxSteps)
	e.varint(int64(l.Timeout))
	e.varint(int64(l.MaxOutput))
	e.varint(l.MaxMemory)
	e.varint(int64(l.MaxProgram))
	e.varint(int64(l.MaxNesting))
	e.varint(m.now.Unix())
	e.varint(int64(m.now.Nanosecond()))
	name, offset := m.now.Zone()
	e.string(name)
	e.varint(int64(offset))
	e.varint(m.dataLimit)
	e.varint(m.goLimit)
	e.varint(m.memCeiling)
	e.varint(m.cpuSeconds)
	return nil
}

func (d *decoder) run() *runMsg {
	m := &runMsg{schemas: d.string(), names: d.strings(), reply: d.string(), bare: d.bool()}
	m.inputs, _ = d.value().(map[string]any)
	if some, names := d.bool(), d.strings(); some {
		m.globals = append([]string{}, names...)
	}
	m.limits = sandbox.Limits{
		MaxSteps:   d.uvarint(),
		Timeout:    time.Duration(d.varint()),
		MaxOutput:  int(d.varint()),
		MaxMemory:  d.varint(),
		MaxProgram: int(d.varint()),
		MaxNesting: int(d.varint()),
	}
	sec, nsec := d.varint(), d.varint()
	zone, offset := d.string(), d.varint()
	m.now = time.Unix(sec, nsec).In(time.FixedZone(zone, int(offset)))
	m.dataLimit, m.goLimit, m.memCeiling, m.cpuSeconds = d.varint(), d.varint(), d.varint(), d.varint()
	return m
}

// call is one table call of a plan, sent by the worker. Where is always a dict filter (or nil):
// a function filter stays in the worker.
type call struct {
	op      byte
	table   string
	where   map[string]any
	limit   int
	reverse bool
	key     any       // opGet
	row     table.Row // opInsert: the row; opUpdate: the fields
}

func (e *encoder) call(c *call) error {
	e.reset(msgCall)
	e.byte(c.op)
	e.string(c.table)
	var err error
	switch c.op {
	case opFind, opCount:
		err = e.where(c.where)
		e.uvarint(uint64(c.limit))
		e.bool(c.reverse)
	case opGet:
		err = e.value(c.key)
	case opInsert:
		err = e.row(c.row)
	case opUpdate:
		if err = e.row(c.row); err == nil {
			err = e.where(c.where)
		}
		e.uvarint(uint64(c.limit))
	case opRemove:
		err = e.where(c.where)
		e.uvarint(uint64(c.limit))
	}
	return err
}

func (e *encoder) where(w map[string]any) error {
	if w == nil {
		e.byte(tagNil)
		return nil
	}
	return e.row(w)
}

func (d *decoder) call() *call {
	c := &call{op: d.byte(), table: d.string()}
	switch c.op {
	case opFind, opCount:
		c.where, _ = d.value().(map[string]any)
		c.limit = int(d.uvarint())
		c.reverse = d.bool()
	case opGet:
		c.key = d.value()
	case opInsert:
		c.row = d.row()
	case opUpdate:
		c.row = d.row()
		c.where, _ = d.value().(map[string]any)
		c.limit = int(d.uvarint())
	case opRemove:
		c.where, _ = d.value().(map[string]any)
		c.limit = int(d.uvarint())
	case opLen:
	default:
		d.fail()
	}
	return c
}

// answer is the pool's reply to a call.
type answer struct {
	err  error
	n    int         // opLen, opCount, opUpdate, opRemove
	rows []table.Row // opFind: the rows of this part
	// shape is the field order rows are written in (the schema's), and cache the pool's record
	// of the worker's row cache; neither is sent by itself.
	shape []string
	cache *rowCache
	total int       // opFind: the rows of every part
	more  bool      // opFind: another part follows
	row   table.Row // opGet (nil: no such row)
	key   any       // opInsert
}

// findPart is how many rows one part of a search's answer carries. A large answer goes in
// parts so that the worker decodes one part while the pool encodes the next.
const findPart = 2048

// Error kinds in a reply. The kinds plans see most keep their Go types across the pipe, so a
// caller's errors.As works in the worker as it does in process.
const (
	errNone byte = iota
	errPlain
	errField
	errQuery
)

func (e *encoder) answer(op byte, a *answer) error {
	e.reset(msgReply)
	if a.err != nil {
		e.error(a.err)
		return nil
	}
	e.byte(errNone)
	switch op {
	case opLen, opCount, opUpdate, opRemove:
		e.varint(int64(a.n))
	case opFind:
		e.uvarint(uint64(a.total))
		e.bool(a.more)
		return e.rows(a.rows, a.shape, a.cache)
	case opGet:
		e.bool(a.row != nil)
		if a.row != nil {
			return e.row(a.row)
		}
	case opInsert:
		return e.value(a.key)
	}
	return nil
}

// error writes an error as its message plus, when it is or wraps one, a *table.FieldError or
// *table.QueryError.
func (e *encoder) error(err error) {
	var fe *table.FieldError
	var qe *table.QueryError
	switch {
	case errors.As(err, &fe):
		e.byte(errField)
		e.string(err.Error())
		e.string(fe.Table)
		e.string(fe.Field)
		e.string(fe.Rule)
		if e.value(fe.Key) != nil {
			e.byte(tagNil)
		}
		if e.value(fe.Value) != nil {
			e.byte(tagNil)
		}
	case errors.As(err, &qe):
		e.byte(errQuery)
		e.string(err.Error())
		e.string(qe.Table)
		e.string(qe.Message)
		e.string(qe.Suggestion)
	default:
		e.byte(errPlain)
		e.string(err.Error())
	}
}

// remoteError is an error of the pool's view, as the worker sees it: the message as the view
// said it, wrapping the typed cause when there was one.
type remoteError struct {
	msg   string
	cause error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.cause }

func (d *decoder) error(kind byte) error {
	msg := d.string()
	var cause error
	switch kind {
	case errField:
		fe := &table.FieldError{Table: d.string(), Field: d.string(), Rule: d.string()}
		fe.Key, fe.Value = d.value(), d.value()
		cause = fe
	case errQuery:
		cause = &table.QueryError{Table: d.string(), Message: d.string(), Suggestion: d.string()}
	case errPlain:
	default:
		d.fail()
	}
	if cause != nil && cause.Error() == msg {
		return cause
	}
	return &remoteError{msg: msg, cause: cause}
}

// answer reads the answer to a call; rows is the worker's row cache.
func (d *decoder) answer(op byte, rows *[]table.Row) *answer {
	a := d.answerHeader(op)
	if a.err != nil {
		return a
	}
	switch op {
	case opLen, opCount, opUpdate, opRemove:
		a.n = int(d.varint())
	case opFind:
		a.rows = d.rows(rows)
	case opGet:
		if d.bool() {
			a.row = d.row()
		}
	case opInsert:
		a.key = d.value()
	}
	return a
}

// answerHeader reads an answer up to its payload: the error, or for a search the rows' total
// and whether another part follows.
func (d *decoder) answerHeader(op byte) *answer {
	a := &answer{}
	if kind := d.byte(); kind != errNone {
		a.err = d.error(kind)
		return a
	}
	if op == opFind {
		a.total = int(min(d.uvarint(), 1<<24)) // a hint: the parts hold the rows
		a.more = d.bool()
	}
	return a
}

// done is a worker's report of a finished run.
type done struct {
	res    *sandbox.Result
	vmData int64 // the worker's data segment after the run, in bytes
}

func (e *encoder) done(m done) {
	e.reset(msgDone)
	r := m.res
	e.string(string(r.Outcome))
	e.string(string(r.Limit))
	e.string(r.Program)
	e.uvarint(uint64(len(r.Diagnostics)))
	for _, x := range r.Diagnostics {
		e.string(string(x.Stage))
		e.string(x.Code)
		e.varint(int64(x.Line))
		e.varint(int64(x.Col))
		e.string(x.Message)
		e.string(x.Hint)
	}
	e.string(r.Stdout)
	e.bool(r.StdoutTruncated)
	e.uvarint(uint64(len(r.Rewrites)))
	for _, x := range r.Rewrites {
		e.varint(int64(x.Line))
		e.string(x.Rule)
		e.string(x.Before)
		e.string(x.After)
	}
	// Only a run that ended ok sends its globals: a failed run's are half-set, nothing reads
	// them (the engine takes STATUS and answer_text from ok runs only), and a hostile plan
	// would otherwise push everything it built before failing into the parent. Globals are
	// plain values by construction (sandbox.plainGlobals); a failure here would be a defect,
	// and the globals then arrive empty rather than the run failing.
	mark := len(e.buf)
	if r.Outcome != sandbox.OutcomeOK || e.value(r.Globals) != nil {
		e.buf = append(e.buf[:mark], tagNil)
	}
	e.uvarint(r.Steps)
	e.varint(int64(r.Duration))
	e.varint(m.vmData)
}

func (d *decoder) done() done {
	r := &sandbox.Result{
		Outcome: sandbox.Outcome(d.string()),
		Limit:   sandbox.Limit(d.string()),
		Program: d.string(),
	}
	if n := d.count(6); n > 0 {
		r.Diagnostics = make(diag.List, n)
		for i := range r.Diagnostics {
			r.Diagnostics[i] = diag.Diagnostic{
				Stage: diag.Stage(d.string()), Code: d.string(),
				Line: int(d.varint()), Col: int(d.varint()),
				Message: d.string(), Hint: d.string(),
			}
		}
	}
	r.Stdout = d.string()
	r.StdoutTruncated = d.bool()
	if n := d.count(4); n > 0 {
		r.Rewrites = make([]pycompat.Rewrite, n)
		for i := range r.Rewrites {
			r.Rewrites[i] = pycompat.Rewrite{Line: int(d.varint()), Rule: d.string(), Before: d.string(), After: d.string()}
		}
	}
	r.Globals, _ = d.value().(map[string]any)
	r.Steps = d.uvarint()
	r.Duration = time.Duration(d.varint())
	return done{res: r, vmData: d.varint()}
}

// envSpec is what a worker builds its environment from (engine.NewEnv).
type envSpec struct {
	Schemas []*table.Schema `json:"schemas"`
	Helpers string          `json:"helpers,omitempty"`
}
