// Package pg keeps a starplan store in PostgreSQL, over pgx/v5: the second backend of the store
// seam (store.Store, store.Stage), passing store/storetest like store/bolt. Several starplan
// processes may work on one database at once.
//
// Layout, in one SQL schema (by default named after the domain):
//
//   - one table per domain table: a typed column per field (text for strings and timestamps,
//     whose text is kept as written; bigint; double precision; boolean; jsonb for lists and
//     objects), the key as primary key, NOT NULL for required fields, CHECK constraints for the
//     bounds the schema states (number bounds, lengths, enums; patterns are left to starplan's
//     validation, RE2 not being PostgreSQL's dialect), a hash index per declared index (reads
//     look them up by equality only, and a hash holds a value of any length); and two
//     columns of starplan's: _version (the row's version, from the sequence _starplan_ver) and
//     _ord (the key's natural-order encoding, bytea, unique: ORDER BY _ord is table.CompareKeys
//     order, which no collation gives);
//   - _starplan: the store's record (format, domain, the domain's definition files and their
//     SHA-256), so Open by DSN alone rebuilds the Domain;
//   - _starplan_tables: each domain table's version;
//   - _starplan_sys and _starplan_sysidx: the system documents (runs, decisions, tokens, the
//     seed, …) and which collections keep an ordered index (see sys.go).
//
// Versions. Every change to a row gives it a new version (an insert by the column's default, an
// update by a row trigger unless the writer sets one), and every statement that changes a
// domain table gives the table a new version (a statement trigger, before the statement's
// rows), so other programs' writes are seen as concurrent changes too. A row's version is what a run records of a row it read or
// replaced; a table's version is what it records with a predicate read, and what makes a stage
// Moved (a table at a version above the highest at the stage's start).
//
// Runs. A Stage holds no connection and no transaction between calls: each read is one SQL
// statement, which reads the table's version and the rows together (one snapshot). The
// where-filter's top-level equalities and comparisons on scalar fields are pushed down as SQL
// (an equality on the key or a declared index uses its index: a get is one indexed SELECT),
// with the filter's limit when equalities are the whole filter; a read with a limit and a
// filter SQL cannot answer walks from its end in pages (a last(where) reads the last rows);
// rows are then checked with the compiled filter in Go, the one definition of what matches. Reads are recorded as store/bolt records them (rows,
// predicates with key range, count and digest), so a Pending means the same in both.
//
// Apply: one READ COMMITTED transaction that (1) locks FOR UPDATE, in name order, the version
// rows of every table the run wrote or read; (2) locks the rows it replaces FOR UPDATE and the
// rows it read FOR SHARE, and compares their versions; (3) checks each predicate read, at once
// when its table's version has not moved, else by running its filter again over its key range;
// (4) runs verify inside the transaction; (5) writes the rows and the extra system documents;
// then commits, or rolls back and writes nothing. Two applies that touch a common table queue
// on (1) — every apply, on any server, and every other program's statement that changes the
// table (its trigger updates that row) takes that lock — and the second reads what the first
// committed, since each READ COMMITTED statement sees the commits before it. So two conflicting
// applies cannot both succeed: whichever locks second sees the first's rows and fails with a
// *store.ConflictError. A deadlock with another program's writes, which PostgreSQL breaks by
// ending one transaction, makes the apply run again (maxApplyAttempts). The cost: applies that
// touch one table are serialized (each holds the lock for a few round trips, and for verify).
//
// Also: Seed/SeedRows (the kept seed), Import (JSON or CSV, read by store/bolt's reader
// (store.ReadCSV); one transaction under the table's lock: the file is read as a stream and
// each row validated and sent to COPY as it is read, straight into an empty table (its indexes
// dropped and built again after the copy: its readers wait for the import's commit) or into a temporary table merged by set-based upsert
// or replace; a bad record rolls it all back), Dump/Export (JSON or CSV, the bytes store/bolt writes for the
// same rows), UpgradeDomain (upgrade.go: the rows checked, then the tables, columns, constraints
// and indexes changed and the definition recorded, in one transaction), Check (rows against their schemas and _ord, system documents, the
// ordered index, the domain's rules), Notify/Listen (PostgreSQL's NOTIFY on the store's channel,
// for a server to relay its events to the others; not wired into the server yet).
//
// Mapped tables (mapping.go). A domain table whose schema carries "sql" (table.SQLMapping) is
// an existing SQL table (in any schema) that another program made and writes:
// Create checks it against the catalog (every mismatch listed in one *MappingError, nothing
// created: the type rules, nullability against required fields, the key a primary key or a NOT
// NULL unique column, no generated mapped column, no unmapped NOT NULL column without a default,
// no other store holding it) and adopts it in its transaction: _version and _ord added in one
// ALTER TABLE (a rewrite that fires none of the table's triggers; no row changed), the three
// triggers (_starplan_touch passed the domain table's name, since the SQL name is another), a
// hash index for each declared index no index leads with, and its version row. Its rows are
// kept: Create seeds it only when it is empty, and Seed never replaces its rows. Reads cast its
// columns to the types starplan keeps (an integer to bigint, a varchar to text, a numeric to
// float8). Check checks it against the catalog again (another program may have altered it or
// dropped a trigger); UpgradeDomain never alters it. A new store of the domain in another schema
// is refused (the table has one store); once the old store's schema is dropped, a new one adopts
// the table again (the _version and _ord left behind are made again).
//
// The statement trigger _starplan_touch fires BEFORE a statement changes a row, taking the
// table's version row first, as an apply does (version row, then rows), so another program's
// single statement never deadlocks with an apply (stores made before this kept an AFTER
// trigger). A key is in two B-tree indexes
// (the primary key, _ord), whose entries PostgreSQL limits to about 2,700 bytes after
// compression: a longer key (store.MaxKeyBytes allows 4,096) fails its apply, which writes
// nothing. Another program's INSERT without _ord, or UPDATE of a key, gets its _ord from a
// trigger that encodes the key in SQL as Go does (ordsql.go; Check compares the two).
package pg
