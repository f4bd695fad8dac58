package pg

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// ImportMode says what an import does with the rows the file does not hold (store.ImportMode).
type ImportMode = store.ImportMode

const (
	// Upsert inserts rows with new keys and replaces rows whose key exists; other rows stay.
	Upsert = store.Upsert
	// Replace makes the table hold exactly the imported rows.
	Replace = store.Replace
)

// ImportResult counts what an import changed (store.ImportResult; Commits is 1 when it changed
// anything: an import is one transaction).
type ImportResult = store.ImportResult

// The tools of the db commands (store/tools.go).
var (
	_ store.Seeder   = (*Store)(nil)
	_ store.Exporter = (*Store)(nil)
	_ store.Importer = (*Store)(nil)
)

// ImportBatches is store.Importer's import in commits of batch records: a PostgreSQL store
// imports a file in one transaction instead (COPY into a temporary table), so it refuses.
func (s *Store) ImportBatches(ctx context.Context, name string, r io.Reader, format store.Format, batch int) (ImportResult, error) {
	return ImportResult{}, errors.New("import: a PostgreSQL store imports a file in one transaction, not in batches: drop --batch")
}

// Import reads rows for table name from r and writes them in one transaction, or nothing. JSON
// is an array of objects, or {"<table>": [...]} as Dump writes; CSV is what store.ReadCSV reads
// (a header of field names, then rows; store/bolt reads the same). Every record is validated:
// bad records import nothing, and the *store.ImportErrors names each (up to
// store.MaxImportErrors) with its record, its line (CSV) and the field. A record without its
// key, in a table with a key prefix, gets the next key after the highest of the file and
// (Upsert) of the table, read under the table's lock.
//
// The file is read as a stream, on a goroutine of its own, and its valid rows go to PostgreSQL
// (COPY, as ImportRows writes them) as they are read, so that reading and writing overlap and
// the file is never held whole: only its keys are kept (a key that comes twice is a bad record),
// and the records without a key until the file's end. From the first bad record on, no row is
// sent: the copy fails, the rest of the file is read for the other bad records, and the
// transaction, which holds the table's lock from its start, is rolled back.
func (s *Store) Import(ctx context.Context, name string, r io.Reader, format store.Format, mode ImportMode) (ImportResult, error) {
	sc := s.schemas[name]
	if sc == nil {
		return ImportResult{}, fmt.Errorf("import: unknown table %q%s", name, store.DidYouMean(name, s.names))
	}
	var read func(c *collector) error
	switch format {
	case store.JSON:
		read = func(c *collector) error { return readJSON(ctx, sc, r, c.add) }
	case store.CSV:
		read = func(c *collector) error { return store.ReadCSV(ctx, sc, r, c.bad, c.add) }
	default:
		return ImportResult{}, fmt.Errorf("import: unknown format %q (want json or csv)", format)
	}
	t := s.tables[name]
	var res ImportResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		empty, err := s.beginImport(ctx, tx, t)
		if err != nil {
			return err
		}
		next := int64(-1)
		if mode == Upsert && !empty {
			if next, _, err = t.maxNum(ctx, tx, nil); err != nil {
				return err
			}
		}
		done := make(chan struct{})
		c := newCollector(sc, done)
		readErr := make(chan error, 1)
		go func() {
			err := read(c)
			if err == nil {
				err = ctx.Err()
			}
			if err == nil {
				err = c.generate(next)
			}
			if err == nil && !c.bad.Failed() {
				err = c.flush()
			}
			c.end(err != nil || c.bad.Failed())
			readErr <- err
		}()
		res, err = s.load(ctx, tx, t, mode, empty, &chanSource{t: t, c: c})
		close(done)
		if rerr := <-readErr; rerr != nil && !errors.Is(rerr, errCopyEnded) {
			return rerr
		}
		if berr := c.bad.Err(); berr != nil {
			return berr
		}
		return err
	})
	if err == nil && res.Inserted+res.Updated+res.Deleted > 0 {
		res.Commits = 1
	}
	return res, err
}

// importBatch is how many rows the reader of an import hands the copy at a time.
const importBatch = 1000

