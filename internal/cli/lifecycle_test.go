package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"
)

// TestLifecycle runs, as the built binary and in the order a person runs them, the commands of a
// store's life, for each shipped domain and for one the test writes itself:
//
//	db init → describe → exec → apply → runs, runs show → db export (JSON, CSV) of every table
//	→ db import into fresh stores → their dumps equal the store's → db seed --force → the dump
//	equals the one taken right after init → db check
//
// It does so three times (for the default domain; see below for the others): alone; while `starplan serve` holds the stores (the commands go through
// its socket, and those that need the file to themselves must say so); and with the server
// killed (SIGKILL) after it applied the run, after which the store must open and every command
// work. Every step is checked against what the command claims: its exit code, the store and the
// counts it names, and the data a later dump shows.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	bin := starplanBinary(t) // once for every domain and mode below
	domainsDir, err := filepath.Abs(filepath.Join("..", "..", "domains"))
	require.NoError(t, err)
	workshop := filepath.Join(t.TempDir(), "workshop")
	require.NoError(t, os.Mkdir(workshop, 0o755))
	for name, text := range workshopDomain {
		require.NoError(t, os.WriteFile(filepath.Join(workshop, name), []byte(text), 0o644))
	}
	all := []lifecycleMode{alone, served, killed}
	// In the normal tier (internal/testtier) the default domain runs in every mode and each other
	// domain in one mode of its own (what differs by domain, its tables' export, import and
	// dumps, is in every mode's sequence); the long tier runs every domain in every mode.
	domains := []lifecycleDomain{
		{name: "inventory", dir: filepath.Join(domainsDir, "inventory"), modes: all}, // the built-in default: no flag
		{name: "library", dir: filepath.Join(domainsDir, "library"), initArgs: []string{"--domain", filepath.Join(domainsDir, "library")},
			modes: testtier.Size([]lifecycleMode{served}, all)},
		{name: "workshop", dir: workshop, initArgs: []string{"--domain", workshop}, modes: testtier.Size([]lifecycleMode{killed}, all)},
	}
	for _, dom := range domains {
		t.Run(dom.name, func(t *testing.T) {
			t.Parallel() // most of a step is starting a process: the domains overlap well
			for _, mode := range dom.modes {
				t.Run(string(mode), func(t *testing.T) {
					// Each mode has a working directory and stores of its own: the modes overlap
					// too. (Parallel subtests start after every top-level test: one domain's
					// three modes in a row were the package's last seconds, on one processor.)
					t.Parallel()
					newLifecycle(t, bin, dom).sequence(mode)
				})
			}
		})
	}
}

// lifecycleDomain is a domain the lifecycle runs on.
type lifecycleDomain struct {
	name     string   // as domain.json and describe name it
	dir      string   // its directory: domain.json, seed.json, example.star (the plan exec runs)
	initArgs []string // what db init needs to make a store of it
	modes    []lifecycleMode
}

// lifecycleMode is how the store is held while the sequence runs.
type lifecycleMode string

const (
	alone  lifecycleMode = "alone"  // every command opens the store itself
	served lifecycleMode = "served" // starplan serve holds every store; commands go through it
	killed lifecycleMode = "killed" // a server applies the run, is killed with SIGKILL, and the rest runs alone
)

// lifecycle runs the binary's commands in a working directory of their own.
type lifecycle struct {
	t      *testing.T
	ctx    context.Context
	bin    string
	dom    lifecycleDomain
	schema lcDomainFile
	work   string // the working directory; files the commands read are named relative to it
	env    []string
}

func newLifecycle(t *testing.T, bin string, dom lifecycleDomain) *lifecycle {
	// A short directory: a unix socket's path has at most 107 bytes.
	base, err := os.MkdirTemp("", "splc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	var schema lcDomainFile
	require.NoError(t, json.Unmarshal([]byte(readFile(t, filepath.Join(dom.dir, store.DomainFile))), &schema))
	return &lifecycle{
		t: t, ctx: deadline(t), bin: bin, dom: dom, schema: schema, work: base,
		// Nothing of the machine's: no model, no default store, no colour.
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + base, "XDG_DATA_HOME=" + filepath.Join(base, "xdg"),
			"NO_COLOR=1", "STARPLAN_TOKEN=a-token-for-the-lifecycle-test"},
	}
}

