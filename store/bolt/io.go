package bolt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
)

// Format is a file format for Export and Import (store.Format).
type Format = store.Format

// The formats Export and Import understand.
const (
	JSON = store.JSON // an array of row objects, fields in schema order
	CSV  = store.CSV  // a header row of field names, then one line per row
)

// ImportMode says what Import does with the table's existing rows (store.ImportMode).
type ImportMode = store.ImportMode

const (
	// Upsert inserts rows with new keys and replaces rows whose key exists; other rows stay.
	Upsert = store.Upsert
	// Replace makes the table hold exactly the imported rows.
	Replace = store.Replace
)

// ImportResult counts what an Import changed, and in how many commits (0 when nothing changed).
type ImportResult = store.ImportResult

// ImportError is a record that cannot be imported (store.ImportError).
type ImportError = store.ImportError

// ImportErrors are every bad record of an import (store.ImportErrors).
type ImportErrors = store.ImportErrors

// MaxImportErrors is how many bad records an import reports (store.MaxImportErrors).
const MaxImportErrors = store.MaxImportErrors

// Seed replaces every table's rows with the seed the store was made from (see seedRows) in one
// atomic step, recorded like any commit. Without force it refuses (ErrNotEmpty) when any table
// holds a row; when the store keeps no seed it refuses (ErrNoSeed) and changes nothing. System
// collections are kept.
func (s *Store) Seed(ctx context.Context, force bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("store is closed")
	}
	for _, name := range s.names {
		if s.tables[name].count() > 0 && !force {
			return store.ErrNotEmpty
		}
	}
	seed, err := s.seedRows()
	if err != nil {
		return err
	}
	var ops []op
	for _, name := range s.names {
		sc := s.schemas[name]
		seeded := map[any]bool{}
		for _, row := range seed[name] {
			k := row[sc.Key]
			seeded[k] = true
			ops = append(ops, op{s: sc, key: k, row: row})
		}
		var err error
		for _, r := range s.tables[name].walk(ctx, nil, nil, false, &err) {
			if !seeded[r.key] {
				ops = append(ops, op{s: sc, key: r.key, cur: r})
			}
		}
		if err != nil {
			return err
		}
	}
	if err := s.currentLocked(ops); err != nil {
		return err
	}
	return s.commitLocked(ops, nil)
}

// SeedRows reports how many rows a reseed writes, per table, or ErrNoSeed.
func (s *Store) SeedRows() (map[string]int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seed, err := s.seedRows()
	if err != nil {
		return nil, err
	}
	n := make(map[string]int, len(s.names))
	for _, name := range s.names {
		n[name] = len(seed[name])
	}
	return n, nil
}

// snapshot returns the committed rows of a table in key order.
func (s *Store) snapshot(name string) (*store.Schema, []*rec, error) {
	sc := s.schemas[name]
	if sc == nil {
		return nil, nil, fmt.Errorf("unknown table %q%s", name, store.DidYouMean(name, s.names))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var recs []*rec
	var err error
	for _, r := range s.tables[name].walk(context.Background(), nil, nil, false, &err) {
		recs = append(recs, r)
	}
	return sc, recs, err
}

// Dump writes every table as one JSON object {"<table>": [rows...]}, tables sorted, rows in key
// order and fields in schema order: the format of a domain's seed.json. Floats keep their fraction
// at every depth (see jsonValue), so a dump imported into a new store dumps the same bytes.
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
		cw, err := store.NewCSVWriter(w, sc)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := cw.Write(r.row); err != nil {
				return err
			}
		}
		return cw.Flush()
	}
	return fmt.Errorf("unknown format %q (want json or csv)", format)
}

func writeRowsJSON(w *bufio.Writer, sc *store.Schema, recs []*rec, indent string) {
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
			w.WriteString(store.JSONValue(r.row[f.Name]))
		}
		w.WriteString("}")
	}
	w.WriteString("\n" + indent + "]")
}

// record is one parsed import row and where it came from.
type record struct {
	row  table.Row
	num  int
	line int
}