var (
	// errReadFailed ends an import's copy when its reader failed or found a bad record.
	errReadFailed = errors.New("import: the file was not read whole, or has bad records")
	// errCopyEnded stops an import's reader when its copy ended (failed) first.
	errCopyEnded = errors.New("import: the copy ended")
)

// collector validates an import's records as they are read (as store/bolt's importer does) and
// sends the valid ones, in batches, to the copy (out); it keeps every key with its record (a key
// that comes twice is a bad record) and the records without a key, to be given one once the
// file's highest key is known. It runs on the reader's goroutine; the copy sees only out and
// failed.
type collector struct {
	sc      *store.Schema
	bad     *store.ImportErrors
	seen    seenKeys
	later   []keyless
	fileMax int64 // the highest key number (KeyPrefix and digits) among the records
	batch   []table.Row
	out     chan []table.Row // closed by end
	done    <-chan struct{}  // closed when the copy ended
	failed  atomic.Bool      // set before out is closed when the rows sent are not all of them
	ended   bool
}

type keyless struct {
	row       table.Row
	num, line int
}

func newCollector(sc *store.Schema, done <-chan struct{}) *collector {
	return &collector{sc: sc, bad: &store.ImportErrors{Table: sc.Name}, fileMax: -1,
		out: make(chan []table.Row, 4), done: done}
}

// add takes one record as read (store.ReadCSV's callback).
func (c *collector) add(row table.Row, num, line int) error {
	k := row[c.sc.Key]
	if n, ok := c.sc.KeyNum(k); ok && n > c.fileMax {
		c.fileMax = n
	}
	if k == nil && c.sc.KeyPrefix != "" {
		c.later = append(c.later, keyless{row, num, line})
		return nil
	}
	return c.check(row, num, line)
}

// check validates a record with its key, refuses a key an earlier record has, and sends it on
// while no record was bad.
func (c *collector) check(row table.Row, num, line int) error {
	sc := c.sc
	v, err := sc.ValidateOwned(row)
	if err != nil {
		c.bad.Add(&store.ImportError{Table: sc.Name, Record: num, Line: line, Err: err})
		return c.stopIfBad()
	}
	k := v[sc.Key]
	if j, dup := c.seen.add(k, num); dup {
		c.bad.Add(&store.ImportError{Table: sc.Name, Record: num, Line: line,
			Err: &table.FieldError{Table: sc.Name, Key: k, Rule: fmt.Sprintf("duplicate key: record %d has the same %s", j, sc.Key)}})
		return c.stopIfBad()
	}
	if err := c.stopIfBad(); err != nil || c.ended { // store.ReadCSV adds its bad records itself
		return err
	}
	c.batch = append(c.batch, v)
	if len(c.batch) == importBatch {
		return c.flush()
	}
	return nil
}

// seenKeys are the keys of an import's records, each with the first record that has it: a map
// by the key's type, which hashes a key faster than a map of interfaces.
type seenKeys struct {
	strs map[string]int
	ints map[int64]int
}

// add records key k of record num, or returns the record that had it first.
func (s *seenKeys) add(k any, num int) (first int, dup bool) {
	switch k := k.(type) {
	case string:
		if s.strs == nil {
			s.strs = map[string]int{}
		}
		if first, dup = s.strs[k]; !dup {
			s.strs[k] = num
		}
	case int64:
		if s.ints == nil {
			s.ints = map[int64]int{}
		}
		if first, dup = s.ints[k]; !dup {
			s.ints[k] = num
		}
	default: // a validated key is a string or an int
		panic(fmt.Sprintf("import: a key of type %T", k))
	}
	return first, dup
}

// stopIfBad ends the rows sent when a record was bad (the copy then fails; the file is read on
// for the other bad records), or reports errCopyEnded when the copy ended (failed) first.
func (c *collector) stopIfBad() error {
	if c.bad.Failed() {
		c.end(true)
	}
	if c.ended {
		return nil
	}
	select {
	case <-c.done:
		return errCopyEnded
	default:
		return nil
	}
}

// flush sends the rows batched.
func (c *collector) flush() error {
	if len(c.batch) == 0 || c.ended {
		return nil
	}
	select {
	case c.out <- c.batch:
		c.batch = make([]table.Row, 0, importBatch)
		return nil
	case <-c.done:
		return errCopyEnded
	}
}

