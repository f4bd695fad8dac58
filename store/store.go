package store

import (
	"context"

	"github.com/starplan/starplan/table"
)

// Store is an open store of one domain, as the engine uses it: the committed tables, read and
// written only through staged views and ApplyPending, and the system collections (the audit
// log's runs, decisions, …) that plans never see. store/bolt implements it over one bbolt file;
// storetest.Run is what every implementation must pass. A Store is safe for concurrent use.
type Store interface {
	// Domain is the domain the store holds (its tables, seed and definition files).
	Domain() *Domain
	// Names lists the domain's tables, sorted. System collections are never listed.
	Names() []string
	// Schema returns the named table's schema; false when the domain has no such table.
	Schema(name string) (*table.Schema, bool)

	// StageFor starts a run's staged view over the committed tables, as of now: reads see the
	// run's own writes, writes stay in the stage until ApplyPending. Its scans stop when ctx is
	// done (with ctx's cause) and it holds the run to limits (zero fields: unlimited).
	StageFor(ctx context.Context, limits RunLimits) Stage

	// ApplyPending writes p (a Stage's Pending, possibly read back from the audit log) and the
	// documents extra in one atomic commit, or writes nothing. It fails with a *ConflictError
	// (errors.Is ErrConflict) when a row p wrote or read, or a predicate it read, has moved
	// since; with a *WriteError when a row no longer fits its schema; or with verify's error.
	// verify sees the change set and the committed state under the commit's lock and may be
	// called more than once (nil: none). When ctx carries an *ApplySteps (WithApplySteps),
	// the apply appends its steps to it, timed: the conflict checks, verify and the commit.
	ApplyPending(ctx context.Context, p *Pending, verify Verify, extra ...SysDoc) error

	// PutSys stores v (as JSON) under id in the system collection coll, replacing any document
	// with that id.
	PutSys(ctx context.Context, coll, id string, v any) error
	// PutSysDocs stores several system documents in one atomic commit.
	PutSysDocs(ctx context.Context, docs ...SysDoc) error
	// GetSys decodes the document id of coll into v, reporting whether it exists. A document
	// that should be there and is not, or does not decode, is a *DamagedError.
	GetSys(coll, id string, v any) (bool, error)
	// ListSys returns every document of coll, sorted by id.
	ListSys(coll string) ([]SysRecord, error)
	// PruneSys removes, in one atomic commit, every document of coll for which drop returns
	// true, and the documents of the same id in the collections with. drop must not call the
	// store; its error removes nothing.
	PruneSys(ctx context.Context, coll string, drop func(SysRecord) (bool, error), with ...string) (SysPruned, error)
	// PruneSysOldest makes one prune p of the oldest documents of the indexed collection
	// p.Coll, in one atomic commit with the writes p.Then adds: documents are offered to p.Drop
	// in index order, up to p.Max removals. A collection without a current index is pruned
	// whole, in id order, in one commit (p.After and p.Max do not apply).
	PruneSysOldest(ctx context.Context, p SysPrune) (SysPruned, error)
	// RebuildSysIndex builds coll's ordered index afresh from index's entry for each document,
	// in one commit, and returns how many it indexed.
	RebuildSysIndex(ctx context.Context, coll string, index func(SysRecord) (SysIndex, error)) (int, error)
	// SysIndexReady reports whether coll has a current index.
	SysIndexReady(coll string) (bool, error)
	// SysStats returns the count and bytes of each group of the indexed coll, or ErrNoSysIndex.
	SysStats(coll string) (map[string]SysGroup, error)
	// ScanSys walks coll's index in order (opts), reading the documents opts.Next takes, or
	// returns ErrNoSysIndex.
	ScanSys(coll string, opts SysScan) ([]SysEntry, error)

	// Close releases the store. Stages of a closed store must not be used.
	Close() error
}

// Stage is one run's view of a Store: a table.View whose writes stay in an overlay over the
// committed tables. It records the version of every row it read or replaced and every filter it
// walked, so that ApplyPending of its Pending can tell whether anything it depended on moved
// (a row changed, or a row inserted that one of its filters would now return). A Stage is for
// one goroutine at a time.
type Stage interface {
	table.View
	// Committed's LastRow reads the committed row of a table with the highest key, for the
	// contract's checks; it records no read, but a table committed to since the stage started
	// makes the stage Moved.
	Committed
	// ChangeSet is what the run changed, table by table (tables it did not change are absent).
	ChangeSet() table.ChangeSet
	// Pending is the run's writes and reads, for ApplyPending now or later.
	Pending() *Pending
	// Scans lists the run's reads that walked a table although they filtered on some field,
	// in the order they first happened (at most MaxScans).
	Scans() []Scan
	// Exceeded returns the run limit the run crossed, or nil.
	Exceeded() *LimitError
	// RowsRead is how many rows the run's reads took (Meter.RowsRead), for its telemetry.
	RowsRead() int
	// Moved reports whether a read of the run saw a table that another commit changed after
	// the stage started: the run saw the data as of more than one moment (safe, since
	// ApplyPending checks every read again, but worth running again).
	Moved() bool
}
