package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// auditCollection is the store's system collection that holds the audit log. Plans never see
// system collections.
const auditCollection = "runs"

// RunRecord is everything the audit log keeps about one run. A record is bounded: see MaxRecord
// for what is cut and what is kept whole.
type RunRecord struct {
	ID string `json:"run_id"` // "id" in records written before run_id was the one name

	Time    time.Time `json:"time"`
	Origin  string    `json:"origin"`
	Request string    `json:"request"`
	// Subject is who the run acts for (Request.Subject); empty for nobody.
	Subject string `json:"subject,omitempty"`
	// TraceID is the trace the run's span belongs to (Result.TraceID); empty when traces are off.
	TraceID string `json:"trace_id,omitempty"`
	// Reply is the model's reply (or the bare program) up to MaxReplyExcerpt bytes; a longer one
	// is cut there and Truncated names "reply". ReplyBytes and ReplySHA256 are the length and
	// the hex SHA-256 of the whole reply, so a kept copy can be matched to the run.
	Reply           string             `json:"reply"`
	ReplyBytes      int                `json:"reply_bytes"`
	ReplySHA256     string             `json:"reply_sha256,omitempty"`
	Program         string             `json:"program"`
	Rewrites        []pycompat.Rewrite `json:"rewrites"`
	Diagnostics     diag.List          `json:"diagnostics"`
	Stdout          string             `json:"stdout"`
	StdoutTruncated bool               `json:"stdout_truncated"`
	AnswerText      string             `json:"answer_text"`
	Status          string             `json:"status"`
	Changes         table.ChangeSet    `json:"changes"`
	// ChangedRows counts the rows the run changed, those a cut of Changes left out included.
	ChangedRows int           `json:"changed_rows"`
	Outcome     Outcome       `json:"outcome"`
	Limit       sandbox.Limit `json:"limit,omitempty"`
	Steps       uint64        `json:"steps"`
	DurationMS  float64       `json:"duration_ms"`
	Pending     bool          `json:"pending"`
	Applied     bool          `json:"applied"`
	AppliedAt   *time.Time    `json:"applied_at,omitempty"`
	ApplyError  string        `json:"apply_error,omitempty"`
	// ConflictAt is when an apply found that the data the run depended on had moved.
	ConflictAt *time.Time `json:"conflict_at,omitempty"`
	// ApplyOrigin is who applied the run, or tried to (Engine.ApplyAs).
	ApplyOrigin string     `json:"apply_origin,omitempty"`
	Model       *ModelCall `json:"model,omitempty"`
	// Limits are the run's own limits, where its request set them (Replay runs it under them again).
	Limits *sandbox.Limits `json:"limits,omitempty"`
	// Writes is what applying the run writes, with the versions it saw; kept while pending and
	// dropped when the run is applied, conflicts or is rejected.
	Writes *store.Pending `json:"writes,omitempty"`
	// Truncated names what the result and then the record cut to stay bounded: the names of
	// Result.Truncated, and "reply", "request", "stdout", "rewrites", "changes", "origin",
	// "model", "apply_error".
	Truncated []string `json:"truncated,omitempty"`
	// Who proposed the run and who decided on it (approval.go).
	Who

	// chainEvent and chainBy are what the record's next queued write adds to the hash chain
	// (chain.go); empty: ChainProposed by its proposer.
	chainEvent, chainBy string
	// chainRead is the hash of the record's bytes as a decision read them (decisionRecord),
	// which the decision's chain entry carries (ChainEntry.Read); empty on a record not read
	// for a decision.
	chainRead string

	// Scans are the run's reads that no index answered (Result.Scans): at most store.MaxScans.
	Scans []store.Scan `json:"scans,omitempty"`
}

// An audit record is bounded whatever the run did, so the log grows by a known amount per run.
// MaxRecord bounds the stored JSON of a record without its Changes and Writes; each field has a
// share of it (in bytes of JSON, escapes counted) and a cut field is named in
// RunRecord.Truncated, never cut silently. The shares below, MaxProgram, MaxAnswer and
// MaxDiagnostics diagnostics of two MaxMessage texts each add up to less than MaxRecord.
//
// Changes and Writes are not cut while they may still matter: Writes are what an apply writes,
// and the change-set digest a reviewer approves (server.Digest) covers Changes, so a run that
// is pending, was applied or conflicted keeps both whole (Writes until it is settled). Both are
// bounded by the run's staged-bytes budget (sandbox.Limits.MaxMemory) and the domain's run
// limits. Changes of a run that never had anything to apply (a contract violation) are only
// shown, and are cut to MaxRecordChanges.
const (
	// MaxRecord is the most bytes of JSON an audit record takes, its Changes and Writes aside.
	MaxRecord = 1 << 20
	// MaxReplyExcerpt is the most bytes of a reply the record keeps.
	MaxReplyExcerpt = 16 << 10
	// MaxRecordRequest is the most bytes of the customer's request the record keeps.
	MaxRecordRequest = 16 << 10
	// MaxRecordStdout is the most bytes of a run's printed output the record keeps: the
	// sandbox's default output limit, which a request may raise for its own result.
	MaxRecordStdout = sandbox.DefaultMaxOutput
	// MaxRecordProgram is the most bytes of JSON of the program the record keeps: room for a
	// program of MaxProgram bytes with some quotes and line ends to escape.
	MaxRecordProgram = MaxProgram + MaxProgram/4
	// MaxRecordRewrites is the most Python rewrites the record lists, each line cut to
	// maxRecordName bytes.
	MaxRecordRewrites = 100
	// MaxRecordChanges is the most bytes of JSON of the changes of a run that never had
	// anything to apply; whole rows are kept, in table and key order, while they fit.
	MaxRecordChanges = 256 << 10
	// maxRecordName bounds the short texts of a record: origin, model name, a diagnostic's
	// stage and code, a rewrite's rule and lines.
	maxRecordName = 256
)

