package pg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// A domain table mapped onto an existing SQL table (table.SQLMapping): Create checks the table
// against the database's catalog (checkMapping), and adopts it (adoptDDL) in the transaction
// that makes the store.
//
// The type rules (a field's type → the column types that hold it; a column's type is that of
// its base type when it is a domain):
//
//   - string, timestamp: text or varchar; a varchar(n) only when the field's longest value
//     (max_len, or its default bound) fits in n. char(n) is refused: it pads with blanks, so
//     a value would not read back as written;
//   - int: bigint; integer and smallint when the field's min and max lie within the column's
//     range (a value outside could not be written); numeric(p, 0) (with p < 19 the bounds
//     must fit p digits). numeric without a scale of 0 is refused: it holds fractions, which
//     would read back rounded;
//   - float: double precision, or numeric without precision and scale (it keeps the digits
//     starplan writes). real and numeric(p, s) are refused: they round what is written;
//   - bool: boolean;
//   - list, object, map: jsonb or json.
//
// And: the table exists (a plain table: not a view, nor partitioned); every mapped column
// exists; a NOT NULL column holds a required field, and a required field a NOT NULL column
// (another program's NULL would read back as a row without a required field); the key field's column is the primary key, or
// NOT NULL with a unique index of that column alone (no predicate); no mapped column is
// generated or GENERATED ALWAYS AS IDENTITY (starplan writes every mapped field); every column
// no field maps onto is nullable, or has a default, or is generated (starplan's inserts leave
// it out); _version and _ord, when the table has them (from an earlier store whose schema was
// dropped), are bigint and bytea; no other store holds the table (its _starplan_touch trigger);
// two domain tables do not map onto one SQL table; the connection's role owns the table (or is
// a member of its owner: adoption alters it); and the server is PostgreSQL 13 or later.
//
// Adoption adds to the table, in one ALTER TABLE (one rewrite of the table, under its ACCESS
// EXCLUSIVE lock, which fires none of the table's own triggers; no row is changed or lost):
// _version bigint NOT NULL DEFAULT nextval(_starplan_ver) and _ord bytea NOT NULL with a
// unique index (computed for the rows already there as a stored generated column, then made a
// plain column the _starplan_ord trigger keeps); the triggers of the store's own tables
// (_starplan_touch, passed the domain table's name, _starplan_bump, _starplan_ord); a hash
// index for each declared index whose column no B-tree or hash index leads; and the table's
// version row. Columns _version and _ord left by an earlier store are dropped and added again.

// MappingError lists every way a domain's mapped tables do not fit the database's catalog.
// Create returns it (and creates nothing) when any does not.
type MappingError struct {
	Problems []MappingProblem
}

// MappingProblem is one mismatch between a mapped domain table and its SQL table.
type MappingProblem struct {
	Table    string // the domain table
	SQLTable string // the SQL table, schema.table
	Column   string // the SQL column, or "" for the table as a whole
	Found    string // what the catalog holds
	Fix      string // what to change
}

func (p MappingProblem) String() string {
	where := "table " + p.Table + " (" + p.SQLTable + ")"
	if p.Column != "" {
		where += " column " + p.Column
	}
	return where + ": " + p.Found + "; " + p.Fix
}

func (e *MappingError) Error() string {
	var b strings.Builder
	n := len(e.Problems)
	fmt.Fprintf(&b, "the domain's mapped tables do not fit the PostgreSQL tables they name (%d %s); nothing was created:", n, plural(n, "problem", "problems"))
	for _, p := range e.Problems {
		b.WriteString("\n  - " + p.String())
	}
	return b.String()
}

// Mismatches is how many problems e lists.
func (e *MappingError) Mismatches() int { return len(e.Problems) }

