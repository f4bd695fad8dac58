package bolt

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"

	"github.com/ostafen/clover/v2"
	"github.com/ostafen/clover/v2/query"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// TestHelperProcess is not a test: the tests re-execute the test binary to run it as another
// process (holding a store open, or applying in a loop until killed).
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("STARPLAN_STORE_HELPER")
	if mode == "" {
		t.Skip("helper process only")
	}
	dir := os.Getenv("STARPLAN_STORE_DIR")
	switch mode {
	case "hold":
		s, err := Open(dir, Options{})
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			os.Exit(2)
		}
		os.Stdout.WriteString("open\n")
		var buf [1]byte
		os.Stdin.Read(buf[:]) // hold the store until the parent closes our stdin
		s.Close()
		os.Exit(0)
	case "apply":
		runApplyLoop(dir)
	case "sysindex":
		runSysIndexLoop(dir)
	}
	os.Exit(3)
}

func helperCmd(t *testing.T, mode, dir string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STARPLAN_STORE_HELPER="+mode, "STARPLAN_STORE_DIR="+dir, "GORACE=atexit_sleep_ms=0") // no second asleep at exit under -race
	return cmd
}

func TestOpenCreatesAndSeedsOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "starplan") // clover's Open would not create it
	var stderr bytes.Buffer
	s, err := Open(dir, Options{Stderr: &stderr})
	require.NoError(t, err)
	assert.True(t, s.Created())
	assert.Equal(t, "seeded new store at "+dir+" with the inventory demo data (7 rows)\n", stderr.String())
	assert.Equal(t, 6, tbl(t, s.Stage(), "inventory").Len())
	require.NoError(t, s.Close())

	stderr.Reset()
	s, err = Open(dir, Options{Stderr: &stderr})
	require.NoError(t, err)
	defer s.Close()
	assert.False(t, s.Created())
	assert.Empty(t, stderr.String(), "the note is printed once, when the store is created")
	assert.Equal(t, 1, tbl(t, s.Stage(), "transactions").Len())
}

func TestOpenNoSeed(t *testing.T) {
	var stderr bytes.Buffer
	s, err := Open(t.TempDir(), Options{NoSeed: true, Stderr: &stderr})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, 0, tbl(t, s.Stage(), "inventory").Len())
	assert.Contains(t, stderr.String(), "with empty inventory tables")
}

// TestSeedIsTheDemoStore checks the embedded seed against the shared evaluation data, byte for
// byte in meaning, and that a new store holds exactly it.
func TestSeedIsTheDemoStore(t *testing.T) {
	raw, err := os.ReadFile("../../domains/inventory/seed.json")
	require.NoError(t, err)
	if shared, err := os.ReadFile("../../../shared/eval/seed-store.json"); err == nil {
		assert.JSONEq(t, string(shared), string(raw), "domains/inventory/seed.json must be the demo store")
	}
	s := openTemp(t)
	var dump bytes.Buffer
	require.NoError(t, s.Dump(&dump))
	assert.JSONEq(t, string(raw), dump.String())
}

func TestOpenInUseInProcess(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	_ = s
	done := make(chan error, 1)
	go func() {
		_, err := Open(dir, Options{LockTimeout: 100 * time.Millisecond})
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.ErrorIs(t, err, store.ErrInUse)
		assert.EqualError(t, err, "store "+dir+" is in use by another starplan process")
		var iu *store.InUseError
		require.ErrorAs(t, err, &iu)
		assert.Contains(t, iu.Hint(), "--db")
	case <-time.After(30 * time.Second):
		t.Fatal("a second Open hung instead of failing")
	}
}