// end closes out, once: failed says the rows sent are not all the file's.
func (c *collector) end(failed bool) {
	if c.ended {
		return
	}
	c.ended = true
	c.failed.Store(failed)
	c.batch = nil
	close(c.out)
}

// generate gives the records without a key the next keys after next (and after the file's
// highest), in file order, and checks them.
func (c *collector) generate(next int64) error {
	next = max(next, c.fileMax)
	for _, rc := range c.later {
		next++
		rc.row[c.sc.Key] = c.sc.FormatKey(max(next, 1))
		next = max(next, 1)
		if err := c.check(rc.row, rc.num, rc.line); err != nil {
			return err
		}
	}
	c.later = nil
	return nil
}

// chanSource is the pgx.CopyFromSource of a collector's rows.
type chanSource struct {
	t     *sqlTable
	c     *collector
	batch []table.Row
	i     int
}

func (s *chanSource) Next() bool {
	s.i++
	for s.i >= len(s.batch) {
		b, ok := <-s.c.out
		if !ok {
			return false
		}
		s.batch, s.i = b, 0
	}
	return true
}

func (s *chanSource) Values() ([]any, error) { return s.t.values(s.batch[s.i], true) }

func (s *chanSource) Err() error {
	if s.c.failed.Load() {
		return errReadFailed
	}
	return nil
}

// readJSON reads a JSON import as a stream: an array of objects, or {"<table>": [...]} as Dump
// writes, giving each record to fn as it is read (its line unknown: 0).
func readJSON(ctx context.Context, sc *store.Schema, r io.Reader, fn func(row table.Row, num, line int) error) error {
	name := sc.Name
	dec := json.NewDecoder(bufio.NewReader(store.ContextReader(ctx, r)))
	dec.UseNumber()
	notJSON := func(rec int, err error) error {
		return &store.ImportError{Table: name, Record: rec, Err: fmt.Errorf("the file is not JSON: %w", err)}
	}
	otherTable := func(key json.Token) error {
		return &store.ImportError{Table: name, Err: fmt.Errorf("the file holds table %q; import one table at a time", key)}
	}
	tok, err := dec.Token()
	if err != nil {
		return notJSON(0, err)
	}
	inObject := tok == json.Delim('{')
	if inObject {
		key, err := dec.Token()
		if err != nil {
			return notJSON(0, err)
		}
		if key != json.Token(name) && key != json.Delim('}') {
			return otherTable(key)
		}
		if key == json.Delim('}') {
			return &store.ImportError{Table: name, Err: fmt.Errorf("{%q: ...} must hold a list of rows", name)}
		}
		if tok, err = dec.Token(); err != nil {
			return notJSON(0, err)
		}
		if tok != json.Delim('[') {
			return &store.ImportError{Table: name, Err: fmt.Errorf("{%q: ...} must hold a list of rows", name)}
		}
	}
	if tok != json.Delim('[') {
		return &store.ImportError{Table: name, Err: fmt.Errorf("the file must hold a list of rows or {%q: [rows]}", name)}
	}
	for i := 1; dec.More(); i++ {
		var x any // decoding into an any takes encoding/json's fast path, not reflection's
		if err := dec.Decode(&x); err != nil {
			return notJSON(i, err)
		}
		m, ok := x.(map[string]any)
		if !ok {
			return &store.ImportError{Table: name, Record: i, Err: errors.New("want an object with the row's fields")}
		}
		if err := fn(store.FromJSON(m).(map[string]any), i, 0); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the array's end
		return notJSON(0, err)
	}
	if inObject {
		if dec.More() {
			key, err := dec.Token()
			if err != nil {
				return notJSON(0, err)
			}
			return otherTable(key)
		}
		if _, err := dec.Token(); err != nil {
			return notJSON(0, err)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &store.ImportError{Table: name, Err: errors.New("malformed JSON: data follows the value: a file is one JSON array of records (or an object of tables, as a dump)")}
	}
	return nil
}

// lockTable takes table name's lock as an apply does (its version row, FOR UPDATE).
func lockTable(ctx context.Context, tx pgx.Tx, schema, name string) error {
	_, err := tx.Exec(ctx, "SELECT ver FROM "+ident(schema, verTable)+" WHERE name = $1 FOR UPDATE", name)
	return err
}

// ImportRows writes rows (each valid against the table's schema, keys distinct) into table name
// in one transaction: it takes the table's lock as an apply does, and COPYs the rows into the
// table when it is empty, else into a temporary table from which it deletes (Replace), updates
// the rows that differ and inserts the new ones, each one statement. Runs that read the table
// and apply later conflict, as with any commit.
func (s *Store) ImportRows(ctx context.Context, name string, rows []table.Row, mode ImportMode) (ImportResult, error) {
	t := s.tables[name]
	if t == nil {
		return ImportResult{}, fmt.Errorf("import: unknown table %q%s", name, store.DidYouMean(name, s.names))
	}
	var res ImportResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.importTx(ctx, tx, t, rows, mode)
		return err
	})
	if err == nil && res.Inserted+res.Updated+res.Deleted > 0 {
		res.Commits = 1
	}
	return res, err
}

