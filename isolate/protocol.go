package isolate

import (
	"errors"
	"unsafe"

	"github.com/starplan/starplan/sandbox"
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
	Warnings []string // limits the worker could not apply to itself
	VMData   int64    // its data segment (VmData) at start, in bytes
	GoTotal  int64    // the Go runtime's memory at start, as debug.SetMemoryLimit counts it, in bytes
}

// runMsg asks a worker to run one plan.
type runMsg struct {
	// Job is the run as the pool was given it, less its View (the pool serves the plan's table
	// calls from it) and its Helpers (they travel in Schemas); see notSent.
	Job sandbox.Request
	// Schemas is the JSON of the environment's envSpec (the view's schemas in Names order and
	// the domain's helpers), or "" when the worker has it already; the worker keeps the
	// environment of the last one.
	Schemas string
	Names   []string
	// DataLimit is the worker's data segment limit for the run, in bytes (RLIMIT_DATA).
	DataLimit int64
	// GoLimit is the Go runtime's soft memory limit for the run, in bytes (debug.SetMemoryLimit).
	GoLimit int64
	// MemCeiling is the Go runtime's memory at which the worker stops itself with exitMemory,
	// in bytes: a clean exit before the kernel refuses memory somewhere in the runtime.
	MemCeiling int64
	// CPUSeconds is the processor time the run may add to the worker's total, in seconds.
	CPUSeconds int64
}

// The codecs of the records (record.go), built when the program starts.
var (
	readyCodec = recordCodec[ready]()
	runCodec   = recordCodec[runMsg]()
	doneCodec  = recordCodec[done]()
)

func (e *encoder) ready(r ready) {
	e.reset(msgReady)
	_ = readyCodec.enc(e, unsafe.Pointer(&r)) // no field of a ready holds a value
}

func (d *decoder) ready() (r ready) {
	readyCodec.dec(d, unsafe.Pointer(&r))
	return r
}

// run writes m; it fails when an input is not a plain value.
func (e *encoder) run(m *runMsg) error {
	e.reset(msgRun)
	return runCodec.enc(e, unsafe.Pointer(m))
}

func (d *decoder) run() *runMsg {
	m := &runMsg{}
	runCodec.dec(d, unsafe.Pointer(m))
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
	Res    *sandbox.Result
	VMData int64 // the worker's data segment after the run, in bytes
}

func (e *encoder) done(m done) {
	// Only a run that ended ok sends its globals: a failed run's are half-set, nothing reads
	// them (the engine takes STATUS and answer_text from ok runs only), and a hostile plan
	// would otherwise push everything it built before failing into the parent. Globals are
	// plain values by construction (sandbox.plainGlobals); a failure here would be a defect,
	// and the globals then arrive empty rather than the run failing.
	if m.Res.Outcome != sandbox.OutcomeOK && m.Res.Globals != nil {
		r := *m.Res
		r.Globals, m.Res = nil, &r
	}
	e.reset(msgDone)
	if doneCodec.enc(e, unsafe.Pointer(&m)) != nil {
		r := *m.Res
		r.Globals, m.Res = nil, &r
		e.reset(msgDone)
		_ = doneCodec.enc(e, unsafe.Pointer(&m))
	}
}

func (d *decoder) done() (m done) {
	doneCodec.dec(d, unsafe.Pointer(&m))
	if m.Res == nil {
		d.fail() // a worker always reports a result
	}
	return m
}

// envSpec is what a worker builds its environment from (sandbox.NewDomainEnv).
type envSpec struct {
	Schemas []*table.Schema `json:"schemas"`
	Helpers string          `json:"helpers,omitempty"`
}
