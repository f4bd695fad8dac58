package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/opener"
)

// session runs starplan commands against one store in a temporary directory, with injected
// streams, as a person or a script would.
type session struct {
	t   *testing.T
	dir string
	// isolated runs plans in worker processes, as the CLI does by default; a session runs them
	// in process (--in-process) unless the test is about isolation: a worker's start costs
	// more than most commands under test, and the isolate package tests the workers.
	isolated bool
	// db is what --db names when it is not dir (a URL); opener opens it (nil: the built-in
	// backends); env is the environment beyond NO_COLOR.
	db     string
	opener *opener.Opener
	env    map[string]string
}

func newSession(t *testing.T) *session {
	return &session{t: t, dir: filepath.Join(t.TempDir(), "store")}
}

// newIsolatedSession is a session whose commands run plans in isolated workers, as a user's do.
func newIsolatedSession(t *testing.T) *session {
	s := newSession(t)
	s.isolated = true
	return s
}

type output struct {
	code     int
	out, err string
}

// run executes one command. tty makes stdout and stdin terminals; input is what the user types.
func (s *session) run(tty bool, input string, args ...string) output {
	s.t.Helper()
	var out, errb bytes.Buffer
	ios := IOStreams{
		In: strings.NewReader(input), Out: &out, Err: &errb, OutTTY: tty, InTTY: tty,
		Getenv: func(k string) string {
			if k == "NO_COLOR" {
				return "1"
			}
			return s.env[k]
		},
		opener: s.opener,
	}
	global := []string{"--db", s.dir}
	switch {
	case s.db == "-": // none: STARPLAN_DB, or the default
		global = nil
	case s.db != "":
		global = []string{"--db", s.db}
	}
	if !s.isolated {
		global = append(global, "--in-process")
	}
	code := Main(append(global, args...), ios)
	return output{code, out.String(), errb.String()}
}

func example(name string) string { return filepath.Join("..", "..", "testdata", "examples", name) }

func TestExecPipedPrintsTheResultDocument(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "exec", "--request", "Purchase 3 Wayfarer sunglasses for customer Alice.", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.err, "seeded new store at")
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	assert.Equal(t, engine.OutcomeOK, res.Outcome)
	assert.True(t, res.Pending)
	for _, field := range []string{"run_id", "outcome", "status", "answer_text", "stdout", "diagnostics", "stdout_truncated", "rewrites", "changes", "pending", "applied", "steps", "duration_ms"} {
		assert.Contains(t, o.out, `"`+field+`"`, "the result document has %s", field)
	}

	// The pending run is applied by a later command, in a later process lifetime.
	o = s.run(false, "", "apply", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)
	var applied engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &applied))
	assert.True(t, applied.Applied)

	o = s.run(false, "", "apply", res.RunID)
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "already applied")
	assert.Contains(t, o.err, "Try: ")
}

func TestExecOnATerminalAsksBeforeApplying(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(true, "y\n", "exec", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "STATUS: success")
	assert.Contains(t, o.out, "Changes (dry run, not applied):")
	assert.Contains(t, o.out, "~ SG002    6 → 3")
	assert.Contains(t, o.out, "Apply these changes? [y/N]")
	assert.Contains(t, o.out, "Applied run r_")

	o = s.run(true, "\n", "exec", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "~ SG002    3 → 0", "the first purchase was applied")
	assert.Contains(t, o.out, "Not applied. To apply later: starplan apply r_")
}