// lcStep is one command and what it did.
type lcStep struct {
	args []string
	output
}

func (s lcStep) String() string {
	return fmt.Sprintf("starplan %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(s.args, " "), s.code, s.out, s.err)
}

// run runs the binary with args, as a script would (standard input empty, output piped).
func (lc *lifecycle) run(args ...string) lcStep {
	lc.t.Helper()
	cmd := exec.CommandContext(lc.ctx, lc.bin, args...)
	cmd.Dir, cmd.Env = lc.work, lc.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	s := lcStep{args: args, output: output{out: out.String(), err: errb.String()}}
	if err != nil {
		var ee *exec.ExitError
		require.True(lc.t, errors.As(err, &ee), "%s: %v", s, err)
		s.code = ee.ExitCode()
	}
	return s
}

// ok runs a command that must succeed.
func (lc *lifecycle) ok(args ...string) lcStep {
	lc.t.Helper()
	s := lc.run(args...)
	require.Equal(lc.t, ExitOK, s.code, "%s", s)
	return s
}

// dump is the store's `db dump --json`.
func (lc *lifecycle) dump(dir string) string {
	lc.t.Helper()
	return lc.ok("db", "dump", "--json", "--db", dir).out
}

func (lc *lifecycle) initArgs(dir string, extra ...string) []string {
	return append(append([]string{"db", "init", "--db", dir}, extra...), lc.dom.initArgs...)
}

// sequence is the lifecycle of one store, held as mode says.
func (lc *lifecycle) sequence(mode lifecycleMode) {
	t := lc.t
	dir := filepath.Join(lc.work, "store")

	// The domain checks as a whole, and init makes a store of it holding its seed.
	s := lc.ok("domain", "check", lc.dom.dir)
	assert.Contains(t, s.out+s.err, lc.dom.name, "domain check names the domain it checked: %s", s)
	s = lc.ok(lc.initArgs(dir)...)
	assert.Contains(t, s.out+s.err, dir, "db init names the store it created: %s", s)
	var servers []*lcServer
	if mode != alone {
		servers = append(servers, lc.serve(dir))
	}

	lc.initAgain(dir, mode != alone)

	first := lc.dump(dir)
	lc.holdsTheSeed(first)
	lc.floatsKeepTheirPoint(first)

	// describe names the domain and its tables with the rows the dump holds.
	s = lc.ok("describe", "--json", "--db", dir)
	var d struct {
		Domain string `json:"domain"`
		Tables []struct {
			Name string `json:"name"`
			Rows int    `json:"rows"`
		} `json:"tables"`
	}
	require.NoError(t, json.Unmarshal([]byte(s.out), &d), "%s", s)
	assert.Equal(t, lc.dom.name, d.Domain, "%s", s)
	rows := lc.rowCounts(first)
	described := map[string]int{}
	for _, tb := range d.Tables {
		described[tb.Name] = tb.Rows
	}
	assert.Equal(t, rows, described, "describe's tables and row counts are the dump's: %s", s)

	// exec is a dry run: it stages changes, writes nothing, and leaves the run pending.
	s = lc.run("exec", "--json", "--db", dir, lc.relative(filepath.Join(lc.dom.dir, "example.star")))
	require.Equal(t, ExitOK, s.code, "%s", s)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(s.out), &res), "%s", s)
	require.Equal(t, engine.OutcomeOK, res.Outcome, "%s", s)
	require.True(t, res.Pending, "a plan that changes data leaves its run pending: %s", s)
	require.NotEmpty(t, res.RunID, "%s", s)
	require.Positive(t, res.Changes.Rows(), "the domain's example plan changes something: %s", s)
	assert.Equal(t, first, lc.dump(dir), "exec without --apply wrote to the store")

	// apply writes the run's changes.
	s = lc.ok("apply", res.RunID, "--json", "--db", dir)
	var applied engine.Result
	require.NoError(t, json.Unmarshal([]byte(s.out), &applied), "%s", s)
	assert.Equal(t, res.RunID, applied.RunID, "%s", s)
	assert.True(t, applied.Applied, "%s", s)
	assert.Equal(t, res.Changes.Rows(), applied.Changes.Rows(), "apply wrote the changes the dry run showed: %s", s)

	if mode == killed {
		servers[0].kill()
		servers = nil
		lc.initAgain(dir, false) // the socket the server left does not confuse it
	}
	current := lc.dump(dir)
	lc.holdsTheChanges(current, res)

	// The audit log has the run, applied.
	s = lc.ok("runs", "--json", "--db", dir)
	var runs []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(s.out), &runs), "%s", s)
	i := slices.IndexFunc(runs, func(r engine.RunSummary) bool { return r.ID == res.RunID })
	if assert.GreaterOrEqual(t, i, 0, "runs lists the run %s: %s", res.RunID, s) {
		assert.True(t, runs[i].Applied, "%s", s)
		assert.Equal(t, engine.StateApplied, runs[i].State, "%s", s)
	}
	s = lc.ok("runs", "show", res.RunID, "--json", "--db", dir)
	var rec engine.RunRecord
	require.NoError(t, json.Unmarshal([]byte(s.out), &rec), "%s", s)
	assert.Equal(t, res.RunID, rec.ID, "%s", s)
	assert.True(t, rec.Applied, "%s", s)
	assert.Equal(t, res.Changes.Rows(), rec.ChangedRows, "%s", s)
	assert.Equal(t, normalize(res.Changes), normalize(rec.Changes), "runs show has the changes exec showed: %s", s)

	// Every table exported, as JSON and as CSV, holds the dump's rows.
	tables := lc.tables(current)
	for _, tb := range lc.schema.Tables {
		s = lc.ok("db", "export", tb.Name, "--db", dir)
		var exported []any
		require.NoError(t, json.Unmarshal([]byte(s.out), &exported), "%s", s)
		assert.Equal(t, tables[tb.Name], exported, "the JSON export of %s holds the dump's rows: %s", tb.Name, s)
		require.NoError(t, os.WriteFile(filepath.Join(lc.work, tb.Name+".json"), []byte(s.out), 0o644))

		s = lc.ok("db", "export", tb.Name, "--format", "csv", "--db", dir)
		records, err := csv.NewReader(strings.NewReader(s.out)).ReadAll()
		require.NoError(t, err, "%s", s)
		require.NotEmpty(t, records, "a CSV export starts with its header: %s", s)
		assert.Equal(t, tb.fieldNames(), records[0], "the CSV header is the table's fields: %s", s)
		assert.Len(t, records[1:], len(tables[tb.Name]), "the CSV export of %s has a line per row: %s", tb.Name, s)
		require.NoError(t, os.WriteFile(filepath.Join(lc.work, tb.Name+".csv"), []byte(s.out), 0o644))
	}

	// Each export imports into a fresh store of the domain, which then dumps as the store does.
	for _, format := range []string{"json", "csv"} {
		fresh := filepath.Join(lc.work, "fresh-"+format)
		s = lc.ok(lc.initArgs(fresh, "--empty")...)
		assert.Contains(t, s.out+s.err, fresh, "db init names the store it created: %s", s)
		for name, n := range lc.rowCounts(lc.dump(fresh)) {
			assert.Zero(t, n, "db init --empty created %s with rows in %s", fresh, name)
		}
		if mode == served {
			servers = append(servers, lc.serve(fresh))
		}
		for _, tb := range lc.schema.Tables {
			s = lc.ok("db", "import", tb.Name, tb.Name+"."+format, "--db", fresh)
			assert.Equal(t, len(tables[tb.Name]), importCount(t, s, "inserted"), "the import into an empty table inserts every row of the file: %s", s)
			for _, other := range []string{"updated", "deleted", "unchanged"} {
				assert.Zero(t, importCount(t, s, other), "%s", s)
			}
		}
		assert.Equal(t, current, lc.dump(fresh), "a fresh store that imported the %s exports dumps byte for byte as the store they came from", format)
	}

	// seed --force puts the seed back: the store then dumps as right after init.
	s = lc.ok("db", "seed", "--force", "--db", dir)
	assert.Contains(t, s.out+s.err, dir, "db seed names the store it seeded: %s", s)
	assert.Equal(t, first, lc.dump(dir), "db seed --force said it seeded %s (exit 0), but its dump is not the one taken right after db init: the store does not hold the domain's seed", dir)

	// db check needs the file to itself: while a server holds the store it says so; alone, the
	// store and the fresh ones check out.
	if mode == served {
		s = lc.run("db", "check", "--json", "--db", dir)
		assert.NotEqual(t, ExitOK, s.code, "%s", s)
		assert.Contains(t, s.out+s.err, dir, "%s", s)
		lc.saysAServerHoldsIt(s, dir)
		// Through the server, a command prints what it prints alone.
		relayed := [][]string{{"runs", "show", res.RunID, "--json", "--db", dir}, {"describe", "--json", "--db", dir}, {"db", "dump", "--json", "--db", dir}}
		outs := make([]string, len(relayed))
		for i, args := range relayed {
			outs[i] = lc.ok(args...).out
		}
		for _, srv := range servers {
			srv.stop()
		}
		for i, args := range relayed {
			assert.Equal(t, outs[i], lc.ok(args...).out, "starplan %s prints the same through the server as alone", strings.Join(args, " "))
		}
	}
	for _, d := range []string{dir, filepath.Join(lc.work, "fresh-json"), filepath.Join(lc.work, "fresh-csv")} {
		lc.checksOut(d)
	}
}

