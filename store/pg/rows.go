package pg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// sqlTable is a domain table's SQL form: its columns, in the schema's field order, and the
// select list that reads a row back. A table mapped onto an existing one (table.SQLMapping) is
// that table, its fields in the columns the mapping names, read back cast to the types starplan
// keeps (an int of an integer column is an int64, a varchar is text, a numeric a float8).
type sqlTable struct {
	schema string // the store's SQL schema (its version rows)
	s      *store.Schema
	name   string   // the quoted, schema-qualified table name
	path   []string // the table's schema and name, unquoted
	mapped bool     // an existing table (s.SQL), not one the store made
	cols   []string // field names, in declaration order
	fields []*store.Field
	sel    string // the select list of the fields, with _version first
	keySel string // the key column as selected ("t.col", cast to bigint or text when mapped)
}

func newSQLTable(schema string, s *store.Schema) *sqlTable {
	t := &sqlTable{schema: schema, s: s, name: ident(schema, s.Name), path: []string{schema, s.Name}}
	if s.SQL != nil {
		sqlSchema, sqlName, _ := strings.Cut(s.SQL.Table, ".")
		t.path, t.mapped = []string{sqlSchema, sqlName}, true
		t.name = ident(sqlSchema, sqlName)
	}
	sel := []string{"t._version"}
	for i := range s.Fields {
		f := s.FieldsByName[s.Fields[i].Name]
		t.cols = append(t.cols, f.Name)
		t.fields = append(t.fields, f)
		sel = append(sel, t.selCol(f.Field))
	}
	t.sel = strings.Join(sel, ", ")
	t.keySel = t.selCol(s.KeyField.Field)
	return t
}

// selCol is how the select list reads field f.
func (t *sqlTable) selCol(f *table.Field) string {
	c := "t." + t.col(f.Name)
	switch {
	case f.Nested():
		return c + "::text" // decoded with its numbers' kinds (decode)
	case !t.mapped:
		return c
	case f.Type == table.TypeInt:
		return c + "::bigint"
	case f.Type == table.TypeFloat:
		return c + "::float8"
	case f.Type == table.TypeString, f.Type == table.TypeTimestamp:
		return c + "::text"
	}
	return c
}

// col is the quoted column of a field.
func (t *sqlTable) col(field string) string { return q(t.s.SQL.Column(field)) }

// colNames are the (unquoted) columns of t.cols, in order.
func (t *sqlTable) colNames() []string {
	out := make([]string, len(t.cols))
	for i, c := range t.cols {
		out[i] = t.s.SQL.Column(c)
	}
	return out
}

// sqlType is the column type of a field.
func sqlType(f *table.Field) string {
	switch f.Type {
	case table.TypeInt:
		return "bigint"
	case table.TypeFloat:
		return "double precision"
	case table.TypeBool:
		return "boolean"
	case table.TypeList, table.TypeObject:
		return "jsonb"
	}
	return "text" // string, and timestamp: the ISO-8601 text as written, its form kept
}

// literal quotes a string as an SQL literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// createTableSQL is the CREATE TABLE of a domain table: typed columns, the key as primary key,
// NOT NULL for required fields and CHECK constraints for the bounds the schema states (number
// bounds, lengths, enums; a pattern is RE2, which PostgreSQL's regular expressions do not
// match exactly, so it is left to starplan's own validation), and _version and _ord.
func createTableSQL(schema string, s *store.Schema) string {
	var cols []string
	for i := range s.Fields {
		f := &s.Fields[i]
		c := q(f.Name) + " " + sqlType(f)
		if f.Name == s.Key {
			c += " PRIMARY KEY"
		} else if f.Required {
			c += " NOT NULL"
		}
		if chk := checkSQL(f); chk != "" {
			c += " CHECK (" + chk + ")"
		}
		cols = append(cols, c)
	}
	cols = append(cols, "_version bigint NOT NULL DEFAULT nextval('"+strings.ReplaceAll(ident(schema, verSeq), "'", "''")+"')")
	cols = append(cols, "_ord bytea NOT NULL UNIQUE") // the key's natural order (ordKey)
	return "CREATE TABLE " + ident(schema, s.Name) + " (\n\t" + strings.Join(cols, ",\n\t") + "\n)"
}

// checkSQL is the CHECK constraint's condition of field f's bounds (number bounds, lengths,
// enums), or "" when it states none.
func checkSQL(f *table.Field) string {
	var checks []string
	switch f.Type {
	case table.TypeInt, table.TypeFloat:
		if f.Min != nil {
			checks = append(checks, q(f.Name)+" >= "+num(*f.Min))
		}
		if f.Max != nil {
			checks = append(checks, q(f.Name)+" <= "+num(*f.Max))
		}
	case table.TypeString, table.TypeTimestamp:
		checks = append(checks, fmt.Sprintf("char_length(%s) <= %d", q(f.Name), f.MaxChars()))
		if f.MinLen > 0 {
			checks = append(checks, fmt.Sprintf("char_length(%s) >= %d", q(f.Name), f.MinLen))
		}
		if len(f.Enum) > 0 {
			vals := make([]string, len(f.Enum))
			for i, e := range f.Enum {
				vals[i] = literal(e)
			}
			checks = append(checks, q(f.Name)+" IN ("+strings.Join(vals, ", ")+")")
		}
	}
	return strings.Join(checks, " AND ")
}

// values returns a validated row's column values in t.cols order, then its _ord when withOrd.
func (t *sqlTable) values(r table.Row, withOrd bool) ([]any, error) {
	out := make([]any, 0, len(t.cols)+1)
	for _, f := range t.fields {
		v := r[f.Name]
		if v != nil && f.Nested() {
			raw, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("%s row %s: field %s: %w", t.s.Name, table.FormatValue(r[t.s.Key]), f.Name, err)
			}
			v = json.RawMessage(raw)
		}
		out = append(out, v)
	}
	if withOrd {
		out = append(out, ordKey(r[t.s.Key]))
	}
	return out, nil
}

// rec is a committed row as read: its key, its row and its version.
type rec struct {
	key any
	row table.Row
	ver int64
}

// decode turns the values of one selected row (t.sel, after skip leading columns) into a rec.
func (t *sqlTable) decode(vals []any) (*rec, error) {
	ver, ok := vals[0].(int64)
	if !ok {
		return nil, fmt.Errorf("%s: a row's _version is %T", t.s.Name, vals[0])
	}
	row := make(table.Row, len(t.fields))
	for i, f := range t.fields {
		v := vals[i+1]
		if v != nil && f.Nested() {
			str, _ := v.(string)
			dec := json.NewDecoder(bytes.NewReader([]byte(str)))
			dec.UseNumber()
			var x any
			if err := dec.Decode(&x); err != nil {
				return nil, fmt.Errorf("%s: field %s does not read back: %w", t.s.Name, f.Name, err)
			}
			v = table.RestoreKinds(f.Field, store.FromJSON(x))
		}
		row[f.Name] = v
	}
	return &rec{key: row[t.s.Key], row: row, ver: ver}, nil
}

// scanRecs reads every row of rows (selected with t.sel) as recs.
func (t *sqlTable) scanRecs(rows pgx.Rows) ([]*rec, error) {
	defer rows.Close()
	var out []*rec
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		r, err := t.decode(vals)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