func newRecord(res *Result, req Request, at time.Time, writes *store.Pending) *RunRecord {
	if len(req.PlanJSON) > 0 {
		req.Reply = string(req.PlanJSON) // what the planner sent; the compiled program is Program
	}
	sum := sha256.Sum256([]byte(req.Reply))
	var limits *sandbox.Limits
	if req.Limits != (sandbox.Limits{}) {
		limits = &req.Limits
	}
	r := &RunRecord{
		ID: res.RunID, Time: at, Origin: req.Origin, Request: req.UserRequest, Subject: req.Subject, TraceID: res.TraceID, Limits: limits,
		Reply: req.Reply, ReplyBytes: len(req.Reply), ReplySHA256: hex.EncodeToString(sum[:]),
		Program: res.Program, Rewrites: res.Rewrites, Diagnostics: res.Diagnostics,
		Stdout: res.Stdout, StdoutTruncated: res.StdoutTruncated,
		AnswerText: res.AnswerText, Status: res.Status, Changes: res.Changes, ChangedRows: res.Changes.Rows(),
		Outcome: res.Outcome, Limit: res.Limit, Scans: res.Scans, Steps: res.Steps, DurationMS: res.DurationMS,
		Pending: res.Pending, Model: req.Model, Writes: writes,
		Truncated: slices.Clone(res.Truncated), Who: Who{ProposedBy: orLocal(req.By).Name},
	}
	if writes == nil {
		var cut bool
		if r.Changes, cut = clipChanges(r.Changes, MaxRecordChanges); cut {
			r.Truncated = addCut(r.Truncated, "changes")
		}
	}
	r.bound()
	return r
}

// bound cuts the record's fields to their shares of MaxRecord (see there) and names what it cut
// in Truncated. It does not touch Changes or Writes, and a bounded record stays as it is.
func (r *RunRecord) bound() {
	text := func(s *string, max int, what string) {
		var c bool
		if *s, c = clipJSON(*s, max); c {
			r.Truncated = addCut(r.Truncated, what)
		}
	}
	text(&r.Reply, MaxReplyExcerpt, "reply")
	text(&r.Request, MaxRecordRequest, "request")
	text(&r.Origin, maxRecordName, "origin")
	text(&r.ProposedBy, maxRecordName, "proposed_by")
	text(&r.Program, MaxRecordProgram, "program")
	text(&r.AnswerText, MaxAnswer, "answer_text")
	text(&r.Status, MaxAnswer, "status")
	text(&r.ApplyError, MaxMessage, "apply_error")
	text(&r.ApplyOrigin, maxRecordName, "apply_origin")
	var c bool
	if r.Stdout, c = clipJSON(r.Stdout, MaxRecordStdout); c {
		r.StdoutTruncated = true
		r.Truncated = addCut(r.Truncated, "stdout")
	}
	if r.Model != nil {
		m := *r.Model
		if m.Model, c = clipJSON(m.Model, maxRecordName); c {
			r.Truncated = addCut(r.Truncated, "model")
		}
		m.ParentRunID, _ = clipJSON(m.ParentRunID, maxRecordName)
		r.Model = &m
	}
	if r.Diagnostics, c = capDiagnostics(r.Diagnostics); c {
		r.Truncated = addCut(r.Truncated, "diagnostics")
	}
	ds := make(diag.List, len(r.Diagnostics)) // a copy: the result shares the list
	for i, d := range r.Diagnostics {
		var c1, c2, c3, c4 bool
		var stage string
		stage, c1 = clipJSON(string(d.Stage), maxRecordName)
		d.Stage = diag.Stage(stage)
		d.Code, c2 = clipJSON(d.Code, maxRecordName)
		d.Message, c3 = clipJSON(d.Message, MaxMessage)
		d.Hint, c4 = clipJSON(d.Hint, MaxMessage)
		if c1 || c2 || c3 || c4 {
			r.Truncated = addCut(r.Truncated, "diagnostic messages")
		}
		ds[i] = d
	}
	r.Diagnostics = ds
	rw := r.Rewrites
	if len(rw) > MaxRecordRewrites {
		rw = rw[:MaxRecordRewrites]
		r.Truncated = addCut(r.Truncated, "rewrites")
	}
	r.Rewrites = make([]pycompat.Rewrite, len(rw))
	for i, w := range rw {
		var c1, c2, c3 bool
		w.Rule, c1 = clipJSON(w.Rule, maxRecordName)
		w.Before, c2 = clipJSON(w.Before, maxRecordName)
		w.After, c3 = clipJSON(w.After, maxRecordName)
		if c1 || c2 || c3 {
			r.Truncated = addCut(r.Truncated, "rewrites")
		}
		r.Rewrites[i] = w
	}
}