// importer validates an import's records as they are read, so that a large file is never held
// whole: it keeps each valid row (the decoded record is dropped), each key with its record, and
// only the records without a key as read, since their keys can be generated only once every key
// of the file is known.
type importer struct {
	sc      *store.Schema
	bad     *ImportErrors // the records that do not validate
	rows    []table.Row   // the valid rows, until a record is bad
	seen    seenKeys      // every key checked, with the record that has it
	later   []record      // records without a key, to be given one
	pending []record      // keyed records read but not yet checked (see importBatch)
	fileMax int64         // the highest key number (KeyPrefix and digits) among the records
}

func newImporter(sc *store.Schema) *importer {
	return &importer{sc: sc, bad: &ImportErrors{Table: sc.Name}, fileMax: -1}
}

// seenKeys is the set of an import's keys, each with the record that has it, to refuse a key
// that comes twice. It lives as long as the import and grows to the file's keys: a million in a
// large one. Keys in ascending order (a file as Export writes it, a table's order) are kept as
// their encodings (store.AppendKey) back to back in one block, which the collector does not trace,
// and each is compared with the last only; a key out of that order goes to a map, and is looked
// for in the block by binary search. As a map of every key, it held one object per key that
// every collection of the import traced again (and rehashed as it grew): a tenth of the time
// of a large import.
type seenKeys struct {
	run  []byte         // the ascending keys' encodings, back to back
	ends []int          // where each of them ends in run
	nums []int          // the record of each
	out  map[string]int // the other keys' encodings → their records
	enc  []byte         // the encoding being looked for
}

// add records key k of record num, or returns the record that has k already (dup true).
func (s *seenKeys) add(k any, num int) (first int, dup bool) {
	s.enc = store.AppendKey(s.enc[:0], k)
	if j, ok := s.out[string(s.enc)]; ok {
		return j, true
	}
	if n := len(s.ends); n == 0 || bytes.Compare(s.enc, s.runKey(n-1)) > 0 {
		s.run = append(s.run, s.enc...)
		s.ends = append(s.ends, len(s.run))
		s.nums = append(s.nums, num)
		return 0, false
	}
	if j, ok := s.inRun(s.enc); ok {
		return j, true
	}
	if s.out == nil {
		s.out = map[string]int{}
	}
	s.out[string(s.enc)] = num
	return 0, false
}

// has reports whether key k was added.
func (s *seenKeys) has(k any) bool {
	s.enc = store.AppendKey(s.enc[:0], k)
	if _, ok := s.out[string(s.enc)]; ok {
		return true
	}
	_, ok := s.inRun(s.enc)
	return ok
}

// inRun looks for enc among the ascending keys, and returns its record.
func (s *seenKeys) inRun(enc []byte) (int, bool) {
	i, ok := sort.Find(len(s.ends), func(i int) int { return bytes.Compare(enc, s.runKey(i)) })
	if !ok {
		return 0, false
	}
	return s.nums[i], true
}

// runKey is the i-th ascending key's encoding.
func (s *seenKeys) runKey(i int) []byte {
	start := 0
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.run[start:s.ends[i]]
}

// add takes one record as it is read.
func (im *importer) add(rc record) {
	k := rc.row[im.sc.Key]
	if n, ok := im.sc.KeyNum(k); ok && n > im.fileMax {
		im.fileMax = n
	}
	if k == nil && im.sc.KeyPrefix != "" {
		im.later = append(im.later, rc)
		return
	}
	if im.pending = append(im.pending, rc); len(im.pending) == importBatch {
		im.flush()
	}
}

// importBatch is how many records an import reads before it checks them. Checking each as it
// is read interleaved the decoder's short-lived maps with the rows the table keeps, so that
// after a collection every page of those maps was half garbage and later allocations filled
// the holes: a search over 100k imported rows in that process took 18 ms instead of 12.
const importBatch = 4096

// flush checks the pending records, in the order they were read.
func (im *importer) flush() {
	for _, rc := range im.pending {
		im.check(rc)
	}
	clear(im.pending)
	im.pending = im.pending[:0]
}

