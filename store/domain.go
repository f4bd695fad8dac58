package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/table"
)

// Domain is a set of tables declared as data: the schemas and the rows a new store starts with.
// A domain is a directory (or fs.FS) holding domain.json and, optionally, seed.json:
//
//	domain.json  {"name": "inventory", "doc": "...", "tables": [<table.Schema>, ...]}
//	seed.json    {"<table>": [<row>, ...], ...}
//
// and the files of the layers above the store (the policy, the prompt notes, the example plan;
// see package domains), which the store keeps as the domain's Definition. Adding a domain needs
// no Go changes: LoadDomain reads any such directory.
type Domain struct {
	Name   string          `json:"name"`
	Doc    string          `json:"doc,omitempty"`
	Tables []*table.Schema `json:"tables"`
	// Seed holds the rows of a new store, per table, already validated against the schemas.
	Seed map[string][]table.Row `json:"-"`
	// Definition holds the domain's files as read (every definition file at the root of its
	// directory but seed.json), by name. A store records them when it is created, and a store
	// opened without a domain is opened with the one it recorded.
	Definition map[string]string `json:"-"`

	schemas map[string]*Schema
}

// The files of a domain's directory. The store reads domain.json and seed.json; it records
// every definition file (a lower-case name ending in .json, .star or .md) for the layers above.
const (
	DomainFile = "domain.json"
	SeedFile   = "seed.json"
	// MaxDefinition is the most bytes a domain's definition files may hold together. The store
	// records them in its own record, which every commit rewrites.
	MaxDefinition = 256 << 10
)

var definitionFileRE = regexp.MustCompile(`^[a-z][a-z0-9_]*\.(json|star|md)$`)

// Inventory returns the inventory domain that ships with starplan (domains/inventory): the
// tables inventory and transactions, seeded with the demo store (six sunglasses styles and the
// opening balance). Each call returns a new value that the caller may change.
func Inventory() *Domain {
	dir, ok := domains.Builtin(domains.Inventory)
	if !ok {
		panic("the inventory domain is not embedded")
	}
	d, err := LoadDomain(dir)
	if err != nil {
		panic(fmt.Sprintf("the embedded inventory domain is broken: %v", err))
	}
	return d
}

// LoadDomain reads a domain from fsys (use os.DirFS for a directory): domain.json, seed.json
// when present, and the other definition files as its Definition. It checks every schema and
// validates every seed row, so a domain that loads can be opened.
func LoadDomain(fsys fs.FS) (*Domain, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("load domain: %w", err)
	}
	def := map[string]string{}
	var seed []byte
	total := 0
	for _, e := range entries {
		if !definitionFileRE.MatchString(e.Name()) {
			continue
		}
		if !e.Type().IsRegular() {
			// A link or a device would be read as something else than the directory shows.
			return nil, fmt.Errorf("load domain: %s is not a regular file (a link, a directory or a device); copy the file itself into the domain", e.Name())
		}
		limit := MaxDefinition - total
		if e.Name() == SeedFile {
			limit = MaxSeed
		}
		b, err := readAtMost(fsys, e.Name(), limit)
		if err != nil {
			return nil, fmt.Errorf("load domain: %w", err)
		}
		if e.Name() == SeedFile {
			seed = b
			continue
		}
		total += len(b)
		def[e.Name()] = string(b)
	}
	if _, ok := def[DomainFile]; !ok {
		return nil, fmt.Errorf("load domain: no %s", DomainFile)
	}
	d, err := DomainFromDefinition(def)
	if err != nil {
		return nil, err
	}
	if seed != nil {
		// A seed with several bad rows is refused with one error per row, joined (errors.Join).
		if d.Seed, err = d.DecodeTables(bytes.NewReader(seed)); err != nil {
			return nil, fmt.Errorf("load domain %s: %w", d.Name, diag.JSONError(SeedFile, string(seed), err))
		}
	}
	return d, nil
}

// MaxSeed is the most bytes a domain's seed.json may hold: a seed is demo data (db import loads
// real data, in batches).
const MaxSeed = 16 << 20