// clipChanges returns the changes that fit in max bytes of JSON: whole rows, in table and key
// order, inserted, then updated, then deleted, up to the first that does not fit. cs itself is
// left as it is. cut reports whether any row was left out.
func clipChanges(cs table.ChangeSet, max int) (_ table.ChangeSet, cut bool) {
	if cs == nil {
		return nil, false
	}
	size := func(v any) int {
		b, err := json.Marshal(v)
		if err != nil {
			return max + 1
		}
		return len(b) + 1 // and a comma
	}
	if size(cs) <= max {
		return cs, false
	}
	out := table.ChangeSet{}
	used := 2
	fits := func(v any) bool {
		n := size(v)
		if cut || used+n > max {
			cut = true
			return false
		}
		used += n
		return true
	}
	for _, name := range slices.Sorted(maps.Keys(cs)) {
		tc := cs[name]
		kept := &table.TableChanges{Key: tc.Key, Inserted: []table.Row{}, Updated: []table.Update{}, Deleted: []table.Row{}}
		if !fits(map[string]*table.TableChanges{name: kept}) {
			break
		}
		out[name] = kept
		for _, row := range tc.Inserted {
			if !fits(row) {
				break
			}
			kept.Inserted = append(kept.Inserted, row)
		}
		for _, u := range tc.Updated {
			if !fits(u) {
				break
			}
			kept.Updated = append(kept.Updated, u)
		}
		for _, row := range tc.Deleted {
			if !fits(row) {
				break
			}
			kept.Deleted = append(kept.Deleted, row)
		}
	}
	return out, true
}

// clipJSON cuts s so that its JSON encoding (as encoding/json writes it, with HTML escapes)
// takes at most max bytes besides its quotes: at a UTF-8 boundary, with a marker that says how
// long s was. Plain text is cut at about max bytes; text full of characters that JSON escapes
// is cut shorter. cut reports whether it cut.
func clipJSON(s string, max int) (_ string, cut bool) {
	if len(s) <= max/6 || jsonLenUpTo(s, max) <= max { // no byte takes more than 6 in JSON
		return s, false
	}
	marker := fmt.Sprintf("… [cut: %d bytes in all]", len(s))
	room := max - len(marker) // the marker has nothing to escape
	n, i := 0, 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		c := runeJSONLen(r, w)
		if n+c > room {
			break
		}
		n += c
		i += w
	}
	return s[:i] + marker, true
}

// jsonLen is the length of s encoded as a JSON string, without its quotes.
func jsonLen(s string) int { return jsonLenUpTo(s, len(s)*6) }

// jsonLenUpTo is jsonLen(s) when that is at most limit, else a length above limit: it stops
// counting there, so that a string of megabytes costs no more than the bytes a record keeps.
func jsonLenUpTo(s string, limit int) int {
	n := 0
	for i := 0; i < len(s) && n <= limit; {
		r, w := utf8.DecodeRuneInString(s[i:])
		n += runeJSONLen(r, w)
		i += w
	}
	return n
}

// runeJSONLen is how many bytes encoding/json writes for the rune r, read from w bytes of a
// string; at most 6.
func runeJSONLen(r rune, w int) int {
	switch {
	case r == utf8.RuneError && w == 1:
		return 6 // an invalid byte: \ufffd
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	}
	return w
}

// addCut adds what to the list of cut parts, once.
func addCut(list []string, what string) []string {
	if slices.Contains(list, what) {
		return list
	}
	return append(list, what)
}

// Result returns the run's result document as it stands in the log.
func (r *RunRecord) Result() *Result {
	res := &Result{
		RunID: r.ID, Outcome: r.Outcome, Status: r.Status, AnswerText: r.AnswerText,
		Stdout: r.Stdout, StdoutTruncated: r.StdoutTruncated, Diagnostics: r.Diagnostics,
		Limit: r.Limit, Rewrites: r.Rewrites, Changes: r.Changes, Pending: r.Pending,
		Applied: r.Applied, Steps: r.Steps, DurationMS: r.DurationMS, Program: r.Program, Scans: r.Scans,
		Truncated: slices.Clone(r.Truncated), Who: r.Who, TraceID: r.TraceID,
	}
	res.normalize()
	return res
}

// RunSummary is one line of `starplan runs`.
type RunSummary struct {
	ID      string    `json:"run_id"`
	Time    time.Time `json:"time"`
	Origin  string    `json:"origin"`
	Request string    `json:"request"`
	// Subject is who the run acts for (RunRecord.Subject); absent for nobody.
	Subject     string  `json:"subject,omitempty"`
	Outcome     Outcome `json:"outcome"`
	Status      string  `json:"status"`
	ChangedRows int     `json:"changed_rows"`
	Pending     bool    `json:"pending"`
	Applied     bool    `json:"applied"`
	// State is where the run stands in its review (StatePending, StateApplied, ...).
	State string `json:"state"`
	// Bytes is the size of the run's stored record (its JSON).
	Bytes int `json:"bytes"`
}

