// Package bolt is starplan's embedded store backend: a store.Store of one domain kept in one
// bbolt file that is also a plain clover v2 database. It owns Open and Check, the committed
// tables, the staged overlay (Stage) and its predicate reads over them, the atomic apply, seeds,
// import/export and their file formats, and damage detection. It passes store/storetest with its
// tables resident and in the file. It must not import starlark or sandbox.
//
// # Layout on disk
//
// A store is a directory holding one bbolt file (data.db) that is also a plain clover v2
// database: one collection per table, one document per row. A document holds the row's fields,
// "_id" and "_v", the commit sequence number that last wrote the row (its version). Ids are
// UUIDs (clover requires them) that grow with every insert (see rowDocID), so bbolt appends new
// rows. The collection "_starplan" holds the store's record (domain, last sequence number, each
// table's version, the domain's definition and its sums, and each collection's document count
// and digest: see digest.go); system collections such as the audit log's runs are "_<name>" and
// hold JSON documents. Table names start with a letter, so a plan never sees a system
// collection. Beside clover's buckets the file keeps, per table, a key bucket and a bucket per
// declared index (disk.go), and per indexed system collection its ordered index (sysindex.go).
//
// A new data.db is built under a temporary name and linked into place, so it never exists half
// made. An existing one is never created over or written to when it is damaged: Open reads both
// bbolt meta pages itself first and runs every bbolt access under guard (damage.go), and returns
// a *store.DamagedError; Check reports what is wrong without changing anything.
//
// # Reads
//
// Open reads the store's record, not its rows. A table of up to openResident rows is read into
// memory at Open; a larger one stays in the file, where a Get or a lookup on a declared index
// reads one entry of its key or index bucket and a walk streams the rows in key order; once walks
// have read promoteRows rows (or one walk will read a large table whole) it is read into memory
// once, in a goroutine of its own (committed.go). In memory, rows are in natural key order
// (table.CompareKeys) with a hash index per declared field built on first lookup, keyed by the
// text's case fold (so one index answers an equality and an $ieq), and float64 columns for range
// filters (columns.go). A filter that neither the key nor a declared index answers walks the
// table, and the stage reports the walk (Stage.Scans), so a domain author sees which index to
// declare. clover's query engine and secondary indexes are never used: the msgpack documents are
// decoded straight from bbolt by a small decoder that interns field names (codec.go).
//
// Every read a Stage makes is recorded: the version of each row it returned, and for each filter
// it walked a predicate read (reads.go). An apply conflicts when a row read or written moved, or
// when a recorded filter, evaluated again over the rows of its key range, now matches other rows
// (a phantom insert included). A read of more than store.BigRead rows, or past store.MaxPredReads per table,
// is recorded as a read of the whole table.
//
// # Writes and atomicity
//
// Store.ApplyPending checks the pending change's versions and predicate reads under the read
// lock, runs the caller's Verify with no lock held, checks again under the store's write lock
// (and runs Verify again there if a table it read moved), then makes every write of the apply
// (rows, the key and index buckets, the system documents it carries, the record with its
// digests) inside one bbolt read-write transaction: the store hands clover an adapter of clover's
// own store.Store interface whose Begin, during a group, returns the shared transaction with no-op
// Commit and Rollback, and the group commits once (bbolt fsyncs data, then switches the meta
// page). A process killed at any instant therefore leaves the old state or the new one. Only one
// process can open a store (bbolt's file lock); a second gets store.ErrInUse within the lock
// timeout.
package bolt
