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
// (a header of field names, then rows; store/bolt reads the same). Every record is validated
// before anything is written: bad records import nothing, and the *store.ImportErrors names
// each (up to store.MaxImportErrors) with its record, its line (CSV) and the field. A record
// without its key, in a table with a key prefix, gets the next key after the highest of the
// file and (Upsert) of the table, read under the table's lock. The rows are written as
// ImportRows writes them.
func (s *Store) Import(ctx context.Context, name string, r io.Reader, format store.Format, mode ImportMode) (ImportResult, error) {
	sc := s.schemas[name]
	if sc == nil {
		return ImportResult{}, fmt.Errorf("import: unknown table %q%s", name, store.DidYouMean(name, s.names))
	}
	c := &collector{sc: sc, bad: &store.ImportErrors{Table: name}, seen: map[any]int{}, fileMax: -1}
	var err error
	switch format {
	case store.JSON:
		err = readJSON(ctx, sc, r, c.add)
	case store.CSV:
		err = store.ReadCSV(ctx, sc, r, c.bad, c.add)
	default:
		return ImportResult{}, fmt.Errorf("import: unknown format %q (want json or csv)", format)
	}
	if err != nil {
		return ImportResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return ImportResult{}, err
	}
	if len(c.later) == 0 || c.bad.Failed() {
		c.generate(-1) // keys only to validate the rest with: nothing is written
		if err := c.bad.Err(); err != nil {
			return ImportResult{}, err
		}
		return s.ImportRows(ctx, name, c.rows, mode)
	}
	t := s.tables[name]
	var res ImportResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockTable(ctx, tx, s.schema, name); err != nil {
			return err
		}
		next := int64(-1)
		if mode == Upsert {
			var err error
			if next, _, err = t.maxNum(ctx, tx, nil); err != nil {
				return err
			}
		}
		c.generate(next)
		if err := c.bad.Err(); err != nil {
			return err
		}
		res, err = s.importTx(ctx, tx, t, c.rows, mode)
		return err
	})
	if err == nil && res.Inserted+res.Updated+res.Deleted > 0 {
		res.Commits = 1
	}
	return res, err
}

// collector validates an import's records as they are read (as store/bolt's importer does): it
// keeps the valid rows, every key with its record (a key that comes twice is a bad record) and
// the records without a key, to be given one once the file's highest key is known.
type collector struct {
	sc      *store.Schema
	bad     *store.ImportErrors
	rows    []table.Row
	seen    map[any]int
	later   []keyless
	fileMax int64 // the highest key number (KeyPrefix and digits) among the records
}

type keyless struct {
	row       table.Row
	num, line int
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
	c.check(row, num, line)
	return nil
}

// check validates a record with its key and refuses a key an earlier record has.
func (c *collector) check(row table.Row, num, line int) {
	sc := c.sc
	v, err := sc.ValidateOwned(row)
	if err != nil {
		c.bad.Add(&store.ImportError{Table: sc.Name, Record: num, Line: line, Err: err})
		return
	}
	k := v[sc.Key]
	if j, dup := c.seen[k]; dup {
		c.bad.Add(&store.ImportError{Table: sc.Name, Record: num, Line: line,
			Err: &table.FieldError{Table: sc.Name, Key: k, Rule: fmt.Sprintf("duplicate key: record %d has the same %s", j, sc.Key)}})
		return
	}
	c.seen[k] = num
	c.rows = append(c.rows, v)
}

// generate gives the records without a key the next keys after next (and after the file's
// highest), in file order, and checks them.
func (c *collector) generate(next int64) {
	next = max(next, c.fileMax)
	for _, rc := range c.later {
		next++
		rc.row[c.sc.Key] = c.sc.FormatKey(max(next, 1))
		next = max(next, 1)
		c.check(rc.row, rc.num, rc.line)
	}
	c.later = nil
}

// readJSON reads a JSON import: an array of objects, or {"<table>": [...]} as Dump writes, and
// gives each record to fn (its line unknown: 0).
func readJSON(ctx context.Context, sc *store.Schema, r io.Reader, fn func(row table.Row, num, line int) error) error {
	name := sc.Name
	dec := json.NewDecoder(bufio.NewReader(store.ContextReader(ctx, r)))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return &store.ImportError{Table: name, Err: fmt.Errorf("the file is not JSON: %w", err)}
	}
	if dec.More() {
		return &store.ImportError{Table: name, Err: errors.New("malformed JSON: data follows the value: a file is one JSON array of records (or an object of tables, as a dump)")}
	}
	var list []any
	switch x := doc.(type) {
	case []any:
		list = x
	case map[string]any:
		for k := range x {
			if k != name {
				return &store.ImportError{Table: name, Err: fmt.Errorf("the file holds table %q; import one table at a time", k)}
			}
		}
		l, ok := x[name].([]any)
		if !ok {
			return &store.ImportError{Table: name, Err: fmt.Errorf("{%q: ...} must hold a list of rows", name)}
		}
		list = l
	default:
		return &store.ImportError{Table: name, Err: fmt.Errorf("the file must hold a list of rows or {%q: [rows]}", name)}
	}
	for i, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return &store.ImportError{Table: name, Record: i + 1, Err: errors.New("want an object with the row's fields")}
		}
		if err := fn(store.FromJSON(m).(map[string]any), i+1, 0); err != nil {
			return err
		}
	}
	return nil
}

// lockTable takes table name's lock as an apply does (its version row, FOR UPDATE).
func lockTable(ctx context.Context, tx pgx.Tx, schema, name string) error {
	_, err := tx.Exec(ctx, "SELECT ver FROM "+ident(schema, verTable)+" WHERE name = $1 FOR UPDATE", name)
	return err
}

// ImportRows writes rows (each valid against the table's schema, keys distinct) into table name
// in one transaction: it takes the table's lock as an apply does, COPYs the rows into a
// temporary table, and from it deletes (Replace), updates the rows that differ and inserts the
// new ones, each one statement. Runs that read the table and apply later conflict, as with any
// commit.
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
	var res ImportResult
	if err := lockTable(ctx, tx, s.schema, t.s.Name); err != nil {
		return res, err
	}
	if err := s.checkDefinition(ctx, tx); err != nil {
		return res, err
	}
	var nonEmpty bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+t.name+")").Scan(&nonEmpty); err != nil {
		return res, err
	}
	if !nonEmpty {
		// Into an empty table the rows are copied straight in.
		if err := copyRows(ctx, tx, t, rows); err != nil {
			return res, err
		}
		return ImportResult{Inserted: len(rows)}, nil
	}
	tmp := "_starplan_import_" + t.s.Name
	cols := append(t.colNames(), "_ord")
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE "+q(tmp)+" ON COMMIT DROP AS SELECT "+strings.Join(quoteAll(cols), ", ")+" FROM "+t.name+" WITH NO DATA"); err != nil {
		return res, err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{tmp}, cols, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		return t.values(rows[i], true)
	})); err != nil {
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
	var err error
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
	res.Unchanged = len(rows) - res.Updated - res.Inserted
	_, err = exec("DROP TABLE " + q(tmp))
	return res, err
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