// UnreadableError names the audit records that are in the store but do not decode (a store's
// damage that its digests miss, or a record of an incompatible starplan). Runs returns it along
// with the records that do read; Record and Prune return it alone.
type UnreadableError struct {
	IDs []string // the unreadable records' ids, sorted
	Err error    // why the first does not decode
}

func (e *UnreadableError) Error() string {
	what := "audit record " + e.IDs[0] + " is"
	if len(e.IDs) > 1 {
		what = fmt.Sprintf("%d audit records (%s) are", len(e.IDs), strings.Join(e.IDs, ", "))
	}
	return fmt.Sprintf("%s unreadable: %v", what, e.Err)
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// Hint says what to do about it.
func (e *UnreadableError) Hint() string {
	return "starplan db check reports every unreadable record; restore the store from a backup to get them back"
}

// CheckRecord returns why raw, a stored audit record, does not decode, or nil. db check runs it
// over every record (store.CheckOptions.Records).
func CheckRecord(raw []byte) error {
	s, err := decodeStored(raw)
	if err != nil {
		return err
	}
	_, err = s.restore()
	return err
}

// AuditCollection is the system collection that holds the audit log.
const AuditCollection = auditCollection

// Runs lists the whole audit log, newest first (ListRuns lists a page). Records that do not
// decode are left out and named by an *UnreadableError, returned with the list of those that do.
func (e *Engine) Runs() ([]RunSummary, error) {
	page, err := e.ListRuns(ListOptions{})
	if page == nil {
		return nil, err
	}
	return page.Runs, err
}

// Record returns the audit record of a run, or a *RunError if there is none. It writes the
// queued records first: what reads a record to write it again (apply, reject) must find its
// last version in the store.
func (e *Engine) Record(id string) (*RunRecord, error) {
	if err := e.audit.flush(); err != nil {
		return nil, err
	}
	return e.storedRecord(id)
}

// readRecord is Record for a reader: a record still queued is read from the queue, without a
// commit (a reader of a run that was just made, as a review page is, would otherwise cost a
// disk sync).
func (e *Engine) readRecord(id string) (*RunRecord, error) { return e.readRecordFor(id, false) }

// decisionRecord is readRecord for a decision (an apply, an approval, a rejection): the record
// comes with the hash of the bytes read (RunRecord.chainRead), which the decision's chain entry
// carries, so that runs verify tells a record edited before the decision (the decision would
// otherwise chain the edit as its own) from the one the run's last entry chained.
func (e *Engine) decisionRecord(id string) (*RunRecord, error) { return e.readRecordFor(id, true) }

func (e *Engine) readRecordFor(id string, decision bool) (*RunRecord, error) {
	return e.readRecordIn(e.audit.tail(), id, decision)
}

// readRecordIn is readRecordFor with tail, the audit log's tail as it was read: a record of it
// whose batch has committed since is read from the store.
func (e *Engine) readRecordIn(tail []*queuedRecord, id string, decision bool) (*RunRecord, error) {
	for i := len(tail) - 1; i >= 0; i-- { // the newest version
		if q := tail[i]; q.rec.ID == id {
			if !q.pin() {
				break // its batch committed since tail: the store has it (or a later version)
			}
			return e.readQueued(q, decision)
		}
	}
	return e.storedRecordFor(id, decision)
}

// readQueued decodes q's bytes, which the caller pinned.
func (e *Engine) readQueued(q *queuedRecord, decision bool) (*RunRecord, error) {
	defer q.unpin()
	raw, err := q.EncodeJSON()
	if err != nil {
		return nil, err
	}
	rec, err := e.decodeRecord(raw)
	if err == nil && decision {
		rec.chainRead = q.sum // the hash the queue's write chains (after EncodeJSON)
	}
	return rec, err
}

// storedRecord reads a run's record from the store.
func (e *Engine) storedRecord(id string) (*RunRecord, error) { return e.storedRecordFor(id, false) }

// storedRecordFor is storedRecord, with the hash of its bytes for a decision (decisionRecord).
func (e *Engine) storedRecordFor(id string, decision bool) (*RunRecord, error) {
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
		return nil, &UnreadableError{IDs: []string{id}, Err: err}
	}
	if decision {
		r.chainRead = sha256Hex(raw)
	}
	return r, nil
}

// PruneOptions say which runs Prune removes.
type PruneOptions struct {
	// OlderThan is the age of the runs to remove; it must be positive. A run's age counts from
	// its last step in the log: its apply if it was applied, else its run.
	OlderThan time.Duration
	// Pending removes old pending runs too; they can then never be applied. Without it they are
	// kept, and counted in PruneReport.KeptPending.
	Pending bool
}

