// Package store owns starplan's data: clover-backed tables declared as data per domain, their
// schemas and validation, the staged view a run reads and writes through (Stage, a table.View),
// the change set it produces, the atomic apply with optimistic version checks, seeds, and
// import/export. It must not import starlark or sandbox: plans reach it only through the
// table.View interface that the builtins wrap.
//
// # Layout on disk
//
// A store is a directory holding one bbolt file (data.db) that is also a plain clover v2
// database: one collection per table, one document per row. A document holds the row's fields,
// "_id" and "_v", the commit sequence number that last wrote the row (its version). Ids are
// UUIDs (clover requires them) that grow with every insert (see rowDocID), so bbolt appends new
// rows and Open finds them mostly in key order already. The collection "_starplan" holds the
// store's record (domain, last sequence number, each table's version, and each collection's
// document count and digest: see digest.go); system collections such
// as the audit log's runs are "_<name>" and hold JSON documents. Table names start with a letter,
// so a plan can never see a system collection.
//
// A new data.db is built under a temporary name and linked into place, so it never exists half
// made. An existing one is never created over or written to when it is damaged: Open reads both
// bbolt meta pages itself first and runs every bbolt access under guard (see damage.go), and
// returns a *DamagedError; Check reports what is wrong without changing anything.
//
// # Reads
//
// Open loads every table into memory: rows in natural key order (table.CompareKeys) and, per
// field a table declares in its indexes (domain.json), a hash index built on the first lookup,
// keyed by the text's case fold (table.FoldKey) so that one index answers an equality and an
// $ieq, and get({"name": X}) costs about what get_by_key does. A filter that neither the key nor
// a declared index answers walks the table, and the stage reports the walk (Stage.Scans), so a
// domain author sees which index to declare. Numeric fields also get float64 columns on first
// range filter, which rule rows out of a scan without touching their maps (see columns.go: the
// compiled filter still decides every row the columns cannot settle exactly). clover's secondary
// indexes are never used (they return duplicates once a collection has two). To open 100,000
// rows within the budget, Open reads the msgpack values clover wrote straight from bbolt with a
// small decoder that interns field names and converts numbers to the schema's kinds as it goes;
// clover's own path (query plan, generic msgpack into
// interface maps, a field-name string per field) allocates about twice as much per row. Writes
// still go through clover's API, so the data stays a clover database.
//
// A Find returning more than bigRead committed rows records one read of the whole table (at the
// table's version) instead of one per row; an apply of such a run conflicts if anything in that
// table changed since. Reads do not detect phantoms otherwise: a row inserted by another run
// that a Find would now return does not conflict unless the table was read whole.
//
// # Writes and atomicity
//
// A Stage writes into an overlay and records the version each changed row replaced and each
// row it read. Store.ApplyPending checks those versions under the read lock, runs the caller's
// Verify with no lock held, checks them again under the store's write lock (and runs Verify again
// there if a table it read moved), then runs
// every clover call of the apply inside one bbolt read-write transaction: the store hands clover
// a store.Store adapter whose Begin, during a group, returns the shared transaction with no-op
// Commit and Rollback, and the group commits once (bbolt fsyncs data, then switches the meta
// page). A process killed at any instant therefore leaves the old state or the new one. Only one
// process can open a store (bbolt's file lock); a second gets ErrInUse within a second.
package store