func TestOpenInUseByAnotherProcess(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	dir := t.TempDir()
	cmd := helperCmd(t, "hold", dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line := make([]byte, 5)
	_, err = out.Read(line)
	require.NoError(t, err)
	require.Equal(t, "open\n", string(line))

	_, err = Open(dir, Options{}) // the default timeout: one second
	assert.ErrorIs(t, err, store.ErrInUse)

	stdin.Close()
	require.NoError(t, cmd.Wait())
	s, err := Open(dir, Options{})
	require.NoError(t, err, "the store opens once the other process is gone")
	s.Close()
}

func TestDefaultDir(t *testing.T) {
	env := map[string]string{"HOME": "/home/someone"}
	dir, err := DefaultDir(func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Equal(t, "/home/someone/.local/share/starplan", dir)

	env["XDG_DATA_HOME"] = "/xdg"
	dir, _ = DefaultDir(func(k string) string { return env[k] })
	assert.Equal(t, "/xdg/starplan", dir)

	env["STARPLAN_DB"] = "/env/db"
	dir, _ = DefaultDir(func(k string) string { return env[k] })
	assert.Equal(t, "/env/db", dir)

	_, err = DefaultDir(func(string) string { return "" })
	assert.ErrorContains(t, err, "HOME is not set")

	t.Setenv("STARPLAN_DB", "/process/env")
	dir, _ = DefaultDir(nil)
	assert.Equal(t, "/process/env", dir, "nil reads the process's environment")
}

// libraryDomain is a second domain, brought as files only: an int key and other rules.
var libraryDomain = fstest.MapFS{
	"domain.json": {Data: []byte(`{
		"name": "library",
		"tables": [{
			"name": "books",
			"key": "book_id",
			"fields": [
				{"name": "book_id", "type": "int", "required": true},
				{"name": "title", "type": "string", "required": true, "max_len": 20, "read_only": true},
				{"name": "genre", "type": "string", "enum": ["novel", "poetry"]},
				{"name": "on_loan", "type": "bool"},
				{"name": "rating", "type": "float", "min": 0, "max": 5}
			]
		}]
	}`)},
	"seed.json": {Data: []byte(`{"books": [
		{"book_id": 10, "title": "Emma", "genre": "novel", "on_loan": false, "rating": 4},
		{"book_id": 9, "title": "Odes", "genre": "poetry", "on_loan": true}
	]}`)},
}

func TestDomainFromFiles(t *testing.T) {
	d, err := store.LoadDomain(libraryDomain)
	require.NoError(t, err)
	dir := t.TempDir()
	s, err := Open(dir, Options{Domain: d})
	require.NoError(t, err)
	v := s.Stage()
	assert.Equal(t, []string{"books"}, v.Names())
	books := tbl(t, v, "books")
	rows := find(t, books, table.Query{})
	assert.Equal(t, []any{int64(9), int64(10)}, keys(t, rows, "book_id"), "int keys in numeric order")
	assert.Equal(t, 4.0, rows[1]["rating"])
	row, ok, err := books.Get(10)
	require.NoError(t, err)
	require.True(t, ok, "a Go int finds an int key")
	assert.Equal(t, "Emma", row["title"])
	_, ok, _ = books.Get(10.0)
	assert.True(t, ok, "an integral float finds an int key")

	_, err = books.Insert(table.Row{"book_id": 11, "title": "Dune", "genre": "scifi"})
	var fe *table.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "genre", fe.Field)
	assert.Contains(t, fe.Rule, `"novel", "poetry"`)
	_, err = books.Insert(table.Row{"title": "No key"})
	require.ErrorAs(t, err, &fe, "no key prefix: a key is required")
	assert.Equal(t, "book_id", fe.Field)

	_, err = books.Insert(table.Row{"book_id": 11, "title": "Dune", "rating": 4.5, "on_loan": false})
	require.NoError(t, err)
	_, err = books.Update(table.Row{"title": "Dune II"}, table.Query{Where: map[string]any{"book_id": 11}})
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "title", fe.Field)
	assert.Equal(t, "is read-only and cannot be changed by update", fe.Rule)
	n, err := books.Update(table.Row{"title": "Dune", "on_loan": true}, table.Query{Where: map[string]any{"book_id": 11}})
	require.NoError(t, err, "setting a read-only field to its value is no change")
	assert.Equal(t, 1, n)
	raw, err := json.Marshal(v.Pending()) // int keys come back from JSON as floats
	require.NoError(t, err)
	var p store.Pending
	require.NoError(t, json.Unmarshal(raw, &p))
	require.NoError(t, s.ApplyPending(bg, &p, nil))
	require.NoError(t, s.Close())

	// Opened without a domain, the store has the one it recorded; opened as another, it refuses.
	s, err = Open(dir, Options{MustExist: true})
	require.NoError(t, err)
	assert.Equal(t, "library", s.Domain().Name)
	assert.Equal(t, []string{"books"}, s.Names())
	require.NoError(t, s.Close())
	_, err = Open(dir, Options{Domain: store.Inventory()})
	assert.ErrorContains(t, err, "holds the library domain, not inventory")
	var de *store.DomainError
	require.ErrorAs(t, err, &de)
	assert.Contains(t, de.Hint(), "--db DIR for a store of the inventory domain")

	s, err = Open(dir, Options{Domain: d})
	require.NoError(t, err)
	defer s.Close()
	row, ok, _ = tbl(t, s.Stage(), "books").Get(int64(11))
	require.True(t, ok)
	assert.Equal(t, 4.5, row["rating"])
	assert.Equal(t, true, row["on_loan"])
}