// PruneReport says what Prune removed.
type PruneReport struct {
	Before  time.Time `json:"before"`  // runs whose last step came before this were removed
	Removed int       `json:"removed"` // how many runs
	// Bytes is the size of the JSON of the records removed, with their decisions. The store's
	// file does not shrink by it: bbolt reuses the freed pages for later records.
	Bytes int64 `json:"bytes"`
	// KeptPending counts the pending runs older than Before that were kept.
	KeptPending int `json:"kept_pending"`
	// Steps is how many transactions removed them, oldest first, each with the hash chain's
	// checkpoint that excuses its runs (at most PruneBatch runs a step).
	Steps int `json:"steps"`
}

// Prune removes from the audit log the runs older than opts.OlderThan (by the engine's clock),
// with the reviewers' decisions about them. Pending runs are kept unless opts.Pending is set:
// they are what a later apply needs. A non-positive age is an error.
//
// It removes the oldest runs first, in steps of at most PruneBatch runs, each one transaction
// that removes its runs and writes the hash chain's checkpoint that excuses them (chain.prune):
// a prune stopped or failed part way has removed the runs of its completed steps, each a whole
// prune of its own that verifies, and nothing of the rest. The report then says what the
// completed steps removed, with the error. One transaction per step bounds the memory a prune
// takes (bbolt holds a transaction's changed pages until it commits) whatever the log's size.
// Each step holds the apply lock (pruneStep); applies and decisions go on between steps.
func (e *Engine) Prune(ctx context.Context, opts PruneOptions) (*PruneReport, error) {
	if opts.OlderThan <= 0 {
		return nil, fmt.Errorf("prune runs older than %s: the age must be positive", opts.OlderThan)
	}
	rep := &PruneReport{Before: e.opts.Now().Add(-opts.OlderThan)}
	kept := map[string]bool{} // the old pending runs kept: a step may be offered one again when the store runs its transaction again
	drop := func(doc store.SysRecord) (bool, error) {
		e.decodes.Add(1)
		var r struct {
			Time      time.Time  `json:"time"`
			AppliedAt *time.Time `json:"applied_at"`
			Pending   bool       `json:"pending"`
		}
		if err := json.Unmarshal(doc.JSON, &r); err != nil {
			// Its age is unknown: removing it, or keeping it, would be a guess.
			return false, &UnreadableError{IDs: []string{doc.ID}, Err: err}
		}
		last := r.Time
		if r.AppliedAt != nil && r.AppliedAt.After(last) {
			last = *r.AppliedAt
		}
		switch {
		case !last.Before(rep.Before):
			return false, nil
		case r.Pending && !opts.Pending:
			kept[doc.ID] = true
			return false, nil
		}
		return true, nil
	}
	// Only runs before the cut can be removed (a run's last step is never before its time):
	// through the index, the prune reads those records and not the rest of the log.
	p := store.SysPrune{Coll: auditCollection, Before: orderKey(rep.Before), Max: e.pruneBatch, Drop: drop, With: []string{decisionCollection}}
	var known chainPrune // the chain, read by the first step and kept by the next
	for {
		pruned, err := e.pruneStep(ctx, &known, &p)
		rep.KeptPending = len(kept)
		if err != nil && rep.Removed > 0 {
			return rep, fmt.Errorf("pruning the audit log (the steps done stand, each whole: runs removed %d, in steps %d): %w", rep.Removed, rep.Steps, err)
		}
		if err != nil {
			return rep, fmt.Errorf("pruning the audit log: %w", err)
		}
		rep.Removed += len(pruned.IDs)
		rep.Bytes += pruned.Bytes
		if len(pruned.IDs) > 0 {
			rep.Steps++
		}
		if !pruned.More {
			return rep, nil
		}
		if e.pruneStepped != nil {
			e.pruneStepped()
		}
		p.After = pruned.Cursor
	}
}

// pruneStep makes one step of a prune p (Engine.Prune) under the apply lock, so that no apply
// or decision reads a run as pending while it goes, after a flush, so that the queued records
// (a decision's record an apply queued among them) are judged too and none is written after
// its run went. The lock is the step's, not the prune's: between two steps applies and
// decisions go on (a server's requests waited for the whole prune, a minute at 1M runs); a
// run decided meanwhile is judged by the next step as its record then says.
func (e *Engine) pruneStep(ctx context.Context, known *chainPrune, p *store.SysPrune) (store.SysPruned, error) {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	if err := e.audit.flush(); err != nil {
		return store.SysPruned{}, err
	}
	return e.chain.prune(ctx, e.opts.Now(), known, func(then func([]string) (store.SysAfter, error)) (store.SysPruned, error) {
		p.Then = then
		return e.st.PruneSysOldest(ctx, *p)
	})
}

// PruneBatch is the most runs one step of a prune removes (one transaction; Engine.Prune).
// bbolt holds a transaction's changed pages in memory until it commits: removing 833k runs of a
// 1M-run log (BenchmarkMixedLoad's seed) in one transaction peaked at 6.2 GB RSS (47 s); in
// steps of 50k at 2.7 GB (67-79 s), most of it the 2 GB file bbolt maps; steps of 20k took 2.4 GB
// but 108 s (each commit writes its pages and searches bbolt's freelist), of 100k 3.5 GB.
const PruneBatch = 50_000