// Hint says what to do next.
func (e *MappingError) Hint() string {
	return "change each SQL table or the domain's fields as the lines above say, then run db init again"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// pgColumn is one column as the catalog describes it.
type pgColumn struct {
	name      string
	typ       string // the base type's name: int4, varchar, numeric...
	display   string // format_type: integer, character varying(20)...
	typmod    int32  // of the base type
	notNull   bool
	hasDef    bool
	generated bool // GENERATED ... STORED
	identity  byte // 'a' ALWAYS, 'd' BY DEFAULT, 0 none
}

// pgIndex is one index of the table: its key columns ("" for an expression).
type pgIndex struct {
	primary, unique, partial bool
	method                   string
	cols                     []string
}

// pgTable is what the catalog holds of a mapped table.
type pgTable struct {
	kind    string // pg_class.relkind; "" when there is no such relation
	cols    map[string]*pgColumn
	order   []string
	indexes []pgIndex
	owner   string          // the schema of the function of its _starplan_touch trigger, when it has one
	trigs   map[string]bool // its triggers named _starplan_*
	owned   bool            // the current role owns it (or is a member of its owner)
	role    string          // its owner
}

// catalogDB is what reads the catalog: a pool, a connection or a transaction.
type catalogDB interface {
	querier
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const serverVersionMin = 130000 // ALTER COLUMN ... DROP EXPRESSION (adoptDDL)

// readCatalog reads the catalog's description of SQL table schema.name.
func readCatalog(ctx context.Context, db catalogDB, schema, name string) (*pgTable, error) {
	t := &pgTable{cols: map[string]*pgColumn{}}
	var oid uint32
	err := db.QueryRow(ctx, `SELECT c.oid, c.relkind::text, pg_has_role(c.relowner, 'USAGE'), pg_get_userbyid(c.relowner)::text
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, name).Scan(&oid, &t.kind, &t.owned, &t.role)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the catalog of %s.%s: %w", schema, name, err)
	}
	rows, err := db.Query(ctx, `SELECT a.attname::text, bt.typname::text, format_type(a.atttypid, a.atttypmod),
		CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END,
		a.attnotnull OR (t.typtype = 'd' AND t.typnotnull), a.atthasdef, a.attgenerated <> '', a.attidentity::text
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s.%s: %w", schema, name, err)
	}
	for rows.Next() {
		c := &pgColumn{}
		var ident string
		if err := rows.Scan(&c.name, &c.typ, &c.display, &c.typmod, &c.notNull, &c.hasDef, &c.generated, &ident); err != nil {
			rows.Close()
			return nil, err
		}
		if ident != "" {
			c.identity = ident[0]
		}
		t.cols[c.name] = c
		t.order = append(t.order, c.name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = db.Query(ctx, `SELECT i.indisprimary, i.indisunique, i.indpred IS NOT NULL, am.amname::text,
		ARRAY(SELECT coalesce(a.attname::text, '') FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(n, o)
			LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n
			WHERE k.o <= i.indnkeyatts ORDER BY k.o)
		FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
		WHERE i.indrelid = $1 AND i.indisvalid`, oid)
	if err != nil {
		return nil, fmt.Errorf("read the indexes of %s.%s: %w", schema, name, err)
	}
	for rows.Next() {
		var ix pgIndex
		if err := rows.Scan(&ix.primary, &ix.unique, &ix.partial, &ix.method, &ix.cols); err != nil {
			rows.Close()
			return nil, err
		}
		t.indexes = append(t.indexes, ix)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = db.Query(ctx, `SELECT tg.tgname::text, n.nspname::text FROM pg_trigger tg JOIN pg_proc p ON p.oid = tg.tgfoid JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE tg.tgrelid = $1 AND tg.tgname LIKE '\_starplan\_%'`, oid)
	if err != nil {
		return nil, fmt.Errorf("read the triggers of %s.%s: %w", schema, name, err)
	}
	t.trigs = map[string]bool{}
	for rows.Next() {
		var tg, fschema string
		if err := rows.Scan(&tg, &fschema); err != nil {
			rows.Close()
			return nil, err
		}
		t.trigs[tg] = true
		if tg == "_starplan_touch" {
			t.owner = fschema
		}
	}
	rows.Close()
	return t, rows.Err()
}

// uniqueOn reports whether col alone is the primary key or a unique index without predicate.
func (t *pgTable) uniqueOn(col string) (primary, unique bool) {
	for _, ix := range t.indexes {
		if len(ix.cols) == 1 && ix.cols[0] == col && !ix.partial {
			primary = primary || ix.primary
			unique = unique || ix.unique
		}
	}
	return primary, unique
}

// indexedBy reports whether some B-tree or hash index without predicate leads with col.
func (t *pgTable) indexedBy(col string) bool {
	for _, ix := range t.indexes {
		if len(ix.cols) > 0 && ix.cols[0] == col && !ix.partial && (ix.method == "btree" || ix.method == "hash") {
			return true
		}
	}
	return false
}

// checkMapping checks every mapped table of schemas against the catalog, as the rules at the
// top of this file say, for a store in SQL schema storeSchema: the catalog's description of each
// mapped table (by domain table name), or a *MappingError listing every mismatch.
func checkMapping(ctx context.Context, db catalogDB, storeSchema string, schemas map[string]*store.Schema) (map[string]*pgTable, error) {
	var names []string
	for name, sc := range schemas {
		if sc.SQL != nil {
			names = append(names, name)
		}
	}
	cats := map[string]*pgTable{}
	if len(names) == 0 {
		return cats, nil
	}
	sort.Strings(names)
	e := &MappingError{}
	var ver int
	if err := db.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&ver); err != nil {
		return nil, err
	}
	if ver < serverVersionMin {
		e.Problems = append(e.Problems, MappingProblem{Table: names[0], SQLTable: schemas[names[0]].SQL.Table,
			Found: fmt.Sprintf("the server is PostgreSQL %d.%d", ver/10000, ver%10000),
			Fix:   "mapping a table onto an existing one needs PostgreSQL 13 or later: upgrade the server, or remove the \"sql\" properties"})
		return nil, e
	}
	by := map[string]string{}
	for _, name := range names {
		sc := schemas[name]
		if other, dup := by[sc.SQL.Table]; dup {
			e.Problems = append(e.Problems, MappingProblem{Table: name, SQLTable: sc.SQL.Table, Found: "table " + other + " maps onto it too",
				Fix: "map each domain table onto a table of its own"})
			continue
		}
		by[sc.SQL.Table] = name
		sqlSchema, sqlName, _ := strings.Cut(sc.SQL.Table, ".")
		if sqlSchema == storeSchema && (strings.HasPrefix(sqlName, "_starplan") || schemas[sqlName] != nil && schemas[sqlName].SQL == nil) {
			e.Problems = append(e.Problems, MappingProblem{Table: name, SQLTable: sc.SQL.Table, Found: "the store's own schema " + storeSchema + " names a table of its own so",
				Fix: "map onto a table outside the store's schema, or keep the store in another one (--schema)"})
			continue
		}
		cat, err := readCatalog(ctx, db, sqlSchema, sqlName)
		if err != nil {
			return nil, err
		}
		cats[name] = cat
		e.Problems = append(e.Problems, mappingProblems(storeSchema, sc, cat, false)...)
	}
	if len(e.Problems) > 0 {
		return nil, e
	}
	return cats, nil
}

// mappingProblems are the ways sc does not fit cat (the catalog's description of sc.SQL.Table):
// to be adopted by a store in storeSchema, or, when adopted, as the store in storeSchema
// adopted it (its columns and triggers in place).
func mappingProblems(storeSchema string, sc *store.Schema, cat *pgTable, adopted bool) []MappingProblem {
	var out []MappingProblem
	bad := func(col, found, fix string) {
		out = append(out, MappingProblem{Table: sc.Name, SQLTable: sc.SQL.Table, Column: col, Found: found, Fix: fix})
	}
	switch cat.kind {
	case "":
		bad("", "no such table", "create it first (a mapping adopts an existing table), or correct sql.table")
		return out
	case "r":
	case "p":
		bad("", "it is a partitioned table (its unique indexes must hold the partition key, so the store's unique _ord cannot be added)", "map a plain table, or one of the partitions")
		return out
	default:
		bad("", "it is not a table (pg_class.relkind "+cat.kind+": a view, a sequence, a foreign table...)", "map onto a plain table")
		return out
	}
	if !adopted && !cat.owned {
		bad("", "it is owned by role "+cat.role+", and this connection's role is not a member of it (adoption alters the table)", "run db init as its owner (or a member of it), or GRANT "+q(cat.role)+" TO the role starplan connects as")
	}
	switch {
	case adopted:
		for _, tg := range []string{"_starplan_touch", "_starplan_bump", "_starplan_ord"} {
			if !cat.trigs[tg] {
				bad("", "its trigger "+tg+" is gone (other programs' writes to it are not seen as changes)", "create it again: "+adoptTrigger(storeSchema, sc, tg))
			}
		}
		if cat.owner != "" && cat.owner != storeSchema {
			bad("", "its _starplan_touch trigger is the store's in schema "+cat.owner, "drop it, and create it again: "+adoptTrigger(storeSchema, sc, "_starplan_touch"))
		}
		for _, c := range []string{"_version", "_ord"} {
			if cat.cols[c] == nil {
				bad(c, "no such column (the store adds it when it adopts the table)", "the store's record of its rows is lost: make a new store of the domain (db init) to adopt the table again")
			}
		}
	case cat.owner != "":
		bad("", "the starplan store in schema "+cat.owner+" holds it already (its _starplan_touch trigger)", "one SQL table belongs to one store: use that store (?schema="+cat.owner+"), or drop its triggers _starplan_touch, _starplan_bump and _starplan_ord")
	}
	mapped := map[string]bool{}
	for i := range sc.Fields {
		f := &sc.Fields[i]
		col := sc.SQL.Column(f.Name)
		mapped[col] = true
		c := cat.cols[col]
		if c == nil {
			bad(col, "no such column (field "+f.Name+" maps onto it)", "add the column, or map the field onto one of the table's columns with sql.columns"+store.DidYouMean(col, visibleCols(cat)))
			continue
		}
		if found, fix := typeProblem(f, c); found != "" {
			bad(col, found, fix)
		}
		switch {
		case c.generated:
			bad(col, "a generated column (field "+f.Name+" maps onto it)", "starplan writes every field it maps: map the field onto a plain column, or drop the field from the domain")
		case c.identity == 'a':
			bad(col, "GENERATED ALWAYS AS IDENTITY (field "+f.Name+" maps onto it)", "starplan writes every field it maps: ALTER COLUMN "+q(col)+" SET GENERATED BY DEFAULT, or drop the field from the domain")
		}
		if f.Name == sc.Key {
			primary, unique := cat.uniqueOn(col)
			switch {
			case primary:
			case unique && c.notNull:
			case unique:
				bad(col, "the key field "+f.Name+"'s column is unique but nullable", "ALTER COLUMN "+q(col)+" SET NOT NULL")
			default:
				bad(col, "the key field "+f.Name+"'s column is neither the primary key nor unique", "make it the primary key (ALTER TABLE ... ADD PRIMARY KEY ("+q(col)+")) or NOT NULL with a unique index on it alone, or choose as key a field whose column is")
			}
			continue
		}
		switch {
		case c.notNull && !f.Required:
			bad(col, "NOT NULL, and field "+f.Name+" is optional (a row without it could not be written)", "make the field required, or ALTER COLUMN "+q(col)+" DROP NOT NULL")
		case !c.notNull && f.Required:
			bad(col, "nullable, and field "+f.Name+" is required (another program's NULL would read back as a row without it)", "ALTER COLUMN "+q(col)+" SET NOT NULL, or make the field optional")
		}
	}
	for _, name := range cat.order {
		c := cat.cols[name]
		switch name {
		case "_version":
			if c.typ != "int8" {
				bad(name, "a column _version of type "+c.display, "the store adds _version bigint to the table: rename or drop that column")
			}
			continue
		case "_ord":
			if c.typ != "bytea" {
				bad(name, "a column _ord of type "+c.display, "the store adds _ord bytea to the table: rename or drop that column")
			}
			continue
		}
		if !mapped[name] && c.notNull && !c.hasDef && !c.generated && c.identity == 0 {
			bad(name, "NOT NULL without a default, and no field maps onto it (a row starplan inserts could not be written)", "map a field onto it, give it a DEFAULT, or ALTER COLUMN "+q(name)+" DROP NOT NULL")
		}
	}
	return out
}

func visibleCols(cat *pgTable) []string {
	return slices.DeleteFunc(slices.Clone(cat.order), func(c string) bool { return c == "_version" || c == "_ord" })
}

// intRange is the range of the integer column types.
var intRange = map[string][2]float64{
	"int2": {math.MinInt16, math.MaxInt16},
	"int4": {math.MinInt32, math.MaxInt32},
}

// typeProblem says how column c cannot hold field f (found, fix), or "" when it can.
func typeProblem(f *table.Field, c *pgColumn) (found, fix string) {
	is := "of type " + c.display + ", and field " + f.Name + " is " + f.Type
	switch f.Type {
	case table.TypeString, table.TypeTimestamp:
		switch c.typ {
		case "text":
			return "", ""
		case "varchar":
			if c.typmod < 0 {
				return "", ""
			}
			if n := int(c.typmod) - 4; f.MaxChars() > n {
				return is + fmt.Sprintf(" of up to %d characters (a longer value could not be written)", f.MaxChars()),
					fmt.Sprintf("set the field's max_len to at most %d, or widen the column (ALTER COLUMN %s TYPE text)", n, q(c.name))
			}
			return "", ""
		case "bpchar":
			return is + " (char(n) pads values with blanks, so they would not read back as written)", "ALTER COLUMN " + q(c.name) + " TYPE varchar or text"
		}
		return is, "a " + f.Type + " field needs a text or varchar column: change the column's type, or the field's"
	case table.TypeInt:
		switch c.typ {
		case "int8":
			return "", ""
		case "int2", "int4":
			r := intRange[c.typ]
			if f.Min == nil || f.Max == nil || *f.Min < r[0] || *f.Max > r[1] {
				return is + fmt.Sprintf(" without min and max within %s's range %.0f..%.0f (a larger value could not be written)", c.display, r[0], r[1]),
					fmt.Sprintf("set the field's min and max within %.0f..%.0f, or widen the column (ALTER COLUMN %s TYPE bigint)", r[0], r[1], q(c.name))
			}
			return "", ""
		case "numeric":
			if c.typmod < 0 || (c.typmod-4)&0xffff != 0 {
				return is + " (a numeric with fractions would read back rounded)", "ALTER COLUMN " + q(c.name) + " TYPE numeric(p, 0) or bigint, or make the field a float"
			}
			if p := (c.typmod - 4) >> 16; p < 19 {
				lim := math.Pow(10, float64(p)) - 1
				if f.Min == nil || f.Max == nil || *f.Min < -lim || *f.Max > lim {
					return is + fmt.Sprintf(" without min and max within %.0f..%.0f (a larger value could not be written)", -lim, lim),
						fmt.Sprintf("set the field's min and max within %.0f..%.0f, or widen the column (ALTER COLUMN %s TYPE bigint)", -lim, lim, q(c.name))
				}
			}
			return "", ""
		}
		return is, "an int field needs a bigint, integer, smallint or numeric(p, 0) column: change the column's type, or the field's"
	case table.TypeFloat:
		switch {
		case c.typ == "float8", c.typ == "numeric" && c.typmod < 0:
			return "", ""
		case c.typ == "float4":
			return is + " (real keeps about 6 digits: a value starplan writes would read back changed)", "ALTER COLUMN " + q(c.name) + " TYPE double precision"
		case c.typ == "numeric":
			return is + " (numeric(p, s) rounds what is written, so a value would read back changed)", "ALTER COLUMN " + q(c.name) + " TYPE numeric or double precision"
		}
		return is, "a float field needs a double precision or numeric column: change the column's type, or the field's"
	case table.TypeBool:
		if c.typ == "bool" {
			return "", ""
		}
		return is, "a bool field needs a boolean column"
	case table.TypeList, table.TypeObject, table.TypeMap:
		if c.typ == "jsonb" || c.typ == "json" {
			return "", ""
		}
		return is, "a " + f.Type + " field needs a jsonb or json column"
	}
	return is, "no column type holds it"
}

// adoptDDL is what makes sc's SQL table (checked by checkMapping) one of the store's tables in
// schema (see the top of this file). cat is the catalog's description of it.
func adoptDDL(schema string, sc *store.Schema, cat *pgTable) []string {
	t := newSQLTable(schema, sc)
	key := q(sc.SQL.Column(sc.Key))
	seq := strings.ReplaceAll(ident(schema, verSeq), "'", "''")
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	var drop []string
	for _, c := range []string{"_version", "_ord"} {
		if cat.cols[c] != nil { // left by an earlier store
			drop = append(drop, "DROP COLUMN "+q(c)+", ")
		}
	}
	ord := ident(schema, ordTextFunc) + "(" + key + "::text)"
	if sc.KeyField.Type == table.TypeInt {
		ord = "int8send(" + key + "::bigint # (-9223372036854775807 - 1))"
	}
	// One rewrite: the volatile default gives each row a version, the generated expression its
	// _ord; neither fires the table's triggers. DROP EXPRESSION then makes _ord a plain column
	// (keeping its values), which the _starplan_ord trigger keeps from here on.
	add("ALTER TABLE %s %sADD COLUMN _version bigint NOT NULL DEFAULT nextval('%s'), ADD COLUMN _ord bytea NOT NULL GENERATED ALWAYS AS (%s) STORED", t.name, strings.Join(drop, ""), seq, ord)
	add("ALTER TABLE %s ALTER COLUMN _ord DROP EXPRESSION", t.name)
	add("CREATE UNIQUE INDEX ON %s (_ord)", t.name)
	for _, idx := range sc.Indexes {
		if col := sc.SQL.Column(idx); !cat.indexedBy(col) {
			add("CREATE INDEX ON %s USING hash (%s)", t.name, q(col))
		}
	}
	for _, tg := range []string{"_starplan_touch", "_starplan_bump", "_starplan_ord"} {
		out = append(out, adoptTrigger(schema, sc, tg))
	}
	add("INSERT INTO %s (name, ver) VALUES (%s, nextval('%s'))", ident(schema, verTable), literal(sc.Name), seq)
	return out
}

// adoptTrigger is the CREATE TRIGGER of trigger tg (_starplan_touch, _starplan_bump or
// _starplan_ord) on mapped table sc's SQL table, for the store in schema.
func adoptTrigger(schema string, sc *store.Schema, tg string) string {
	name := newSQLTable(schema, sc).name
	switch tg {
	case "_starplan_touch":
		return fmt.Sprintf("CREATE TRIGGER _starplan_touch BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)", name, ident(schema, touchFunc), literal(sc.Name))
	case "_starplan_bump":
		return fmt.Sprintf("CREATE TRIGGER _starplan_bump BEFORE UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s()", name, ident(schema, bumpFunc))
	}
	return ordTriggerSQL(schema, sc)
}

// checkAdopted reports, as problems of kind store.CheckRecord, how each mapped table of s no
// longer fits its domain table or lost what the store added to it (another program may have
// altered it since).
func (s *Store) checkAdopted(ctx context.Context, db catalogDB, rep *store.CheckReport) error {
	for _, name := range s.names {
		sc := s.schemas[name]
		if sc.SQL == nil {
			continue
		}
		sqlSchema, sqlName, _ := strings.Cut(sc.SQL.Table, ".")
		cat, err := readCatalog(ctx, db, sqlSchema, sqlName)
		if err != nil {
			return err
		}
		for _, p := range mappingProblems(s.schema, sc, cat, true) {
			what := p.SQLTable
			if p.Column != "" {
				what += " column " + p.Column
			}
			rep.Add(store.CheckRecord, name, "mapped onto %s: %s; %s", what, p.Found, p.Fix)
		}
	}
	return nil
}