// While exec waits for a person at [y/N], it does not hold the store: another command uses it
// meanwhile (here, the same purchase applied at once). The approved run is then applied only if
// nothing it depended on moved, so it ends as a conflict instead of selling the stock twice.
func TestExecReleasesTheStoreWhileAskingToApply(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	var inner output
	answer := &promptReader{answer: "y\n", meanwhile: func() {
		inner = s.run(false, "", "exec", "--apply", example("02_purchase_wayfarer.star"))
	}}
	var out, errb bytes.Buffer
	ios := IOStreams{In: answer, Out: &out, Err: &errb, OutTTY: true, InTTY: true, Getenv: func(k string) string {
		if k == "NO_COLOR" {
			return "1"
		}
		return ""
	}}
	code := Main([]string{"--db", s.dir, "exec", example("02_purchase_wayfarer.star")}, ios)
	require.True(t, answer.asked)
	require.Equal(t, ExitOK, inner.code, "the store was free while the first exec waited: %s", inner.err)
	assert.Contains(t, inner.out, `"applied": true`)
	assert.Contains(t, out.String(), "Apply these changes? [y/N]")
	assert.Equal(t, ExitConflict, code, "%s\n%s", out.String(), errb.String())
	assert.Contains(t, out.String(), "conflict")
	o := s.run(false, "", "db", "dump", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	var dump map[string][]map[string]any
	require.NoError(t, json.Unmarshal([]byte(o.out), &dump))
	for _, row := range dump["inventory"] {
		if row["item_id"] == "SG002" {
			assert.EqualValues(t, 3, row["quantity_in_stock"], "sold once, not twice")
		}
	}
}

// promptReader is a terminal's input: the first read (the program waiting for an answer) runs
// meanwhile, then returns answer.
type promptReader struct {
	answer    string
	meanwhile func()
	asked     bool
}

func (r *promptReader) Read(p []byte) (int, error) {
	if !r.asked {
		r.asked = true
		r.meanwhile()
	}
	n := copy(p, r.answer)
	r.answer = r.answer[n:]
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func TestExecNotInteractiveLeavesThePendingRunID(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	var out, errb bytes.Buffer
	ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, OutTTY: true, InTTY: false, Getenv: func(string) string { return "" }}
	code := Main([]string{"--db", s.dir, "exec", example("03_two_item_order.star")}, ios)
	require.Equal(t, ExitOK, code, errb.String())
	assert.Regexp(t, `pending: starplan apply r_[0-9a-f]{24}\n`, out.String())
	assert.Contains(t, out.String(), "\x1b[", "colour on a terminal without NO_COLOR")
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		return p
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"accepted", []string{"exec", example("01_round_under_100.star")}, ExitOK},
		{"rejected by the check", []string{"exec", write("try.star", "try:\n    x = 1\nexcept:\n    pass\n")}, ExitRejected},
		{"stopped by a limit", []string{"exec", example("05_hostile_memory_bomb.star")}, ExitRejected},
		{"contract violation", []string{"exec", write("nostatus.star", "answer_text = 'hi'\n")}, ExitContract},
		{"unknown command", []string{"frobnicate"}, ExitUsage},
		{"missing file", []string{"exec", filepath.Join(dir, "nope.star")}, ExitUsage},
		{"unknown run", []string{"apply", "r_0000000000"}, ExitUsage},
		{"check finds problems", []string{"check", write("bad.star", "x = 2 ** 3\n")}, ExitRejected},
		{"check passes", []string{"check", example("03_two_item_order.star")}, ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := s.run(false, "", tt.args...)
			assert.Equal(t, tt.code, o.code, "stdout: %s\nstderr: %s", o.out, o.err)
		})
	}
}

func TestConflictExitCode(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "exec", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code)
	var first engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &first))
	require.Equal(t, ExitOK, s.run(false, "", "exec", "--apply", example("02_purchase_wayfarer.star")).code)
	o = s.run(false, "", "apply", first.RunID)
	assert.Equal(t, ExitConflict, o.code, o.out)
	assert.Contains(t, o.out, `"outcome": "conflict"`)

	// Every later apply of the conflicted run says conflict again, with what to do: not a usage
	// error, as if the run id were wrong.
	for _, tty := range []bool{false, true} {
		o = s.run(tty, "", "apply", first.RunID)
		assert.Equal(t, ExitConflict, o.code, "tty %v: %s%s", tty, o.out, o.err)
		assert.Contains(t, o.err, "already ended in a conflict", tty)
		assert.Contains(t, o.err, "Try: starplan runs replay "+first.RunID, tty)
		assert.Contains(t, o.out, "conflict", tty)
	}
	o = s.run(false, "", "apply", "--json", first.RunID)
	assert.Equal(t, ExitConflict, o.code, o.err)
	var again engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &again), "the run's document, as the first apply printed it")
	assert.Equal(t, engine.OutcomeConflict, again.Outcome)
	assert.Equal(t, first.RunID, again.RunID)
}

func TestRunsListsAndShows(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "exec", "--request", "buy wayfarer", example("02_purchase_wayfarer.star"))
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	s.run(false, "", "exec", example("05_hostile_memory_bomb.star"))

	o = s.run(true, "", "runs")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, res.RunID)
	assert.Contains(t, o.out, "limit_exceeded")
	assert.Contains(t, o.out, "pending")

	o = s.run(true, "", "runs", "show", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Request: buy wayfarer")
	assert.Contains(t, o.out, "pending: starplan apply "+res.RunID)
	assert.Contains(t, o.out, "Program:")
	assert.Contains(t, o.out, "rewrote is-none")
	assert.Contains(t, o.out, "~ SG002    6 → 3")
}

func TestDBCommands(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	o := s.run(false, "", "db", "dump")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "inventory (6 rows)")
	assert.Contains(t, o.out, "OPENING_BALANCE")

	o = s.run(false, "", "db", "export", "inventory")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.True(t, strings.HasPrefix(o.out, "[\n  {\"item_id\": \"SG001\""), "JSON by default: %s", o.out)

	o = s.run(false, "", "db", "export", "inventory", "--format", "csv")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.True(t, strings.HasPrefix(o.out, "item_id,name,description,quantity_in_stock,price\n"))

	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("item_id,name,description,quantity_in_stock,price\nSG007,Cat Eye,Pointed,5,75\nSG008,Bad,x,-3,10\n"), 0o644))
	o = s.run(false, "", "db", "import", "inventory", bad)
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, `line 3: field "quantity_in_stock" = -3`)
	o = s.run(false, "", "db", "dump")
	assert.NotContains(t, o.out, "Cat Eye", "one bad row imports nothing")

	good := filepath.Join(dir, "good.csv")
	require.NoError(t, os.WriteFile(good, []byte("item_id,name,description,quantity_in_stock,price\nSG007,Cat Eye,Pointed,5,75\n"), 0o644))
	o = s.run(false, "", "db", "import", "inventory", good)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "1 inserted")

	o = s.run(false, "", "db", "seed")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "--force")
	require.Equal(t, ExitOK, s.run(false, "", "db", "seed", "--force").code)
	assert.NotContains(t, s.run(false, "", "db", "dump").out, "Cat Eye")
}