// initAgain runs db init on the existing store in dir: it changes nothing and says why, that the
// store exists or (held) that a server holds it.
func (lc *lifecycle) initAgain(dir string, held bool) {
	t := lc.t
	t.Helper()
	s := lc.run(lc.initArgs(dir)...)
	assert.NotEqual(t, ExitOK, s.code, "a second db init on %s: %s", dir, s)
	assert.Contains(t, s.out+s.err, dir, "%s", s)
	if held {
		lc.saysAServerHoldsIt(s, dir)
	} else {
		assert.Contains(t, s.out+s.err, "exists", "%s", s)
	}
}

// saysAServerHoldsIt asserts that a command refused because a server holds the store, and says
// so: a person must learn that stopping `starplan serve` is what lets it run.
func (lc *lifecycle) saysAServerHoldsIt(s lcStep, dir string) {
	lc.t.Helper()
	assert.Contains(lc.t, s.out+s.err, "serve", "a command that needs %s to itself, refused while starplan serve holds it, says that a server holds it: %s", dir, s)
}

// checksOut runs db check on dir: exit 0, a report with no problems, every count verified, and
// the rows the dump holds.
func (lc *lifecycle) checksOut(dir string) {
	t := lc.t
	t.Helper()
	s := lc.run("db", "check", "--json", "--db", dir)
	assert.Equal(t, ExitOK, s.code, "%s", s)
	var rep store.CheckReport
	require.NoError(t, json.Unmarshal([]byte(s.out), &rep), "%s", s)
	assert.Empty(t, rep.Problems, "%s", s)
	assert.Empty(t, rep.Unverified, "db check verifies the row counts and digests of a store this binary wrote: %s", s)
	counts := map[string]int{}
	for _, tc := range rep.Tables {
		counts[tc.Table] = tc.Rows
	}
	assert.Equal(t, lc.rowCounts(lc.dump(dir)), counts, "db check counts the rows the dump holds: %s", s)
}