func (s *Store) importTx(ctx context.Context, tx pgx.Tx, t *sqlTable, rows []table.Row, mode ImportMode) (ImportResult, error) {
	empty, err := s.beginImport(ctx, tx, t)
	if err != nil {
		return ImportResult{}, err
	}
	return s.load(ctx, tx, t, mode, empty, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		return t.values(rows[i], true)
	}))
}

// beginImport takes t's lock, checks the store's definition, and reports whether t is empty.
func (s *Store) beginImport(ctx context.Context, tx pgx.Tx, t *sqlTable) (empty bool, err error) {
	if err := lockTable(ctx, tx, s.schema, t.s.Name); err != nil {
		return false, err
	}
	if err := s.checkDefinition(ctx, tx); err != nil {
		return false, err
	}
	var nonEmpty bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+t.name+")").Scan(&nonEmpty); err != nil {
		return false, err
	}
	return !nonEmpty, nil
}

// load writes the rows of src (valid, keys distinct) into t, locked by beginImport: straight
// into an empty table (copyIntoEmpty), else into a temporary table, then merged.
func (s *Store) load(ctx context.Context, tx pgx.Tx, t *sqlTable, mode ImportMode, empty bool, src pgx.CopyFromSource) (ImportResult, error) {
	var res ImportResult
	if empty {
		n, err := copyIntoEmpty(ctx, tx, t, src)
		return ImportResult{Inserted: n}, err
	}
	tmp := "_starplan_import_" + t.s.Name
	cols := append(t.colNames(), "_ord")
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE "+q(tmp)+" ON COMMIT DROP AS SELECT "+strings.Join(quoteAll(cols), ", ")+" FROM "+t.name+" WITH NO DATA"); err != nil {
		return res, err
	}
	copied, err := tx.CopyFrom(ctx, pgx.Identifier{tmp}, cols, src)
	if err != nil {
		return res, fmt.Errorf("import %s: %w", t.s.Name, err)
	}
	key := t.col(t.s.Key)
	var ti, ii []string
	for _, c := range t.cols {
		ti = append(ti, "t."+t.col(c))
		ii = append(ii, "i."+t.col(c))
	}
	same := "ROW(" + strings.Join(ti, ", ") + ") IS NOT DISTINCT FROM ROW(" + strings.Join(ii, ", ") + ")"
	exec := func(sql string) (int, error) {
		tag, err := tx.Exec(ctx, sql)
		if err != nil {
			return 0, fmt.Errorf("import %s: %w", t.s.Name, err)
		}
		return int(tag.RowsAffected()), nil
	}
	if mode == Replace {
		if res.Deleted, err = exec("DELETE FROM " + t.name + " t WHERE NOT EXISTS (SELECT 1 FROM " + q(tmp) + " i WHERE i." + key + " = t." + key + ")"); err != nil {
			return res, err
		}
	}
	var set []string
	for _, c := range t.cols {
		set = append(set, t.col(c)+" = i."+t.col(c))
	}
	if res.Updated, err = exec("UPDATE " + t.name + " t SET " + strings.Join(set, ", ") + " FROM " + q(tmp) + " i WHERE t." + key + " = i." + key + " AND NOT (" + same + ")"); err != nil {
		return res, err
	}
	if res.Inserted, err = exec("INSERT INTO " + t.name + " (" + strings.Join(quoteAll(cols), ", ") + ") SELECT " + strings.Join(quoteAll(cols), ", ") + " FROM " + q(tmp) + " i WHERE NOT EXISTS (SELECT 1 FROM " + t.name + " t WHERE t." + key + " = i." + key + ")"); err != nil {
		return res, err
	}
	res.Unchanged = int(copied) - res.Updated - res.Inserted
	_, err = exec("DROP TABLE " + q(tmp))
	return res, err
}