// readAtMost reads a file of fsys, failing as soon as it holds more than limit bytes: a file is
// never read whole before its size is known to fit.
func readAtMost(fsys fs.FS, name string, limit int) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		if name == SeedFile {
			return nil, fmt.Errorf("%s holds more than %d bytes; load real data with starplan db import", name, limit)
		}
		return nil, fmt.Errorf("its definition files hold more than %d bytes (at %s)", MaxDefinition, name)
	}
	return b, nil
}

// DomainFromDefinition builds a domain (without seed rows) from its definition files, as a
// store recorded them.
func DomainFromDefinition(def map[string]string) (*Domain, error) {
	var d Domain
	dec := json.NewDecoder(strings.NewReader(def[DomainFile]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("load domain: %w", diag.JSONError(DomainFile, def[DomainFile], err))
	}
	if dec.More() {
		return nil, fmt.Errorf("load domain: %s: trailing data after the JSON object", DomainFile)
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("load domain: %s: %w", DomainFile, err)
	}
	d.Definition = maps.Clone(def)
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
	d.schemas = make(map[string]*Schema, len(d.Tables))
	for _, t := range d.Tables {
		if t == nil {
			return errors.New("null table")
		}
		c, err := CompileSchema(t)
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

// Schemas returns the compiled schemas, by table name, compiling them if the Domain was built in Go.
func (d *Domain) Schemas() (map[string]*Schema, error) {
	if d.schemas == nil || len(d.schemas) != len(d.Tables) {
		if err := d.check(); err != nil {
			return nil, err
		}
	}
	return d.schemas, nil
}

// DecodeTables reads {"table": [rows]} and validates every row; the error names the table and
// the row's position.
func (d *Domain) DecodeTables(r io.Reader) (map[string][]table.Row, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var raw map[string][]map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	// Every bad row is reported (up to maxSeedErrors), so that a seed is corrected in one pass.
	out := make(map[string][]table.Row, len(raw))
	var errs []error
	more := 0
	bad := func(err error) {
		if len(errs) < maxSeedErrors {
			errs = append(errs, err)
		} else {
			more++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		s := d.schemas[name]
		if s == nil {
			bad(fmt.Errorf("unknown table %q%s", name, DidYouMean(name, d.TableNames())))
			continue
		}
		seen := make(map[any]int, len(raw[name]))
		rows := make([]table.Row, 0, len(raw[name]))
		for i, r := range raw[name] {
			row, err := s.ValidateRow(FromJSON(r).(map[string]any))
			if err != nil {
				bad(fmt.Errorf("%s record %d: %w", name, i+1, err))
				continue
			}
			k := row[s.Key]
			if j, dup := seen[k]; dup {
				bad(fmt.Errorf("%s record %d: key %s repeats record %d", name, i+1, table.FormatValue(k), j))
				continue
			}
			seen[k] = i + 1
			rows = append(rows, row)
		}
		out[name] = rows
	}
	if more > 0 {
		errs = append(errs, fmt.Errorf("and %d more bad records", more))
	}
	return out, errors.Join(errs...)
}

// maxSeedErrors is the most bad seed rows one load reports (the rest are counted).
const maxSeedErrors = 20

// TableNames lists the domain's table names in the order they are declared.
func (d *Domain) TableNames() []string {
	names := make([]string, len(d.Tables))
	for i, t := range d.Tables {
		names[i] = t.Name
	}
	return names
}

// DidYouMean is " (did you mean \"NAME\"?)" for the candidate nearest x, else " (known: A, B)".
func DidYouMean(x string, candidates []string) string {
	if near := nearest(x, candidates); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return " (known: " + strings.Join(candidates, ", ") + ")"
}

// FromJSON turns the json.Number values of a decoded document into int64 (integer literals) or
// float64 (anything with a fraction or exponent), recursively.
func FromJSON(v any) any {
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
			x[k] = FromJSON(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = FromJSON(e)
		}
		return x
	}
	return v
}
