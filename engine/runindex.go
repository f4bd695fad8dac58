package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// The audit log's index.
//
// Every record is written with its entry in the store's index of the "runs" collection
// (store.SysIndex): ordered by the run's time, grouped by its state. The entry is computed by
// recordIndex from the record and whether a reviewer rejected it, and written in the same
// transaction as the record (the audit log's batches, an apply, a rejection, which rewrites the
// record with its decision), so the index cannot drift from the records; the store keeps the
// count and bytes of each state with it. Listing the newest N runs, or the pending ones, reads
// N entries and N records (ListRuns), whatever the size of the log.
//
// A store written before the index, or by a starplan that does not know it, has none that is
// current: New builds it from every record and decision (once, in one transaction; Engine.
// IndexBuilt says how many records it read).

// stateUnreadable is the index group of a record that did not decode when the index was built
// (a damaged record of an older store): it is listed apart, by id (UnreadableError).
const stateUnreadable = "unreadable"

// recordIndex is the record's entry in the audit log's index.
func recordIndex(r *RunRecord, rejected bool) *store.SysIndex {
	return &store.SysIndex{Order: orderKey(r.Time), Group: stateOf(r.Applied, rejected, r.Pending, r.Outcome)}
}

// orderKey is a run's time as its index sorts it: UTC, fixed width.
func orderKey(t time.Time) string { return t.UTC().Format("20060102T150405.000000000Z") }

// recordDoc is the stored document of a record, with its index entry.
func recordDoc(r *RunRecord, rejected bool) store.SysDoc {
	return store.SysDoc{Collection: auditCollection, ID: r.ID, Value: recordValue{r}, Index: recordIndex(r, rejected)}
}

// ensureIndex builds the audit log's index when the store has none that is current. The caller
// holds applyMu, or no other goroutine uses the engine yet.
func (e *Engine) ensureIndex(ctx context.Context) error {
	ready, err := e.st.SysIndexReady(auditCollection)
	if err != nil || ready {
		return err
	}
	decisions, err := e.Decisions()
	if err != nil {
		return err
	}
	n, err := e.st.RebuildSysIndex(ctx, auditCollection, func(doc store.SysRecord) (store.SysIndex, error) {
		var r struct {
			Time    time.Time `json:"time"`
			Applied bool      `json:"applied"`
			Pending bool      `json:"pending"`
			Outcome Outcome   `json:"outcome"`
		}
		if err := json.Unmarshal(doc.JSON, &r); err != nil {
			return store.SysIndex{Group: stateUnreadable}, nil
		}
		return store.SysIndex{Order: orderKey(r.Time), Group: stateOf(r.Applied, decisions[doc.ID] != nil, r.Pending, r.Outcome)}, nil
	})
	if err != nil {
		return fmt.Errorf("building the audit log's index: %w", err)
	}
	e.indexBuilt = n
	return nil
}

// IndexBuilt is how many records New read to build the audit log's index, which a store written
// before it (or by an older starplan) lacks; 0 when the index was current.
func (e *Engine) IndexBuilt() int { return e.indexBuilt }

// ListOptions say which runs ListRuns lists.
type ListOptions struct {
	// State keeps to the runs in this state (StatePending, ...); "" lists every run.
	State string
	// Limit is the most runs of the page; 0 lists every run left.
	Limit int
	// Cursor continues a listing after the page whose RunPage.NextCursor it is; "" starts at the
	// newest run.
	Cursor string
	// Since keeps to the runs at or after this time; zero for all.
	Since time.Time
}

// RunPage is a page of the audit log, newest first, with the log's counts.
type RunPage struct {
	Runs []RunSummary `json:"runs"`
	// NextCursor lists the next page (ListOptions.Cursor); empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
	// Count is how many runs the log holds, in every state.
	Count int `json:"count"`
	// Bytes is the stored size of every record of the log (their JSON).
	Bytes int64 `json:"bytes"`
	// States counts the runs of each state (the log's own counts, kept with every write).
	States map[string]int `json:"states"`
}

// CursorError is a cursor that is not one ListRuns gave.
type CursorError struct{ Cursor string }

