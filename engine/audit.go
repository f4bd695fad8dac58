package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// auditCollection is the store's system collection that holds the audit log. Plans never see
// system collections.
const auditCollection = "runs"

// RunRecord is everything the audit log keeps about one run.
type RunRecord struct {
	ID              string             `json:"id"`
	Time            time.Time          `json:"time"`
	Origin          string             `json:"origin"`
	Request         string             `json:"request"`
	Reply           string             `json:"reply"`
	Program         string             `json:"program"`
	Rewrites        []pycompat.Rewrite `json:"rewrites"`
	Diagnostics     diag.List          `json:"diagnostics"`
	Stdout          string             `json:"stdout"`
	StdoutTruncated bool               `json:"stdout_truncated"`
	AnswerText      string             `json:"answer_text"`
	Status          string             `json:"status"`
	Changes         table.ChangeSet    `json:"changes"`
	Outcome         Outcome            `json:"outcome"`
	Limit           sandbox.Limit      `json:"limit,omitempty"`
	Steps           uint64             `json:"steps"`
	DurationMS      float64            `json:"duration_ms"`
	Pending         bool               `json:"pending"`
	Applied         bool               `json:"applied"`
	AppliedAt       *time.Time         `json:"applied_at,omitempty"`
	ApplyError      string             `json:"apply_error,omitempty"`
	Model           *ModelCall         `json:"model,omitempty"`
	// Writes is what applying the run writes, with the versions it saw; kept while pending.
	Writes *store.Pending `json:"writes,omitempty"`
}

func newRecord(res *Result, req Request, at time.Time, writes *store.Pending) *RunRecord {
	return &RunRecord{
		ID: res.RunID, Time: at, Origin: req.Origin, Request: req.UserRequest, Reply: req.Reply,
		Program: res.Program, Rewrites: res.Rewrites, Diagnostics: res.Diagnostics,
		Stdout: res.Stdout, StdoutTruncated: res.StdoutTruncated,
		AnswerText: res.AnswerText, Status: res.Status, Changes: res.Changes,
		Outcome: res.Outcome, Limit: res.Limit, Steps: res.Steps, DurationMS: res.DurationMS,
		Pending: res.Pending, Model: req.Model, Writes: writes,
	}
}

// Result returns the run's result document as it stands in the log.
func (r *RunRecord) Result() *Result {
	res := &Result{
		RunID: r.ID, Outcome: r.Outcome, Status: r.Status, AnswerText: r.AnswerText,
		Stdout: r.Stdout, StdoutTruncated: r.StdoutTruncated, Diagnostics: r.Diagnostics,
		Limit: r.Limit, Rewrites: r.Rewrites, Changes: r.Changes, Pending: r.Pending,
		Applied: r.Applied, Steps: r.Steps, DurationMS: r.DurationMS, Program: r.Program,
	}
	res.normalize()
	return res
}

// RunSummary is one line of `starplan runs`.
type RunSummary struct {
	ID          string    `json:"id"`
	Time        time.Time `json:"time"`
	Origin      string    `json:"origin"`
	Request     string    `json:"request"`
	Outcome     Outcome   `json:"outcome"`
	Status      string    `json:"status"`
	ChangedRows int       `json:"changed_rows"`
	Pending     bool      `json:"pending"`
	Applied     bool      `json:"applied"`
}

// Runs lists the audit log, newest first.
func (e *Engine) Runs() ([]RunSummary, error) {
	if err := e.audit.flush(); err != nil {
		return nil, err
	}
	recs, err := e.st.ListSys(auditCollection)
	if err != nil {
		return nil, err
	}
	out := make([]RunSummary, 0, len(recs))
	for _, raw := range recs {
		r, err := e.decodeRecord(raw.JSON)
		if err != nil {
			return nil, fmt.Errorf("audit record %s is unreadable: %w", raw.ID, err)
		}
		out = append(out, RunSummary{
			ID: r.ID, Time: r.Time, Origin: r.Origin, Request: r.Request, Outcome: r.Outcome,
			Status: r.Status, ChangedRows: r.Changes.Rows(), Pending: r.Pending, Applied: r.Applied,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	return out, nil
}

// Record returns the audit record of a run, or a *RunError if there is none.
func (e *Engine) Record(id string) (*RunRecord, error) {
	if err := e.audit.flush(); err != nil {
		return nil, err
	}
	var raw json.RawMessage
	ok, err := e.st.GetSys(auditCollection, id, &raw)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &RunError{ID: id, Problem: "there is no run with this id", Hint: "starplan runs lists the runs"}
	}
	r, err := e.decodeRecord(raw)
	if err != nil {
		return nil, fmt.Errorf("audit record %s is unreadable: %w", id, err)
	}
	return r, nil
}

// RunError is a request about a run that cannot be served: unknown, already applied, nothing to
// apply.
type RunError struct {
	ID      string
	Problem string
	Hint    string
}

func (e *RunError) Error() string { return fmt.Sprintf("run %s: %s", e.ID, e.Problem) }

// auditLog writes records in the background, in batches: a dry run must not wait for a disk
// sync, and a burst of runs shares one. Records are durable once flush returns; close flushes.
// A process killed before then loses the records of its last moments, never the store's
// consistency (applies write their record in the same transaction as their data).
type auditLog struct {
	st      *store.Store
	mu      sync.Mutex
	queue   []*RunRecord
	closed  bool       // after close, add writes at once
	writeMu sync.Mutex // one batch at a time, so a later version of a record lands last
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	err     error // the first error of a background write, returned by close
}

// maxQueued is how many records may wait before add writes them itself.
const maxQueued = 4096

// auditLinger is how long the writer waits after the first queued record for others to join its
// batch: one disk sync per burst of runs instead of one per run.
const auditLinger = 5 * time.Millisecond

func newAuditLog(st *store.Store) *auditLog {
	a := &auditLog{st: st, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a
}

func (a *auditLog) add(r *RunRecord) {
	a.mu.Lock()
	a.queue = append(a.queue, r)
	now := a.closed || len(a.queue) >= maxQueued
	a.mu.Unlock()
	if now {
		a.background(a.flush())
		return
	}
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// background keeps the first error of a write nobody waits for, for close to return.
func (a *auditLog) background(err error) {
	if err == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
}

func (a *auditLog) loop() {
	defer close(a.done)
	for {
		select {
		case <-a.wake:
			select {
			case <-time.After(auditLinger):
			case <-a.stop:
			}
			a.background(a.flush())
		case <-a.stop:
			a.background(a.flush())
			return
		}
	}
}

// flush writes every queued record in one transaction. A batch that cannot be written goes back
// to the front of the queue, so the next flush tries it again.
func (a *auditLog) flush() error {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.mu.Lock()
	batch := a.queue
	a.queue = nil
	a.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	docs := make([]store.SysDoc, len(batch))
	for i, r := range batch {
		docs[i] = store.SysDoc{Collection: auditCollection, ID: r.ID, Value: r}
	}
	if err := a.st.PutSysDocs(context.Background(), docs...); err != nil {
		a.mu.Lock()
		a.queue = append(batch, a.queue...)
		a.mu.Unlock()
		return fmt.Errorf("writing the audit log: %w", err)
	}
	return nil
}

// close writes what is queued and stops the writer; records added afterwards are written at
// once. It is safe to call more than once.
func (a *auditLog) close() error {
	a.once.Do(func() {
		a.mu.Lock()
		a.closed = true
		a.mu.Unlock()
		close(a.stop)
		<-a.done
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}
