package store

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/starplan/starplan/table"
)

// Format is a file format for Export and Import.
type Format string

// The formats Export and Import understand.
const (
	JSON Format = "json" // an array of row objects, fields in schema order
	CSV  Format = "csv"  // a header row of field names, then one line per row
)

// FormatOf picks the format from a file name's extension (.json or .csv).
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return JSON, nil
	case ".csv":
		return CSV, nil
	}
	return "", fmt.Errorf("cannot tell the format of %s from its extension: use .json or .csv", path)
}

// ImportMode says what Import does with the table's existing rows.
type ImportMode int

const (
	// Upsert inserts rows with new keys and replaces rows whose key exists; other rows stay.
	Upsert ImportMode = iota
	// Replace makes the table hold exactly the imported rows.
	Replace
)

// ImportResult counts what an Import changed.
type ImportResult struct {
	Inserted, Updated, Deleted, Unchanged int
}

// ImportError is a record that cannot be imported; nothing was imported. Record is the 1-based
// position of the row among the data records (0 for a problem with the file itself) and Line
// the line of the file where it starts (0 when unknown). Err is usually a *table.FieldError
// naming the field, the value and the rule.
type ImportError struct {
	Table  string
	Record int
	Line   int
	Err    error
}

func (e *ImportError) Error() string {
	return fmt.Sprintf("import %s: %s; nothing was imported", e.Table, e.problem())
}

// problem is the record's place and what is wrong with it: "record 2, line 3: field "price" is
// empty: it is required". An absent value is "empty" (a CSV cell, a JSON null or a missing
// field), never Python's None.
func (e *ImportError) problem() string {
	var where []string
	if e.Record > 0 {
		where = append(where, fmt.Sprintf("record %d", e.Record))
	}
	if e.Line > 0 {
		where = append(where, fmt.Sprintf("line %d", e.Line))
	}
	msg := e.Err.Error()
	var fe *table.FieldError
	switch {
	case errors.As(e.Err, &fe) && fe.Field != "" && fe.Value == nil:
		msg = fmt.Sprintf("field %q is empty: it %s", fe.Field, fe.Rule) // "is required", "must be ..."
	case errors.As(e.Err, &fe) && fe.Field != "":
		msg = fmt.Sprintf("field %q = %s %s", fe.Field, table.FormatValue(fe.Value), fe.Rule)
	}
	if len(where) == 0 {
		return msg
	}
	return strings.Join(where, ", ") + ": " + msg
}

// MaxImportErrors is how many bad records an import reports before it stops looking: enough to
// fix a file in one pass, bounded for a file that is wrong on every line.
const MaxImportErrors = 20

// ImportErrors are every bad record of an import (at most MaxImportErrors, and how many more
// there were); nothing was imported. errors.As finds each *ImportError.
type ImportErrors struct {
	Table string
	Errs  []*ImportError
	// More counts the bad records found past MaxImportErrors; Partial says the file could not
	// be read to its end (a malformed line), so there may be others after the last one.
	More    int
	Partial bool
}

func (e *ImportErrors) Error() string {
	if len(e.Errs) == 1 && e.More == 0 {
		return e.Errs[0].Error()
	}
	var b strings.Builder
	n := len(e.Errs) + e.More
	fmt.Fprintf(&b, "import %s: %d records are wrong; nothing was imported:", e.Table, n)
	for _, ie := range e.Errs {
		b.WriteString("\n  " + ie.problem())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n  and %d more", e.More)
	}
	if e.Partial {
		b.WriteString("\n  (reading stopped at the last one; there may be more after it)")
	}
	return b.String()
}

func (e *ImportErrors) Unwrap() []error {
	out := make([]error, len(e.Errs))
	for i, ie := range e.Errs {
		out[i] = ie
	}
	return out
}

// add records a bad record, counting those past the cap.
func (e *ImportErrors) add(ie *ImportError) {
	if len(e.Errs) < MaxImportErrors {
		e.Errs = append(e.Errs, ie)
		return
	}
	e.More++
}

// err is e as an error, or nil when no record was bad.
func (e *ImportErrors) err() error {
	if len(e.Errs) == 0 {
		return nil
	}
	slices.SortStableFunc(e.Errs, func(a, b *ImportError) int { return cmp.Compare(a.Record, b.Record) })
	return e
}

func (e *ImportError) Unwrap() error { return e.Err }

