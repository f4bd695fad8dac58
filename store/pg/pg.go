package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Options configure Open and Create. The zero value opens the only store in the database with
// the domain it recorded.
type Options struct {
	// Schema is the SQL schema that holds the store (a letter followed by letters, digits or _,
	// at most 54 of them; case is kept). Create defaults it to the domain's name;
	// Open to the Domain's name when one is given, else to the one schema of the database that
	// holds a starplan store (an error names them when there are several).
	Schema string
	// Domain, for Open, is the domain the store must hold (a *store.DomainError otherwise); nil
	// opens it with the domain it recorded.
	Domain *store.Domain
	// NoSeed makes Create leave the tables empty instead of loading the domain's seed rows.
	NoSeed bool
	// Stderr receives Create's one-line note of what it made; nil discards it.
	Stderr io.Writer
	// MaxConns bounds the connection pool (0: pgxpool's default, the larger of 4 and the CPUs).
	MaxConns int32
	// Tracer, when set, sees every query the store sends (tests count them; a caller may log or
	// trace them).
	Tracer pgx.QueryTracer
}

// Store is a starplan store held in a PostgreSQL schema. It is safe for concurrent use, and any
// number of Stores (in as many processes) may work on one database at once: every apply is one
// transaction that takes the locks described in doc.go.
type Store struct {
	pool    *pgxpool.Pool
	schema  string // the SQL schema, unquoted
	domain  *store.Domain
	schemas map[string]*store.Schema
	names   []string
	tables  map[string]*sqlTable
	defSums []byte // the record's definition_sums as opened (checkDefinition)
	locks   sysLocks
}

// maxSchemaName is the longest schema name: PostgreSQL's identifiers hold 63 bytes, and the
// store's notification channel is the name with a prefix of 9.
const maxSchemaName = 54

// formatVersion is the layout of the SQL objects a store is made of (the _starplan row's format).
const formatVersion = 1

// The store's own SQL objects in its schema, besides one table per domain table. Domain names
// cannot start with "_", so none can be a domain table.
const (
	metaTable   = "_starplan"        // one row: format, domain, definition and its sums
	verTable    = "_starplan_tables" // one row per domain table: its version
	verSeq      = "_starplan_ver"    // every version (rows' and tables') comes from it
	sysTable    = "_starplan_sys"    // the system documents
	sysIdxTable = "_starplan_sysidx" // the system collections whose ordered index is current
	touchFunc   = "_starplan_touch"  // the trigger function that bumps a table's version
	bumpFunc    = "_starplan_bump"   // the trigger function that bumps a changed row's version
)

// ErrExists is matched (errors.Is) by Create's error when the schema already holds a store.
var ErrExists = errors.New("the schema already holds a starplan store")