// copyIntoEmpty COPYs src into t, which is empty, and returns how many rows it copied. A table
// of the store's own has its indexes dropped before the copy and made again after it, in the
// transaction: PostgreSQL builds an index from the whole table, sorted once, for a fraction of
// what keeping it up row by row costs (at 1M rows, half of the server's time: see
// scale_bench_test.go). They are made again from the catalog's own definitions under their
// names, the constraints that own one (the primary key, _ord's UNIQUE) as constraints, which
// check the keys again. Dropping them takes the table's ACCESS EXCLUSIVE lock to the commit: a
// read of the table (a dry run, another program's SELECT) waits for the import instead of
// seeing the table empty. A table another program shares (mapped), or one a foreign key refers
// to, keeps its indexes (and its readers).
func copyIntoEmpty(ctx context.Context, tx pgx.Tx, t *sqlTable, src pgx.CopyFromSource) (int, error) {
	var rebuild []string
	if !t.mapped {
		var err error
		if rebuild, err = dropIndexes(ctx, tx, t); err != nil {
			return 0, fmt.Errorf("import %s: %w", t.s.Name, err)
		}
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier(t.path), append(t.colNames(), "_ord"), src)
	if err != nil {
		return 0, fmt.Errorf("import %s: %w", t.s.Name, err)
	}
	for _, st := range rebuild {
		if _, err := tx.Exec(ctx, st); err != nil {
			return 0, fmt.Errorf("import %s: %w (in %s)", t.s.Name, err, st)
		}
	}
	return int(n), nil
}