// generate gives the records without a key the next keys after next, in file order, and
// checks them.
func (im *importer) generate(next int64) {
	im.flush()
	sc := im.sc
	next = max(next, im.fileMax)
	for _, rc := range im.later {
		next++
		rc.row[sc.Key] = sc.FormatKey(max(next, 1))
		next = max(next, 1)
		im.check(rc)
	}
	im.later = nil
}

// check validates a record with its key and refuses a key an earlier record has.
func (im *importer) check(rc record) {
	sc := im.sc
	row, err := sc.ValidateOwned(rc.row) // the reader's map, no one else's
	if err != nil {
		im.fail(&ImportError{Table: sc.Name, Record: rc.num, Line: rc.line, Err: err})
		return
	}
	k := row[sc.Key]
	if j, dup := im.seen.add(k, rc.num); dup {
		im.fail(&ImportError{Table: sc.Name, Record: rc.num, Line: rc.line,
			Err: &table.FieldError{Table: sc.Name, Key: k, Rule: fmt.Sprintf("duplicate key: record %d has the same %s", j, sc.Key)}})
		return
	}
	if len(im.bad.Errs) == 0 {
		im.rows = append(im.rows, row)
	}
}

// fail records a bad record; nothing will be imported, so the rows are let go.
func (im *importer) fail(ie *ImportError) {
	im.bad.Add(ie)
	im.rows = nil
}

// ctxEvery is how many records an import reads between looks at its context.
const ctxEvery = 4096

// Import reads rows for one table from r and writes them in one atomic step. JSON is an array of
// objects, or {"<table>": [...]} as Dump writes, and nothing after it but white space; CSV is a
// header of field names, then rows, where an empty cell is no value (None), a number is written as
// spreadsheets write one (an optional sign, digits, one decimal point, an exponent for a float; Go's
// 1_000, 0x10, Inf and NaN are refused) and a list or dict is JSON text. Every row is validated before anything is written: one bad
// row imports nothing, and the *ImportError names the record, its line, the field and the rule.
// A missing key is generated when the schema has a key prefix. Upsert replaces a row whose key
// exists with the imported row as a whole (columns the file lacks become None).
//
// The file is read as a stream and each record validated as it is read, so memory holds the
// valid rows, not the file and its decoded records besides.
func (s *Store) Import(ctx context.Context, name string, r io.Reader, format Format, mode ImportMode) (ImportResult, error) {
	var res ImportResult
	sc := s.schemas[name]
	if sc == nil {
		return res, fmt.Errorf("import: unknown table %q%s", name, store.DidYouMean(name, s.names))
	}
	im := newImporter(sc)
	bad := &ImportErrors{Table: name} // records the reader finds wrong (CSV rows of the wrong length)
	// A large import into an empty table is staged (see staged.go): from its stagedMin-th valid
	// row on it holds the Store's lock and writes every stageBatch rows in a staging commit, so
	// that memory holds a batch, not the file's rows and one transaction of all of them.
	var stg *staged
	locked, tried := false, false
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	failed := func() bool { return im.bad.Failed() || bad.Failed() }
	each := func(rc record) error {
		if im.add(rc); len(im.pending) >= stageBatch { // the tests' small batches
			im.flush()
		}
		if !tried && len(im.rows) >= stagedMin && !failed() {
			tried = true
			s.mu.Lock()
			locked = true
			if s.closed {
				return errors.New("store is closed")
			}
			var err error
			if stg, err = s.beginStaged(sc); err != nil {
				return err
			}
			if stg == nil {
				s.mu.Unlock()
				locked = false
			}
		}
		if stg != nil && len(im.rows) >= stageBatch && !failed() {
			if err := stg.stageRows(im.rows); err != nil {
				return err
			}
			clear(im.rows)
			im.rows = im.rows[:0]
		}
		return nil
	}
	// unstage deletes what was staged when the import fails, and returns err with its error.
	unstaged := false
	unstage := func(err error) error {
		if stg == nil || unstaged {
			return err
		}
		unstaged = true
		if derr := stg.discard(); derr != nil {
			return errors.Join(err, fmt.Errorf("import: the rows written so far were not deleted (the store deletes them when it is opened again): %w", derr))
		}
		return err
	}
	finished := false
	defer func() { // a panic (a server recovers it) leaves nothing staged either
		if !finished {
			unstage(nil)
		}
	}()
	var err error
	switch format {
	case JSON:
		err = readJSONRecords(ctx, sc, r, each)
	case CSV:
		err = store.ReadCSV(ctx, sc, r, bad, func(row table.Row, num, line int) error { return each(record{row: row, num: num, line: line}) })
	default:
		return res, fmt.Errorf("import: unknown format %q (want json or csv)", format)
	}
	if err != nil {
		return res, unstage(err)
	}
	if err := ctx.Err(); err != nil {
		return res, unstage(err)
	}

	if !locked {
		s.mu.Lock()
		locked = true
	}
	if s.closed {
		return res, errors.New("store is closed")
	}
	mt := s.tables[name]
	next := int64(-1)
	if mode == Upsert {
		next = mt.maxNum
	}
	empty := mt.count() == 0
	im.generate(next)
	bad.Merge(im.bad)
	if err := bad.Err(); err != nil {
		return res, unstage(err)
	}
	if stg != nil {
		if err := stg.stageRows(im.rows); err != nil {
			return res, unstage(err)
		}
		im.rows = nil
		if err := stg.finish(); err != nil {
			return ImportResult{}, unstage(err)
		}
		finished = true
		return ImportResult{Inserted: stg.n, Commits: 1}, nil
	}
	ops, err := s.importOps(sc, im.rows, !empty, &res)
	if err != nil {
		return ImportResult{}, err
	}
	im.rows = nil
	if mode == Replace {
		var err error
		for _, cur := range mt.walk(ctx, nil, nil, false, &err) {
			if !im.seen.has(cur.key) {
				res.Deleted++
				ops = append(ops, op{s: sc, key: cur.key, base: cur.ver, cur: cur})
			}
		}
		if err != nil {
			return ImportResult{}, err
		}
	}
	im.seen = seenKeys{}
	if err := s.commitLocked(ops, nil); err != nil {
		return ImportResult{}, err
	}
	if len(ops) > 0 {
		res.Commits = 1
	}
	return res, nil
}