// holdsTheSeed asserts that a dump holds the rows of the domain's seed.json: every row, every
// field it gives (the others null), compared as JSON values.
func (lc *lifecycle) holdsTheSeed(dump string) {
	t := lc.t
	t.Helper()
	var seed map[string][]map[string]any
	require.NoError(t, json.Unmarshal([]byte(readFile(t, filepath.Join(lc.dom.dir, store.SeedFile))), &seed))
	tables := lc.tables(dump)
	for _, tb := range lc.schema.Tables {
		got := byKey(tables[tb.Name], tb.Key)
		assert.Len(t, got, len(seed[tb.Name]), "after db init, %s holds the seed's rows:\n%s", tb.Name, dump)
		for _, want := range seed[tb.Name] {
			row, ok := got[fmt.Sprint(want[tb.Key])]
			if !assert.True(t, ok, "the seed's %s row %v is in the dump", tb.Name, want[tb.Key]) {
				continue
			}
			for _, f := range tb.Fields {
				assert.Equal(t, want[f.Name], row[f.Name], "%s row %v field %s: the dump holds the seed's value", tb.Name, want[tb.Key], f.Name)
			}
		}
	}
}

// holdsTheChanges asserts that a dump holds the rows a run inserted and updated, as the run's
// result shows them after.
func (lc *lifecycle) holdsTheChanges(dump string, res engine.Result) {
	t := lc.t
	t.Helper()
	tables := lc.tables(dump)
	for name, ch := range res.Changes {
		got := byKey(tables[name], ch.Key)
		after := append([]map[string]any{}, asMaps(ch.Inserted)...)
		for _, u := range ch.Updated {
			after = append(after, normalize(u.After).(map[string]any))
		}
		for _, want := range after {
			assert.Equal(t, want, got[fmt.Sprint(want[ch.Key])], "after the apply, %s holds the run's row %v", name, want[ch.Key])
		}
	}
}