// Open opens the store in dsn's database (a postgres:// URL or a key=value DSN). A database
// without one is a *store.NoStoreError.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	pool, err := connect(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	s, err := open(ctx, pool, dsn, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Create makes a store of dom in dsn's database, in the schema opts.Schema (default: the
// domain's name, created when missing): one table per domain table with the domain's seed rows
// (none with opts.NoSeed), the system tables and the domain's definition, in one transaction.
// A schema that already holds a store is an error matching ErrExists.
func Create(ctx context.Context, dsn string, dom *store.Domain, opts Options) (*Store, error) {
	if dom == nil {
		return nil, errors.New("create a PostgreSQL store: no domain given")
	}
	if _, err := dom.Schemas(); err != nil {
		return nil, err
	}
	if opts.Schema == "" {
		opts.Schema = dom.Name
	}
	pool, err := connect(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	kept, err := create(ctx, pool, opts.Schema, dom, opts.NoSeed)
	if err != nil {
		pool.Close()
		return nil, err
	}
	opts.Domain = dom
	s, err := open(ctx, pool, dsn, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if opts.Stderr != nil {
		n := 0
		for name, rows := range dom.Seed {
			if !slices.Contains(kept, name) {
				n += len(rows)
			}
		}
		var adopted string
		for _, sc := range dom.Tables {
			if sc.SQL != nil {
				adopted += fmt.Sprintf("; adopted %s as table %s", sc.SQL.Table, sc.Name)
				if slices.Contains(kept, sc.Name) {
					adopted += " (its rows kept, the seed's not loaded)"
				}
			}
		}
		if opts.NoSeed || n == 0 {
			fmt.Fprintf(opts.Stderr, "created new store in PostgreSQL schema %s with empty %s tables%s\n", opts.Schema, dom.Name, adopted)
		} else {
			fmt.Fprintf(opts.Stderr, "created new store in PostgreSQL schema %s with %s%s\n", opts.Schema, store.SeedWords(dom.Name, n), adopted)
		}
	}
	return s, nil
}

func connect(ctx context.Context, dsn string, opts Options) (*pgxpool.Pool, error) {
	if opts.Schema != "" && (!store.ValidName(opts.Schema) || len(opts.Schema) > maxSchemaName) {
		return nil, fmt.Errorf("schema name %q: must be a letter followed by letters, digits or _, at most %d of them", opts.Schema, maxSchemaName)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL connection string: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", redact(dsn), err)
	}
	return pool, nil
}

// redact is dsn as messages show it (store.Redact: every password-like value replaced by xxxxx,
// in a URL or a key=value DSN).
func redact(dsn string) string { return store.Redact(dsn) }

// ident quotes a schema-qualified name.
func ident(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

// q quotes one identifier.
func q(name string) string { return pgx.Identifier{name}.Sanitize() }

// findSchema returns the one schema of the database that holds a store.
func findSchema(ctx context.Context, pool *pgxpool.Pool, dsn string) (string, error) {
	rows, err := pool.Query(ctx, `SELECT table_schema FROM information_schema.tables WHERE table_name = $1 ORDER BY 1`, metaTable)
	if err != nil {
		return "", err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	switch len(found) {
	case 0:
		return "", &store.NoStoreError{Dir: redact(dsn)}
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("the database holds %d starplan stores (schemas %s): say which (--schema, Options.Schema)", len(found), strings.Join(found, ", "))
}

type metaRow struct {
	format     int
	domain     string
	definition map[string]string
	sums       map[string]string
}

func open(ctx context.Context, pool *pgxpool.Pool, dsn string, opts Options) (*Store, error) {
	schema := opts.Schema
	if schema == "" && opts.Domain != nil {
		schema = opts.Domain.Name
	}
	if schema == "" {
		var err error
		if schema, err = findSchema(ctx, pool, dsn); err != nil {
			return nil, err
		}
	}
	var m metaRow
	var def, sums []byte
	err := pool.QueryRow(ctx, "SELECT format, domain, definition, definition_sums FROM "+ident(schema, metaTable)).Scan(&m.format, &m.domain, &def, &sums)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000"): // no such table / schema
		return nil, &store.NoStoreError{Dir: redact(dsn) + " (schema " + schema + ")"}
	case errors.Is(err, pgx.ErrNoRows):
		return nil, &store.DamagedError{Path: schema, Problem: "its " + metaTable + " table holds no row: the store's record is lost"}
	case err != nil:
		return nil, fmt.Errorf("open the store in schema %s: %w", schema, err)
	}
	if m.format != formatVersion {
		return nil, fmt.Errorf("unknown PostgreSQL store format %d in schema %s (this starplan reads format %d)", m.format, schema, formatVersion)
	}
	if err := json.Unmarshal(def, &m.definition); err != nil {
		return nil, &store.DamagedError{Path: schema, Problem: "the recorded domain definition does not read back: " + err.Error(), Err: err}
	}
	if err := json.Unmarshal(sums, &m.sums); err != nil {
		return nil, &store.DamagedError{Path: schema, Problem: "the recorded definition sums do not read back: " + err.Error(), Err: err}
	}
	if msg := store.DefinitionMismatch(m.definition, m.sums); msg != "" {
		return nil, &store.DamagedError{Path: schema, Problem: msg}
	}
	dom := opts.Domain
	if dom == nil {
		if dom, err = store.DomainFromDefinition(m.definition); err != nil {
			return nil, &store.DamagedError{Path: schema, Problem: "the store's recorded domain: " + err.Error(), Err: err}
		}
	}
	if m.domain != dom.Name {
		return nil, &store.DomainError{Dir: redact(dsn) + " (schema " + schema + ")", Holds: m.domain, Wanted: dom.Name}
	}
	schemas, err := dom.Schemas()
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, schema: schema, domain: dom, schemas: schemas, names: dom.TableNames(), tables: map[string]*sqlTable{}, defSums: sums}
	sort.Strings(s.names)
	for _, name := range s.names {
		s.tables[name] = newSQLTable(schema, schemas[name])
	}
	if err := s.addMissingTables(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// create makes the store's SQL objects, adopts the mapped tables and loads the seed, in one
// transaction. kept names the mapped tables that held rows, which were kept and not seeded.
func create(ctx context.Context, pool *pgxpool.Pool, schema string, dom *store.Domain, noSeed bool) (kept []string, err error) {
	def := dom.Definition
	if def == nil {
		// A domain built in Go: its domain.json is what it declares, so Open can rebuild it.
		raw, err := json.Marshal(dom)
		if err != nil {
			return nil, err
		}
		def = map[string]string{store.DomainFile: string(raw)}
	}
	defJSON, err := json.Marshal(def)
	if err != nil {
		return nil, err
	}
	sumsJSON, err := json.Marshal(store.DefinitionSums(def))
	if err != nil {
		return nil, err
	}
	schemas, err := dom.Schemas()
	if err != nil {
		return nil, err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2)`, schema, metaTable).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return fmt.Errorf("create a store in PostgreSQL schema %s: %w (open it, or pass another schema)", schema, ErrExists)
		}
		cats, err := checkMapping(ctx, tx, schema, schemas)
		if err != nil {
			return err
		}
		var stmts []string
		add := func(format string, args ...any) { stmts = append(stmts, fmt.Sprintf(format, args...)) }
		add("CREATE SCHEMA IF NOT EXISTS %s", q(schema))
		add("CREATE TABLE %s (format int NOT NULL, domain text NOT NULL, definition jsonb NOT NULL, definition_sums jsonb NOT NULL, only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row))", ident(schema, metaTable))
		add("CREATE SEQUENCE %s", ident(schema, verSeq))
		add("CREATE TABLE %s (name text PRIMARY KEY, ver bigint NOT NULL)", ident(schema, verTable))
		add(`CREATE TABLE %s (coll text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, json text NOT NULL, ord text COLLATE "C", grp text COLLATE "C", PRIMARY KEY (coll, id))`, ident(schema, sysTable))
		add("CREATE INDEX ON %s (coll, ord, id)", ident(schema, sysTable))
		add("CREATE INDEX ON %s (coll, grp, ord, id)", ident(schema, sysTable))
		add("CREATE TABLE %s (coll text PRIMARY KEY)", ident(schema, sysIdxTable))
		// Every statement that changes a domain table, starplan's or another program's, gives
		// the table a new version; every changed row gets a new version (an insert by default,
		// an update by this trigger unless the writer set one). A mapped table's trigger passes
		// its domain table's name (its SQL name is another); a table of the store's own is named
		// as its domain table. The statement trigger fires BEFORE the statement changes a row:
		// it takes the table's version row first, in the order an apply takes its locks (the
		// version row, then the rows), so that another program's single statement cannot
		// deadlock with an apply (stores made before kept an AFTER trigger: the apply runs
		// again when PostgreSQL ends it for such a deadlock, but the other program's statement
		// may be the one ended).
		add(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	UPDATE %s SET ver = nextval('%s') WHERE name = coalesce(TG_ARGV[0], TG_TABLE_NAME);
	RETURN NULL;
END $f$`, ident(schema, touchFunc), ident(schema, verTable), strings.ReplaceAll(ident(schema, verSeq), "'", "''"))
		add(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	IF NEW._version IS NOT DISTINCT FROM OLD._version THEN
		NEW._version := nextval('%s');
	END IF;
	RETURN NEW;
END $f$`, ident(schema, bumpFunc), strings.ReplaceAll(ident(schema, verSeq), "'", "''"))
		stmts = append(stmts, ordFunctionsSQL(schema)...)
		for _, name := range dom.TableNames() {
			if cat := cats[name]; cat != nil {
				stmts = append(stmts, adoptDDL(schema, schemas[name], cat)...)
			} else {
				stmts = append(stmts, tableDDL(schema, schemas[name])...)
			}
		}
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st); err != nil {
				return fmt.Errorf("create the store in schema %s: %w (in %s)", schema, err, firstLine(st))
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+ident(schema, metaTable)+" (format, domain, definition, definition_sums) VALUES ($1, $2, $3, $4)",
			formatVersion, dom.Name, json.RawMessage(defJSON), json.RawMessage(sumsJSON)); err != nil {
			return err
		}
		if len(dom.Seed) > 0 {
			seed, err := store.EncodeSeed(dom.Seed)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+ident(schema, sysTable)+" (coll, id, json) VALUES ($1, $2, $3)", store.SeedCollection, store.SeedID, string(seed)); err != nil {
				return err
			}
		}
		if noSeed {
			return nil
		}
		for _, name := range dom.TableNames() {
			t := newSQLTable(schema, schemas[name])
			if t.mapped && len(dom.Seed[name]) > 0 {
				// A mapped table's rows are the SQL table's: the seed goes only into an empty one.
				var nonEmpty bool
				if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+t.name+")").Scan(&nonEmpty); err != nil {
					return err
				}
				if nonEmpty {
					kept = append(kept, name)
					continue
				}
			}
			if err := copyRows(ctx, tx, t, dom.Seed[name]); err != nil {
				return err
			}
		}
		return nil
	})
	return kept, err
}

// tableDDL makes one domain table: the table, its declared indexes (hash indexes: reads look
// them up by equality only, and a hash index holds a value of any length), its triggers and
// its version row.
func tableDDL(schema string, sc *store.Schema) []string {
	name := sc.Name
	out := []string{createTableSQL(schema, sc)}
	for _, idx := range sc.Indexes {
		out = append(out, fmt.Sprintf("CREATE INDEX %s ON %s USING hash (%s)", q(name+"_"+idx+"_idx"), ident(schema, name), q(idx)))
	}
	return append(out,
		fmt.Sprintf("CREATE TRIGGER _starplan_touch BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s()", ident(schema, name), ident(schema, touchFunc)),
		fmt.Sprintf("CREATE TRIGGER _starplan_bump BEFORE UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s()", ident(schema, name), ident(schema, bumpFunc)),
		ordTriggerSQL(schema, sc),
		fmt.Sprintf("INSERT INTO %s (name, ver) VALUES (%s, nextval('%s'))", ident(schema, verTable), literal(name), strings.ReplaceAll(ident(schema, verSeq), "'", "''")))
}

// addMissingTables creates the tables of the domain that the store does not have yet (a domain
// may gain tables after its stores were made), empty, in one transaction.
func (s *Store) addMissingTables(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, "SELECT name FROM "+ident(s.schema, verTable))
	if err != nil {
		return fmt.Errorf("open the store in schema %s: %w", s.schema, err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var stmts []string
	for _, name := range s.names {
		if !slices.Contains(have, name) {
			if sc := s.schemas[name]; sc.SQL != nil {
				return fmt.Errorf("open the store in schema %s: table %s is mapped onto %s, which the store has not adopted; a table is mapped when the store is made (db init): remove its \"sql\" property, or make a new store of the domain", s.schema, name, sc.SQL.Table)
			}
			stmts = append(stmts, tableDDL(s.schema, s.schemas[name])...)
		}
	}
	if len(stmts) == 0 {
		return nil
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st); err != nil {
				return fmt.Errorf("add a table to the store in schema %s: %w (in %s)", s.schema, err, firstLine(st))
			}
		}
		return nil
	})
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// copyRows loads validated rows into t with COPY.
func copyRows(ctx context.Context, tx pgx.Tx, t *sqlTable, rows []table.Row) error {
	if len(rows) == 0 {
		return nil
	}
	cols := append(t.colNames(), "_ord")
	n, err := tx.CopyFrom(ctx, pgx.Identifier(t.path), cols, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		return t.values(rows[i], true)
	}))
	if err != nil {
		return fmt.Errorf("load the rows of %s: %w", t.s.Name, err)
	}
	if int(n) != len(rows) {
		return fmt.Errorf("load the rows of %s: %d of %d copied", t.s.Name, n, len(rows))
	}
	return nil
}

// Domain is the domain the store holds.
func (s *Store) Domain() *store.Domain { return s.domain }

// Names lists the domain's tables, sorted.
func (s *Store) Names() []string { return slices.Clone(s.names) }

// Schema returns the named table's schema.
func (s *Store) Schema(name string) (*table.Schema, bool) {
	c := s.schemas[name]
	if c == nil {
		return nil, false
	}
	return c.Schema, true
}

// SQLSchema is the SQL schema that holds the store.
func (s *Store) SQLSchema() string { return s.schema }

// Pool is the store's connection pool, for callers that read the tables with SQL of their own.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the store's connections.
func (s *Store) Close() error {
	s.locks.close()
	s.pool.Close()
	return nil
}

// Store and Stage are the PostgreSQL implementations of store's interfaces.
var (
	_ store.Store = (*Store)(nil)
	_ store.Stage = (*Stage)(nil)
)
