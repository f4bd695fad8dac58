package store

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/starplan/starplan/table"
)

// Domain is a set of tables declared as data: the schemas and the rows a new store starts with.
// A domain is a directory (or fs.FS) holding domain.json and, optionally, seed.json:
//
//	domain.json  {"name": "inventory", "doc": "...", "tables": [<table.Schema>, ...]}
//	seed.json    {"<table>": [<row>, ...], ...}
//
// Adding a domain needs no Go changes: LoadDomain reads any such directory.
type Domain struct {
	Name   string          `json:"name"`
	Doc    string          `json:"doc,omitempty"`
	Tables []*table.Schema `json:"tables"`
	// Seed holds the rows of a new store, per table, already validated against the schemas.
	Seed map[string][]table.Row `json:"-"`

	schemas map[string]*schema
}

//go:embed domains
var domainsFS embed.FS

// Inventory returns the inventory domain that ships with starplan: the tables inventory and
// transactions, seeded with the demo store (six sunglasses styles and the opening balance). Each
// call returns a new value that the caller may change.
func Inventory() *Domain {
	sub, err := fs.Sub(domainsFS, "domains/inventory")
	if err != nil {
		panic(err)
	}
	d, err := LoadDomain(sub)
	if err != nil {
		panic(fmt.Sprintf("the embedded inventory domain is broken: %v", err))
	}
	return d
}

// LoadDomain reads a domain from fsys (use os.DirFS for a directory): domain.json, and
// seed.json when present. It checks every schema and validates every seed row, so a domain that
// loads can be opened.
func LoadDomain(fsys fs.FS) (*Domain, error) {
	raw, err := fs.ReadFile(fsys, "domain.json")
	if err != nil {
		return nil, fmt.Errorf("load domain: %w", err)
	}
	var d Domain
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("load domain: domain.json: %w", err)
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("load domain: domain.json: %w", err)
	}
	raw, err = fs.ReadFile(fsys, "seed.json")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &d, nil
	case err != nil:
		return nil, fmt.Errorf("load domain %s: %w", d.Name, err)
	}
	seed, err := d.decodeTables(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("load domain %s: seed.json: %w", d.Name, err)
	}
	d.Seed = seed
	return &d, nil
}

// check compiles every schema.
func (d *Domain) check() error {
	if !nameRE.MatchString(d.Name) {
		return fmt.Errorf("domain name %q: must be a letter followed by letters, digits or _", d.Name)
	}
	if len(d.Tables) == 0 {
		return errors.New("a domain needs at least one table")
	}
	d.schemas = make(map[string]*schema, len(d.Tables))
	for _, t := range d.Tables {
		if t == nil {
			return errors.New("null table")
		}
		c, err := compileSchema(t)
		if err != nil {
			return err
		}
		if d.schemas[t.Name] != nil {
			return fmt.Errorf("table %s is declared twice", t.Name)
		}
		d.schemas[t.Name] = c
	}
	return nil
}

// compiled returns the compiled schemas, compiling them if the Domain was built in Go.
func (d *Domain) compiled() (map[string]*schema, error) {
	if d.schemas == nil || len(d.schemas) != len(d.Tables) {
		if err := d.check(); err != nil {
			return nil, err
		}
	}
	return d.schemas, nil
}

// decodeTables reads {"table": [rows]} and validates every row; the error names the table and
// the row's position.
func (d *Domain) decodeTables(r io.Reader) (map[string][]table.Row, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var raw map[string][]map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	out := make(map[string][]table.Row, len(raw))
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := d.schemas[name]
		if s == nil {
			return nil, fmt.Errorf("unknown table %q%s", name, didYouMean(name, d.tableNames()))
		}
		seen := make(map[any]int, len(raw[name]))
		rows := make([]table.Row, 0, len(raw[name]))
		for i, r := range raw[name] {
			row, err := s.validate(fromJSON(r).(map[string]any))
			if err != nil {
				return nil, fmt.Errorf("%s record %d: %w", name, i+1, err)
			}
			k := row[s.Key]
			if j, dup := seen[k]; dup {
				return nil, fmt.Errorf("%s record %d: key %s repeats record %d", name, i+1, table.FormatValue(k), j)
			}
			seen[k] = i + 1
			rows = append(rows, row)
		}
		out[name] = rows
	}
	return out, nil
}

func (d *Domain) tableNames() []string {
	names := make([]string, len(d.Tables))
	for i, t := range d.Tables {
		names[i] = t.Name
	}
	return names
}

func didYouMean(x string, candidates []string) string {
	if near := nearest(x, candidates); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return " (known: " + strings.Join(candidates, ", ") + ")"
}

// fromJSON turns the json.Number values of a decoded document into int64 (integer literals) or
// float64 (anything with a fraction or exponent), recursively.
func fromJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil && !strings.ContainsAny(string(x), ".eE") {
			return i
		}
		f, err := x.Float64()
		if err != nil {
			return string(x)
		}
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = fromJSON(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = fromJSON(e)
		}
		return x
	}
	return v
}
