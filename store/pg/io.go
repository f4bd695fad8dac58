package pg

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
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

// jsonOnly is the error of a CSV import or export: the PostgreSQL store reads and writes JSON.
func jsonOnly(what string, format store.Format) error {
	return fmt.Errorf("%s: a PostgreSQL store %ss JSON only, not %s: use --format json (or COPY in psql for CSV)", what, what, format)
}

// ImportBatches is store.Importer's import in commits of batch records: a PostgreSQL store
// imports a file in one transaction instead (COPY into a temporary table), so it refuses.
func (s *Store) ImportBatches(ctx context.Context, name string, r io.Reader, format store.Format, batch int) (ImportResult, error) {
	return ImportResult{}, errors.New("import: a PostgreSQL store imports a file in one transaction, not in batches: drop --batch")
}

// maxImportErrors is the most bad records one import reports.
const maxImportErrors = 20

// Import reads rows for table name from r, JSON: an array of objects, or {"<table>": [...]} as
// Dump writes; validates every one (one bad record imports nothing; the error names each, up to
// maxImportErrors) and writes them in one transaction with COPY (see ImportRows). Every record
// carries its key.
func (s *Store) Import(ctx context.Context, name string, r io.Reader, format store.Format, mode ImportMode) (ImportResult, error) {
	if format != store.JSON {
		return ImportResult{}, jsonOnly("import", format)
	}
	sc := s.schemas[name]
	if sc == nil {
		return ImportResult{}, fmt.Errorf("import: unknown table %q%s", name, store.DidYouMean(name, s.names))
	}
	dec := json.NewDecoder(bufio.NewReader(r))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return ImportResult{}, fmt.Errorf("import %s: the file is not JSON: %w", name, err)
	}
	if dec.More() {
		return ImportResult{}, fmt.Errorf("import %s: data after the JSON value", name)
	}
	var list []any
	switch x := doc.(type) {
	case []any:
		list = x
	case map[string]any:
		for k := range x {
			if k != name {
				return ImportResult{}, fmt.Errorf("import %s: the file holds table %q; import one table at a time", name, k)
			}
		}
		l, ok := x[name].([]any)
		if !ok {
			return ImportResult{}, fmt.Errorf("import %s: {%q: ...} must hold a list of rows", name, name)
		}
		list = l
	default:
		return ImportResult{}, fmt.Errorf("import %s: the file must hold a list of rows or {%q: [rows]}", name, name)
	}
	rows := make([]table.Row, 0, len(list))
	var errs []error
	seen := make(map[any]int, len(list))
	for i, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s record %d: not an object", name, i+1))
		} else if row, err := sc.ValidateOwned(store.FromJSON(m).(map[string]any)); err != nil {
			errs = append(errs, fmt.Errorf("%s record %d: %w", name, i+1, err))
		} else if j, dup := seen[row[sc.Key]]; dup {
			errs = append(errs, fmt.Errorf("%s record %d: key %s repeats record %d", name, i+1, table.FormatValue(row[sc.Key]), j))
		} else {
			seen[row[sc.Key]] = i + 1
			rows = append(rows, row)
		}
		if len(errs) >= maxImportErrors {
			errs = append(errs, errors.New("and maybe more bad records"))
			break
		}
	}
	if len(errs) > 0 {
		return ImportResult{}, fmt.Errorf("import %s: nothing was imported: %w", name, errors.Join(errs...))
	}
	return s.ImportRows(ctx, name, rows, mode)
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
	if _, err := tx.Exec(ctx, "SELECT ver FROM "+ident(s.schema, verTable)+" WHERE name = $1 FOR UPDATE", t.s.Name); err != nil {
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
// seed is store.ErrNoSeed. System documents are kept.
func (s *Store) Seed(ctx context.Context, force bool) error {
	seed, err := s.keptSeed()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, name := range s.names {
			if !force {
				var any bool
				if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.tables[name].name+")").Scan(&any); err != nil {
					return err
				}
				if any {
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

// Export is ExportTo without a context, JSON only (store.Exporter).
func (s *Store) Export(w io.Writer, name string, format store.Format) error {
	if format != store.JSON {
		return jsonOnly("export", format)
	}
	return s.ExportTo(context.Background(), w, name)
}

// ExportTo writes one table's rows in key order as a JSON array.
func (s *Store) ExportTo(ctx context.Context, w io.Writer, name string) error {
	t := s.tables[name]
	if t == nil {
		return fmt.Errorf("export: unknown table %q%s", name, store.DidYouMean(name, s.names))
	}
	bw := bufio.NewWriter(w)
	if err := s.writeRows(ctx, s.pool, bw, t, ""); err != nil {
		return err
	}
	bw.WriteString("\n")
	return bw.Flush()
}

func (s *Store) writeRows(ctx context.Context, db querier, w *bufio.Writer, t *sqlTable, indent string) error {
	rows, err := db.Query(ctx, "SELECT "+t.sel+" FROM "+t.name+" t ORDER BY t._ord")
	if err != nil {
		return fmt.Errorf("read %s: %w", t.s.Name, err)
	}
	defer rows.Close()
	w.WriteString("[")
	n := 0
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		r, err := t.decode(vals)
		if err != nil {
			return err
		}
		if n > 0 {
			w.WriteString(",")
		}
		n++
		w.WriteString("\n" + indent + "  {")
		for i, f := range t.cols {
			if i > 0 {
				w.WriteString(", ")
			}
			fmt.Fprintf(w, "%q: ", f)
			writeJSONValue(w, r.row[f])
		}
		w.WriteString("}")
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n > 0 {
		w.WriteString("\n" + indent)
	}
	w.WriteString("]")
	return nil
}

// writeJSONValue writes v as JSON, a float always with a fraction or exponent (so it reads back
// as a float where no type says so), object keys sorted.
func writeJSONValue(w *bufio.Writer, v any) {
	switch x := v.(type) {
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") && !math.IsInf(x, 0) {
			s += ".0"
		}
		w.WriteString(s)
	case []any:
		w.WriteString("[")
		for i, e := range x {
			if i > 0 {
				w.WriteString(", ")
			}
			writeJSONValue(w, e)
		}
		w.WriteString("]")
	case map[string]any:
		w.WriteString("{")
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				w.WriteString(", ")
			}
			kb, _ := json.Marshal(k)
			w.Write(kb)
			w.WriteString(": ")
			writeJSONValue(w, x[k])
		}
		w.WriteString("}")
	default:
		b, err := json.Marshal(x)
		if err != nil {
			b = []byte("null")
		}
		w.Write(b)
	}
}