func TestDemo(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := Main([]string{"demo"}, IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
	require.Equal(t, ExitOK, code, errb.String())
	for _, want := range []string{"Yes: our Classic sunglasses", "Applied run r_", "STATUS: insufficient_stock", "limit_exceeded (memory limit)", "SG002    Wayfarer  3",
		"rewritten to Starlark: is-none, f-string", "go build -o starplan ./cmd/starplan"} {
		assert.Contains(t, out.String(), want)
	}
	// Its store is temporary: it names no run id as a command to type later.
	assert.NotRegexp(t, `starplan (apply|runs show) r_`, out.String())
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	var out bytes.Buffer
	ios := IOStreams{In: strings.NewReader("x = 70 <= 80 <= 100\nprint(inventry_tbl)\n"), Out: &out, Err: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	code := Main([]string{"--db", s.dir, "check", "--json", "-"}, ios)
	assert.Equal(t, ExitRejected, code)
	var rep checkReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Len(t, rep.Diagnostics, 1)
	assert.Equal(t, "did you mean inventory_tbl?", rep.Diagnostics[0].Hint)
	require.Len(t, rep.Rewrites, 1)
	assert.Equal(t, "chained-compare", rep.Rewrites[0].Rule)
}

// Plans run in isolated workers by default; --in-process runs them here. Both give the same
// result, and the worker command stays out of the help.
func TestIsolatedByDefault(t *testing.T) {
	t.Parallel()
	ios := IOStreams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	pool, run, err := runner(ios, &globalOptions{})
	require.NoError(t, err)
	require.NotNil(t, pool, "isolated by default")
	defer pool.Close()
	assert.Same(t, pool, run)
	pool, run, err = runner(ios, &globalOptions{InProcess: true})
	require.NoError(t, err)
	assert.Nil(t, pool)
	assert.Nil(t, run, "engine.New runs in process when the runner is nil")

	s := newIsolatedSession(t)
	var results []engine.Result
	for _, args := range [][]string{{"exec"}, {"--in-process", "exec"}} {
		o := s.run(false, "", append(args, example("03_two_item_order.star"))...)
		require.Equal(t, ExitOK, o.code, o.err)
		var res engine.Result
		require.NoError(t, json.Unmarshal([]byte(o.out), &res))
		results = append(results, res)
	}
	assert.Equal(t, results[0].AnswerText, results[1].AnswerText)
	assert.Equal(t, results[0].Changes["inventory"], results[1].Changes["inventory"])
	// The transactions match but for now(), which the two runs read at different moments.
	for _, res := range results {
		for _, txn := range res.Changes["transactions"].Inserted {
			delete(txn, "timestamp")
		}
	}
	assert.Equal(t, results[0].Changes["transactions"], results[1].Changes["transactions"])

	help := s.run(false, "", "--help")
	assert.NotContains(t, help.out, workerCommand)
}

// The program in the result is the whole text that was checked: a NUL, where go.starlark.net's
// scanner would stop, is rejected at its position instead of the prefix being run. Through the
// isolated worker, as exec runs plans by default.
func TestExecReportsTheWholeProgramItChecked(t *testing.T) {
	t.Parallel()
	s := newIsolatedSession(t)
	src := "STATUS = \"success\"\nanswer_text = \"Nothing to do.\"\n# \x00\nSTATUS = \"hidden\"\n"
	plan := filepath.Join(t.TempDir(), "nul.star")
	require.NoError(t, os.WriteFile(plan, []byte(src), 0o644))
	o := s.run(false, "", "exec", plan)
	assert.Equal(t, ExitRejected, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	assert.Equal(t, engine.OutcomeCheckFailed, res.Outcome)
	assert.Equal(t, src, res.Program)
	require.NotEmpty(t, res.Diagnostics)
	assert.Equal(t, "program-control-char", res.Diagnostics[0].Code)
	assert.Equal(t, [2]int{3, 3}, [2]int{res.Diagnostics[0].Line, res.Diagnostics[0].Col})
}

// runRaw runs a command with exactly args (no --db added), in an environment where only HOME is
// set, to home.
func (s *session) runRaw(home string, args ...string) output {
	s.t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	code := Main(args, IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: getenv})
	return output{code, out.String(), errb.String()}
}