func TestLoadDomainRejects(t *testing.T) {
	good := string(libraryDomain["domain.json"].Data)
	for _, tc := range []struct {
		name, domain, seed, want string
	}{
		{"bad json", `{`, ``, "domain.json"},
		{"unknown member", `{"name": "x", "tables": [], "extra": 1}`, ``, `unknown field "extra"`},
		{"no tables", `{"name": "x", "tables": []}`, ``, "at least one table"},
		{"bad type", strings.Replace(good, `"type": "bool"`, `"type": "boolean"`, 1), ``, `unknown type "boolean"`},
		{"key not declared", strings.Replace(good, `"key": "book_id"`, `"key": "id"`, 1), ``, `key field "id" is not declared`},
		{"reserved name", strings.Replace(good, `"name": "genre"`, `"name": "_genre"`, 1), ``, `field name "_genre"`},
		{"bad pattern", strings.Replace(good, `"enum": ["novel", "poetry"]`, `"pattern": "("`, 1), ``, "pattern"},
		{"seed unknown table", good, `{"bookz": []}`, `unknown table "bookz" (did you mean "books"?)`},
		{"seed bad row", good, `{"books": [{"book_id": 1, "title": "ok"}, {"book_id": 2, "title": "ok", "rating": 7}]}`, `books record 2: books row 2: field "rating" = 7 must be a number >= 0 and <= 5`},
		{"seed duplicate key", good, `{"books": [{"book_id": 1, "title": "a"}, {"book_id": 1, "title": "b"}]}`, "record 2: key 1 repeats record 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{"domain.json": {Data: []byte(tc.domain)}}
			if tc.seed != "" {
				fsys["seed.json"] = &fstest.MapFile{Data: []byte(tc.seed)}
			}
			_, err := store.LoadDomain(fsys)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestInventoryDomain(t *testing.T) {
	d := store.Inventory()
	assert.Equal(t, "inventory", d.Name)
	require.Len(t, d.Tables, 2)
	inv, tx := d.Tables[0], d.Tables[1]
	assert.Equal(t, []string{"item_id", "name", "description", "quantity_in_stock", "price"}, inv.FieldNames())
	assert.Equal(t, []string{"transaction_id", "customer_name", "transaction_summary", "transaction_amount", "balance_after_transaction", "timestamp"}, tx.FieldNames())
	assert.Equal(t, "TXN", tx.KeyPrefix)
	assert.Equal(t, 3, tx.KeyDigits)
	assert.Len(t, d.Seed["inventory"], 6)
	d.Tables[0].Name = "changed"
	assert.Equal(t, "inventory", store.Inventory().Tables[0].Name, "each call returns a new value")
}

func TestSystemCollections(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	type run struct {
		Request string  `json:"request"`
		Tokens  int     `json:"tokens"`
		Cost    float64 `json:"cost"`
	}
	require.NoError(t, s.PutSys(bg, "runs", "r2", run{Request: "sell one", Tokens: 12, Cost: 0.5}))
	require.NoError(t, s.PutSys(bg, "runs", "r1", run{Request: "first"}))
	require.NoError(t, s.PutSys(bg, "runs", "r2", run{Request: "sell two", Tokens: 13}))
	var got run
	ok, err := s.GetSys("runs", "r2", &got)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, run{Request: "sell two", Tokens: 13}, got, "put replaces")
	ok, err = s.GetSys("runs", "r9", &got)
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = s.GetSys("audit", "r1", &got)
	require.NoError(t, err)
	assert.False(t, ok, "a collection never written reads as empty")

	recs, err := s.ListSys("runs")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, "r1", recs[0].ID)
	assert.JSONEq(t, `{"request":"first","tokens":0,"cost":0}`, string(recs[0].JSON))

	// Never visible to plans.
	v := s.Stage()
	assert.Equal(t, []string{"inventory", "transactions"}, v.Names())
	for _, name := range []string{"runs", "_runs", "_starplan", "starplan"} {
		_, ok := v.Table(name)
		assert.False(t, ok, name)
	}
	assert.Error(t, s.PutSys(bg, "starplan", "meta", 1), "the store's own record is not a system collection")
	assert.Error(t, s.PutSys(bg, "_x", "a", 1))

	require.NoError(t, s.Close())
	s = openAt(t, dir)
	ok, err = s.GetSys("runs", "r1", &got)
	require.NoError(t, err)
	assert.True(t, ok, "system documents persist")
}

func TestClosedStore(t *testing.T) {
	s := openTemp(t)
	v := s.Stage()
	_, err := tbl(t, v, "inventory").Update(table.Row{"price": 1}, table.Query{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close twice is fine")
	assert.ErrorContains(t, v.Apply(bg), "closed")
	assert.ErrorContains(t, s.PutSys(bg, "runs", "a", 1), "closed")
}

func TestCorruptedStoreReportsError(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, dbFileName), []byte("not a bbolt file"), 0o644))
	_, err := Open(dir, Options{})
	require.Error(t, err)
	assert.False(t, errors.Is(err, store.ErrInUse))
	assert.Contains(t, err.Error(), dir)
}

