package pg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

var _ store.DomainUpgrader = (*Store)(nil)

// UpgradeDomain implements store.DomainUpgrader in one transaction, which writes everything or
// nothing:
//
//  1. it locks the store's record (_starplan) and then every table's version row, in name order,
//     as an apply does: applies and imports under way finish first, and the ones that come after
//     wait for the commit. The record must still hold the definition this Store was opened with
//     (another process may have upgraded it since);
//  2. it reads every row of every table and checks it against dom's schema of its table, as
//     store/bolt does (store.UpgradeRowProblem: a row must validate without any value being
//     converted); a table that holds rows may neither disappear nor change its key field. Any
//     offender refuses the upgrade with a *store.UpgradeError listing them;
//  3. it changes the SQL objects to dom's: a new table is created (tableDDL), an empty table the
//     new definition drops is dropped, an empty table whose key changes is made again; a new
//     field is a new column (NOT NULL when required, which only an empty table allows: step 2
//     refuses the rows that lack it), a dropped field's column is dropped (step 2 refuses a row
//     that holds a value in it), a field whose column type changes (float to int, list to
//     string...) is altered, which step 2 allows only when no row holds a value in it; a
//     field's NOT NULL and CHECK constraint follow its required flag and bounds (the CHECK is
//     dropped and added again, named TABLE_FIELD_check); indexes are created and dropped as
//     declared;
//  4. it records dom's definition and its sums, keeps dom's seed (or none), writes extra, and
//     gives every table a new version, so that a run made before, on any server, whose reads
//     include a whole table or a predicate conflicts at apply.
//
// A table mapped onto an existing SQL table (table.SQLMapping) is never altered: an upgrade
// that would change its columns, or its mapping, is refused. Other servers on the same database
// keep the definition they opened with until they open the store again; every apply and import
// they make after the upgrade is refused with ErrUpgraded and writes nothing (checkDefinition,
// after the table locks the upgrade held), so stop or restart them with it. The engine refuses
// an upgrade while runs are pending (or expires them); a run another server makes between that
// look and the commit is refused at its apply on that server, not on one opened afresh.
//
// After it returns nil the store serves only Close, as store/bolt's.
func (s *Store) UpgradeDomain(ctx context.Context, dom *store.Domain, extra ...store.SysDoc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dom.Name != s.domain.Name {
		return &store.DomainError{Dir: "PostgreSQL schema " + s.schema, Holds: s.domain.Name, Wanted: dom.Name}
	}
	schemas, err := dom.Schemas()
	if err != nil {
		return err
	}
	def, err := definitionOf(dom)
	if err != nil {
		return err
	}
	defJSON, err := json.Marshal(def)
	if err != nil {
		return err
	}
	sumsJSON, err := json.Marshal(store.DefinitionSums(def))
	if err != nil {
		return err
	}
	var seed json.RawMessage
	if len(dom.Seed) > 0 {
		if seed, err = store.EncodeSeed(dom.Seed); err != nil {
			return err
		}
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.lockForUpgrade(ctx, tx); err != nil {
			return err
		}
		stmts, err := s.upgradePlan(ctx, tx, schemas)
		if err != nil {
			return err
		}
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st); err != nil {
				return fmt.Errorf("upgrade the store in schema %s: %w (in %s); nothing was changed", s.schema, err, firstLine(st))
			}
		}
		if _, err := tx.Exec(ctx, "UPDATE "+ident(s.schema, metaTable)+" SET definition = $1, definition_sums = $2",
			json.RawMessage(defJSON), json.RawMessage(sumsJSON)); err != nil {
			return err
		}
		if seed != nil {
			_, err = tx.Exec(ctx, "INSERT INTO "+ident(s.schema, sysTable)+" (coll, id, json) VALUES ($1, $2, $3) ON CONFLICT (coll, id) DO UPDATE SET json = EXCLUDED.json",
				store.SeedCollection, store.SeedID, string(seed))
		} else {
			_, err = tx.Exec(ctx, "DELETE FROM "+ident(s.schema, sysTable)+" WHERE coll = $1 AND id = $2", store.SeedCollection, store.SeedID)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE "+ident(s.schema, verTable)+" SET ver = nextval('"+strings.ReplaceAll(ident(s.schema, verSeq), "'", "''")+"')"); err != nil {
			return err
		}
		return s.putSysTx(ctx, tx, extra)
	})
	if err != nil {
		return err
	}
	// The tables in memory are the old schemas': nothing more is served.
	s.pool.Close()
	return nil
}

// definitionOf is the definition a store of dom records (a domain built in Go: its domain.json).
func definitionOf(dom *store.Domain) (map[string]string, error) {
	if dom.Definition != nil {
		return dom.Definition, nil
	}
	raw, err := json.Marshal(dom)
	if err != nil {
		return nil, err
	}
	return map[string]string{store.DomainFile: string(raw)}, nil
}

