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
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/starplan/starplan/table"
)

// This file holds what every backend's import and export share: the errors of an import
// (ImportError, ImportErrors), reading a CSV file into rows (ReadCSV) and writing one
// (CSVWriter), and the JSON form of a stored value (JSONValue). A backend validates, keys and
// writes the rows its own way.

// ClipText is the start of s, up to its first line's end, as an error quotes it.
func ClipText(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 24 {
		s = strings.ToValidUTF8(s[:24], "") + "…"
	}
	return s
}

// ImportError is a record that cannot be imported; nothing was imported. Record is the 1-based
// position of the row among the data records (0 for a problem with the file itself) and Line
// the line of the file where it starts (0 when unknown). When the problem has a place of its own
// (a CSV cell, what follows a JSON file's value), Line and Col are that place: Col counts the
// line's bytes from 1 (0: no column). Err is usually a *table.FieldError naming the field, the
// value and the rule.
type ImportError struct {
	Table  string
	Record int
	Line   int
	Col    int // the byte of the line where the problem is, from 1, when known (0: not)
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
		if e.Col > 0 {
			where[len(where)-1] += fmt.Sprintf(", column %d", e.Col)
		}
	}
	msg := e.Err.Error()
	var fe *table.FieldError
	switch {
	case errors.As(e.Err, &fe) && fe.Field != "" && fe.Value == nil:
		msg = fmt.Sprintf("field %s is empty: it %s", table.FormatValue(fe.Field), fe.Rule) // "is required", "must be ..."
	case errors.As(e.Err, &fe) && fe.Field != "":
		msg = fmt.Sprintf("field %s = %s %s", table.FormatValue(fe.Field), fileValue(fe.Value), fe.Rule)
	}
	if len(where) == 0 {
		return msg
	}
	return strings.Join(where, ", ") + ": " + msg
}

// fileValue renders a value read from an import's file as JSON writes it, for the error that
// quotes it: true, false and null, not Python's True, False and None (table.FormatValue, for values
// a plan holds), and a number in JSON's shortest form (encoding/json's, ECMAScript's: positional
// below 1e21), so an integer too large for an int reads as the digits the file wrote, rounded,
// not Go's 1.2345678901234567e+19. The file's own text is gone by then (records are decoded into
// rows as read); JSON's is what it was written in, or for a CSV cell the nearest. Strings, and
// the clipping of long values, are FormatValue's.
func fileValue(v any) string { return table.FormatValueAs(v, jsonScalar) }

// jsonScalar spells a scalar as JSON writes it (Inf and NaN, which JSON has no text for, as Go).
func jsonScalar(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		if b, err := json.Marshal(x); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v)
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
	// Written and Commits are the records that an import in batches wrote before the first bad
	// record, and in how many commits (0 for an import that writes all or nothing).
	Written, Commits int
}

// Imported is how many records, the file's first ones, were imported before the first bad record
// (by an import in batches; 0 for Import, which imports all or nothing).
func (e *ImportErrors) Imported() int { return e.Written }

// outcome says what was imported despite the bad records.
func (e *ImportErrors) outcome() string {
	switch {
	case e.Written == 0:
		return "nothing was imported"
	case e.Commits == 0: // an import run again, up to where it failed before
		if e.Written == 1 {
			return "the first record was imported already, none after it"
		}
		return fmt.Sprintf("the first %d records were imported already, none after them", e.Written)
	}
	records, commits, after := fmt.Sprintf("the first %d records were", e.Written), fmt.Sprintf("%d commits", e.Commits), "them"
	if e.Written == 1 {
		records, after = "the first record was", "it"
	}
	if e.Commits == 1 {
		commits = "1 commit"
	}
	return fmt.Sprintf("%s imported (in %s), none after %s", records, commits, after)
}

// Failed reports whether a bad record was found.
func (e *ImportErrors) Failed() bool { return len(e.Errs) > 0 || e.More > 0 }