func TestPendingJSONRoundTrip(t *testing.T) {
	s := openTemp(t)
	v := s.Stage()
	inv := tbl(t, v, "inventory")
	_, err := inv.Update(table.Row{"quantity_in_stock": 22}, table.Query{Where: where("name", "Aviator")})
	require.NoError(t, err)
	p := v.Pending()
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	var back store.Pending
	require.NoError(t, json.Unmarshal(raw, &back))
	cs, err := s.pendingChangeSet(&back)
	require.NoError(t, err)
	assert.Equal(t, v.ChangeSet(), cs, "a stored dry run renders the same diff")
	require.NoError(t, s.ApplyPending(bg, &back, nil))
	row, _ := committed(t, s, "inventory", "SG001")
	assert.Equal(t, int64(22), row["quantity_in_stock"], "JSON's 22.0 is an int again")
}

func TestOpenAddsTablesTheDomainGained(t *testing.T) {
	d, err := store.LoadDomain(libraryDomain)
	require.NoError(t, err)
	dir := t.TempDir()
	s, err := Open(dir, Options{Domain: d})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	d.Tables = append(d.Tables, &table.Schema{Name: "members", Key: "member_id", Fields: []table.Field{
		{Name: "member_id", Type: table.TypeString}, {Name: "name", Type: table.TypeString},
	}})
	s, err = Open(dir, Options{Domain: d})
	require.NoError(t, err)
	defer s.Close()
	v := s.Stage()
	assert.Equal(t, []string{"books", "members"}, v.Names())
	assert.Equal(t, 0, tbl(t, v, "members").Len())
	assert.Equal(t, 2, tbl(t, v, "books").Len())
	_, err = tbl(t, v, "members").Insert(table.Row{"member_id": "m1", "name": "Ann"})
	require.NoError(t, err)
	require.NoError(t, v.Apply(bg))
}

