package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/starplan/starplan/store"
)

// The audit log is hash-chained.
//
// Run records are rewritten as a run moves on (pending, approved, applied, rejected), so the
// chain is kept beside them, in the system collection ChainCollection: every write of a run
// record is chained in the same transaction as the record. An entry names the run, what
// happened (ChainProposed, ChainApproved, ...) and by whom, and carries the SHA-256 of the
// record's bytes as written, the SHA-256 of the entry before it and its own (over its
// canonical bytes: its JSON with "sha256" empty). A batch of queued records (dry runs, mostly:
// auditLog) is chained by one ChainBatch entry that lists, in order, what an entry each would
// say (ChainRecord: run, event, by, the record's hash): one entry, one hash and one stored
// document per batch instead of per record (issue 32). A decision's record gets an entry of
// its own. A document "head" names the last entry.
//
// VerifyChain walks the entries in order and the records beside them, and names the first that
// does not match: an entry whose hash or link is wrong, a record whose bytes are not those its
// last entry (or batch entry's record write) chained (edited after it was written), a record
// with no entry, an entry whose record is missing, or a batch entry of the wrong form. A
// decision's entry carries the hash of the record the decision read (Read), which must be the
// one the run's last entry chained: a record edited before a decision otherwise became the
// decision's own, and the chain verified again. Prune removes the entries of a prefix of the
// chain that only concerns runs a prune removed (a batch entry: every run it names removed) and
// appends a checkpoint entry with the hash of the last entry it removed, so the rest still
// verifies, and the count and hash of the runs prunes removed that the entries before it name
// (PrunedRuns): the only missing records the verifier excuses. Entries carry Form chainForm;
// those of an older starplan (Form 0) carry neither field and are checked as they were.
//
// The hashes are not keyed: whoever can write the store can rewrite the whole chain after an
// edit. The chain makes an edit through the store's API, or a removed record, show; keeping the
// head's hash (starplan runs verify prints it) elsewhere makes a rewrite show too.

// ChainCollection is the system collection that holds the audit log's hash chain.
const ChainCollection = "audit_chain"

// chainHeadID is the id of the chain's head document.
const chainHeadID = "head"

// The events of chain entries.
const (
	ChainStart        = "start"         // the chain's first entry; records older than it are not chained
	ChainProposed     = "proposed"      // a run was recorded (by its proposer)
	ChainApproved     = "approved"      // a person approved (and, when theirs was the last approval needed, applied) it
	ChainAutoApproved = "auto-approved" // an auto rule let it through (by names the rule)
	ChainConflict     = "conflict"      // its apply found the data moved
	ChainRejected     = "rejected"      // a reviewer rejected it
	ChainRecorded     = "recorded"      // the record was written again, unchanged in substance
	ChainCheckpoint   = "checkpoint"    // a prune removed the entries up to PrunedThrough
	ChainDomain       = "domain"        // the store's domain definition was replaced (Definition names it)
	ChainBatch        = "batch"         // several record writes of one commit (Records lists them)
)

// ChainEntry is one entry of the audit log's hash chain.
type ChainEntry struct {
	Seq   int64     `json:"seq"`
	Time  time.Time `json:"time"`
	RunID string    `json:"run_id,omitempty"`
	Event string    `json:"event"`
	// By is who: a principal's name, or the rule's name for ChainAutoApproved.
	By string `json:"by,omitempty"`
	// Record is the hex SHA-256 of the run record's bytes as this write stored them.
	Record string `json:"record_sha256,omitempty"`
	// Read is, on a decision's entry (chainDecision), the hex SHA-256 of the record's bytes as
	// the decision read them: the hash its run's last entry chained, unless the record was
	// changed in between (an edit the decision would otherwise make its own). Empty on the
	// first entry of a run decided as it ran (Request.Apply), which read no record.
	Read string `json:"read_sha256,omitempty"`
	// PrunedThrough and PrunedSHA256 are, on a checkpoint, the seq and hash of the last entry
	// the prune removed.
	PrunedThrough int64  `json:"pruned_through,omitempty"`
	PrunedSHA256  string `json:"pruned_sha256,omitempty"`
	// PrunedRuns and PrunedRunsSHA256 are, on a checkpoint, how many runs the entries before it
	// name whose records prunes removed, and the SHA-256 of their sorted ids (runSetSum): the
	// only missing records the chain excuses (the rest were removed outside a prune).
	PrunedRuns       int    `json:"pruned_runs,omitempty"`
	PrunedRunsSHA256 string `json:"pruned_runs_sha256,omitempty"`
	// Since is, on the start and on checkpoints, when the chain began: records older than it
	// were written before starplan chained them.
	Since *time.Time `json:"chain_since,omitempty"`
	// Definition is, on a ChainDomain entry, the SHA-256 of the definition recorded from then
	// on (DefinitionDigest).
	Definition string `json:"definition_sha256,omitempty"`
	// Records are, on a ChainBatch entry, the record writes it chains, in the order they were
	// written: what one entry each would say (run, event, by, the record's hash), in one entry
	// for a batch of queued records (issue 32).
	Records []ChainRecord `json:"records,omitempty"`
	// Form is the form of the entry: chainForm on those this starplan writes, 0 (absent) on
	// those of a starplan before Read and PrunedRuns, which need not carry them.
	Form int    `json:"form,omitempty"`
	Prev string `json:"prev_sha256"`
	Hash string `json:"sha256"`
}

// chainForm is the form of the entries this starplan writes: a decision's entry carries Read,
// a checkpoint PrunedRunsSHA256.
const chainForm = 2

// ChainRecord is one record write of a ChainBatch entry.
type ChainRecord struct {
	RunID  string `json:"run_id"`
	Event  string `json:"event"`
	By     string `json:"by,omitempty"`
	Record string `json:"record_sha256"`
	Read   string `json:"read_sha256,omitempty"` // as ChainEntry.Read
}

