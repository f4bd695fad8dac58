// Package store is what every starplan store backend shares and owes. It owns the Store and Stage
// interfaces the engine holds (a store of one domain; one run's staged view of it), the domain
// (domain.json, seed.json and the record of its whole definition, Domain), the compiled schemas
// that validate every row (Schema), the pending change a dry run leaves and ApplyPending writes
// (Pending, with its row and predicate reads), the Verify an apply runs under the commit's lock,
// system documents and their ordered index (SysDoc, SysIndex, SysScan), the scans a run reports,
// run limits, the check report, the errors every backend returns (ConflictError, DamagedError,
// InUseError, …), and what the `starplan db` commands need beyond Store, each a small interface a
// backend implements (Seeder, Exporter, Importer, Local; tools.go).
//
// It must not import clover or bbolt (a second backend imports it and nothing of the first),
// nor starlark or sandbox: plans reach a store only through the table.View a Stage is.
//
// The backends live below it: store/bolt keeps a store in one bbolt file (the default, and the
// only one today), store/opener picks the backend a name (a path, a postgres:// URL) selects, and
// store/storetest is the conformance suite each passes (Run(t, open)). What a
// backend must do, in short:
//
//   - A Stage's reads see the committed tables as of its start plus the run's own writes; its
//     writes stay in the stage. It records the version of every row it read or replaced and every
//     filter it walked (a predicate read: where, key range, what matched), so that
//   - ApplyPending can refuse with a *ConflictError anything that moved since, a phantom insert
//     included (a row a recorded filter would now return), run Verify on the changes as they are
//     about to be committed, and write the rows and the extra system documents (the audit record)
//     in one atomic commit, or nothing.
//   - A store that cannot be trusted is a *DamagedError, never silently repaired or written to.
package store