// lockForUpgrade locks the store's record and every table's version row, and checks that the
// record holds the definition s was opened with.
func (s *Store) lockForUpgrade(ctx context.Context, tx pgx.Tx) error {
	var raw []byte
	if err := tx.QueryRow(ctx, "SELECT definition FROM "+ident(s.schema, metaTable)+" FOR UPDATE").Scan(&raw); err != nil {
		return fmt.Errorf("upgrade: read the store's record: %w", err)
	}
	var recorded map[string]string
	if err := json.Unmarshal(raw, &recorded); err != nil {
		return &store.DamagedError{Path: s.schema, Problem: "the recorded domain definition does not read back: " + err.Error(), Err: err}
	}
	mine, err := definitionOf(s.domain)
	if err != nil {
		return err
	}
	if !maps.Equal(recorded, mine) {
		return errors.New("upgrade: the store's domain definition changed since this process opened it (another starplan upgraded it); nothing was changed: open the store again, then upgrade")
	}
	_, err = tx.Exec(ctx, "SELECT name FROM "+ident(s.schema, verTable)+" ORDER BY name FOR UPDATE")
	return err
}

// upgradePlan checks every row against schemas (the new definition's) and returns the
// statements that make the SQL objects dom's, or a *store.UpgradeError.
func (s *Store) upgradePlan(ctx context.Context, tx pgx.Tx, schemas map[string]*store.Schema) ([]string, error) {
	ue := &store.UpgradeError{}
	bad := func(p store.RowProblem) {
		if len(ue.Problems) < store.MaxRowProblems {
			ue.Problems = append(ue.Problems, p)
		} else {
			ue.More++
		}
	}
	var stmts []string
	for _, name := range s.names {
		t, old, sc := s.tables[name], s.schemas[name], schemas[name]
		n, before := 0, len(ue.Problems)+ue.More
		held := map[string]bool{} // the fields some row holds a value in
		check := sc != nil && sc.Key == old.Key
		err := s.eachRow(ctx, tx, t, func(r *rec) error {
			n++
			row := make(table.Row, len(r.row))
			for k, v := range r.row {
				if v != nil { // a NULL column is an absent field
					row[k] = v
					held[k] = true
				}
			}
			if check {
				if p, ok := store.UpgradeRowProblem(sc, r.key, row); !ok {
					bad(p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("upgrade: read %s: %w", name, err)
		}
		switch {
		case sc == nil && n > 0:
			bad(store.RowProblem{Table: name, Problem: fmt.Sprintf("holds %d rows, and the new definition does not declare the table", n)})
			continue
		case sc != nil && sc.Key != old.Key && n > 0:
			bad(store.RowProblem{Table: name, Field: sc.Key, Problem: fmt.Sprintf("the key changes from %s to %s, and the table holds %d rows; a key cannot change under rows", old.Key, sc.Key, n)})
			continue
		}
		if sc != nil && len(ue.Problems)+ue.More == before {
			// The guard of ALTER COLUMN ... TYPE ... USING NULL: validation refuses such rows
			// already (their values do not fit the new type, or would be converted).
			for _, f := range sc.Fields {
				if was := old.FieldsByName[f.Name]; was != nil && held[f.Name] && sqlType(was.Field) != sqlType(&f) {
					bad(store.RowProblem{Table: name, Field: f.Name, Problem: fmt.Sprintf("the column type changes from %s to %s, and rows hold values in it; a field's type cannot change under rows that hold it (export the table, upgrade without them, import them again)", sqlType(was.Field), sqlType(&f))})
				}
			}
		}
		if mapped := old.SQL != nil || sc != nil && sc.SQL != nil; mapped {
			if sc == nil || !reflect.DeepEqual(old.SQL, sc.SQL) || len(alterTable(s.schema, old, sc)) > 0 {
				bad(store.RowProblem{Table: name, Problem: "is mapped onto an existing SQL table, which an upgrade does not alter: keep the table's fields, their types and bounds, its indexes and its \"sql\" mapping as they are, or change the SQL table yourself and map it again with a new store (db init)"})
			}
			continue
		}
		switch {
		case sc == nil:
			stmts = append(stmts, dropTable(s.schema, name)...)
		case sc.Key != old.Key || sqlType(sc.KeyField.Field) != sqlType(old.KeyField.Field):
			// An empty table whose key changes is made again (its primary key, _ord trigger).
			stmts = append(stmts, dropTable(s.schema, name)...)
			stmts = append(stmts, tableDDL(s.schema, sc)...)
		default:
			stmts = append(stmts, alterTable(s.schema, old, sc)...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(schemas)) {
		if s.schemas[name] == nil {
			if sc := schemas[name]; sc.SQL != nil {
				bad(store.RowProblem{Table: name, Problem: "is a new table mapped onto an existing SQL table, which an upgrade does not adopt: remove its \"sql\" mapping, or make a new store of the domain (db init)"})
			} else {
				stmts = append(stmts, tableDDL(s.schema, sc)...)
			}
		}
	}
	if len(ue.Problems) > 0 {
		return nil, ue
	}
	return stmts, nil
}

// dropTable drops an empty table and its version row.
func dropTable(schema, name string) []string {
	return []string{
		"DROP TABLE " + ident(schema, name),
		"DELETE FROM " + ident(schema, verTable) + " WHERE name = " + literal(name),
	}
}

// alterTable is the statements that make table old's columns, constraints and indexes new's
// (same name and key). A column whose type changes holds no value (upgradePlan).
func alterTable(schema string, old, sc *store.Schema) []string {
	tbl := ident(schema, sc.Name)
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	// dropChecks drops every CHECK constraint on a column, whatever PostgreSQL named it (an
	// inline one is TABLE_COLUMN_check, or with a number when that name was taken).
	dropChecks := func(col string) {
		add(`DO $d$ DECLARE c text; BEGIN
	FOR c IN SELECT con.conname FROM pg_constraint con JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = ANY (con.conkey)
		WHERE con.conrelid = %s::regclass AND con.contype = 'c' AND a.attname = %s LOOP
		EXECUTE format('ALTER TABLE %%s DROP CONSTRAINT %%I', %s, c);
	END LOOP;
END $d$`, literal(tbl), literal(col), literal(tbl))
	}
	addCheck := func(f *table.Field) {
		if chk := checkSQL(f); chk != "" {
			add("ALTER TABLE %s ADD CONSTRAINT %s CHECK (%s)", tbl, q(sc.Name+"_"+f.Name+"_check"), chk)
		}
	}
	for i := range old.Fields {
		if f := &old.Fields[i]; sc.FieldsByName[f.Name] == nil {
			add("ALTER TABLE %s DROP COLUMN %s", tbl, q(f.Name))
		}
	}
	for i := range sc.Fields {
		f := &sc.Fields[i]
		was := old.FieldsByName[f.Name]
		if was == nil {
			c := q(f.Name) + " " + sqlType(f)
			if f.Required {
				c += " NOT NULL"
			}
			add("ALTER TABLE %s ADD COLUMN %s", tbl, c)
			addCheck(f)
			continue
		}
		typeChanged := sqlType(f) != sqlType(was.Field)
		if typeChanged { // no row holds a value in it (upgradePlan)
			dropChecks(f.Name)
			add("ALTER TABLE %s ALTER COLUMN %s TYPE %s USING NULL", tbl, q(f.Name), sqlType(f))
		}
		if f.Name != sc.Key && f.Required != was.Required {
			if f.Required {
				add("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL", tbl, q(f.Name))
			} else {
				add("ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL", tbl, q(f.Name))
			}
		}
		if typeChanged || checkSQL(f) != checkSQL(was.Field) {
			if !typeChanged {
				dropChecks(f.Name)
			}
			addCheck(f)
		}
	}
	for _, idx := range old.Indexes {
		if !slices.Contains(sc.Indexes, idx) && sc.FieldsByName[idx] != nil { // a dropped column took its index
			add("DROP INDEX %s", ident(schema, sc.Name+"_"+idx+"_idx"))
		}
	}
	for _, idx := range sc.Indexes { // an altered column's index PostgreSQL rebuilds itself
		if !slices.Contains(old.Indexes, idx) {
			add("CREATE INDEX %s ON %s USING hash (%s)", q(sc.Name+"_"+idx+"_idx"), tbl, q(idx))
		}
	}
	return out
}

// ErrUpgraded is matched (errors.Is) by the error of an apply or an import through a Store
// opened before the store's domain was upgraded (by this process or another).
var ErrUpgraded = errors.New("the store's domain definition was upgraded since this process opened it")

// checkDefinition refuses to write through s when the store's recorded definition is not the
// one s was opened with: its schemas are not the store's any more. Called inside an apply's or
// an import's transaction after its table locks, which an upgrade holds until it commits, so it
// reads what an upgrade under way committed.
func (s *Store) checkDefinition(ctx context.Context, tx pgx.Tx) error {
	var sums []byte
	if err := tx.QueryRow(ctx, "SELECT definition_sums FROM "+ident(s.schema, metaTable)).Scan(&sums); err != nil {
		return fmt.Errorf("read the store's record: %w", err)
	}
	if !bytes.Equal(sums, s.defSums) {
		return fmt.Errorf("%w; nothing was written: open the store again (restart this server) to use the new definition, and make the run again", ErrUpgraded)
	}
	return nil
}
