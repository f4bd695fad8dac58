package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/pgtest"
)

// pgURL is a postgres:// URL of a fresh database for t (pgtest.DSN may be in key=value form,
// which --db does not take), or skips t with pgtest's hint when no PostgreSQL is given.
func pgURL(t *testing.T) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	u := url.URL{Scheme: "postgres", Path: "/" + cfg.Database, User: url.User(cfg.User)}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	q := url.Values{"sslmode": {"disable"}, "port": {fmt.Sprint(cfg.Port)}}
	if strings.HasPrefix(cfg.Host, "/") {
		q.Set("host", cfg.Host)
	} else {
		u.Host = cfg.Host
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Every command works on a PostgreSQL store named by --db postgres://…: db init from a domain
// directory, exec's dry run, apply, runs, db dump/export/import (JSON and CSV)/seed/check, token; a second store in the same database by ?schema=.
func TestCommandsOnPostgreSQL(t *testing.T) {
	t.Parallel()
	db := pgURL(t)
	s := &session{t: t, dir: filepath.Join(t.TempDir(), "unused"), db: db}
	ok := func(args ...string) output {
		t.Helper()
		o := s.run(false, "", args...)
		require.Equal(t, ExitOK, o.code, "%v: %s", args, o.err)
		return o
	}

	o := ok("db", "init", "--domain", "../../domains/inventory")
	assert.Contains(t, o.err, "created new store in PostgreSQL schema inventory with the inventory demo data (7 rows)")
	o = s.run(false, "", "db", "init")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "a store already exists at "+db+"; nothing was changed")
	assert.NoDirExists(t, s.dir)

	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(ok("exec", "--request", "Purchase 3 Wayfarer sunglasses for customer Alice.", example("02_purchase_wayfarer.star")).out), &res))
	require.True(t, res.Pending, "a piped exec is a dry run")
	assert.Regexp(t, `SG002 +Wayfarer +\S.* 6 +95\.00`, ok("db", "dump").out, "the dry run wrote nothing")
	var applied engine.Result
	require.NoError(t, json.Unmarshal([]byte(ok("apply", res.RunID).out), &applied))
	assert.True(t, applied.Applied)
	o = s.run(false, "", "apply", res.RunID)
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "already applied")
	assert.Contains(t, ok("runs").out, res.RunID)
	assert.Contains(t, ok("runs", "show", res.RunID).out, "applied")

	assert.Contains(t, ok("db", "dump").out, "inventory (6 rows)")
	dump := ok("db", "dump", "--json").out
	assert.Contains(t, dump, `"quantity_in_stock": 3`, "the applied purchase is in the rows")
	export := ok("db", "export", "inventory").out
	assert.True(t, strings.HasPrefix(export, "[\n  {\"item_id\": \"SG001\""), export)
	assert.Contains(t, ok("db", "export", "inventory", "--format", "csv").out, "item_id,name,description,quantity_in_stock,price\nSG001,")

	good := writeFile(t, "good.json", `[{"item_id": "SG007", "name": "Cat Eye", "description": "Pointed", "quantity_in_stock": 5, "price": 75}]`)
	assert.Contains(t, ok("db", "import", "inventory", good).out, "1 inserted")
	assert.Contains(t, ok("db", "dump").out, "Cat Eye")
	o = s.run(false, "", "db", "import", "inventory", writeFile(t, "x.csv", "item_id\nSG008\n"))
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, `field "name" is empty: it is required`)
	o = s.run(false, "", "db", "import", "inventory", good, "--batch", "10")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "drop --batch")

	o = s.run(false, "", "db", "seed")
	assert.Equal(t, ExitUsage, o.code, "a store with rows needs --force")
	o = ok("db", "seed", "--force")
	assert.Contains(t, o.err, "seeded "+db+" with")
	assert.NotContains(t, ok("db", "dump").out, "Cat Eye")
	assert.Contains(t, ok("db", "check").out, `"problems": []`)
	assert.Contains(t, ok("db", "check", "--json").out, `"file": "postgres schema inventory"`)

	ok("token", "create", "agent-1", "--role", "proposer")
	assert.Contains(t, ok("token", "list").out, "agent-1")

	// A second store in the same database, in a schema of its own.
	lib := &session{t: t, dir: s.dir, db: db + "&schema=lib"}
	o = lib.run(false, "", "db", "init", "--domain", "../../domains/library")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.err, "created new store in PostgreSQL schema lib with the library domain's seed (16 rows)")
	o = lib.run(false, "", "describe")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "library")
	o = s.run(false, "", "db", "check")
	assert.Equal(t, ExitInternal, o.code, "two stores in the database: which one must be said")
	assert.Contains(t, o.err, "the database holds 2 starplan stores (schemas inventory, lib)")
}