// Seed replaces every table's rows with the domain's seed rows in one atomic step. Without
// force it refuses (ErrNotEmpty) when any table holds a row. System collections are kept.
func (s *Store) Seed(ctx context.Context, force bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("store is closed")
	}
	var ops []op
	for _, name := range s.names {
		mt := s.tables[name]
		if len(mt.order) > 0 && !force {
			return ErrNotEmpty
		}
		sc := s.schemas[name]
		seeded := map[any]bool{}
		for _, row := range s.domain.Seed[name] {
			k := row[sc.Key]
			seeded[k] = true
			ops = append(ops, op{s: sc, key: k, row: row, base: mt.version(k)})
		}
		for _, r := range mt.order {
			if !seeded[r.key] {
				ops = append(ops, op{s: sc, key: r.key, base: r.ver})
			}
		}
	}
	return s.commitLocked(ops, nil)
}

// snapshot returns the committed rows of a table in key order.
func (s *Store) snapshot(name string) (*schema, []*rec, error) {
	sc := s.schemas[name]
	if sc == nil {
		return nil, nil, fmt.Errorf("unknown table %q%s", name, didYouMean(name, s.names))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sc, append([]*rec(nil), s.tables[name].order...), nil
}

// Dump writes every table as one JSON object {"<table>": [rows...]}, tables sorted, rows in key
// order and fields in schema order: the format of a domain's seed.json.
func (s *Store) Dump(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("{")
	for i, name := range s.names {
		sc, recs, err := s.snapshot(name)
		if err != nil {
			return err
		}
		if i > 0 {
			bw.WriteString(",")
		}
		fmt.Fprintf(bw, "\n  %q: ", name)
		writeRowsJSON(bw, sc, recs, "  ")
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// Export writes one table's committed rows in key order as JSON or CSV.
func (s *Store) Export(w io.Writer, name string, format Format) error {
	sc, recs, err := s.snapshot(name)
	if err != nil {
		return err
	}
	switch format {
	case JSON:
		bw := bufio.NewWriter(w)
		writeRowsJSON(bw, sc, recs, "")
		bw.WriteString("\n")
		return bw.Flush()
	case CSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(sc.FieldNames()); err != nil {
			return err
		}
		line := make([]string, len(sc.Fields))
		for _, r := range recs {
			for i, f := range sc.Fields {
				line[i] = csvCell(r.row[f.Name])
			}
			if err := cw.Write(line); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	}
	return fmt.Errorf("unknown format %q (want json or csv)", format)
}

func writeRowsJSON(w *bufio.Writer, sc *schema, recs []*rec, indent string) {
	if len(recs) == 0 {
		w.WriteString("[]")
		return
	}
	w.WriteString("[")
	for i, r := range recs {
		if i > 0 {
			w.WriteString(",")
		}
		w.WriteString("\n" + indent + "  {")
		for j, f := range sc.Fields {
			if j > 0 {
				w.WriteString(", ")
			}
			name, _ := json.Marshal(f.Name)
			w.Write(name)
			w.WriteString(": ")
			w.WriteString(jsonValue(r.row[f.Name]))
		}
		w.WriteString("}")
	}
	w.WriteString("\n" + indent + "]")
}

// jsonValue renders a stored value; floats keep a decimal point (80.0), so a file read back
// shows which numbers are floats.
func jsonValue(v any) string {
	if f, ok := v.(float64); ok {
		return formatFloat(f)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}

func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if len(s) > 21 {
		s = strconv.FormatFloat(f, 'g', -1, 64)
	}
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

func csvCell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return formatFloat(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		if x {
			return "true"
		}
		return "false"
	}
	return jsonValue(v)
}

// record is one parsed import row and where it came from.
type record struct {
	row  table.Row
	num  int
	line int
}

// Import reads rows for one table from r and writes them in one atomic step. JSON is an array of
// objects, or {"<table>": [...]} as Dump writes; CSV is a header of field names, then rows, where
// an empty cell is no value (None). Every row is validated before anything is written: one bad
// row imports nothing, and the *ImportError names the record, its line, the field and the rule.
// A missing key is generated when the schema has a key prefix. Upsert replaces a row whose key
// exists with the imported row as a whole (columns the file lacks become None).
func (s *Store) Import(ctx context.Context, name string, r io.Reader, format Format, mode ImportMode) (ImportResult, error) {
	var res ImportResult
	sc := s.schemas[name]
	if sc == nil {
		return res, fmt.Errorf("import: unknown table %q%s", name, didYouMean(name, s.names))
	}
	var recs []record
	var err error
	bad := &ImportErrors{Table: name}
	switch format {
	case JSON:
		recs, err = readJSONRecords(sc, r)
	case CSV:
		recs, err = readCSVRecords(sc, r, bad)
	default:
		return res, fmt.Errorf("import: unknown format %q (want json or csv)", format)
	}
	if err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return res, errors.New("store is closed")
	}
	mt := s.tables[name]
	next := int64(-1)
	if mode == Upsert {
		next = mt.maxNum
	}
	for _, rc := range recs {
		if n, ok := sc.keyNum(rc.row[sc.Key]); ok && n > next {
			next = n
		}
	}
	rows := make([]table.Row, len(recs))
	seen := make(map[any]int, len(recs))
	for i, rc := range recs {
		if rc.row[sc.Key] == nil && sc.KeyPrefix != "" {
			next++
			rc.row[sc.Key] = sc.formatKey(max(next, 1))
			next = max(next, 1)
		}
		row, err := sc.validate(rc.row)
		if err != nil {
			bad.add(&ImportError{Table: name, Record: rc.num, Line: rc.line, Err: err})
			continue
		}
		k := row[sc.Key]
		if j, dup := seen[k]; dup {
			bad.add(&ImportError{Table: name, Record: rc.num, Line: rc.line,
				Err: &table.FieldError{Table: name, Key: k, Rule: fmt.Sprintf("duplicate key: record %d has the same %s", recs[j].num, sc.Key)}})
			continue
		}
		seen[k] = i
		rows[i] = row
	}
	if err := bad.err(); err != nil {
		return res, err
	}
	var ops []op
	for _, row := range rows {
		k := row[sc.Key]
		cur := mt.rows[k]
		switch {
		case cur == nil:
			res.Inserted++
			ops = append(ops, op{s: sc, key: k, row: row})
		case equalRows(cur.row, row):
			res.Unchanged++
		default:
			res.Updated++
			ops = append(ops, op{s: sc, key: k, row: row, base: cur.ver})
		}
	}
	if mode == Replace {
		for _, cur := range mt.order {
			if _, keep := seen[cur.key]; !keep {
				res.Deleted++
				ops = append(ops, op{s: sc, key: cur.key, base: cur.ver})
			}
		}
	}
	if err := s.commitLocked(ops, nil); err != nil {
		return ImportResult{}, err
	}
	return res, nil
}

func readJSONRecords(sc *schema, r io.Reader) ([]record, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &ImportError{Table: sc.Name, Err: err}
	}
	// lineAt returns the line of the first token at or after off. Records come in increasing
	// offsets, so it counts newlines on from the previous call instead of from the start (which
	// made importing 100k rows take seconds).
	seenOff, seenLine := int64(0), 1
	lineAt := func(off int64) int {
		for off < int64(len(data)) && strings.ContainsRune(" \t\r\n,", rune(data[off])) {
			off++
		}
		off = min(off, int64(len(data)))
		if off < seenOff {
			seenOff, seenLine = 0, 1
		}
		seenLine += bytes.Count(data[seenOff:off], []byte("\n"))
		seenOff = off
		return seenLine
	}
	jsonErr := func(rec int, err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &ImportError{Table: sc.Name, Record: rec, Line: lineAt(se.Offset - 1), Err: fmt.Errorf("malformed JSON: %v", se)}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &ImportError{Table: sc.Name, Record: rec, Line: lineAt(te.Offset - 1),
				Err: fmt.Errorf("want an object with the row's fields, found a JSON %s", te.Value)}
		}
		return &ImportError{Table: sc.Name, Record: rec, Err: fmt.Errorf("malformed JSON: %v", err)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonErr(0, err)
	}
	if tok == json.Delim('{') { // {"<table>": [...]}, as Dump writes
		found := false
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return nil, jsonErr(0, err)
			}
			if key == sc.Name {
				found = true
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, jsonErr(0, err)
			}
		}
		if !found {
			return nil, &ImportError{Table: sc.Name, Err: fmt.Errorf("the JSON object has no %q member", sc.Name)}
		}
		if tok, err = dec.Token(); err != nil {
			return nil, jsonErr(0, err)
		}
	}
	if tok != json.Delim('[') {
		return nil, &ImportError{Table: sc.Name, Line: lineAt(dec.InputOffset() - 1), Err: errors.New("want a JSON array of row objects")}
	}
	var recs []record
	for n := 1; dec.More(); n++ {
		line := lineAt(dec.InputOffset())
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			return nil, jsonErr(n, err)
		}
		if obj == nil {
			return nil, &ImportError{Table: sc.Name, Record: n, Line: line, Err: errors.New("want an object with the row's fields, found null")}
		}
		recs = append(recs, record{row: fromJSON(obj).(map[string]any), num: n, line: line})
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(0, err)
	}
	return recs, nil
}