func (e *ImportErrors) Error() string {
	if len(e.Errs) == 1 && e.More == 0 {
		return fmt.Sprintf("import %s: %s; %s", e.Table, e.Errs[0].problem(), e.outcome())
	}
	var b strings.Builder
	n := len(e.Errs) + e.More
	fmt.Fprintf(&b, "import %s: %d records are wrong; %s:", e.Table, n, e.outcome())
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

// Add records a bad record, counting those past the cap. The records kept are the first ones of
// the file, in whatever order they were found.
func (e *ImportErrors) Add(ie *ImportError) {
	if len(e.Errs) < MaxImportErrors {
		e.Errs = append(e.Errs, ie)
		return
	}
	e.More++
	last := 0
	for i, x := range e.Errs {
		if x.Record > e.Errs[last].Record {
			last = i
		}
	}
	if ie.Record < e.Errs[last].Record {
		e.Errs[last] = ie
	}
}

// Merge adds every bad record of o to e.
func (e *ImportErrors) Merge(o *ImportErrors) {
	for _, ie := range o.Errs {
		e.Add(ie)
	}
	e.More += o.More
}

// Err is e as an error, or nil when no record was bad.
func (e *ImportErrors) Err() error {
	if len(e.Errs) == 0 {
		return nil
	}
	slices.SortStableFunc(e.Errs, func(a, b *ImportError) int { return cmp.Compare(a.Record, b.Record) })
	return e
}

func (e *ImportError) Unwrap() error { return e.Err }

// JSONValue renders a stored value as encoding/json would (compact, a dict's keys sorted), but
// floats keep a decimal point (80.0) at every depth, inside lists and dicts too: a file read back,
// by starplan or any typed reader, shows which numbers are floats. (The store keeps a whole
// number without a declared type as an int, so a float there is never whole.)
func JSONValue(v any) string { return string(AppendJSON(nil, v)) }

// AppendJSON appends v, a value a row holds, as JSONValue renders it.
func AppendJSON(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return append(dst, formatFloat(x)...)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSON(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		dst = append(dst, '{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSON(dst, k)
			dst = append(dst, ':')
			dst = AppendJSON(dst, x[k])
		}
		return append(dst, '}')
	}
	b, err := json.Marshal(v) // a string (escaped as ever), or a kind no row holds
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
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

// CSVCell is a stored value as a CSV cell: None empty, a float with its fraction (80.0), a list
// or object as JSONValue writes it.
func CSVCell(v any) string {
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
	return JSONValue(v)
}

// ctxReader reads r until ctx is done, so that a record without end (a reader holds a whole
// record or CSV line) stops with the import.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ctxEvery is how many records ReadCSV reads between looks at its context.
const ctxEvery = 4096

// ContextReader reads r until ctx is done: a reader that holds a whole record (a JSON decoder,
// a CSV line) then stops with the import.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return &ctxReader{ctx: ctx, r: r} }

// ReadCSV reads a CSV file: a header of field names, then rows, each given to fn with its
// 1-based number among the data rows and the line it starts on. The separator is a comma,
// or a semicolon when the header has semicolons and no comma (as spreadsheets write CSV in
// locales whose decimal mark is a comma). A row with the wrong number of cells is added to bad
// and reading goes on; a malformed line ends the reading with the records found wrong so far.
// Each cell is converted to its field's kind as csvValue says (the rows are not validated: the
// backend does that, with its keys). When bad holds a record on return, nothing should be
// imported: bad.Err() is the error to return.
func ReadCSV(ctx context.Context, sc *Schema, r io.Reader, bad *ImportErrors, fn func(row table.Row, num, line int) error) error {
	br := bufio.NewReader(&ctxReader{ctx: ctx, r: r})
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
		if ctx.Err() != nil { // the reader stopped because the import was cancelled
			return ctx.Err()
		}
		ie := &ImportError{Table: sc.Name, Record: rec, Err: fmt.Errorf("malformed CSV: %v", err)}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			ie.Line, ie.Err = pe.Line, fmt.Errorf("malformed CSV: %v", pe.Err)
		}
		if len(bad.Errs) == 0 {
			return ie
		}
		bad.Add(ie)
		bad.Partial = true
		return bad
	}
	header, err := cr.Read()
	if err == io.EOF {
		return &ImportError{Table: sc.Name, Err: errors.New("empty CSV: the first line must name the fields")}
	}
	if err != nil {
		return csvErr(0, err)
	}
	cols := make([]*Field, len(header))
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		f := sc.FieldsByName[h]
		if f == nil {
			return &ImportError{Table: sc.Name, Line: 1, Err: fmt.Errorf("header: column %s is not a field of %s%s", table.FormatValue(h), sc.Name, DidYouMean(h, sc.FieldNames()))}
		}
		for _, prev := range cols[:i] {
			if prev == f {
				return &ImportError{Table: sc.Name, Line: 1, Err: fmt.Errorf("header: column %s appears twice", table.FormatValue(h))}
			}
		}
		cols[i] = f
	}
	cr.ReuseRecord = true // each row's cells are converted to values below
	for n := 1; ; n++ {
		if n%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		cells, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return csvErr(n, err)
		}
		line, _ := cr.FieldPos(0)
		if len(cells) != len(cols) {
			bad.Add(&ImportError{Table: sc.Name, Record: n, Line: line,
				Err: fmt.Errorf("%d cells, but the header names %d fields", len(cells), len(cols))})
			continue
		}
		row := make(table.Row, len(cells))
		for i, cell := range cells {
			v, rule := csvValue(cols[i], cell)
			if rule != "" {
				line, col := cr.FieldPos(i)
				bad.Add(&ImportError{Table: sc.Name, Record: n, Line: line, Col: col,
					Err: &table.FieldError{Table: sc.Name, Field: cols[i].Name, Value: cell, Rule: rule}})
				row = nil
				break
			}
			if v != nil {
				row[cols[i].Name] = v
			}
		}
		if row == nil {
			continue
		}
		if err := fn(row, n, line); err != nil {
			return err
		}
	}
	return nil
}