// floatsKeepTheirPoint asserts that the dump writes every value of a float field, nested ones
// too, with its decimal point (57.0, not 57), as store.Dump says it does, so that a reader of
// the file tells floats from ints.
func (lc *lifecycle) floatsKeepTheirPoint(dump string) {
	t := lc.t
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(dump))
	dec.UseNumber()
	var tables map[string][]map[string]any
	require.NoError(t, dec.Decode(&tables))
	var bare []string
	for _, tb := range lc.schema.Tables {
		for _, row := range tables[tb.Name] {
			for _, f := range tb.Fields {
				f.bareFloats(fmt.Sprintf("%s[%v].%s", tb.Name, row[tb.Key], f.Name), row[f.Name], &bare)
			}
		}
	}
	assert.Empty(t, bare, "db dump --json writes these floats as ints (store.Dump: floats keep a decimal point, 80.0, so that a file read back shows which numbers are floats):\n%s", dump)
}

// rowCounts are the rows of each table in a dump.
func (lc *lifecycle) rowCounts(dump string) map[string]int {
	counts := map[string]int{}
	for name, rows := range lc.tables(dump) {
		counts[name] = len(rows)
	}
	return counts
}

// tables parses a dump: each table's rows as JSON values.
func (lc *lifecycle) tables(dump string) map[string][]any {
	lc.t.Helper()
	var tables map[string][]any
	require.NoError(lc.t, json.Unmarshal([]byte(dump), &tables), "db dump --json prints JSON:\n%s", dump)
	return tables
}

// relative names path from the working directory, as a person in it would.
func (lc *lifecycle) relative(path string) string {
	rel, err := filepath.Rel(lc.work, path)
	require.NoError(lc.t, err)
	return rel
}

// lcServer is `starplan serve` on a store, started by the test.
type lcServer struct {
	lc    *lifecycle
	dir   string
	cmd   *exec.Cmd
	errb  *syncBuffer
	ended chan struct{} // closed once the process has exited
}

// serve starts `starplan serve` on dir and waits until its socket answers. It is stopped when
// the test ends, whatever happened.
func (lc *lifecycle) serve(dir string) *lcServer {
	t := lc.t
	t.Helper()
	srv := &lcServer{lc: lc, dir: dir, errb: &syncBuffer{}, ended: make(chan struct{})}
	srv.cmd = exec.Command(lc.bin, "--db", dir, "serve", "--listen", "127.0.0.1:0")
	srv.cmd.Dir, srv.cmd.Env = lc.work, lc.env
	srv.cmd.Stdout, srv.cmd.Stderr = srv.errb, srv.errb
	require.NoError(t, srv.cmd.Start())
	go func() { _ = srv.cmd.Wait(); close(srv.ended) }()
	t.Cleanup(func() {
		select {
		case <-srv.ended:
		default:
			_ = srv.cmd.Process.Kill()
			<-srv.ended
		}
	})
	socket := filepath.Join(dir, SocketName)
	for {
		// The socket answers first, then the HTTP address is listened on and printed.
		if conn, err := net.Dial("unix", socket); err == nil {
			conn.Close()
			if strings.Contains(srv.errb.String(), "starplan serve: listening on") {
				return srv
			}
		}
		select {
		case <-srv.ended:
			t.Fatalf("starplan serve on %s exited before its socket answered (%s):\n%s", dir, srv.cmd.ProcessState, srv.errb)
		case <-lc.ctx.Done():
			t.Fatalf("starplan serve on %s never answered on %s:\n%s", dir, socket, srv.errb)
		default:
			waitABit()
		}
	}
}