// RunError is a request about a run that cannot be served: unknown, already applied, nothing to
// apply.
type RunError struct {
	ID      string
	Problem string
	Hint    string
	// Result is the run's result when the refusal still has one to show: an apply of a run that
	// already ended in a conflict answers with the conflict, as its first apply did.
	Result *Result
	// Code names the refusal's condition (internal/errcode) where a transport must tell it
	// from the others: errcode.RunChanged (changedElsewhere); "" otherwise.
	Code string
}

func (e *RunError) Error() string { return fmt.Sprintf("run %s: %s", e.ID, e.Problem) }

// auditLog writes records in the background, in batches: a dry run must not wait for a disk
// sync, and a stream of runs shares one commit (one disk sync, one write of the store's record,
// the chain's head and the index's counts) among up to auditBatch records. Records are durable
// once flush returns; close flushes, and so does every read of the log (Record, ListRuns,
// RunStats, VerifyChain), so a reader always sees every run. A process killed before a flush
// loses the records queued in its last auditLinger (dry runs, pending runs, refused applies),
// never the store's consistency nor an apply: an apply writes its record in the same
// transaction as its data (applyRecord). TestKillDuringRunsAndApplies kills a process amid both.
type auditLog struct {
	st    store.Store
	chain *chain
	mu    sync.Mutex
	queue []*queuedRecord
	// encoded is how many records at the queue's head are encoded (auditLog.encode); gen counts
	// the queue's replacements (a batch taken, or put back), which set it to 0.
	encoded int
	gen     uint64
	// inflight is the batch being written: with queue, what readers see that the store may not
	// hold yet (tail).
	inflight []*queuedRecord
	closed   bool         // after close, add writes at once
	writeMu  sync.RWMutex // one batch at a time, so a later version of a record lands last; a listing read-locks it
	wake     chan struct{}
	full     chan struct{} // the queue holds a whole batch: write it without lingering
	linger   time.Duration // auditLinger; tests keep records queued with a longer one
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	err      error        // the first error of a background write, returned by close
	commits  atomic.Int64 // batches written, for the benchmarks
	// deciding counts the decisions (writeWith with records of their own) on their way to
	// writeMu: the background writer leaves the queue to them (they commit it with their own
	// records) rather than make them wait for a batch's commit and sync.
	deciding atomic.Int32
	// bufs are the buffers of records whose batches committed, for the next to encode into.
	bufs recordBufs
	// around, when set (by benchmarks), runs each flush: it measures the CPU of a batch's write,
	// its records' encoding included.
	around func(write func() error) error
	// lingering says that the background writer is waiting out its linger for a batch, which it
	// writes then whatever add says: add wakes it only every auditEncodeEvery records, to encode
	// what is queued (auditLog.encodeNew).
	lingering bool
}

// maxQueued is how many records may wait before add writes them itself.
const maxQueued = 4096

// auditLinger is how long the writer waits after the first queued record for others to join its
// batch, and so the most a killed process's log can miss: the records queued in its last
// auditLinger. A commit's fixed cost (its sync, the store's record, the chain's head, the index's
// counts) is shared by the batch (issue 32).
const auditLinger = 50 * time.Millisecond

// auditBatch is a batch that is written at once, without waiting out the linger: a burst of
// runs commits every auditBatch records.
const auditBatch = 256

// auditEncodeEvery is how many records a lingering writer is woken for: it encodes them then, as
// one. A wake per record cost more than encoding one: the run that queued it woke an idle
// thread for the writer (a futex call), and the writer went back to sleep after each (issue 32:
// about 18 µs of the process's CPU a run in BenchmarkDryRunStream, 6 %).
const auditEncodeEvery = 16

func newAuditLog(st store.Store, c *chain) *auditLog {
	a := &auditLog{st: st, chain: c, linger: auditLinger, wake: make(chan struct{}, 1), full: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a
}

// queuedRecord is a record waiting in the audit log's queue, with its JSON once encoded: a
// listing that shows it before it is written encodes it, and the write stores those bytes.
// A record is not changed once queued.
//
// Its bytes are encoded into a buffer of its log's (recordBufs), which goes back there once the
// batch that wrote it has committed (release): a new zeroed buffer per record, and the garbage
// it made, were a sixth of the engine's side of the audit write (issue 32). Nothing reads them
// then: the store keeps no bytes of a write after it (store.SelfEncoded); a listing reads
// queued records under the writer's read lock (listRuns), so never one of a batch being
// written; a reader without it (readRecordFor) pins the bytes while it reads them, and a pinned
// record's buffer is left to the garbage collector.
type queuedRecord struct {
	rec  *RunRecord
	once sync.Once
	buf  []byte // store.SysDocRoom, then the JSON
	sum  string // the hex SHA-256 of the JSON, which the hash chain takes (lazyRecord)
	err  error
	// bufs is where buf comes from and goes back to: its log's.
	bufs *recordBufs
	// pins counts the readers of buf outside the writer's lock (pin); -1 once released: buf is
	// gone, and the record is in the store.
	pins atomic.Int32
}

// recordBufs are an audit log's buffers for its records' bytes, free for the next records to
// encode into: at most maxFreeBufs, each of at most maxPooledBuf bytes (a rare large record's is
// left to the garbage collector rather than kept for records a fraction of its size), about a
// batch's worth. Not a sync.Pool: the collector empties one in a cycle or two, and a stream's
// batch is committed a linger or a batch apart, after as many cycles again.
type recordBufs struct {
	mu   sync.Mutex
	free [][]byte
}

const (
	maxFreeBufs  = 320
	maxPooledBuf = 16 << 10
)

// get returns a free buffer, or a new one.
func (p *recordBufs) get() []byte {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return b[:0]
	}
	p.mu.Unlock()
	return make([]byte, 0, recordBufSize)
}