// csvValue converts a cell to the field's kind where it parses; a cell that is no number (or no
// bool) for a number (bool) field is refused with the field's own rule, here, where the caller
// knows the cell's column. Every other rule is validation's. An empty cell is no
// value (None) for every type: CSV has no null, and Export writes None as an empty cell. White
// space around a number, a bool or a nested value is ignored, as around a header's names.
//
// A number is written as CSV users write one (see csvNumber); a cell in one of Go's number
// syntaxes that strconv would take (1_000, 0x10, Inf, NaN, 1e3 for an int) is refused, as is a
// nested value that is not exactly one JSON value: rule says why, and what to write instead.
func csvValue(f *Field, cell string) (v any, rule string) {
	if cell == "" {
		return nil, ""
	}
	if f.Type == table.TypeString {
		return cell, ""
	}
	c := strings.TrimSpace(cell)
	switch f.Type {
	case table.TypeInt, table.TypeFloat:
		v, rule := csvNumber(c, f.Type == table.TypeFloat)
		if _, text := v.(string); text {
			// No number at all ("7x", "abc", "٣"): refused here with the field's own rule, as
			// validation would refuse it, so that the error names the cell's column.
			if _, rule = f.Check(v); rule != "" {
				return nil, rule
			}
		}
		return v, rule
	case table.TypeBool:
		if b, err := strconv.ParseBool(c); err == nil {
			return b, ""
		}
		if _, rule := f.Check(c); rule != "" { // no bool: refused with the field's rule and the cell's column
			return nil, rule
		}
	case table.TypeList, table.TypeObject, table.TypeMap:
		// Export writes a nested value as JSON, so import reads it so: one JSON value, and
		// nothing after it but white space.
		dec := json.NewDecoder(strings.NewReader(c))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		if err == nil {
			if rest := strings.TrimLeft(c[dec.InputOffset():], " \t\r\n"); rest != "" {
				err = fmt.Errorf("%q follows the value", ClipText(rest))
			}
		}
		if err != nil {
			example := `["a", 2.5]`
			switch f.Type {
			case table.TypeObject:
				example = `{"city": "Paris"}`
			case table.TypeMap:
				example = `{"gc_1": 57.0}`
			}
			return nil, fmt.Sprintf("is not JSON text (%v): write the %s as JSON, such as %s", err, f.Type, example)
		}
		return FromJSON(v), ""
	}
	return c, ""
}