// readCSVRecords reads a CSV file: a header of field names, then rows. The separator is a comma,
// or a semicolon when the header has semicolons and no comma (as spreadsheets write CSV in
// locales whose decimal mark is a comma). A row with the wrong number of cells is added to bad
// and reading goes on; a malformed line ends the reading with the records found wrong so far.
func readCSVRecords(sc *schema, r io.Reader, bad *ImportErrors) ([]record, error) {
	br := bufio.NewReader(r)
	cr := csv.NewReader(br)
	if first, _ := br.Peek(64 << 10); len(first) > 0 {
		if i := bytes.IndexByte(first, '\n'); i >= 0 {
			first = first[:i]
		}
		if bytes.IndexByte(first, ',') < 0 && bytes.IndexByte(first, ';') >= 0 {
			cr.Comma = ';'
		}
	}
	cr.FieldsPerRecord = -1 // counted below, so that every short or long row is reported
	csvErr := func(rec int, err error) error {
		ie := &ImportError{Table: sc.Name, Record: rec, Err: fmt.Errorf("malformed CSV: %v", err)}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			ie.Line, ie.Err = pe.Line, fmt.Errorf("malformed CSV: %v", pe.Err)
		}
		if len(bad.Errs) == 0 {
			return ie
		}
		bad.add(ie)
		bad.Partial = true
		return bad
	}
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ImportError{Table: sc.Name, Err: errors.New("empty CSV: the first line must name the fields")}
	}
	if err != nil {
		return nil, csvErr(0, err)
	}
	cols := make([]*field, len(header))
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		f := sc.fields[h]
		if f == nil {
			return nil, &ImportError{Table: sc.Name, Line: 1, Err: fmt.Errorf("header: column %q is not a field of %s%s", h, sc.Name, didYouMean(h, sc.FieldNames()))}
		}
		for _, prev := range cols[:i] {
			if prev == f {
				return nil, &ImportError{Table: sc.Name, Line: 1, Err: fmt.Errorf("header: column %q appears twice", h)}
			}
		}
		cols[i] = f
	}
	var recs []record
	for n := 1; ; n++ {
		cells, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvErr(n, err)
		}
		line, _ := cr.FieldPos(0)
		if len(cells) != len(cols) {
			bad.add(&ImportError{Table: sc.Name, Record: n, Line: line,
				Err: fmt.Errorf("%d cells, but the header names %d fields", len(cells), len(cols))})
			continue
		}
		row := make(table.Row, len(cells))
		for i, cell := range cells {
			if v := csvValue(cols[i], cell); v != nil {
				row[cols[i].Name] = v
			}
		}
		recs = append(recs, record{row: row, num: n, line: line})
	}
	return recs, nil
}

// csvValue converts a cell to the field's kind where it parses; a cell that does not parse is
// passed on as a string so that validation names the value and the rule. An empty cell is no
// value (None) for every type: CSV has no null, and Export writes None as an empty cell.
func csvValue(f *field, cell string) any {
	if cell == "" {
		return nil
	}
	if f.Type == table.TypeString {
		return cell
	}
	c := strings.TrimSpace(cell)
	switch f.Type {
	case table.TypeInt, table.TypeFloat:
		if i, err := strconv.ParseInt(c, 10, 64); err == nil {
			return i
		}
		if x, err := strconv.ParseFloat(c, 64); err == nil {
			return x
		}
	case table.TypeBool:
		if b, err := strconv.ParseBool(c); err == nil {
			return b
		}
	case table.TypeList, table.TypeObject:
		// Export writes a nested value as JSON, so import reads it so.
		dec := json.NewDecoder(strings.NewReader(c))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil && !dec.More() {
			return fromJSON(v)
		}
	}
	return c
}