func (e *CursorError) Error() string {
	c := e.Cursor
	if len(c) > 40 {
		c = c[:40] + "…"
	}
	return fmt.Sprintf("cursor %q is not one a listing of runs gave", c)
}

// Hint says what to do about it.
func (e *CursorError) Hint() string {
	return "pass the next_cursor of the previous page as it was, or leave the cursor out to start at the newest run"
}

const cursorPrefix = "c1."

func encodeCursor(key string) string {
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(key))
}

func decodeCursor(c string) (string, error) {
	rest, ok := strings.CutPrefix(c, cursorPrefix)
	if !ok {
		return "", &CursorError{c}
	}
	key, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || !strings.Contains(string(key), "\x00") {
		return "", &CursorError{c}
	}
	return string(key), nil
}

// ListRuns lists a page of the audit log, newest first (runs of the same time by id, last
// first), through its index: a page of N runs reads N+1 index entries and N records, whatever
// the size of the log (the entries of runs in other states, or after Since, are not read when
// State or Since is given). Records that do not decode are left out and named by an
// *UnreadableError, returned with the page; a bad cursor is a *CursorError.
func (e *Engine) ListRuns(opts ListOptions) (*RunPage, error) {
	page, err := e.listRuns(opts)
	if errors.Is(err, store.ErrNoSysIndex) {
		// Made stale while open: rebuilt under the apply lock (logStats), not under the audit
		// writer's read lock listRuns holds, which an apply waits for with the apply lock held.
		if _, _, err := e.logStats(); err != nil {
			return nil, err
		}
		page, err = e.listRuns(opts)
	}
	return page, err
}

// listRuns is ListRuns; it returns store.ErrNoSysIndex when the log's index is not current.
func (e *Engine) listRuns(opts ListOptions) (*RunPage, error) {
	// No batch commits while the listing reads the queue and the store, so that none is in both
	// or in neither.
	e.audit.writeMu.RLock()
	tail, ok := e.newRuns()
	if !ok { // a queued record replaces a stored one: its stored entry would count twice
		e.audit.writeMu.RUnlock()
		if err := e.audit.flush(); err != nil {
			return nil, err
		}
		e.audit.writeMu.RLock()
		tail = nil
	}
	defer e.audit.writeMu.RUnlock()
	after := ""
	if opts.Cursor != "" {
		var err error
		if after, err = decodeCursor(opts.Cursor); err != nil {
			return nil, err
		}
	}
	stats, err := e.st.SysStats(auditCollection)
	if err != nil {
		return nil, err
	}
	page := statsPage(stats)
	var unreadable *UnreadableError
	since := ""
	if !opts.Since.IsZero() {
		since = orderKey(opts.Since)
	}
	taken := 0
	var last string
	queued, fromQueue, err := e.queuedEntries(tail, page, opts.State, after, since)
	if err != nil {
		return nil, err
	}
	entries, err := e.st.ScanSys(auditCollection, store.SysScan{Group: opts.State, After: after, Reverse: true,
		Next: func(en store.SysEntry) (take, more bool) {
			switch {
			case en.Order < since:
				return false, false
			case en.Group == stateUnreadable:
				return false, true
			case opts.Limit > 0 && taken == opts.Limit:
				page.NextCursor = encodeCursor(last)
				return false, false
			}
			taken++
			last = en.Cursor
			return true, true
		}})
	if err != nil {
		return nil, err
	}
	if len(queued) > 0 {
		// Both lists are newest first; the store's holds the page's first Limit of its own.
		entries = mergeEntries(entries, queued)
		page.NextCursor = ""
		if opts.Limit > 0 && len(entries) > opts.Limit {
			entries = entries[:opts.Limit]
			page.NextCursor = encodeCursor(entries[opts.Limit-1].Cursor)
		}
	}
	for _, en := range entries {
		s, ok := queuedSummary(fromQueue[en.ID])
		if !ok {
			s, err = e.decodeSummary(en.JSON)
		}
		if err != nil {
			if unreadable == nil {
				unreadable = &UnreadableError{Err: err}
			}
			unreadable.IDs = append(unreadable.IDs, en.ID)
			continue
		}
		s.State, s.Bytes = en.Group, len(en.JSON)
		if s.State == StatePending && e.policy.Approval.TTL() > 0 && e.opts.Now().Sub(s.Time) > e.policy.Approval.TTL() {
			s.State = StateExpired // the index groups it as pending: expiry moves with the clock
		}
		page.Runs = append(page.Runs, s)
	}
	if stats[stateUnreadable].Count > 0 && opts.Cursor == "" {
		// Named on the first page only, so that paging names each once.
		if _, err := e.st.ScanSys(auditCollection, store.SysScan{Group: stateUnreadable, Next: func(en store.SysEntry) (bool, bool) {
			if unreadable == nil {
				unreadable = &UnreadableError{Err: errors.New("it did not decode when the audit log's index was built")}
			}
			unreadable.IDs = append(unreadable.IDs, en.ID)
			return false, true
		}}); err != nil {
			return nil, err
		}
	}
	if unreadable != nil {
		var err error
		for _, id := range unreadable.IDs { // why the first does not decode, in its own words
			if _, err = e.storedRecord(id); err != nil {
				break
			}
		}
		var ue *UnreadableError
		if errors.As(err, &ue) {
			unreadable.Err = ue.Err
		}
		return page, unreadable
	}
	return page, nil
}