// importOps turns validated rows into the ops that write them, counting in res what each does.
// lookup false says that the table holds none of their keys (it is empty), so none is looked up.
// The caller holds s.mu.
func (s *Store) importOps(sc *store.Schema, rows []table.Row, lookup bool, res *ImportResult) ([]op, error) {
	mt := s.tables[sc.Name]
	ops := make([]op, 0, len(rows))
	for _, row := range rows {
		k := row[sc.Key]
		var cur *rec
		if lookup {
			var err error
			if cur, err = mt.get(k); err != nil {
				return nil, err
			}
		}
		switch {
		case cur == nil:
			res.Inserted++
			ops = append(ops, op{s: sc, key: k, row: row})
		case store.EqualRows(cur.row, row):
			res.Unchanged++
		default:
			res.Updated++
			ops = append(ops, op{s: sc, key: k, row: row, base: cur.ver, cur: cur})
		}
	}
	return ops, nil
}

// ImportBatches imports rows into one table as Import does with Upsert, for files too large to
// write in one commit: every batch records, once validated, are written in a commit of their
// own, so memory holds one batch's rows (and every key read, to refuse a key that comes twice)
// instead of the file's. Between commits other writers may commit and readers see the table part
// imported.
//
// It is resumable by running it again: a bad record, a cancelled context or a killed process
// leaves the batches before it committed and nothing of the rest; the same import run again
// finds the rows already written unchanged and goes on. So every record must carry its key: a
// key generated on one run would be generated again, for a second row, on the next (a record
// without one is an *ImportError). Records are validated as read; once one is bad, nothing more
// is written, and the file is read to its end to report every bad record (*ImportErrors, with
// what the earlier commits imported).
func (s *Store) ImportBatches(ctx context.Context, name string, r io.Reader, format Format, batch int) (ImportResult, error) {
	var res ImportResult
	sc := s.schemas[name]
	if sc == nil {
		return res, fmt.Errorf("import: unknown table %q%s", name, store.DidYouMean(name, s.names))
	}
	if batch < 1 {
		return res, fmt.Errorf("import: a batch of %d records: want at least 1", batch)
	}
	im := newImporter(sc)
	s.mu.Lock()
	mt := s.tables[name]
	// fresh: the table was empty when the import began and no one else has written it since,
	// so no key of the file is in it but those the batches wrote (which seen refuses): nothing
	// needs to be looked up.
	fresh, ver := mt.count() == 0, mt.ver
	s.mu.Unlock()

	// Two stages, one goroutine each: this one reads and validates, the writer commits the
	// batches handed to it, so that reading the next batch overlaps committing the last (each
	// about half of the time). At most two batches are held: the one being committed and the
	// next, read and waiting to be handed over. The reader owns im; the writer owns res, fresh,
	// ver and imported.
	var (
		batches  = make(chan []table.Row)
		written  = make(chan struct{})
		werr     error // the writer's: a commit failed, or ctx ended before one
		imported int   // the records of the batches the writer committed or found unchanged
	)
	rctx, stop := context.WithCancel(ctx) // the reader's: ends with ctx or a failed commit
	defer stop()
	commit := func(rows []table.Row) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := ctx.Err(); err != nil { // a batch not written by a Ctrl-C is not written after it
			return err
		}
		if s.closed {
			return errors.New("store is closed")
		}
		if mt.ver != ver {
			fresh = false
		}
		var done ImportResult
		ops, err := s.importOps(sc, rows, !fresh, &done)
		if err != nil {
			return err
		}
		if err := s.commitLocked(ops, nil); err != nil {
			return err
		}
		ver = mt.ver
		mt.releaseUnneeded() // the rows are in the file: a small batch is not let go by publish
		res.Inserted += done.Inserted
		res.Updated += done.Updated
		res.Unchanged += done.Unchanged
		imported += len(rows)
		if len(ops) > 0 {
			res.Commits++
		}
		return nil
	}
	var wpanic any // the writer's panic, raised again in this goroutine (a server recovers it)
	go func() {
		defer close(written)
		for rows := range batches {
			if werr != nil || wpanic != nil {
				continue
			}
			func() {
				defer func() {
					if v := recover(); v != nil {
						wpanic = fmt.Sprintf("%v\n(in ImportBatches' writer:)\n%s", v, debug.Stack())
						stop()
					}
				}()
				if werr = commit(rows); werr != nil {
					stop()
				}
			}()
		}
	}()
	finished := false
	finish := func() { // the writer is done with every batch handed over
		if !finished {
			finished = true
			close(batches)
			<-written
		}
	}
	defer finish() // also when reading panics: no writer outlives the import
	// handOver gives the writer the rows validated so far, unless a record was bad: nothing from
	// the batch with the first bad record on is written.
	handOver := func() error {
		im.flush()
		rows := im.rows
		im.rows = nil
		if im.bad.Failed() || len(rows) == 0 {
			return nil
		}
		select {
		case batches <- rows:
			return nil
		case <-rctx.Done():
			return rctx.Err()
		}
	}
	add := func(rc record) error {
		if rc.row[sc.Key] == nil && sc.KeyPrefix != "" {
			im.fail(&ImportError{Table: name, Record: rc.num, Line: rc.line, Err: &table.FieldError{Table: name, Field: sc.Key,
				Rule: "is required in a batched import: a key generated on one run would be generated again, for a second row, on the next; give every record its key, or import without batches"}})
			return nil
		}
		im.add(rc)
		if len(im.pending)+len(im.rows) < batch {
			return nil
		}
		if err := rctx.Err(); err != nil { // between batches, as well as every ctxEvery records
			return err
		}
		return handOver()
	}
	var err error
	switch format {
	case JSON:
		err = readJSONRecords(rctx, sc, r, add)
	case CSV:
		err = store.ReadCSV(rctx, sc, r, im.bad, func(row table.Row, num, line int) error { return add(record{row: row, num: num, line: line}) })
	default:
		err = fmt.Errorf("import: unknown format %q (want json or csv)", format)
	}
	if err == nil {
		err = handOver()
	}
	finish()
	if wpanic != nil {
		panic(wpanic)
	}
	im.bad.Written, im.bad.Commits = imported, res.Commits
	if werr != nil {
		return res, werr
	}
	var ie *ImportError
	switch {
	case err == nil:
		err = ctx.Err()
	case errors.As(err, &ie) && err == error(ie):
		// The file could not be read on (malformed, cut off): a bad record like the others,
		// after those read before it, so that the error says what the batches imported.
		im.flush()
		im.bad.Add(ie)
		im.bad.Partial = true
		err = im.bad.Err()
	case err == error(im.bad): // a malformed CSV line after bad records
		im.flush()
		err = im.bad.Err()
	}
	if err == nil {
		err = im.bad.Err()
	}
	return res, err
}