// csvNumber reads a number cell c (trimmed) as CSV users write it: an optional sign (- or +;
// spreadsheets read +5 as 5), then digits with at most one decimal point among them (5, 5.0,
// .5), and for a float field an optional exponent (1.5e3, 2E-4). Leading zeros are fine (007).
// A whole number without a decimal point is an int64, another a float64 (validation converts
// either to the field's kind, or says why not). Go's own syntaxes, which strconv accepts, are
// refused with what to write instead: _ between digits, 0x/0o/0b prefixes, Inf and NaN, an
// exponent for an int; so is a decimal comma or a thousands separator. Anything else is passed
// on as text, for csvValue to refuse with the field's rule.
func csvNumber(c string, float bool) (any, string) {
	plain, ok := numberSyntax(c, float)
	switch {
	case ok && plain:
		i, err := strconv.ParseInt(c, 10, 64)
		if err == nil {
			return i, ""
		}
		if !float {
			return nil, fmt.Sprintf("is too large for an int: an int is between %d and %d", int64(math.MinInt64), int64(math.MaxInt64))
		}
		fallthrough
	case ok:
		x, err := strconv.ParseFloat(c, 64)
		if err != nil {
			return nil, "is too large for a float (about 1.8e308 at most)"
		}
		return x, ""
	}
	form := "digits with an optional leading - and one decimal point, such as 1234.5 or -7"
	if float {
		form += " (an exponent too: 1.5e3)"
	}
	if !float {
		if _, ok := numberSyntax(c, true); ok { // 1e3: an int with an exponent
			if x, err := strconv.ParseFloat(c, 64); err == nil && x == math.Trunc(x) && math.Abs(x) < 1<<63 {
				return nil, fmt.Sprintf("has an exponent, which an int in CSV does not: write %d", int64(x))
			}
			return nil, "has an exponent, which an int in CSV does not: write " + form
		}
	}
	// write says what to write for the cell once fixed to fixed, when that is a number.
	write := func(fixed string) string {
		if _, ok := numberSyntax(fixed, float); ok {
			return "write " + fixed
		}
		return "write " + form
	}
	word := strings.ToLower(strings.TrimLeft(c, "+-"))
	switch {
	case word == "inf" || word == "infinity" || word == "nan":
		return nil, "must be a finite number: CSV has no Inf or NaN (leave the cell empty for no value)"
	case len(word) > 2 && word[0] == '0' && strings.ContainsRune("xob", rune(word[1])):
		base := map[byte]string{'x': "hexadecimal (0x)", 'o': "octal (0o)", 'b': "binary (0b)"}[word[1]]
		rule := "is Go's " + base + " syntax, not a CSV number: "
		if i, err := strconv.ParseInt(c, 0, 64); err == nil {
			return nil, rule + write(strconv.FormatInt(i, 10))
		}
		if x, err := strconv.ParseFloat(c, 64); err == nil && float && !math.IsInf(x, 0) {
			return nil, rule + write(strconv.FormatFloat(x, 'f', -1, 64))
		}
		return nil, rule + "write " + form
	case strings.Contains(c, "_"):
		return nil, `has "_" between digits (Go's syntax, not a CSV number's): ` + write(strings.ReplaceAll(c, "_", ""))
	case strings.Contains(c, ","):
		return nil, "has a comma: write the number with a decimal point and no thousands separator, " + form
	}
	return c, ""
}

// numberSyntax reports whether c is a number as csvNumber reads one, exponent allowing one;
// plain says it has neither decimal point nor exponent.
func numberSyntax(c string, exponent bool) (plain, ok bool) {
	i := 0
	if i < len(c) && (c[i] == '-' || c[i] == '+') {
		i++
	}
	digits, point := 0, false
	for ; i < len(c); i++ {
		if ch := c[i]; ch >= '0' && ch <= '9' {
			digits++
		} else if ch == '.' && !point {
			point = true
		} else {
			break
		}
	}
	if digits == 0 {
		return false, false
	}
	if i == len(c) {
		return !point, true
	}
	if !exponent || c[i] != 'e' && c[i] != 'E' {
		return false, false
	}
	i++
	if i < len(c) && (c[i] == '-' || c[i] == '+') {
		i++
	}
	start := i
	for i < len(c) && c[i] >= '0' && c[i] <= '9' {
		i++
	}
	return false, i > start && i == len(c)
}

// CSVWriter writes a table's rows as CSV, as every backend's Export does: a header of the
// schema's field names, then one line per row, each cell as CSVCell writes it (what ReadCSV reads
// back as the same row).
type CSVWriter struct {
	cw   *csv.Writer
	sc   *Schema
	line []string
}

// NewCSVWriter writes sc's header to w and returns the writer of its rows.
func NewCSVWriter(w io.Writer, sc *Schema) (*CSVWriter, error) {
	c := &CSVWriter{cw: csv.NewWriter(w), sc: sc, line: make([]string, len(sc.Fields))}
	return c, c.cw.Write(sc.FieldNames())
}

// Write writes one row.
func (c *CSVWriter) Write(r table.Row) error {
	for i, f := range c.sc.Fields {
		c.line[i] = CSVCell(r[f.Name])
	}
	return c.cw.Write(c.line)
}

// Flush writes what is buffered and returns the first error of the writes.
func (c *CSVWriter) Flush() error {
	c.cw.Flush()
	return c.cw.Error()
}