// newRuns returns the audit log's queued records (auditLog.tail) of new runs, each run's last
// version, when each run's first record is queued too (a dry run's: no chain event of its own),
// so that the store holds nothing of it: a listing can then show them beside the store's
// without a commit. ok is false when one is a stored run's record written again (an apply that
// failed or found a conflict), whose stored version is in the store's counts and index. A run
// whose dry run and conflict are both queued is one new run, in its last state (issue 32: on a
// busy ledger most applies conflict, and each conflict made the next listing commit the queue).
func (e *Engine) newRuns() (tail []*queuedRecord, ok bool) {
	all := e.audit.tail()
	last := make(map[string]int, len(all))
	for i, q := range all {
		if _, seen := last[q.rec.ID]; !seen && q.rec.chainEvent != "" {
			return nil, false
		}
		last[q.rec.ID] = i
	}
	if len(last) == len(all) {
		return all, true
	}
	tail = make([]*queuedRecord, 0, len(last))
	for i, q := range all {
		if last[q.rec.ID] == i {
			tail = append(tail, q)
		}
	}
	return tail, true
}

// queuedEntries adds the queued new runs to the page's counts, and returns, newest first, the
// index entries of those a listing of state after the cursor after and since since shows.
func (e *Engine) queuedEntries(tail []*queuedRecord, page *RunPage, state, after, since string) ([]store.SysEntry, map[string]*queuedRecord, error) {
	var out []store.SysEntry
	byID := map[string]*queuedRecord{}
	for _, q := range tail {
		raw, err := q.EncodeJSON()
		if err != nil {
			return nil, nil, fmt.Errorf("encoding run %s's record: %w", q.rec.ID, err)
		}
		idx := recordIndex(q.rec, false)
		page.Count++
		page.Bytes += int64(len(raw))
		page.States[idx.Group]++
		en := store.SysEntry{ID: q.rec.ID, Order: idx.Order, Group: idx.Group, Cursor: idx.Order + "\x00" + q.rec.ID, JSON: raw}
		if (state == "" || idx.Group == state) && (after == "" || en.Cursor < after) && idx.Order >= since {
			out = append(out, en)
			byID[en.ID] = q
		}
	}
	slices.SortFunc(out, func(a, b store.SysEntry) int { return strings.Compare(b.Cursor, a.Cursor) })
	return out, byID, nil
}