// lineCounter passes a reader's bytes on and tells the line of an offset in them, keeping only
// the bytes from the last offset asked about on (offsets are asked about in increasing order).
type lineCounter struct {
	r    io.Reader
	buf  []byte // the bytes read from offset base on
	base int64
	line int   // the line of offset base
	col  int   // the bytes of that line before offset base
	err  error // the first error of r (the import's cancellation too) but io.EOF, or errRecordTooLarge
}

// MaxRecordBytes bounds one record of an imported file, with what comes between it and the
// record before (the bytes from that one's end to its own are at most MaxRecordBytes+1, read
// either way: scanned, or by encoding/json): no row is that large, and the reader holds a
// record's bytes until it is decoded, so a file of endless padding or one enormous value ends
// the import instead of filling memory.
const MaxRecordBytes = 64 << 20

// recordLimit is MaxRecordBytes; the tests lower it.
var recordLimit = MaxRecordBytes

var errRecordTooLarge = fmt.Errorf("more than %d MiB without the end of a record: no row is that large; is this the file you meant?", MaxRecordBytes>>20)

func (c *lineCounter) Read(p []byte) (int, error) {
	room := recordLimit + 1 - len(c.buf)
	if room <= 0 {
		return 0, c.fail(errRecordTooLarge)
	}
	n, err := c.r.Read(p[:min(len(p), room)]) // exact: which record passes is not the reads' doing
	c.buf = append(c.buf, p[:n]...)
	if err != nil && err != io.EOF {
		c.fail(err)
	}
	return n, err
}

