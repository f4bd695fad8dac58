package store

import (
	"context"
	"io"
)

// This file holds what the `starplan db` commands need of a store beyond Store: reseeding,
// dumping, exporting and importing rows, and whether the store lives in a directory of this
// machine. Each is a small interface a backend implements (store/bolt implements them all); the
// CLI asks for one by a type assertion on the Store it opened and says so when the backend lacks
// it. Checking a store is not among them: a damaged store cannot be opened, so a backend checks
// what its opener names (store/opener's Backend.Check).

// Format is a file format for Export and Import.
type Format string

// The formats Export and Import understand.
const (
	JSON Format = "json" // an array of row objects, fields in schema order
	CSV  Format = "csv"  // a header row of field names, then one line per row
)

// ImportMode says what Import does with the table's existing rows.
type ImportMode int

const (
	// Upsert inserts rows with new keys and replaces rows whose key exists; other rows stay.
	Upsert ImportMode = iota
	// Replace makes the table hold exactly the imported rows.
	Replace
)

// ImportResult counts what an Import changed, and in how many commits (0 when nothing changed).
type ImportResult struct {
	Inserted, Updated, Deleted, Unchanged int
	Commits                               int
}

// Seeder is a store that can be filled again with the seed it was made from (`starplan db seed`).
type Seeder interface {
	// SeedRows reports how many rows a reseed writes, per table, or ErrNoSeed.
	SeedRows() (map[string]int, error)
	// Seed replaces every table's rows with the store's seed in one atomic step. Without force
	// it refuses (ErrNotEmpty) when any table holds a row; a store that keeps no seed refuses
	// with ErrNoSeed. System collections are kept.
	Seed(ctx context.Context, force bool) error
}

// Exporter writes a store's committed rows (`starplan db dump` and `db export`).
type Exporter interface {
	// Dump writes every table as one JSON object {"<table>": [rows...]}, tables sorted, rows in
	// key order, fields in schema order: the format of a domain's seed.json.
	Dump(w io.Writer) error
	// Export writes one table's committed rows in key order as JSON or CSV; an unknown table is
	// an error that names the known ones.
	Export(w io.Writer, table string, format Format) error
}

// Importer reads rows into a table from a file (`starplan db import`).
type Importer interface {
	// Import validates every row of r and writes them in one atomic step, or nothing.
	Import(ctx context.Context, table string, r io.Reader, format Format, mode ImportMode) (ImportResult, error)
	// ImportBatches upserts the rows of r in commits of batch records each; a failure keeps the
	// batches before it, and the same import run again goes on from there. When bad records
	// stop it after some were written, its error implements PartialImport.
	ImportBatches(ctx context.Context, table string, r io.Reader, format Format, batch int) (ImportResult, error)
}

// PartialImport is implemented by the error of an import in batches that found bad records
// after it had written some (errors.As finds it).
type PartialImport interface {
	error
	// Imported is how many records, the file's first ones, were imported before the first bad
	// one.
	Imported() int
}

// Local is a store kept in a directory of this machine that one process holds at a time
// (store/bolt). Beside it `starplan serve` keeps its socket (through which the CLI's commands
// run while the server holds the store), its token file and who holds the store. A store that
// is not Local (a database server's) is opened by every process that uses it.
type Local interface {
	// Dir is the store's directory.
	Dir() string
}
