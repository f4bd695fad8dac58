package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/table"
)

// Document is a run as every transport shows it: `starplan runs show --json`, GET
// /v1/runs/{id} and the MCP show_run tool print the same document, built here (Show). It is the
// result document (Result) and, flat beside it, the digest of its change set (what an apply must
// be given), its state, the reviewer's decision, its recorded lifecycle and what the audit log
// keeps about its making. The dry run's own answer (RunDocument) has all but the history. New
// fields are added, never renamed: clients read these keys.
//
// The transports print the same bytes (WriteJSON's: no HTML escapes) in their own envelope: HTTP
// and MCP on one line, the CLI indented for people and with the characters a terminal must not
// get raw written as JSON escapes (the same JSON value).
type Document struct {
	Result
	Digest    string     `json:"digest" jsonschema:"sha256 of the canonical encoding of the change set; apply takes it"`
	State     string     `json:"state" jsonschema:"pending, expired, applied, rejected, conflict, done or failed"`
	Request   string     `json:"request"`
	Subject   string     `json:"subject,omitempty" jsonschema:"who the run acts for, when it names someone"`
	Origin    string     `json:"origin"`
	Time      *time.Time `json:"time,omitempty"`
	AppliedAt *time.Time `json:"applied_at,omitempty"`
	Decision  *Decision  `json:"decision,omitempty"`
	// Events is the run's lifecycle as the audit log keeps it (the events a server streamed for
	// it, without their stream ids); empty in the answer of the dry run itself.
	Events []StreamEvent `json:"events,omitempty" jsonschema:"the run's lifecycle as recorded: started, finished, rejected, applied, failed"`
	// Made is what the audit log keeps about how the run was made and settled (nil only in a
	// document made by DocumentOf from a bare result).
	*Made
}

// Made is what a run's audit record keeps beyond its result: the reply it ran, the model call
// behind it, its own limits and how its apply went. Its fields are flat in Document.
type Made struct {
	// Reply is the model's reply (or the bare program) up to MaxReplyExcerpt bytes; ReplyBytes
	// and ReplySHA256 are the whole reply's length and hex SHA-256.
	Reply       string `json:"reply" jsonschema:"the model's reply or the program, as sent (its start, when long)"`
	ReplyBytes  int    `json:"reply_bytes" jsonschema:"the length of the whole reply, in bytes"`
	ReplySHA256 string `json:"reply_sha256,omitempty" jsonschema:"the hex SHA-256 of the whole reply"`
	// ChangedRows counts the rows the run changed, those a cut of Changes left out included.
	ChangedRows int        `json:"changed_rows" jsonschema:"how many rows the run changes, those cut from changes included"`
	ApplyError  string     `json:"apply_error,omitempty" jsonschema:"why the run can no longer be applied"`
	ConflictAt  *time.Time `json:"conflict_at,omitempty" jsonschema:"when an apply found that the data the run depended on had moved"`
	ApplyOrigin string     `json:"apply_origin,omitempty" jsonschema:"who applied the run, or tried to"`
	Model       *ModelCall `json:"model,omitempty" jsonschema:"the model call that wrote the reply"`
	// Limits are the run's own limits, where its request set them.
	Limits *sandbox.Limits `json:"limits,omitempty" jsonschema:"the run's own limits, where its request set them"`
}

// DocumentOf is the document of a bare result: the result, the digest of its changes and its
// state.
func DocumentOf(res *Result) (*Document, error) {
	dg, err := Digest(res.Changes)
	if err != nil {
		return nil, err
	}
	return &Document{Result: *res, Digest: dg, State: StateOf(res, nil)}, nil
}

// Show returns a run as the audit log holds it, with its decision and history: the one document
// of a run. An unknown run is a *RunError, an unreadable record an *UnreadableError.
func (e *Engine) Show(id string) (*Document, error) {
	rec, err := e.readRecord(id)
	if err != nil {
		return nil, err
	}
	d, _, err := e.Decision(id)
	if err != nil {
		return nil, err
	}
	doc, err := RecordDocument(rec, d)
	if err == nil && doc.State == StatePending && e.Expired(rec) {
		doc.State = StateExpired // expiry moves with the engine's clock and the domain's pending_ttl
	}
	return doc, err
}

// RecordDocument is the document of a run from its audit record and, if a reviewer decided on
// it, decision (Show reads both).
func RecordDocument(rec *RunRecord, d *Decision) (*Document, error) {
	res := rec.Result()
	doc, err := DocumentOf(res)
	if err != nil {
		return nil, err
	}
	t := rec.Time
	doc.State = StateOf(res, d)
	doc.Request, doc.Origin, doc.Time, doc.AppliedAt, doc.Decision = rec.Request, rec.Origin, &t, rec.AppliedAt, d
	doc.Subject = rec.Subject
	doc.Events = streamHistory(rec, d, doc.Digest)
	doc.Made = madeOf(rec)
	return doc, nil
}

// WriteJSON writes the document as the transports print it: JSON without HTML escapes, indented
// by indent ("" for one line), and a line end.
func (d *Document) WriteJSON(w io.Writer, indent string) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	return enc.Encode(d)
}

func madeOf(rec *RunRecord) *Made {
	return &Made{Reply: rec.Reply, ReplyBytes: rec.ReplyBytes, ReplySHA256: rec.ReplySHA256, ChangedRows: rec.ChangedRows,
		ApplyError: rec.ApplyError, ConflictAt: rec.ConflictAt, ApplyOrigin: rec.ApplyOrigin, Model: rec.Model, Limits: rec.Limits}
}

// DigestPrefix names the digest's algorithm and encoding version, so that a later encoding can
// never be mistaken for this one.
const DigestPrefix = "sha256:"

// digestDomain separates change-set digests from any other SHA-256 of the same bytes.
const digestDomain = "starplan change set v1\n"

// Digest returns the digest of a change set: "sha256:" and the hex SHA-256 of a canonical
// encoding of every changed row (inserted, updated with before, after and fields, deleted) per
// table. The encoding is JSON with object keys sorted and no insignificant space, so the digest
// of a run's changes is the same whether they come from its dry run or, later, from its audit
// record. A nil change set digests as the empty one. A reviewer approves a run by its digest.
func Digest(cs table.ChangeSet) (string, error) {
	if cs == nil {
		cs = table.ChangeSet{}
	}
	var b bytes.Buffer
	b.WriteString(digestDomain)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cs); err != nil {
		return "", fmt.Errorf("encoding the change set for its digest: %w", err)
	}
	sum := sha256.Sum256(b.Bytes())
	return DigestPrefix + hex.EncodeToString(sum[:]), nil
}