func TestOpenRejectsForeignData(t *testing.T) {
	dir := t.TempDir()
	db, err := clover.Open(dir)
	require.NoError(t, err)
	require.NoError(t, db.CreateCollection("inventory"))
	require.NoError(t, db.Close())
	_, err = Open(dir, Options{})
	assert.ErrorContains(t, err, "not a starplan store")

	dir = t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.write(bg, func() error {
		return s.putSysLocked(metaCollection, metaID, metaRecord{Format: 99, Domain: "inventory"})
	}))
	require.NoError(t, s.Close())
	_, err = Open(dir, Options{})
	assert.ErrorContains(t, err, "unknown store format 99")
}

func TestOpenWritesNothingToAnExistingStore(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.Close())
	path := filepath.Join(dir, dbFileName)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(path, old, old))
	s = openAt(t, dir)
	find(t, tbl(t, s.Stage(), "inventory"), table.Query{})
	require.NoError(t, s.Close())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, old, fi.ModTime(), "opening and reading must not commit (each commit costs two fsyncs)")
}

// TestNewRowsAreCloverDocuments imports rows (more than one chunk of new documents) and reads the
// file with clover itself: it counts them, as its record of the collection says, and finds each
// with its fields.
func TestNewRowsAreCloverDocuments(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	dir := t.TempDir()
	s := openAt(t, dir)
	seeded := tbl(t, s.Stage(), "inventory").Len()
	const n = insertChunk + 10
	var file bytes.Buffer
	rows := make([]table.Row, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range rows {
		rows[i] = benchItem(rng, 1000+i)
	}
	require.NoError(t, json.NewEncoder(&file).Encode(rows))
	res, err := s.Import(bg, "inventory", &file, JSON, Upsert)
	require.NoError(t, err)
	require.Equal(t, n, res.Inserted)
	require.NoError(t, s.Close())

	db, err := clover.Open(dir)
	require.NoError(t, err)
	defer db.Close()
	count, err := db.Count(query.NewQuery("inventory"))
	require.NoError(t, err)
	assert.Equal(t, seeded+n, count, "clover's record of the collection counts the new documents")
	for _, i := range []int{0, insertChunk - 1, insertChunk, n - 1} {
		doc, err := db.FindFirst(query.NewQuery("inventory").Where(query.Field("item_id").Eq(rows[i]["item_id"])))
		require.NoError(t, err)
		require.NotNil(t, doc, "clover finds row %d", i)
		for k, v := range rows[i] {
			assert.Equal(t, v, doc.Get(k), "row %d field %s", i, k)
		}
	}
}

// TestNewRowsMustPassTheFile writes new documents whose ids a document of the file has (as a store
// whose sequence went back would give them), out of id order, and with a value of a kind no
// validated row holds: nothing is written.
func TestNewRowsMustPassTheFile(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	row := table.Row{"item_id": "SG900", "name": "x", "description": nil, "quantity_in_stock": int64(1), "price": 1.0}
	err := s.write(bg, func() error { return s.insertNew("inventory", 1, []newDoc{{id: rowDocID(1, 1), row: row}}) })
	var de *store.DamagedError
	require.ErrorAs(t, err, &de)
	assert.Contains(t, err.Error(), "the store's sequence is behind its documents")
	err = s.write(bg, func() error {
		return s.insertNew("inventory", 9, []newDoc{{id: rowDocID(9, 2), row: row}, {id: rowDocID(9, 1), row: row}})
	})
	assert.ErrorContains(t, err, "out of id order")
	odd := maps.Clone(row)
	odd["quantity_in_stock"] = 1 // an int: validation makes every int an int64
	err = s.write(bg, func() error { return s.insertNew("inventory", 9, []newDoc{{id: rowDocID(9, 1), row: odd}}) })
	assert.ErrorContains(t, err, "a value of a kind no validated row holds")
	require.NoError(t, s.Close())
	s = openAt(t, dir)
	_, found, err := tbl(t, s.Stage(), "inventory").Get("SG900")
	require.NoError(t, err)
	assert.False(t, found)
}

// TestAppendedPagesAreFull imports rows in key order into an empty table: the documents and the
// keys bucket are appended to, so their pages are written full, not half full as bbolt splits
// by default (half the pages to write, and to keep in memory while the import commits).
func TestAppendedPagesAreFull(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	s, _ := openEmpty(t)
	var file bytes.Buffer
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]table.Row, testtier.Size(4000, 20_000)) // about 330 leaf pages of documents, 90 of keys
	for i := range rows {
		rows[i] = benchItem(rng, i+1)
	}
	require.NoError(t, json.NewEncoder(&file).Encode(rows))
	_, err := s.Import(bg, "inventory", &file, JSON, Upsert)
	require.NoError(t, err)
	require.NoError(t, s.bolt.db.View(func(tx *bbolt.Tx) error {
		for name, b := range map[string]*bbolt.Bucket{"documents": tx.Bucket([]byte(rootBucket)), "keys": tableKeys(tx, "inventory")} {
			st := b.Stats()
			full := float64(st.LeafInuse) / float64(st.LeafAlloc)
			assert.Greater(t, full, 0.9, "%s: %d leaf pages, %.0f %% used", name, st.LeafPageN, 100*full)
		}
		return nil
	}))
}

