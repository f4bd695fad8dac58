package store

import (
	"fmt"
	"time"

	"github.com/starplan/starplan/table"
)

// The kinds of check a Problem comes from, in the order Check runs them.
const (
	CheckFile   = "file"   // the file as a whole: size, meta pages
	CheckPages  = "pages"  // bbolt's page consistency (tx.Check)
	CheckRecord = "record" // the store's own record: format, domain, versions
	CheckRows   = "rows"   // every row decodes and fits its table's schema, keys are unique
	CheckCounts = "counts" // every collection holds the documents the record counted and digested
	CheckKeys   = "keys"   // every table's key and index buckets name exactly its rows (disk.go)
	CheckSystem = "system" // every system document (audit records, decisions) reads back
	CheckPolicy = "policy" // the domain's invariants over the committed rows
)

// MaxProblemsPerCheck bounds a report: a file damaged throughout would otherwise list every page
// and row.
const MaxProblemsPerCheck = 50

// Problem is one thing Check found wrong.
type Problem struct {
	Check   string `json:"check"` // CheckFile, CheckPages, ...
	Table   string `json:"table,omitempty"`
	Message string `json:"message"`
}

// TableCount is how many rows of a table Check read.
type TableCount struct {
	Table string `json:"table"`
	Rows  int    `json:"rows"`
}

// CheckReport is what Check found. Problems is empty when the store is sound; Omitted counts the
// problems left out beyond MaxProblemsPerCheck per check.
type CheckReport struct {
	File     string       `json:"file"`
	Size     int64        `json:"size_bytes"`
	Seq      int64        `json:"seq"` // the last commit's sequence number
	Tables   []TableCount `json:"tables"`
	Problems []Problem    `json:"problems"`
	Omitted  int          `json:"omitted,omitempty"`
	// Unverified says why row counts and digests could not be checked (a store written before
	// they were kept, until its next write); empty when they were.
	Unverified string `json:"unverified,omitempty"`
}

// OK reports whether Check found nothing wrong.
func (r *CheckReport) OK() bool { return len(r.Problems) == 0 && r.Omitted == 0 }

// Add records a problem of the given check (CheckFile, ...) and table (empty: none), or counts
// it in Omitted once that check has MaxProblemsPerCheck. Backends call it as they check.
func (r *CheckReport) Add(check, tbl, format string, args ...any) {
	n := 0
	for _, p := range r.Problems {
		if p.Check == check {
			n++
		}
	}
	if n >= MaxProblemsPerCheck {
		r.Omitted++
		return
	}
	r.Problems = append(r.Problems, Problem{Check: check, Table: tbl, Message: fmt.Sprintf(format, args...)})
}

// CheckOptions configure Check. The zero value checks the inventory domain's store.
type CheckOptions struct {
	// Domain declares the tables; nil means the domain the store recorded.
	Domain *Domain
	// LockTimeout overrides DefaultLockTimeout when positive.
	LockTimeout time.Duration
	// Invariants checks the committed rows against the domain's policy. It gets the domain and every committed
	// row of every table as inserted into an empty store, tables' rows in key order, and returns
	// one message per violation. nil skips the policy check; an error is a failure of starplan.
	Invariants func(dom *Domain, rows table.ChangeSet) ([]string, error)
	// Records decode the documents of system collections, by name ("runs" for the audit log):
	// each gets every document's JSON and returns why it does not decode. A collection without
	// one is checked as JSON only.
	Records map[string]func(raw []byte) error
	// RecordIDs are Records that get the id each document is stored under too (the audit log's
	// records must carry theirs); a collection named here is checked by it, not by Records.
	RecordIDs map[string]func(id string, raw []byte) error
}