// stop sends SIGTERM: the server drains, lets go of the store and removes its socket.
func (srv *lcServer) stop() {
	t := srv.lc.t
	t.Helper()
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	srv.wait()
	assert.Equal(t, ExitOK, srv.cmd.ProcessState.ExitCode(), "starplan serve on %s exits 0 on SIGTERM:\n%s", srv.dir, srv.errb)
	_, err := os.Stat(filepath.Join(srv.dir, SocketName))
	assert.True(t, os.IsNotExist(err), "a stopped server removes its socket")
}

// kill ends the server with SIGKILL, as an OOM killer or a power cut would: its socket stays.
func (srv *lcServer) kill() {
	srv.lc.t.Helper()
	require.NoError(srv.lc.t, srv.cmd.Process.Kill())
	srv.wait()
}

func (srv *lcServer) wait() {
	srv.lc.t.Helper()
	select {
	case <-srv.ended:
	case <-srv.lc.ctx.Done():
		srv.lc.t.Fatalf("starplan serve on %s did not exit:\n%s", srv.dir, srv.errb)
	}
}

// importCount is the number db import reports before label ("6 inserted").
func importCount(t *testing.T, s lcStep, label string) int {
	t.Helper()
	m := regexp.MustCompile(`(\d+) ` + label).FindStringSubmatch(s.out + s.err)
	require.NotNil(t, m, "db import says how many rows it %s: %s", label, s)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// byKey indexes rows (JSON objects) by their key field.
func byKey(rows []any, key string) map[string]map[string]any {
	m := map[string]map[string]any{}
	for _, r := range rows {
		if row, ok := r.(map[string]any); ok {
			m[fmt.Sprint(row[key])] = row
		}
	}
	return m
}

// normalize is v as JSON reads it back (numbers float64, lists []any, objects map[string]any).
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func asMaps[R ~map[string]any](rows []R) []map[string]any {
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		out[i] = normalize(r).(map[string]any)
	}
	return out
}

// lcDomainFile is the part of a domain.json the lifecycle reads: tables, keys, field types.
type lcDomainFile struct {
	Tables []lcTable `json:"tables"`
}

type lcTable struct {
	Name   string    `json:"name"`
	Key    string    `json:"key"`
	Fields []lcField `json:"fields"`
}

func (tb lcTable) fieldNames() []string {
	names := make([]string, len(tb.Fields))
	for i, f := range tb.Fields {
		names[i] = f.Name
	}
	return names
}

type lcField struct {
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	Items  *lcField  `json:"items"`
	Fields []lcField `json:"fields"`
}

// bareFloats adds to bare the path of every value of a float field under v (decoded with
// UseNumber) that is written without a decimal point or exponent.
func (f lcField) bareFloats(path string, v any, bare *[]string) {
	switch f.Type {
	case "float":
		if n, ok := v.(json.Number); ok && !strings.ContainsAny(n.String(), ".eE") {
			*bare = append(*bare, path+" = "+n.String())
		}
	case "list":
		if list, ok := v.([]any); ok && f.Items != nil {
			for i, item := range list {
				f.Items.bareFloats(fmt.Sprintf("%s[%d]", path, i), item, bare)
			}
		}
	case "object":
		if obj, ok := v.(map[string]any); ok {
			for _, sub := range f.Fields {
				sub.bareFloats(path+"."+sub.Name, obj[sub.Name], bare)
			}
		}
	}
}