// chainHead is the stored head of the chain.
type chainHead struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"sha256"`
}

// seal computes the entry's hash over its canonical bytes.
func (c *ChainEntry) seal() {
	c.Hash = ""
	b, _ := json.Marshal(c) // a struct of strings, numbers and a time: it always encodes
	c.Hash = sha256Hex(b)
}

// sealed seals the entry and returns its JSON, as json.Marshal writes it, encoding it once and
// without reflection (the audit log writes an entry per run): its canonical bytes end in
// `"sha256":""}`, so the stored bytes are those with the hash put in.
// TestChainEntryEncoderIsEncodingJSON holds it to seal and json.Marshal.
func (c *ChainEntry) sealed() ([]byte, error) { return c.sealedAfter(0) }

// sealedAfter is sealed's JSON after room zero bytes, which a store may write its header into
// (store.RoomEncoded).
func (c *ChainEntry) sealedAfter(room int) ([]byte, error) {
	// Names are made valid UTF-8 before they are hashed: JSON stores an invalid byte as \ufffd,
	// which reads back as U+FFFD, so an entry hashed over the invalid byte could never verify.
	c.RunID, c.By = strings.ToValidUTF8(c.RunID, "\uFFFD"), strings.ToValidUTF8(c.By, "\uFFFD")
	var e recordEncoder
	b := make([]byte, room, room+512+160*len(c.Records)) // a batch entry: about 150 bytes a record
	b = e.raw(b, `{"seq":`)
	b = e.int(b, c.Seq)
	b = e.raw(b, `,"time":`)
	b = e.time(b, c.Time)
	b = e.optStr(b, `,"run_id":`, c.RunID)
	b = e.raw(b, `,"event":`)
	b = e.str(b, c.Event)
	b = e.optStr(b, `,"by":`, c.By)
	b = e.optStr(b, `,"record_sha256":`, c.Record)
	b = e.optStr(b, `,"read_sha256":`, c.Read)
	if c.PrunedThrough != 0 {
		b = e.raw(b, `,"pruned_through":`)
		b = e.int(b, c.PrunedThrough)
	}
	b = e.optStr(b, `,"pruned_sha256":`, c.PrunedSHA256)
	if c.PrunedRuns != 0 {
		b = e.raw(b, `,"pruned_runs":`)
		b = e.int(b, int64(c.PrunedRuns))
	}
	b = e.optStr(b, `,"pruned_runs_sha256":`, c.PrunedRunsSHA256)
	if c.Since != nil {
		b = e.raw(b, `,"chain_since":`)
		b = e.time(b, *c.Since)
	}
	b = e.optStr(b, `,"definition_sha256":`, c.Definition)
	if len(c.Records) > 0 {
		b = e.raw(b, `,"records":[`)
		for i := range c.Records {
			r := &c.Records[i]
			r.RunID, r.By = strings.ToValidUTF8(r.RunID, "\uFFFD"), strings.ToValidUTF8(r.By, "\uFFFD")
			if i > 0 {
				b = e.raw(b, ",")
			}
			b = e.raw(b, `{"run_id":`)
			b = e.str(b, r.RunID)
			b = e.raw(b, `,"event":`)
			b = e.str(b, r.Event)
			b = e.optStr(b, `,"by":`, r.By)
			b = e.raw(b, `,"record_sha256":`)
			b = e.str(b, r.Record)
			b = e.optStr(b, `,"read_sha256":`, r.Read)
			b = e.raw(b, "}")
		}
		b = e.raw(b, "]")
	}
	if c.Form != 0 {
		b = e.raw(b, `,"form":`)
		b = e.int(b, int64(c.Form))
	}
	b = e.raw(b, `,"prev_sha256":`)
	b = e.str(b, c.Prev)
	b = e.raw(b, `,"sha256":""}`)
	if e.err != nil {
		return nil, e.err
	}
	c.Hash = sha256Hex(b[room:])
	out := append(b[:len(b)-2], c.Hash...) // in place: the canonical bytes are not kept
	return append(out, `"}`...), nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func chainID(seq int64) string { return fmt.Sprintf("%016d", seq) }

// chain is the engine's end of the hash chain: the head, and the lock every write of a run
// record holds from sealing its entry to its commit, so that entries follow one another.
type chain struct {
	mu   sync.Mutex
	head chainHead
	st   store.Store
	// start is the chain's first entry while it is not written yet: a store without a chain gets
	// it with the first chained write, so that opening a store (a command that only reads, too)
	// never writes to it.
	start *ChainEntry
}

// loadChain reads the chain's head, or starts the chain (ChainStart) in a store that has none;
// the start is written with the first chained write (begin).
func loadChain(ctx context.Context, st store.Store, now time.Time) (*chain, error) {
	c := &chain{st: st}
	ok, err := st.GetSys(ChainCollection, chainHeadID, &c.head)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log's hash chain: %w", err)
	}
	if ok {
		return c, nil
	}
	since := now.UTC()
	start := &ChainEntry{Seq: 1, Time: since, Event: ChainStart, Since: &since, Form: chainForm}
	start.seal()
	c.start, c.head = start, chainHead{Seq: 1, Hash: start.Hash}
	return c, nil
}

// link is one record write to chain: its document (of the audit collection), the event and who.
type link struct {
	doc   store.SysDoc
	event string
	by    func() string // read when the record is written: an apply learns its rule in verify
	// definition is set on an entry that chains no record (doc is zero): a ChainDomain entry.
	definition string
	// fold: consecutive links that fold, two or more, share one ChainBatch entry (the audit
	// log's queued records: one entry per batch, not per record; issue 32).
	fold bool
	// read is, for a decision's write (chainDecision), the hash of the record as the decision
	// read it (RunRecord.chainRead): ChainEntry.Read.
	read string
}

// chainDecision reports whether event is a decision's, made on a record it read: its entry
// carries the read record's hash (ChainEntry.Read).
func chainDecision(event string) bool {
	switch event {
	case ChainApproved, ChainAutoApproved, ChainConflict, ChainRejected, ChainRecorded:
		return true
	}
	return false
}

// chainWrite is a batch of chained writes in the making. Its documents marshal lazily, in the
// order the store writes them (each record before its entry, the head last), so a record that an
// apply's verify completes is hashed as it is stored.
type chainWrite struct {
	c       *chain
	entries []*ChainEntry
	last    chainHead
}

// begin locks the chain and returns the documents to write for links: each record, its entry
// (after the records of a batch, its one entry: link.fold), then the head. Call done with the
// write's error, which unlocks and, on success, moves the head.
func (c *chain) begin(now time.Time, links ...link) (*chainWrite, []store.SysDoc) {
	c.mu.Lock()
	w := &chainWrite{c: c, last: c.head}
	var docs []store.SysDoc
	if c.start != nil && len(links) > 0 { // the chain's first write: its start goes with it
		docs = append(docs, store.SysDoc{Collection: ChainCollection, ID: chainID(c.start.Seq), Value: c.start, Create: true})
	}
	for i := 0; i < len(links); {
		n := 1
		for links[i].fold && i+n < len(links) && links[i+n].fold {
			n++
		}
		group := links[i : i+n]
		i += n
		e := &ChainEntry{Seq: c.head.Seq + int64(len(w.entries)) + 1, Time: now.UTC(), Form: chainForm}
		var before *ChainEntry // sealed before e: the store writes the documents in order
		if k := len(w.entries); k > 0 {
			before = w.entries[k-1]
		}
		w.entries = append(w.entries, e)
		recs := make([]*lazyRecord, len(group))
		for k, l := range group {
			recs[k] = &lazyRecord{v: l.doc.Value}
			if l.doc.Value != nil {
				d := l.doc
				d.Value = recs[k]
				docs = append(docs, d)
			}
		}
		prev := func() string {
			if before != nil {
				return before.Hash
			}
			return w.last.Hash
		}
		var seal func()
		if len(group) == 1 {
			l := group[0]
			e.RunID, e.Event, e.Read = l.doc.ID, l.event, l.read
			if l.doc.Value == nil {
				e.Definition = l.definition
			}
			seal = func() {
				e.Record, e.Prev = recs[0].sum, prev()
				if l.by != nil {
					e.By = l.by()
				}
			}
		} else {
			e.Event = ChainBatch
			seal = func() {
				e.Records, e.Prev = make([]ChainRecord, len(group)), prev()
				for k, l := range group {
					e.Records[k] = ChainRecord{RunID: l.doc.ID, Event: l.event, Record: recs[k].sum, Read: l.read}
					if l.by != nil {
						e.Records[k].By = l.by()
					}
				}
			}
		}
		docs = append(docs, store.SysDoc{Collection: ChainCollection, ID: chainID(e.Seq), Create: true, Value: &lazyEntry{e: e, seal: seal}})
	}
	docs = append(docs, store.SysDoc{Collection: ChainCollection, ID: chainHeadID, Value: &lazyHead{w: w}})
	return w, docs
}

// maxChainAttempts is how many times a chained write is made before it gives up on finding the
// chain's end free (other processes appending to it each time).
const maxChainAttempts = 10

// write makes one store write of links with put, which writes the documents it is given (and
// may add its own) in one transaction, and moves the head on. Every entry is written only where
// its number is free (SysDoc.Create): another process on the same store (servers that share a
// PostgreSQL database) that appended since this one last wrote holds the next numbers, so put
// fails with store.ErrSysExists, writing nothing, and the entries are numbered again after the
// head as stored. The head in memory is where this process left the chain, a hint the
// store's unique numbers correct.
//
// On a store that several processes append to (store.SysSerializer) the write holds the store's
// lock on the chain and reads the head as stored first, so it cannot lose the race: an apply's
// write waits for its rows' locks inside put, while the other servers' writes, numbered and
// committed meanwhile, took its numbers at every try.
func (c *chain) write(now time.Time, put func(docs []store.SysDoc) error, links ...link) error {
	unlock, shared, err := c.lockShared()
	if err != nil {
		return err
	}
	defer unlock()
	if shared {
		if links, err = c.withoutStaleRewrites(links); errors.Is(err, errDecidedElsewhere) {
			return err // a decision of this write read a record the batch drops: checked again
		} else if err != nil {
			return fmt.Errorf("reading the audit log before writing it: %w", err)
		}
		if len(links) == 0 {
			return nil // only stale rewrites (their runs pruned or decided elsewhere): nothing to write
		}
	}
	for attempt := 1; ; attempt++ {
		if shared {
			c.mu.Lock()
			err := c.reloadLocked()
			c.mu.Unlock()
			if err != nil {
				return fmt.Errorf("reading the audit log's hash chain: %w", err)
			}
		}
		w, docs := c.begin(now, links...)
		err := put(docs)
		if errors.Is(err, store.ErrSysExists) && attempt < maxChainAttempts {
			rerr := c.reloadLocked()
			w.done(err)
			if rerr != nil {
				return fmt.Errorf("reading the audit log's hash chain again: %w", rerr)
			}
			continue
		}
		w.done(err)
		return err
	}
}

// withoutStaleRewrites drops, on a store several servers share, the queued rewrites (a
// conflict's, a failed apply's: records an apply queues, written without a decision's checks)
// of runs whose stored record is no longer the one the rewrite was made from (link.read) and
// that are not written earlier in this same write:
//
//   - the record is gone: another server's prune (runs prune --pending) removed the run after
//     this engine queued its rewrite, and writing it would put back a record the prune's
//     checkpoint counts removed (runs verify and db check would report the log damaged for
//     good; rvprune's finding);
//   - the record moved on: another server decided the run since (rejected or applied it,
//     recorded an approval, its own conflict), and writing it would put the stale record over
//     that decision: a rejected or applied run pending again with its writes, an approval gone,
//     and a chain entry that reads a record that is not the run's last (runs verify reports it).
//
// A rewrite that read no record (a run applied as it ran: link.read is empty) writes the run's
// first record, which no other server can have seen: it is kept. A decision of this write (a
// link of its own, after the queue) on a run whose rewrite is dropped read that rewrite's
// record, which the log will not hold: the write fails with errDecidedElsewhere, writing
// nothing, and the decision is checked again (the rewrite is dropped again by the next batch).
// It runs under the store's lock on the chain, which every other server's record write and
// prune step holds too, so nothing falls between the look and the write. One read per queued
// rewrite, on shared stores only.
func (c *chain) withoutStaleRewrites(links []link) ([]link, error) {
	rewrite := func(l link) bool {
		return l.fold && l.event != ChainProposed && l.read != "" && l.doc.Collection == auditCollection
	}
	if !slices.ContainsFunc(links, rewrite) {
		return links, nil // a batch of dry runs' records, or a decision's: no map of the ids it writes
	}
	var kept []link
	written, dropped := map[string]bool{}, map[string]bool{}
	for i, l := range links {
		if !l.fold && dropped[l.doc.ID] {
			return nil, errDecidedElsewhere
		}
		if rewrite(l) && !written[l.doc.ID] {
			var raw json.RawMessage
			ok, err := c.st.GetSys(auditCollection, l.doc.ID, &raw)
			if err != nil {
				return nil, err
			}
			if !ok || sha256Hex(raw) != l.read {
				if kept == nil {
					kept = append(make([]link, 0, len(links)), links[:i]...)
				}
				dropped[l.doc.ID] = true
				continue
			}
		}
		written[l.doc.ID] = true
		if kept != nil {
			kept = append(kept, l)
		}
	}
	if kept == nil {
		return links, nil
	}
	return kept, nil
}

// lockShared takes the store's lock on the chain when other processes may append to it
// (store.SysSerializer; shared reports it), before c.mu; unlock releases it.
func (c *chain) lockShared() (unlock func(), shared bool, err error) {
	ss, ok := c.st.(store.SysSerializer)
	if !ok {
		return func() {}, false, nil
	}
	unlock, err = ss.LockSys(context.Background(), ChainCollection)
	if err != nil {
		return nil, false, fmt.Errorf("locking the audit log's hash chain: %w", err)
	}
	return unlock, true, nil
}

// reloadLocked reads the head as stored; the caller holds c.mu.
func (c *chain) reloadLocked() error {
	var h chainHead
	ok, err := c.st.GetSys(ChainCollection, chainHeadID, &h)
	if err != nil {
		return err
	}
	if ok {
		c.head, c.start = h, nil
	}
	return nil
}

// done unlocks the chain; when err is nil the write committed and the head moves on.
func (w *chainWrite) done(err error) {
	defer w.c.mu.Unlock()
	if err == nil && len(w.entries) > 0 {
		last := w.entries[len(w.entries)-1]
		w.c.head = chainHead{Seq: last.Seq, Hash: last.Hash}
		w.c.start = nil // written
	}
}

// lazyRecord marshals a run record when the store writes it, and keeps the hash of its bytes.
type lazyRecord struct {
	v   any
	sum string
}

// MarshalJSON is EncodeJSON, for encoders that do not know store.SelfEncoded.
func (l *lazyRecord) MarshalJSON() ([]byte, error) { return l.EncodeJSON() }

// EncodeJSON implements store.SelfEncoded: the store writes these very bytes, whose hash is chained.
func (l *lazyRecord) EncodeJSON() ([]byte, error) {
	b, err := store.EncodeSys(l.v)
	if err != nil {
		return nil, err
	}
	l.sum = sha256Hex(b)
	return b, nil
}

// EncodeJSONRoom implements store.RoomEncoded when the record does (its room the store's header's).
func (l *lazyRecord) EncodeJSONRoom() ([]byte, int, error) {
	r, ok := l.v.(store.RoomEncoded)
	if !ok {
		b, err := l.EncodeJSON()
		return b, 0, err
	}
	buf, room, err := r.EncodeJSONRoom()
	if err != nil {
		return nil, 0, err
	}
	if s, ok := l.v.(summedRecord); ok && s.recordSum() != "" {
		l.sum = s.recordSum()
	} else {
		l.sum = sha256Hex(buf[room:])
	}
	return buf, room, nil
}

// summedRecord is a record value that hashed its JSON when it encoded it (queuedRecord: outside
// the writer's lock); recordSum is "" when it has not.
type summedRecord interface{ recordSum() string }

type lazyEntry struct {
	e    *ChainEntry
	seal func()
}

func (l *lazyEntry) MarshalJSON() ([]byte, error) { return l.EncodeJSON() }

// EncodeJSON implements store.SelfEncoded.
func (l *lazyEntry) EncodeJSON() ([]byte, error) {
	l.seal()
	return l.e.sealed()
}

// EncodeJSONRoom implements store.RoomEncoded: the store writes its header in front of the
// entry instead of copying it.
func (l *lazyEntry) EncodeJSONRoom() ([]byte, int, error) {
	l.seal()
	b, err := l.e.sealedAfter(store.SysDocRoom)
	return b, store.SysDocRoom, err
}

type lazyHead struct{ w *chainWrite }

func (l *lazyHead) MarshalJSON() ([]byte, error) { return l.EncodeJSON() }

// EncodeJSON implements store.SelfEncoded.
func (l *lazyHead) EncodeJSON() ([]byte, error) {
	h := l.w.last
	if n := len(l.w.entries); n > 0 {
		h = chainHead{Seq: l.w.entries[n-1].Seq, Hash: l.w.entries[n-1].Hash}
	}
	return json.Marshal(h)
}

// ChainReport is what VerifyChain found.
type ChainReport struct {
	// Entries and Records are how many chain entries and run records were read.
	Entries int `json:"entries"`
	Records int `json:"records"`
	// Head is the seq and hash of the chain's last entry: keep it elsewhere to tell a rewritten
	// chain from this one later.
	HeadSeq  int64  `json:"head_seq"`
	HeadHash string `json:"head_sha256"`
	// Unchained counts the records older than the chain (written by a starplan before it).
	Unchained int `json:"unchained,omitempty"`
	// Problems are what does not match, the first first: each names the entry or run.
	Problems []ChainProblem `json:"problems"`
}

// OK reports whether the chain and the records match.
func (r *ChainReport) OK() bool { return len(r.Problems) == 0 }

// ChainProblem is one thing that does not match.
type ChainProblem struct {
	Seq     int64  `json:"seq,omitempty"` // the entry concerned; 0 for a record with none
	RunID   string `json:"run_id,omitempty"`
	Message string `json:"message"`
}

// ChainVerifier verifies the chain from its stored documents, fed one by one in any order (db
// check reads them as the store's check walks them): AddEntry for each document of
// ChainCollection, AddRecord for each audit record; then Report.
type ChainVerifier struct {
	entries []ChainEntry
	head    *chainHead
	records map[string]recordSum
	bad     []ChainProblem
}

type recordSum struct {
	sum  string
	time time.Time
}

// NewChainVerifier returns an empty verifier.
func NewChainVerifier() *ChainVerifier { return &ChainVerifier{records: map[string]recordSum{}} }

// AddEntry adds a stored document of ChainCollection. It returns why the document does not decode.
func (v *ChainVerifier) AddEntry(raw []byte) error {
	var probe struct {
		Event *string `json:"event"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return err
	}
	if probe.Event == nil { // the head
		var h chainHead
		if err := json.Unmarshal(raw, &h); err != nil {
			return err
		}
		v.head = &h
		return nil
	}
	var e ChainEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return err
	}
	stored := e.Hash
	e.seal()
	if e.Hash != stored {
		v.bad = append(v.bad, ChainProblem{Seq: e.Seq, RunID: e.RunID, Message: fmt.Sprintf("chain entry %d does not match its hash: it was edited after it was written", e.Seq)})
	}
	e.Hash = stored
	v.entries = append(v.entries, e)
	return nil
}

// CheckOptions are what a store's Check needs to verify the audit log into v, as db check does:
// each chain entry added to v, and each run record checked (CheckRecord) and added as the id it
// is stored under. v's Report is the chain's once the check has read every document.
func (v *ChainVerifier) CheckOptions() store.CheckOptions {
	return store.CheckOptions{
		Records: map[string]func([]byte) error{ChainCollection: v.AddEntry},
		RecordIDs: map[string]func(string, []byte) error{AuditCollection: func(id string, raw []byte) error {
			if err := CheckRecord(raw); err != nil {
				return err
			}
			return v.AddRecordAs(id, raw)
		}},
	}
}

// AddRecord adds a stored audit record. It returns why the record does not decode. Prefer
// AddRecordAs: without the id the record is stored under, two records swapped between runs
// verify.
func (v *ChainVerifier) AddRecord(raw []byte) error { return v.AddRecordAs("", raw) }

// AddRecordAs is AddRecord of the record stored under the id stored: a record is checked as the
// run whose id it carries, so one stored under another run's id (two swapped) or a second copy of
// one (under a new id) would otherwise match its entry.
func (v *ChainVerifier) AddRecordAs(stored string, raw []byte) error {
	var r struct {
		ID     string    `json:"run_id"`
		Legacy string    `json:"id"` // records written before run_id was the one name
		Time   time.Time `json:"time"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if r.ID == "" {
		r.ID = r.Legacy
	}
	if stored != "" && r.ID != stored {
		v.bad = append(v.bad, ChainProblem{RunID: stored, Message: fmt.Sprintf("the record stored as run %s carries the id of run %s: records were swapped or copied between runs", stored, r.ID)})
	}
	if _, ok := v.records[r.ID]; ok && r.ID != "" {
		v.bad = append(v.bad, ChainProblem{RunID: r.ID, Message: fmt.Sprintf("run %s has more than one record: one is a copy, stored under another id", r.ID)})
	}
	v.records[r.ID] = recordSum{sum: sha256Hex(raw), time: r.Time}
	return nil
}

// Report verifies what was added.
func (v *ChainVerifier) Report() *ChainReport {
	rep := &ChainReport{Entries: len(v.entries), Records: len(v.records), Problems: slices.Clone(v.bad)}
	bad := func(seq int64, run, format string, args ...any) {
		rep.Problems = append(rep.Problems, ChainProblem{Seq: seq, RunID: run, Message: fmt.Sprintf(format, args...)})
	}
	es := v.entries
	if len(es) == 0 && v.head == nil {
		// A store no starplan with the chain has written to: its records are older than it.
		rep.Unchained = len(v.records)
		if rep.Problems == nil {
			rep.Problems = []ChainProblem{}
		}
		return rep
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
	pruned := map[int64]string{} // checkpoints: the seq after the removed entries -> the hash before
	var checkpoint *ChainEntry   // the last
	var start time.Time
	for i := range es {
		e := &es[i]
		if e.Event == ChainCheckpoint {
			if e.PrunedThrough != 0 {
				pruned[e.PrunedThrough+1] = e.PrunedSHA256
			}
			checkpoint = e
			if e.Form >= chainForm && e.PrunedRunsSHA256 == "" {
				bad(e.Seq, "", "chain entry %d is a prune's checkpoint that does not name the runs prunes removed (pruned_runs_sha256): the entry is damaged", e.Seq)
			}
		}
		if e.Since != nil && (start.IsZero() || e.Since.Before(start)) {
			start = *e.Since
		}
	}
	last := map[string]*ChainEntry{}
	// readUnchained: runs a decision was made on with no entry before it (the seq of the first):
	// their records must be older than the chain.
	readUnchained := map[string]int64{}
	write := func(e *ChainEntry, run, event, by, record, read string) {
		if chainDecision(event) {
			prev := last[run]
			switch {
			case read == "" && e.Form >= chainForm && prev != nil:
				bad(e.Seq, run, "chain entry %d chains a decision on run %s without the hash of the record it read (read_sha256): the entry is damaged", e.Seq, run)
			case read == "": // an older starplan's, or a run decided as it ran (its first entry: no record read)
			case prev == nil:
				if _, ok := readUnchained[run]; !ok {
					readUnchained[run] = e.Seq
				}
			case prev.Record != read:
				bad(e.Seq, run, "run %s: the decision chained at entry %d read a record that is not the one chained at entry %d: the record was edited before the decision (or, on a store several servers share, another server's decision on the run came between its read and its write)", run, e.Seq, prev.Seq)
			}
		}
		last[run] = &ChainEntry{Seq: e.Seq, RunID: run, Event: event, By: by, Record: record}
	}
	for i := range es {
		e := &es[i]
		switch {
		case i == 0:
			if want, ok := pruned[e.Seq]; ok && e.Prev == want || e.Seq == 1 && e.Prev == "" {
				break
			}
			bad(e.Seq, e.RunID, "chain entry %d is the first, but it is not the start of the chain and no checkpoint names the entry before it: entries were removed", e.Seq)
		case e.Seq != es[i-1].Seq+1:
			bad(e.Seq, e.RunID, "chain entries %d to %d are missing", es[i-1].Seq+1, e.Seq-1)
		case e.Prev != es[i-1].Hash:
			bad(e.Seq, e.RunID, "chain entry %d does not link to entry %d before it", e.Seq, es[i-1].Seq)
		}
		switch {
		case e.Event == ChainBatch:
			if msg := batchProblem(e); msg != "" {
				bad(e.Seq, "", "chain entry %d %s", e.Seq, msg)
			}
			for _, r := range e.Records {
				write(e, r.RunID, r.Event, r.By, r.Record, r.Read)
			}
		case len(e.Records) > 0:
			bad(e.Seq, e.RunID, "chain entry %d lists records, but it is not a batch entry (%q)", e.Seq, e.Event)
		case e.RunID != "" && e.Event != ChainCheckpoint:
			write(e, e.RunID, e.Event, e.By, e.Record, e.Read)
		}
	}
	if n := len(es); n > 0 {
		rep.HeadSeq, rep.HeadHash = es[n-1].Seq, es[n-1].Hash
		if v.head == nil || v.head.Seq != es[n-1].Seq || v.head.Hash != es[n-1].Hash {
			bad(es[n-1].Seq, "", "the chain's head does not name its last entry %d: entries were added or removed", es[n-1].Seq)
		}
	} else {
		bad(0, "", "the audit log's hash chain has a head but no entries: they were removed")
	}
	ids := make([]string, 0, len(v.records))
	for id := range v.records {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := v.records[id]
		e := last[id]
		switch {
		case e == nil && !start.IsZero() && r.time.Before(start):
			rep.Unchained++
		case e == nil:
			bad(0, id, "run %s has a record but no chain entry: it was added outside starplan", id)
		case e.Record != r.sum:
			bad(e.Seq, id, "run %s: its record does not match the hash chained at entry %d: it was edited after it was written", id, e.Seq)
		}
		if seq, ok := readUnchained[id]; ok && (start.IsZero() || !r.time.Before(start)) {
			bad(seq, id, "run %s: the decision chained at entry %d read a record that no entry before it chains, and the run is not older than the chain: the record was added outside starplan", id, seq)
		}
	}
	// A missing record is excused only as one a prune removed: its run's last entry comes
	// before the last checkpoint, which names (count and hash) the runs whose records prunes
	// removed that the entries before it still name (chain.prune). A checkpoint of an older
	// starplan names none: every run before it is excused, as that starplan did.
	var missing []string // runs whose last entry is before the last checkpoint
	named := make([]string, 0, len(last))
	for id := range last {
		named = append(named, id)
	}
	sort.Strings(named)
	for _, id := range named {
		e := last[id]
		if _, ok := v.records[id]; ok {
			continue
		}
		if checkpoint == nil || e.Seq > checkpoint.Seq {
			bad(e.Seq, id, "run %s: its record is missing, and no prune removed it", id)
			continue
		}
		missing = append(missing, id)
	}
	if checkpoint != nil && checkpoint.PrunedRunsSHA256 != "" {
		sort.Strings(missing)
		if len(missing) != checkpoint.PrunedRuns || runSetSum(missing) != checkpoint.PrunedRunsSHA256 {
			bad(checkpoint.Seq, "", "the records of %d runs named by the entries before the prune's checkpoint (entry %d) are missing, where the prunes removed %d: a record was removed outside a prune (or one was put back); the runs missing: %s",
				len(missing), checkpoint.Seq, checkpoint.PrunedRuns, someIDs(missing, 20))
		}
	}
	sort.SliceStable(rep.Problems, func(i, j int) bool {
		a, b := rep.Problems[i], rep.Problems[j]
		if (a.Seq == 0) != (b.Seq == 0) {
			return b.Seq == 0
		}
		return a.Seq < b.Seq
	})
	if rep.Problems == nil {
		rep.Problems = []ChainProblem{}
	}
	return rep
}

// runSetSum is the hex SHA-256 of a set of run ids, sorted: each id and a newline.
func runSetSum(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// someIDs lists ids, the first max of them and how many more.
func someIDs(ids []string, max int) string {
	if len(ids) <= max {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:max], ", "), len(ids)-max)
}

// batchProblem says what is wrong with the form of e, a ChainBatch entry, or "": it names no
// run and no record of its own, and lists record writes, each with its run, event and hash.
func batchProblem(e *ChainEntry) string {
	switch {
	case e.RunID != "" || e.Record != "":
		return "is a batch entry but names a run or record of its own"
	case len(e.Records) == 0:
		return "is a batch entry that lists no record writes"
	}
	for i, r := range e.Records {
		if r.RunID == "" || r.Event == "" || r.Record == "" {
			return fmt.Sprintf("is a batch entry whose record write %d lacks its run, event or hash", i+1)
		}
	}
	return ""
}

// VerifyChain verifies the audit log's hash chain against the records (see ChainVerifier).
func (e *Engine) VerifyChain() (*ChainReport, error) {
	if err := e.audit.flush(); err != nil {
		return nil, err
	}
	// Under the chain's lock: no write lands between the two reads.
	e.chain.mu.Lock()
	defer e.chain.mu.Unlock()
	v := NewChainVerifier()
	entries, err := e.st.ListSys(ChainCollection)
	if err != nil {
		return nil, err
	}
	for _, d := range entries {
		if err := v.AddEntry(d.JSON); err != nil {
			v.bad = append(v.bad, ChainProblem{Message: fmt.Sprintf("chain document %s does not decode: %v", d.ID, err)})
		}
	}
	recs, err := e.st.ListSys(auditCollection)
	if err != nil {
		return nil, err
	}
	for _, d := range recs {
		if err := v.AddRecordAs(d.ID, d.JSON); err != nil {
			v.bad = append(v.bad, ChainProblem{RunID: d.ID, Message: fmt.Sprintf("audit record %s does not decode: %v", d.ID, err)})
		}
	}
	return v.Report(), nil
}

// prune makes one step of a prune (Engine.Prune) under the chain's lock: step removes runs
// from the log in one store transaction (Store.PruneSysOldest) and calls there the function it
// is given with the runs it removes, which returns the chain's writes for that same commit: the
// removal of the entries of the chain's longest prefix that concerns no run still in the log,
// and a checkpoint with the seq and hash of the last entry removed, so the rest still verifies.
// The records and the checkpoint that excuses them go together or not at all: a prune stopped
// or failed (killed, disk full) leaves the log as it was, never records missing that no
// checkpoint excuses. The caller holds applyMu, after a flush.
//
// The checkpoint names the runs whose records prunes removed that the entries before it still
// name (PrunedRuns, PrunedRunsSHA256: a count and a hash, not the ids, which a log with an old
// run kept pending would carry by the million in every checkpoint): the verifier excuses those
// missing records and no others. The set carries over: it is the runs removed now and those
// the last checkpoint named (the missing records of runs whose last entry is before it, when
// they match its count and hash; when they do not, a record went outside a prune, and none of
// them is excused again, nor are its entries removed, so the removal keeps showing). An
// older starplan's checkpoint names no runs; those before it are taken as it took them. Only
// entries of runs so accounted for are removed.
//
// The chain is read before the step's transaction, under the chain's lock (and the store's,
// store.SysSerializer), which every record write holds: neither the chain nor the records can
// change before the step commits. A chain not begun (a log older than the chain) gets no
// checkpoint: no entry names a removed run, and a checkpoint there would be a first entry that
// is not the start.
func (c *chain) prune(ctx context.Context, now time.Time, known *chainPrune, step func(then func(removed []string) (store.SysAfter, error)) (store.SysPruned, error)) (store.SysPruned, error) {
	unlock, shared, err := c.lockShared()
	if err != nil {
		return store.SysPruned{}, err
	}
	defer unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 1; ; attempt++ {
		if shared || attempt > 1 {
			if err := c.reloadLocked(); err != nil {
				return store.SysPruned{}, fmt.Errorf("reading the audit log's hash chain: %w", err)
			}
		}
		if attempt > 1 {
			*known = chainPrune{} // read it all again
		}
		if err := known.catchUp(c); err != nil {
			return store.SysPruned{}, err
		}
		then, done := known.writes(now)
		pruned, err := step(then)
		if errors.Is(err, store.ErrSysExists) && attempt < maxChainAttempts { // another process appended (see write)
			continue
		}
		if err != nil {
			*known = chainPrune{} // the step may have been written, its answer lost: read it all again
			return store.SysPruned{}, err
		}
		if head, ok := done(pruned.IDs); ok {
			c.head, c.start = head, nil
		}
		return pruned, nil
	}
}

// chainPrune is what a prune knows of the chain from one step to the next: the entries and
// which of the runs they name are held, read once (a read of the whole chain and of the log's
// index each step made a prune in steps quadratic), then kept by each step's own writes and by
// reading only the entries others appended between two steps (catchUp).
type chainPrune struct {
	read bool
	head chainHead       // the head es ends at
	es   []ChainEntry    // the entries, in order
	held map[string]bool // the runs the entries name -> whether the log holds a record of it
}

// catchUp brings p to the chain as its head c.head says: the entries appended since p.head
// (others' records and decisions, which hold their runs), or all of it read again when that is
// not all that happened (another prune's checkpoint, a chain begun since). The caller holds c.mu.
func (p *chainPrune) catchUp(c *chain) error {
	if p.read && c.head == p.head {
		return nil
	}
	if p.read && len(p.es) > 0 && c.start == nil && c.head.Seq > p.head.Seq {
		var add []ChainEntry
		prev, ok := p.head.Hash, true
		for seq := p.head.Seq + 1; ok && seq <= c.head.Seq; seq++ {
			var e ChainEntry
			found, err := c.st.GetSys(ChainCollection, chainID(seq), &e)
			if err != nil {
				return err
			}
			ok = found && e.Seq == seq && e.Event != ChainCheckpoint && e.Prev == prev
			prev = e.Hash
			add = append(add, e)
		}
		if ok && prev == c.head.Hash {
			for i := range add {
				for _, id := range entryRuns(&add[i]) {
					p.held[id] = true // its record was written with the entry, and only a prune removes it
				}
			}
			p.es, p.head = append(p.es, add...), c.head
			return nil
		}
	}
	*p = chainPrune{read: true, head: c.head}
	docs, err := c.st.ListSys(ChainCollection)
	if err != nil {
		return err
	}
	for _, d := range docs {
		if d.ID == chainHeadID {
			continue
		}
		var e ChainEntry
		if err := json.Unmarshal(d.JSON, &e); err != nil {
			*p = chainPrune{}
			return fmt.Errorf("chain entry %s does not decode: %w", d.ID, err)
		}
		p.es = append(p.es, e)
	}
	sort.Slice(p.es, func(i, j int) bool { return p.es[i].Seq < p.es[j].Seq })
	named := map[string]int64{}
	for i := range p.es {
		for _, id := range entryRuns(&p.es[i]) {
			named[id] = p.es[i].Seq
		}
	}
	if p.held, err = c.heldRuns(named); err != nil {
		*p = chainPrune{}
		return err
	}
	return nil
}

// writes returns the function that gives a prune step's chain writes for the runs it removes
// (nil when the chain has not begun: no entry names a removed run, and a checkpoint there would
// be a first entry that is not the start), and done, which the caller calls once the step is
// committed with the runs it removed: it brings p past the step and returns the new head (false:
// nothing written).
func (p *chainPrune) writes(now time.Time) (then func(removed []string) (store.SysAfter, error), done func(removed []string) (chainHead, bool)) {
	if len(p.es) == 0 {
		return nil, func([]string) (chainHead, bool) { return chainHead{}, false }
	}
	last := map[string]int64{} // the runs the entries name -> the seq of the last
	var checkpoint *ChainEntry
	for i := range p.es {
		for _, id := range entryRuns(&p.es[i]) {
			last[id] = p.es[i].Seq
		}
		if p.es[i].Event == ChainCheckpoint {
			checkpoint = &p.es[i]
		}
	}
	var (
		cp   *ChainEntry // the step's checkpoint
		gone int         // how many of es it removes
	)
	then = func(removed []string) (store.SysAfter, error) {
		// The runs removed are held until the step commits, and accounted for below: the runs
		// missing before it are those not held.
		accounted := make(map[string]bool, len(removed))
		for _, id := range removed {
			accounted[id] = true
		}
		var before []string // missing before this prune, last named before the last checkpoint
		for id, seq := range last {
			if !p.held[id] && !accounted[id] && checkpoint != nil && seq < checkpoint.Seq {
				before = append(before, id)
			}
		}
		sort.Strings(before)
		if checkpoint != nil && (checkpoint.PrunedRunsSHA256 == "" ||
			len(before) == checkpoint.PrunedRuns && runSetSum(before) == checkpoint.PrunedRunsSHA256) {
			for _, id := range before {
				accounted[id] = true
			}
		}
		var through *ChainEntry
		var since *time.Time
		var after store.SysAfter
		gone = 0
		for i := range p.es {
			e := &p.es[i]
			all := true
			for _, id := range entryRuns(e) {
				all = all && accounted[id]
			}
			if !all {
				break // a run still in the log (or one removed outside a prune): its entries stay, and all after them
			}
			if e.Since != nil && (since == nil || e.Since.Before(*since)) {
				since = e.Since
			}
			through, gone = e, i+1
			after.Remove = append(after.Remove, store.SysKey{Collection: ChainCollection, ID: chainID(e.Seq)})
		}
		var set []string // the runs removed by prunes that the entries kept name
		for id, seq := range last {
			if accounted[id] && (through == nil || seq > through.Seq) {
				set = append(set, id)
			}
		}
		sort.Strings(set)
		cp = &ChainEntry{Seq: p.head.Seq + 1, Time: now.UTC(), Event: ChainCheckpoint, Prev: p.head.Hash, Since: since,
			PrunedRuns: len(set), PrunedRunsSHA256: runSetSum(set), Form: chainForm}
		if through != nil {
			cp.PrunedThrough, cp.PrunedSHA256 = through.Seq, through.Hash
		}
		cp.seal()
		after.Put = []store.SysDoc{{Collection: ChainCollection, ID: chainID(cp.Seq), Value: cp, Create: true},
			{Collection: ChainCollection, ID: chainHeadID, Value: chainHead{Seq: cp.Seq, Hash: cp.Hash}}}
		return after, nil
	}
	done = func(removed []string) (chainHead, bool) {
		if cp == nil || len(removed) == 0 {
			return chainHead{}, false
		}
		for _, id := range removed {
			p.held[id] = false
		}
		for _, e := range p.es[:gone] { // their runs are named no more
			for _, id := range entryRuns(&e) {
				delete(p.held, id)
			}
		}
		p.es = append(slices.Clip(p.es[gone:]), *cp)
		p.head = chainHead{Seq: cp.Seq, Hash: cp.Hash}
		return p.head, true
	}
	return then, done
}

// entryRuns are the runs an entry names: its own, or a batch entry's records'.
func entryRuns(e *ChainEntry) []string {
	var ids []string
	if e.RunID != "" && e.Event != ChainCheckpoint {
		ids = append(ids, e.RunID)
	}
	for _, r := range e.Records {
		ids = append(ids, r.RunID)
	}
	return ids
}

// heldRuns reports which of the runs named have a record in the log: from the log's index, ids
// only, or a read of each where the store has no index.
func (c *chain) heldRuns(named map[string]int64) (map[string]bool, error) {
	held := make(map[string]bool, len(named))
	_, err := c.st.ScanSys(auditCollection, store.SysScan{Next: func(e store.SysEntry) (bool, bool) {
		if _, ok := named[e.ID]; ok {
			held[e.ID] = true
		}
		return false, true
	}})
	if !errors.Is(err, store.ErrNoSysIndex) {
		return held, err
	}
	for id := range named {
		var raw json.RawMessage
		ok, err := c.st.GetSys(auditCollection, id, &raw)
		if err != nil {
			return nil, err
		}
		held[id] = ok
	}
	return held, nil
}