// serve on a PostgreSQL store serves HTTP with the token it is given, and refuses to start
// without one (a database's store has no directory for serve.token).
func TestServeOnPostgreSQL(t *testing.T) {
	t.Parallel()
	db := pgURL(t)
	s := &session{t: t, dir: filepath.Join(t.TempDir(), "unused"), db: db}
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	o := s.run(false, "", "serve", "--listen", "127.0.0.1:0")
	assert.Equal(t, ExitUsage, o.code, o.err)
	assert.Contains(t, o.err, "no token was given")

	const token = "a-token-of-sixteen-or-more"
	base, stop := servePG(t, db, token)
	defer stop()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/describe", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), `"inventory"`)
}

// servePG runs `starplan serve` in process on db with token, and returns its base URL and a
// function that stops it (and checks that it exited 0).
func servePG(t *testing.T, db, token string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(deadline(t))
	errb := &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		ios := IOStreams{In: strings.NewReader(""), Out: io.Discard, Err: errb,
			Getenv: func(k string) string { return map[string]string{"STARPLAN_TOKEN": token}[k] }}
		code <- MainContext(ctx, []string{"--db", db, "--in-process", "serve", "--listen", "127.0.0.1:0"}, ios)
	}()
	listening := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	var m []string
	for m == nil {
		select {
		case c := <-code:
			cancel()
			t.Fatalf("serve exited %d: %s", c, errb)
		case <-ctx.Done():
			t.Fatalf("serve never listened: %s", errb)
		default:
			waitABit()
		}
		m = listening.FindStringSubmatch(errb.String())
	}
	return m[1], func() {
		cancel()
		assert.Equal(t, ExitOK, <-code, errb.String())
	}
}

// The built binary on a PostgreSQL store: init, a dry run, its apply in another process.
func TestBinaryOnPostgreSQL(t *testing.T) {
	t.Parallel()
	db := pgURL(t)
	bin := starplanBinary(t)
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, append([]string{"--db", db}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "STARPLAN_DB=")
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	_, errs, err := run("db", "init", "--domain", "../../domains/inventory")
	require.NoError(t, err, errs)
	assert.Contains(t, errs, "created new store in PostgreSQL schema inventory")
	out, errs, err := run("exec", "--request", "Purchase 3 Wayfarer sunglasses for customer Alice.", example("02_purchase_wayfarer.star"))
	require.NoError(t, err, errs)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.True(t, res.Pending)
	out, errs, err = run("apply", res.RunID)
	require.NoError(t, err, errs)
	var applied engine.Result
	require.NoError(t, json.Unmarshal([]byte(out), &applied))
	assert.True(t, applied.Applied)
	out, errs, err = run("db", "export", "inventory")
	require.NoError(t, err, errs)
	assert.Regexp(t, `"item_id": "SG002", "name": "Wayfarer", "description": "[^"]*", "quantity_in_stock": 3,`, out)
}

// Two serve processes on one database: a dry run on A streams on B's /v1/events, is applied on
// B, and A shows it applied.
func TestTwoServesOnOneDatabase(t *testing.T) {
	t.Parallel()
	db := pgURL(t)
	s := &session{t: t, dir: filepath.Join(t.TempDir(), "unused"), db: db}
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	const token = "a-token-of-sixteen-or-more"
	a, stopA := servePG(t, db, token)
	defer stopA()
	b, stopB := servePG(t, db, token)
	defer stopB()
	ctx := deadline(t)
	call := func(base, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b+"/v1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	lines := bufio.NewScanner(stream.Body)
	for lines.Scan() && lines.Text() != ": subscribed" {
	}

	program, err := os.ReadFile(example("02_purchase_wayfarer.star"))
	require.NoError(t, err)
	body, _ := json.Marshal(map[string]string{"program": string(program)})
	code, out := call(a, "POST", "/v1/runs", string(body))
	require.Equal(t, http.StatusOK, code, out)
	var run struct{ RunID, Digest, State string }
	require.NoError(t, json.Unmarshal([]byte(out), &struct {
		RunID  *string `json:"run_id"`
		Digest *string `json:"digest"`
		State  *string `json:"state"`
	}{&run.RunID, &run.Digest, &run.State}))
	require.Equal(t, "pending", run.State, out)

	var seen []string
	for len(seen) < 2 && lines.Scan() {
		if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok && strings.Contains(data, run.RunID) {
			var ev engine.StreamEvent
			require.NoError(t, json.Unmarshal([]byte(data), &ev))
			seen = append(seen, ev.Type)
		}
	}
	assert.Equal(t, []string{"started", "finished"}, seen, "B streams A's dry run")

	code, out = call(b, "POST", "/v1/runs/"+run.RunID+"/apply", `{"digest": "`+run.Digest+`"}`)
	require.Equal(t, http.StatusOK, code, out)
	assert.Contains(t, out, `"state":"applied"`)
	code, out = call(a, "GET", "/v1/runs/"+run.RunID, "")
	require.Equal(t, http.StatusOK, code, out)
	assert.Contains(t, out, `"state":"applied"`)
}
