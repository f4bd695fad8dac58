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
// "_id" (a version-5 UUID of the table and key, because clover requires UUID ids) and "_v", the
// commit sequence number that last wrote the row. The collection "_starplan" holds the store's
// record (domain, last sequence number, each table's version); system collections such as the
// audit log's runs are "_<name>" and hold JSON documents. Table names start with a letter, so a
// plan can never see a system collection.
//
// # Reads
//
// Open loads every table into memory (rows in natural key order, plus hash indexes built per
// field on first equality lookup); clover's secondary indexes are never used (they return
// duplicates once a collection has two). To open 100,000 rows fast, Open decodes the msgpack
// values clover wrote straight from bbolt instead of going through clover's query plan, which
// decodes, normalises and copies every document several times. Writes still go through clover's
// API, so the format stays clover's.
//
// # Writes and atomicity
//
// A Stage writes into an overlay and records the version each changed row replaced and each
// row it read. Store.ApplyPending checks those versions under the store's write lock, then runs
// every clover call of the apply inside one bbolt read-write transaction: the store hands clover
// a store.Store adapter whose Begin, during a group, returns the shared transaction with no-op
// Commit and Rollback, and the group commits once (bbolt fsyncs data, then switches the meta
// page). A process killed at any instant therefore leaves the old state or the new one. Only one
// process can open a store (bbolt's file lock); a second gets ErrInUse within a second.
package store