// dropIndexes drops t's indexes, and the constraints that own one, and returns the statements
// that make them again; none when a foreign key refers to t.
func dropIndexes(ctx context.Context, tx pgx.Tx, t *sqlTable) ([]string, error) {
	var referred bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE confrelid = $1::regclass)", t.name).Scan(&referred); err != nil {
		return nil, err
	}
	if referred {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid), coalesce(c.conname, ''), coalesce(pg_get_constraintdef(c.oid), '')
		FROM pg_index i LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u', 'x')
		WHERE i.indrelid = $1::regclass ORDER BY i.indexrelid`, t.name)
	if err != nil {
		return nil, err
	}
	var drop, rebuild []string
	for rows.Next() {
		var idx, idxDef, con, conDef string
		if err := rows.Scan(&idx, &idxDef, &con, &conDef); err != nil {
			rows.Close()
			return nil, err
		}
		if con != "" {
			drop = append(drop, "ALTER TABLE "+t.name+" DROP CONSTRAINT "+q(con))
			rebuild = append(rebuild, "ALTER TABLE "+t.name+" ADD CONSTRAINT "+q(con)+" "+conDef)
		} else {
			drop = append(drop, "DROP INDEX "+idx)
			rebuild = append(rebuild, idxDef)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, st := range drop {
		if _, err := tx.Exec(ctx, st); err != nil {
			return nil, fmt.Errorf("%w (in %s)", err, st)
		}
	}
	return rebuild, nil
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = q(n)
	}
	return out
}

// keptSeed is the seed the store was made from, validated again, or store.ErrNoSeed.
func (s *Store) keptSeed() (map[string][]table.Row, error) {
	var raw json.RawMessage
	found, err := s.GetSys(store.SeedCollection, store.SeedID, &raw)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, store.ErrNoSeed
	}
	seed, err := s.domain.DecodeTables(bytes.NewReader(raw))
	if err != nil {
		return nil, &store.DamagedError{Path: s.schema, Problem: "the seed the store keeps does not read back: " + err.Error(), Err: err}
	}
	return seed, nil
}

// SeedRows reports how many rows a reseed writes, per table, or store.ErrNoSeed.
func (s *Store) SeedRows() (map[string]int, error) {
	seed, err := s.keptSeed()
	if err != nil {
		return nil, err
	}
	n := make(map[string]int, len(s.names))
	for _, name := range s.names {
		n[name] = len(seed[name])
	}
	return n, nil
}

// Seed replaces every table's rows with the seed the store was made from, in one transaction.
// Without force it refuses (store.ErrNotEmpty) when any table holds a row; a store that keeps no
// seed is store.ErrNoSeed. A mapped table that holds rows is left as it is, with force too: its
// rows are another program's. System documents are kept.
func (s *Store) Seed(ctx context.Context, force bool) error {
	seed, err := s.keptSeed()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, name := range s.names {
			if t := s.tables[name]; !force || t.mapped {
				var any bool
				if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+t.name+")").Scan(&any); err != nil {
					return err
				}
				switch {
				case any && t.mapped:
					continue // a mapped table's rows are the SQL table's, never replaced by the seed
				case any:
					return store.ErrNotEmpty
				}
			}
			if _, err := s.importTx(ctx, tx, s.tables[name], seed[name], Replace); err != nil {
				return err
			}
		}
		return nil
	})
}

// Dump is DumpTo without a context (store.Exporter).
func (s *Store) Dump(w io.Writer) error { return s.DumpTo(context.Background(), w) }

// DumpTo writes every table as one JSON object {"<table>": [rows...]}, tables sorted, rows in key
// order and fields in schema order, floats with their fraction: a domain's seed.json, and what
// Import reads back. It reads one snapshot.
func (s *Store) DumpTo(ctx context.Context, w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("{")
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		for i, name := range s.names {
			if i > 0 {
				bw.WriteString(",")
			}
			fmt.Fprintf(bw, "\n  %q: ", name)
			if err := s.writeRows(ctx, tx, bw, s.tables[name], "  "); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// Export is ExportTo without a context (store.Exporter).
func (s *Store) Export(w io.Writer, name string, format store.Format) error {
	return s.ExportTo(context.Background(), w, name, format)
}

// ExportTo writes one table's rows in key order as JSON (an array) or CSV (store.CSVWriter), as
// store/bolt writes them: the same rows export as the same bytes from either store.
func (s *Store) ExportTo(ctx context.Context, w io.Writer, name string, format store.Format) error {
	t := s.tables[name]
	if t == nil {
		return fmt.Errorf("export: unknown table %q%s", name, store.DidYouMean(name, s.names))
	}
	switch format {
	case store.JSON:
		bw := bufio.NewWriter(w)
		if err := s.writeRows(ctx, s.pool, bw, t, ""); err != nil {
			return err
		}
		bw.WriteString("\n")
		return bw.Flush()
	case store.CSV:
		cw, err := store.NewCSVWriter(w, t.s)
		if err != nil {
			return err
		}
		err = s.eachRow(ctx, s.pool, t, func(r *rec) error { return cw.Write(r.row) })
		if err != nil {
			return err
		}
		return cw.Flush()
	}
	return fmt.Errorf("unknown format %q (want json or csv)", format)
}

// eachRow calls fn with each row of t in key order.
func (s *Store) eachRow(ctx context.Context, db querier, t *sqlTable, fn func(*rec) error) error {
	rows, err := db.Query(ctx, "SELECT "+t.sel+" FROM "+t.name+" t ORDER BY t._ord")
	if err != nil {
		return fmt.Errorf("read %s: %w", t.s.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		r, err := t.decode(vals)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (s *Store) writeRows(ctx context.Context, db querier, w *bufio.Writer, t *sqlTable, indent string) error {
	w.WriteString("[")
	n := 0
	var buf []byte
	err := s.eachRow(ctx, db, t, func(r *rec) error {
		if n > 0 {
			w.WriteString(",")
		}
		n++
		w.WriteString("\n" + indent + "  {")
		for i, f := range t.cols {
			if i > 0 {
				w.WriteString(", ")
			}
			name, _ := json.Marshal(f)
			w.Write(name)
			w.WriteString(": ")
			buf = store.AppendJSON(buf[:0], r.row[f])
			w.Write(buf)
		}
		w.WriteString("}")
		return nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		w.WriteString("\n" + indent)
	}
	w.WriteString("]")
	return nil
}
