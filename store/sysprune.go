package store

// SysPrune is one prune of the oldest documents of an indexed system collection
// (Store.PruneSysOldest): one atomic commit that removes the documents Drop takes, with their
// companions, and writes what Then adds, or writes nothing.
type SysPrune struct {
	// Coll is the collection pruned.
	Coll string
	// Before: only documents whose index Order sorts before it are offered to Drop (oldest
	// first). "" offers none.
	Before string
	// After starts after this entry (SysPruned.Cursor of an earlier prune); "" from the oldest.
	After string
	// Max stops the prune once it has removed this many documents (0: no bound), so that one
	// commit holds a bounded number of removals; SysPruned.More then says so.
	Max int
	// Drop decides whether a document goes. It sees each document's id and JSON inside the
	// transaction, so nothing changes between its verdict and the removal; it must not call the
	// store. Its error removes nothing. It may be called again for a document when the backend
	// runs the transaction again.
	Drop func(SysRecord) (bool, error)
	// With are companion collections: their documents of a removed document's id go with it.
	With []string
	// Then, when set, is called inside the transaction once Drop has chosen, when at least one
	// document goes, with the ids removed (sorted); the documents it returns are written and
	// removed in the same commit (the audit log's hash chain: its checkpoint and the entries the
	// prune excuses). Its error, or a write of its that fails (SysDoc.Create: ErrSysExists),
	// removes nothing. Like Drop it must not call the store, and may be called more than once.
	Then func(removed []string) (SysAfter, error)
}

// SysAfter is what a prune writes besides its removals (SysPrune.Then).
type SysAfter struct {
	Remove []SysKey // removed first (absent ones are no error)
	Put    []SysDoc // then written, in order
}

// SysKey names a system document.
type SysKey struct {
	Collection string
	ID         string
}

// SysPruned says what PruneSys or PruneSysOldest removed.
type SysPruned struct {
	// IDs are the ids of the documents removed from the pruned collection, sorted.
	IDs []string
	// Bytes is the size of the JSON of every document removed, those of the companion
	// collections included (not SysAfter.Remove's).
	Bytes int64
	// More is set when PruneSysOldest stopped at SysPrune.Max: documents before SysPrune.Before
	// after Cursor are yet to be offered.
	More bool
	// Cursor is where PruneSysOldest stopped: the last entry offered to Drop (SysPrune.After
	// of the next prune).
	Cursor string
}