// queuedSummary is decodeSummary of a queued record's JSON, read from the record itself: a
// listing's newest page is mostly queued runs, and decoding a record costs more than the rest of
// the listing. ok is false (decode the JSON) for a nil record, or one whose texts JSON would
// change (invalid UTF-8).
func queuedSummary(q *queuedRecord) (RunSummary, bool) {
	if q == nil {
		return RunSummary{}, false
	}
	r := q.rec
	for _, s := range []string{r.ID, r.Origin, r.Request, r.Subject, string(r.Outcome), r.Status} {
		if !utf8.ValidString(s) {
			return RunSummary{}, false
		}
	}
	// The time as the JSON holds it: no monotonic reading, and the zone its text says.
	t, err := time.Parse(time.RFC3339Nano, r.Time.Format(time.RFC3339Nano))
	if err != nil {
		return RunSummary{}, false
	}
	return RunSummary{ID: r.ID, Time: t, Origin: r.Origin, Request: r.Request, Subject: r.Subject, Outcome: r.Outcome,
		Status: r.Status, ChangedRows: r.ChangedRows, Pending: r.Pending, Applied: r.Applied}, true
}

// mergeEntries merges two lists of index entries, each newest first, into one.
func mergeEntries(a, b []store.SysEntry) []store.SysEntry {
	out := make([]store.SysEntry, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].Cursor > b[0].Cursor {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// SetRetention records how long the audit log keeps settled runs where a server prunes them
// (server.Options.Retention), for those who describe the store; 0 keeps them forever. The
// engine itself prunes only when asked (Prune).
func (e *Engine) SetRetention(d time.Duration) { e.retention.Store(int64(max(d, 0))) }

// Retention is what SetRetention recorded: 0 when nothing prunes the log.
func (e *Engine) Retention() time.Duration { return time.Duration(e.retention.Load()) }

// RunStats returns the audit log's counts (a RunPage without runs), as its index keeps them:
// nothing is counted, no record is read.
func (e *Engine) RunStats() (*RunPage, error) {
	if err := e.audit.flush(); err != nil {
		return nil, err
	}
	page, _, err := e.logStats()
	return page, err
}

// logStats returns an empty page with the log's counts, and the index's counts per group.
func (e *Engine) logStats() (*RunPage, map[string]store.SysGroup, error) {
	stats, err := e.st.SysStats(auditCollection)
	if errors.Is(err, store.ErrNoSysIndex) {
		// Made stale while open (another starplan wrote the store through this one's lock?):
		// build it again, under the apply lock, as New does.
		e.applyMu.Lock()
		err = e.ensureIndex(context.Background())
		e.applyMu.Unlock()
		if err == nil {
			stats, err = e.st.SysStats(auditCollection)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return statsPage(stats), stats, nil
}

// statsPage is an empty page with the counts of the log's index.
func statsPage(stats map[string]store.SysGroup) *RunPage {
	page := &RunPage{Runs: []RunSummary{}, States: map[string]int{}}
	for state, g := range stats {
		page.Count += g.Count
		page.Bytes += g.Bytes
		if state != stateUnreadable {
			page.States[state] = g.Count
		}
	}
	return page
}

// decodeSummary decodes what a RunSummary shows of a stored record (not its state or size):
// the fields it needs, not the rest.
func (e *Engine) decodeSummary(raw []byte) (RunSummary, error) {
	e.decodes.Add(1)
	var r struct {
		ID          string          `json:"run_id"`
		OldID       string          `json:"id"`
		Time        time.Time       `json:"time"`
		Origin      string          `json:"origin"`
		Request     string          `json:"request"`
		Subject     string          `json:"subject"`
		Outcome     Outcome         `json:"outcome"`
		Status      string          `json:"status"`
		ChangedRows int             `json:"changed_rows"`
		Changes     json.RawMessage `json:"changes"`
		Pending     bool            `json:"pending"`
		Applied     bool            `json:"applied"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return RunSummary{}, err
	}
	if r.ID == "" {
		r.ID = r.OldID // written before run_id was the one name of a run's id
	}
	if r.ChangedRows == 0 && len(r.Changes) > len("null") { // records before changed_rows lack it
		var cs table.ChangeSet
		if err := json.Unmarshal(r.Changes, &cs); err != nil {
			return RunSummary{}, err
		}
		r.ChangedRows = cs.Rows()
	}
	return RunSummary{ID: r.ID, Time: r.Time, Origin: r.Origin, Request: r.Request, Subject: r.Subject, Outcome: r.Outcome,
		Status: r.Status, ChangedRows: r.ChangedRows, Pending: r.Pending, Applied: r.Applied}, nil
}