// put frees the buffers of batch's records, which has committed (queuedRecord.release).
func (p *recordBufs) put(batch []*queuedRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range batch {
		if b := q.release(); b != nil && len(p.free) < maxFreeBufs && cap(b) <= maxPooledBuf {
			p.free = append(p.free, b)
		}
	}
}

// pin keeps buf from being released until unpin; false when it was released already (the
// record is in the store: read it there).
func (q *queuedRecord) pin() bool {
	for {
		n := q.pins.Load()
		if n < 0 {
			return false
		}
		if q.pins.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (q *queuedRecord) unpin() { q.pins.Add(-1) }

// release gives up buf, unless a reader has it pinned, and returns it (nil when pinned or
// none): its batch has committed, so the record has left the tail, and the caller holds the
// writer's lock, so no listing reads it.
func (q *queuedRecord) release() []byte {
	if q.buf == nil || !q.pins.CompareAndSwap(0, -1) {
		return nil
	}
	b := q.buf
	q.buf = nil
	return b
}

// EncodeJSON implements store.SelfEncoded.
func (q *queuedRecord) EncodeJSON() ([]byte, error) {
	buf, room, err := q.EncodeJSONRoom()
	if err != nil {
		return nil, err
	}
	return buf[room:], nil
}

// EncodeJSONRoom implements store.RoomEncoded: the store writes its header before the JSON
// instead of copying it (issue 32).
func (q *queuedRecord) EncodeJSONRoom() ([]byte, int, error) {
	var e recordEncoder
	q.encode(&e)
	return q.buf, store.SysDocRoom, q.err
}

// encode encodes the record with e, once. It reads nothing of the record's bytes afterwards:
// the encoder of a batch that another writer commits meanwhile (auditLog.encode) may see them
// released.
func (q *queuedRecord) encode(e *recordEncoder) {
	q.once.Do(func() {
		var s storedRecord
		q.rec.storeInto(&s)
		if q.buf, q.err = e.record(q.bufs.get()[:store.SysDocRoom], &s); q.err == nil { // the room's bytes are free
			q.sum = sha256Hex(q.buf[store.SysDocRoom:])
		}
	})
}

// recordSum implements summedRecord: the chain takes the hash made with the JSON.
func (q *queuedRecord) recordSum() string { return q.sum }

// encode encodes the records queued now with e, outside the writer's lock (writeMu): a decision
// that writes after a batch waits for its commit, not for its records' encoding too. Records
// are not changed once queued, and each is encoded once (the rest take its bytes); those the
// queue's head holds encoded already (encoded) are not looked at again.
func (a *auditLog) encode(e *recordEncoder) {
	a.mu.Lock()
	gen, start := a.gen, a.encoded
	queued := slices.Clip(a.queue[start:])
	a.mu.Unlock()
	for _, q := range queued {
		q.encode(e) // an error is the write's, again, where it is stored
	}
	a.mu.Lock()
	if a.gen == gen && a.encoded == start {
		a.encoded = start + len(queued)
	}
	a.mu.Unlock()
}

// add queues a copy of r: the caller may go on changing its own (ApplyWith's record after an
// apply that failed) while the writer encodes the copy on its own goroutine. The copy shares
// r's slices and maps, which nobody changes in place once a record is made.
func (a *auditLog) add(r *RunRecord) {
	cp := *r
	a.mu.Lock()
	a.queue = append(a.queue, &queuedRecord{rec: &cp, bufs: &a.bufs})
	n := len(a.queue)
	now := a.closed || n >= maxQueued
	quiet := a.lingering && n < auditBatch && n%auditEncodeEvery != 0 // it writes this record anyway
	a.mu.Unlock()
	if now {
		a.background(a.flush())
		return
	}
	if quiet {
		return
	}
	signal := a.wake
	if n >= auditBatch {
		signal = a.full
	}
	select {
	case signal <- struct{}{}:
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
	var e recordEncoder // the writer's, for the records it encodes as they come: its shapes carry on
	for {
		select {
		case <-a.wake:
			a.encodeNew(&e)
			a.setLingering(true)
			t := time.NewTimer(a.linger)
		linger:
			for {
				select {
				case <-t.C:
					break linger
				case <-a.full:
					break linger
				case <-a.stop:
					break linger
				case <-a.wake:
					a.encodeNew(&e)
				}
			}
			t.Stop()
			a.setLingering(false) // a record queued from now on may miss this batch: it wakes the writer
			a.background(a.flushUnlessDeciding())
		case <-a.full: // a batch filled while the last was being written
			a.background(a.flushUnlessDeciding())
		case <-a.stop:
			a.background(a.flush())
			return
		}
	}
}

func (a *auditLog) setLingering(on bool) {
	a.mu.Lock()
	a.lingering = on
	a.mu.Unlock()
}

// encodeNew encodes the records queued since it last did, while the background writer
// lingers for its batch to fill: as the runs queue them (every auditEncodeEvery), beside the runs, not a linger later
// for the whole batch at once in the batch's turn (the process's CPU is the same either way;
// the stream's wall time per run is lower, ARCHITECTURE.md). It is the writer's
// work, on the writer's goroutine, as the batch's write encoding them would be; a benchmark
// measures it as part of the write (around).
func (a *auditLog) encodeNew(e *recordEncoder) {
	if a.around != nil {
		a.around(func() error { a.encode(e); return nil })
		return
	}
	a.encode(e)
}

// flush writes every queued record in one transaction. A batch that cannot be written goes back
// to the front of the queue, so the next flush tries it again.
func (a *auditLog) flush() error { return a.flushQueue(false) }

// flushUnlessDeciding is the background writer's flush: it writes nothing while a decision is
// on its way to the writer's lock (deciding), which then commits the queue with its own
// records, and the writer looks again after its linger (a decision whose write fails puts the
// queue back). Readers and close flush whatever comes.
func (a *auditLog) flushUnlessDeciding() error { return a.flushQueue(true) }

func (a *auditLog) flushQueue(yield bool) error {
	write := func() error {
		return a.write(time.Now(), nil, func(docs []store.SysDoc) error {
			return a.st.PutSysDocs(context.Background(), docs...)
		}, yield)
	}
	var err error
	if a.around != nil {
		err = a.around(write)
	} else {
		err = write()
	}
	if err != nil {
		return fmt.Errorf("writing the audit log: %w", err)
	}
	return nil
}

// writeWith writes every queued record, then the records of own (a decision's: an apply, an
// approval, a rejection), chained in that order, by write in one transaction: a record written
// again for a decision lands after any queued version of it, and the decision costs one commit,
// not one for the queue and one for itself. When write fails, the queued records go back to the
// front of the queue. With nothing queued and nothing of its own, it writes nothing.
func (a *auditLog) writeWith(now time.Time, own []link, write func(docs []store.SysDoc) error) error {
	return a.write(now, own, write, false)
}

// write is writeWith; yield writes nothing when a decision is on its way (flushUnlessDeciding).
func (a *auditLog) write(now time.Time, own []link, write func(docs []store.SysDoc) error, yield bool) error {
	if len(own) > 0 {
		a.deciding.Add(1)
	}
	var e recordEncoder // one for the batch: its records' rows have the same few shapes
	a.encode(&e)
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	if len(own) > 0 {
		a.deciding.Add(-1)
	}
	if yield && a.deciding.Load() > 0 {
		select { // look again after the linger
		case a.wake <- struct{}{}:
		default:
		}
		return nil
	}
	a.mu.Lock()
	batch := a.queue
	a.queue, a.inflight = nil, batch
	a.gen, a.encoded = a.gen+1, 0
	a.mu.Unlock()
	if len(batch) == 0 && len(own) == 0 {
		return nil
	}
	links := make([]link, 0, len(batch)+len(own))
	for _, q := range batch {
		r := q.rec
		// Never a rejected run's: a rejection writes its record itself (RejectWith), and a
		// rejected run is never queued again (it cannot be applied).
		event, by := r.chainEvent, r.chainBy
		if event == "" {
			event, by = ChainProposed, r.ProposedBy
		}
		doc := recordDoc(r, false)
		doc.Value = q // its bytes, if a listing encoded it already
		links = append(links, link{doc: doc, event: event, by: func() string { return by }, fold: true, read: r.chainRead})
	}
	err := a.chain.write(now, write, append(links, own...)...)
	a.mu.Lock()
	a.inflight = nil // in the store now, or back in the queue
	if err != nil {
		a.queue = append(batch, a.queue...)
		a.gen, a.encoded = a.gen+1, 0
	}
	a.mu.Unlock()
	if err == nil && len(batch) > 0 {
		a.commits.Add(1)
		a.bufs.put(batch)
	}
	return err
}

// tail returns the records not yet in the store, oldest first: the batch being written, then
// the queue. A record not in it is in the store, or not recorded yet: a batch leaves the tail
// only once committed.
func (a *auditLog) tail() []*queuedRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append(slices.Clip(a.inflight), a.queue...)
}

// unwritten reports whether the queue holds the first record of run id (a dry run's: no chain
// event of its own), which no batch has taken yet: the store holds nothing of the run, and
// another engine on the store cannot have seen it.
func (a *auditLog) unwritten(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, q := range a.queue {
		if q.rec.ID == id && q.rec.chainEvent == "" {
			return true
		}
	}
	return false
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