// fail records the first error of the read and returns it.
func (c *lineCounter) fail(err error) error {
	if c.err == nil {
		c.err = err
	}
	return err
}

// kept is where offset off is in the kept bytes: an offset before them counts as the first,
// one past them as their end.
func (c *lineCounter) kept(off int64) int64 { return min(max(off-c.base, 0), int64(len(c.buf))) }

// forget lets go of the bytes before offset off (at most those kept).
func (c *lineCounter) forget(off int64) {
	i := c.kept(off)
	c.line, c.col = advance(c.buf[:i], c.line, c.col)
	c.buf = c.buf[i:]
	c.base += i
}

// valueStart returns where the value begins in b, which starts before its separator sep (0:
// none): after white space, sep, and white space.
func valueStart(b []byte, sep byte) int {
	i := jsonSpace(b, 0)
	if i < len(b) && sep != 0 && b[i] == sep {
		i = jsonSpace(b, i+1)
	}
	return i
}

// lineOf returns the line of the byte at offset off, one of the kept bytes (an offset past them
// counts as the last kept; before them, as the first).
func (c *lineCounter) lineOf(off int64) int {
	return c.line + bytes.Count(c.buf[:c.kept(off)], newline)
}

// rest refuses anything after the JSON value that ends at offset end but white space (the
// reader's error, and the import's cancellation, are returned as such): a file is one value.
// what names the value for the error ("array", "object").
func (c *lineCounter) rest(sc *store.Schema, end int64, what string) error {
	c.forget(end)
	p := make([]byte, 32<<10)
	for {
		if i := jsonSpace(c.buf, 0); i < len(c.buf) {
			c.forget(c.base + int64(i))
			line, col := c.line, c.col+1
			// Enough to show, and a byte more, for clipText to know whether to mark a cut
			// whatever sizes the reads came in.
			for len(c.buf) <= 24 && len(c.buf) <= recordLimit && c.err == nil {
				if _, err := c.Read(p[:25-len(c.buf)]); err != nil {
					break
				}
			}
			return &ImportError{Table: sc.Name, Line: line, Col: col, Err: fmt.Errorf(
				"malformed JSON: %q follows the end of the %s: a file is one JSON array of records (or an object of tables, as a dump); remove what follows, or move its records into the array",
				store.ClipText(string(c.buf)), what)}
		}
		c.forget(c.base + int64(len(c.buf)))
		if _, err := c.Read(p); err == io.EOF || c.err != nil {
			break
		}
	}
	if c.err != nil {
		return &ImportError{Table: sc.Name, Err: c.err}
	}
	return nil
}