// workshopDomain is a third domain, not shipped, as a user would write one: nested lists of
// objects with floats (whole ones such as 57.0 among them), free text with commas, quotes,
// accents and a line break, timestamps, an int key and an optional field left out.
var workshopDomain = map[string]string{
	"domain.json": `{
  "name": "workshop",
  "doc": "A bicycle workshop: its repair jobs with the parts each uses, and its crews.",
  "tables": [
    {
      "name": "jobs",
      "key": "job_id",
      "doc": "One row per repair job.",
      "key_prefix": "J",
      "key_digits": 3,
      "indexes": ["customer"],
      "fields": [
        {"name": "job_id", "type": "string", "required": true, "pattern": "J[0-9]{3,9}", "read_only": true, "doc": "J followed by digits, such as J001"},
        {"name": "customer", "type": "string", "required": true, "min_len": 1, "doc": "who brought the bicycle in"},
        {"name": "notes", "type": "string", "doc": "free text about the job"},
        {"name": "status", "type": "string", "required": true, "enum": ["open", "done"], "doc": "open until the bicycle is fixed"},
        {"name": "parts", "type": "list", "doc": "the parts the job uses", "items": {"type": "object", "fields": [
          {"name": "sku", "type": "string", "required": true, "doc": "the part's stock number"},
          {"name": "qty", "type": "int", "required": true, "min": 1, "doc": "how many"},
          {"name": "unit_price", "type": "float", "required": true, "min": 0, "doc": "dollars each"}
        ]}},
        {"name": "tags", "type": "list", "doc": "labels", "items": {"type": "string"}},
        {"name": "total", "type": "float", "required": true, "min": 0, "doc": "the bill in dollars"},
        {"name": "due", "type": "timestamp", "required": true, "doc": "when the customer collects it, ISO-8601"},
        {"name": "closed_at", "type": "timestamp", "doc": "when the job was done"}
      ]
    },
    {
      "name": "crews",
      "key": "crew_id",
      "doc": "One row per crew of mechanics.",
      "fields": [
        {"name": "crew_id", "type": "int", "required": true, "read_only": true, "doc": "the crew's number"},
        {"name": "name", "type": "string", "required": true, "doc": "the crew's name"},
        {"name": "rate", "type": "float", "required": true, "min": 0, "doc": "dollars an hour"},
        {"name": "shifts", "type": "list", "doc": "who works when", "items": {"type": "object", "fields": [
          {"name": "mechanic", "type": "string", "required": true, "doc": "who"},
          {"name": "hours", "type": "float", "required": true, "doc": "how long"}
        ]}}
      ]
    }
  ]
}
`,
	"seed.json": `{
  "jobs": [
    {"job_id": "J001", "customer": "Zoë Ødegård", "notes": "front brake squeals, \"urgent\";\ncall first, then fix", "status": "open",
     "parts": [{"sku": "BRK-7", "qty": 2, "unit_price": 57.0}, {"sku": "CBL-1", "qty": 1, "unit_price": 4.35}],
     "tags": ["brakes", "urgent"], "total": 118.35, "due": "2026-12-01T09:30:00"},
    {"job_id": "J002", "customer": "Ben", "status": "done", "parts": [], "tags": [], "total": 0.0, "due": "2026-11-20T17:00:00", "closed_at": "2026-11-20T16:45:00"}
  ],
  "crews": [
    {"crew_id": 1, "name": "Morning", "rate": 40.0, "shifts": [{"mechanic": "Ana", "hours": 7.5}, {"mechanic": "Raj", "hours": 8.0}]},
    {"crew_id": 2, "name": "Late, weekends", "rate": 42.25, "shifts": []}
  ]
}
`,
	"policy.json": `{
  "name": "workshop",
  "doc": "A bicycle workshop: jobs get parts and are closed.",
  "contract": {
    "statuses": ["success", "not_found"],
    "write_status": "success",
    "answer_max_sentences": 2,
    "answer_max_chars": 300
  },
  "limits": {},
  "rules": [
    {"name": "only_jobs", "kind": "only_tables", "doc": "only jobs change", "params": {"tables": ["jobs"]}},
    {"name": "no_deletions", "kind": "no_deletes", "doc": "no row is ever removed"},
    {"name": "total_non_negative", "kind": "non_negative", "doc": "a bill is never below 0", "params": {"table": "jobs", "field": "total"}}
  ]
}
`,
	"prompt.json": `{
  "role": "a careful workshop assistant",
  "statuses": {
    "success": {"when": "the job is updated", "answer": "Done: the job is closed."},
    "not_found": {"when": "no such job; change nothing", "answer": "Sorry, there is no such job."}
  }
}
`,
	"example.star": `# Request: "Fit a chain to Zoë's bicycle and close the job."
job = jobs_tbl.get({"job_id": "J001"})
if job == None:
    STATUS = "not_found"
    answer_text = "Sorry, there is no such job."
else:
    chain = {"sku": "CHN-9", "qty": 1, "unit_price": 21.5}
    jobs_tbl.update({"parts": job["parts"] + [chain], "total": job["total"] + 21.5, "status": "done",
        "tags": job["tags"] + ["chain"], "closed_at": now()}, job)
    STATUS = "success"
    answer_text = "Done: the job is closed."
`,
}