// TestNewRowsBesideOldIDs adds rows to a table whose documents have ids as stores had them before
// ids followed insertion (version-5 UUIDs, which sort past every rowDocID): they are not taken for
// a sequence gone back.
func TestNewRowsBesideOldIDs(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	row := table.Row{"item_id": "OLD1", "name": "old", "description": nil, "quantity_in_stock": int64(1), "price": 1.0}
	doc := encodeDoc(sysDocID("inventory", "OLD1"), row, 1)
	require.Greater(t, doc.ObjectId(), rowDocID(1<<40, 1))
	require.NoError(t, s.write(bg, func() error { return s.db.Insert("inventory", doc) }))
	require.NoError(t, s.Close())
	s = openAt(t, dir)
	_, err := s.Import(bg, "inventory", strings.NewReader(`[{"item_id": "NEW1", "name": "new", "quantity_in_stock": 2, "price": 2.0}]`), JSON, Upsert)
	require.NoError(t, err)
	for _, k := range []string{"OLD1", "NEW1"} {
		_, found, err := tbl(t, s.Stage(), "inventory").Get(k)
		require.NoError(t, err)
		assert.True(t, found, k)
	}
}

// TestNewRowsInACloverIndexedCollection adds rows to a collection that clover itself indexes (a
// store opened with clover and given an index; starplan makes none): they go through clover's
// Insert, so clover's index finds them.
func TestNewRowsInACloverIndexedCollection(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.db.CreateIndex("inventory", "name"))
	_, err := s.Import(bg, "inventory", strings.NewReader(`[{"item_id": "NEW1", "name": "Indexed", "quantity_in_stock": 2, "price": 2.0}]`), JSON, Upsert)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err := clover.Open(dir)
	require.NoError(t, err)
	defer db.Close()
	doc, err := db.FindFirst(query.NewQuery("inventory").Where(query.Field("name").Eq("Indexed")))
	require.NoError(t, err)
	require.NotNil(t, doc, "clover's index finds the new row")
	assert.Equal(t, "NEW1", doc.Get("item_id"))
}

// pendingChangeSet renders p as a change set (for showing a stored dry run before applying it).
func (s *Store) pendingChangeSet(p *store.Pending) (table.ChangeSet, error) {
	ops, _, err := s.normalize(p)
	if err != nil {
		return nil, err
	}
	cs := table.ChangeSet{}
	for i, o := range ops {
		tc := cs[o.s.Name]
		if tc == nil {
			tc = &table.TableChanges{Key: o.s.Key, Inserted: []table.Row{}, Updated: []table.Update{}, Deleted: []table.Row{}}
			cs[o.s.Name] = tc
		}
		before := p.Writes[i].Before
		if before != nil {
			if before, err = o.s.ValidateRow(before); err != nil {
				return nil, err
			}
		}
		switch {
		case o.base == 0 && o.row != nil:
			tc.Inserted = append(tc.Inserted, o.row)
		case o.row == nil:
			tc.Deleted = append(tc.Deleted, before)
		default:
			tc.Updated = append(tc.Updated, table.NewUpdate(o.key, before, o.row, store.ChangedFields(before, o.row)))
		}
	}
	return cs, nil
}