// lineAt returns the line of the first token at or after off (spaces and commas are skipped)
// and forgets the bytes before it. An offset before the forgotten ones counts as the first kept.
func (c *lineCounter) lineAt(off int64) int {
	i := c.kept(off)
	for i < int64(len(c.buf)) && strings.IndexByte(" \t\r\n,", c.buf[i]) >= 0 {
		i++
	}
	c.forget(c.base + i)
	return c.line
}

// utf8BOM is the UTF-8 byte-order mark that spreadsheet programs and Windows tools write before
// a text file; a CSV or JSON import skips it.
var utf8BOM = []byte("\ufeff")

// skipBOM returns r without the byte-order mark it starts with, and an error when it starts with
// none: then the reader returned reads all of r's bytes, and its error.
func skipBOM(r io.Reader) (io.Reader, error) {
	var head [3]byte
	n, err := io.ReadFull(r, head[:])
	if n == len(head) && bytes.Equal(head[:], utf8BOM) {
		return r, nil
	}
	rest := r
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		rest = strings.NewReader("")
	case err != nil:
		rest = errReader{err}
	}
	return io.MultiReader(bytes.NewReader(head[:n]), rest), errors.New("no byte-order mark")
}

// decodeJSONRecords is readJSONRecords through encoding/json, for every file or the rest of one
// (see jsonScan): from says where r starts, and r is already bounded by the import's context.
func decodeJSONRecords(ctx context.Context, sc *store.Schema, r io.Reader, from jsonResume, fn func(record) error) error {
	col := from.col
	if !from.inArray && !from.ended && from.line == 1 && from.col == 0 { // the file's start
		var err error
		if r, err = skipBOM(r); err == nil {
			col = len(utf8BOM) // the mark's bytes are the line's, for the columns of errors
		}
	}
	if from.inArray { // r starts inside the array: the decoder sees its opening, and an element
		prefix := "["
		if from.record > 0 {
			prefix = "[{}" // an element that ends in itself, whatever follows it
		}
		r = io.MultiReader(strings.NewReader(prefix), r)
		col -= len(prefix) // the prefix's bytes are not the file's
	}
	lc := &lineCounter{r: r, line: from.line, col: col}
	if from.ended {
		return lc.rest(sc, 0, "array")
	}
	// jsonErr is the error of a token: a syntax error's offset is its character's.
	jsonErr := func(rec int, err error) error {
		if lc.err != nil { // the file could not be read: not malformed, whatever the decoder saw
			return &ImportError{Table: sc.Name, Record: rec, Err: lc.err}
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &ImportError{Table: sc.Name, Record: rec, Line: lc.lineOf(se.Offset), Err: fmt.Errorf("malformed JSON: %v", se)}
		}
		return &ImportError{Table: sc.Name, Record: rec, Err: fmt.Errorf("malformed JSON: %v", err)}
	}
	// valueErr is the error of decoding the value (record rec) whose separator sep starts at
	// offset start. A syntax error's offset counts from where the decoder last began a value,
	// give or take a separator, so its line is found by decoding the value's bytes, which lc
	// holds, again alone: the line of the character the error is at, when that finds the same
	// error, or else of the value's start (the separator's place, when it is the one missing).
	valueErr := func(rec int, start int64, sep byte, err error) error {
		var se *json.SyntaxError
		if lc.err != nil || !errors.As(err, &se) {
			return jsonErr(rec, err)
		}
		lc.forget(start)
		i := valueStart(lc.buf, sep)
		line := lc.lineOf(lc.base + int64(i))
		var raw json.RawMessage
		again := json.NewDecoder(bytes.NewReader(lc.buf[i:])).Decode(&raw)
		if errors.As(again, &se) && again.Error() == err.Error() { // not a missing separator
			line = lc.lineOf(lc.base + int64(i) + se.Offset - 1)
		}
		return &ImportError{Table: sc.Name, Record: rec, Line: line, Err: fmt.Errorf("malformed JSON: %v", err)}
	}
	dec := json.NewDecoder(lc)
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return jsonErr(0, err)
	}
	inObject := tok == json.Delim('{')
	if inObject { // {"<table>": [...]}, as Dump writes
		found := false
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return jsonErr(0, err)
			}
			if key == sc.Name {
				found = true
				break
			}
			var skip json.RawMessage
			start := dec.InputOffset()
			if err := dec.Decode(&skip); err != nil {
				return valueErr(0, start, ':', err)
			}
			lc.forget(dec.InputOffset()) // the skipped member's bytes
		}
		if !found {
			return &ImportError{Table: sc.Name, Err: fmt.Errorf("the JSON object has no %q member", sc.Name)}
		}
		if tok, err = dec.Token(); err != nil {
			return jsonErr(0, err)
		}
	}
	if tok != json.Delim('[') {
		return &ImportError{Table: sc.Name, Line: lc.lineAt(dec.InputOffset() - 1), Err: errors.New("want a JSON array of row objects")}
	}
	lc.forget(dec.InputOffset()) // the record bound counts from here (see MaxRecordBytes)
	if from.inArray && from.record > 0 {
		var stand json.RawMessage // the element standing for those jsonScan took
		if err := dec.Decode(&stand); err != nil {
			return jsonErr(0, err)
		}
		lc.forget(dec.InputOffset())
	}
	for n := from.record + 1; dec.More(); n++ {
		if n%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		start := dec.InputOffset()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) { // the value was read whole: it starts at start
				return &ImportError{Table: sc.Name, Record: n, Line: lc.lineAt(start),
					Err: fmt.Errorf("want an object with the row's fields, found a JSON %s", te.Value)}
			}
			sep := byte(',')
			if n == 1 {
				sep = 0 // the array's first element
			}
			return valueErr(n, start, sep, err)
		}
		// The record's line once it is read: before, the reader may not have reached its start.
		line := lc.lineAt(start)
		lc.forget(dec.InputOffset()) // the next record's bound counts from this one's end
		if obj == nil {
			return &ImportError{Table: sc.Name, Record: n, Line: line, Err: errors.New("want an object with the row's fields, found null")}
		}
		if err := fn(record{row: store.FromJSON(obj).(map[string]any), num: n, line: line}); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return jsonErr(0, err)
	}
	if !inObject {
		return lc.rest(sc, dec.InputOffset(), "array")
	}
	for dec.More() { // the other tables: well-formed, as those before
		if _, err := dec.Token(); err != nil {
			return jsonErr(0, err)
		}
		var skip json.RawMessage
		start := dec.InputOffset()
		if err := dec.Decode(&skip); err != nil {
			return valueErr(0, start, ':', err)
		}
		lc.forget(dec.InputOffset())
	}
	if _, err := dec.Token(); err != nil {
		return jsonErr(0, err)
	}
	return lc.rest(sc, dec.InputOffset(), "object")
}
