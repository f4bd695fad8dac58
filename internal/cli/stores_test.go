package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/server"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/opener"
)

// noPostgres is the PostgreSQL backend of a build that does not link store/pg.
var noPostgres = opener.Backend{Name: "PostgreSQL", Package: "store/pg", Schemes: []string{"postgres", "postgresql"}}

// A postgres URL, in --db or STARPLAN_DB, on a build without the backend: every command says
// what is missing and exits 2, creates nothing, and never prints the URL's password.
func TestPostgresURLWithoutTheBackend(t *testing.T) {
	t.Parallel()
	const url = "postgres://ann:s3cret@db.example/shop"
	o := &opener.Opener{Backends: []opener.Backend{opener.Bolt, noPostgres}}
	for _, args := range [][]string{
		{"exec", "--request", "r", example("01_round_under_100.star")},
		{"db", "init"}, {"db", "check"}, {"db", "dump"}, {"db", "import", "inventory", writeFile(t, "x.csv", "item_id\n")},
		{"runs"}, {"apply", "r_0123456789"}, {"token", "list"}, {"serve", "--listen", "127.0.0.1:0"},
		{"domain", "show"}, {"describe"},
	} {
		for _, viaEnv := range []bool{false, true} {
			s := &session{t: t, dir: filepath.Join(t.TempDir(), "unused"), db: url, opener: o}
			if viaEnv {
				s.db, s.env = "-", map[string]string{"STARPLAN_DB": url}
			}
			out := s.run(false, "", args...)
			assert.Equal(t, ExitUsage, out.code, "%v: %s", args, out.err)
			assert.Contains(t, out.err, "Error: postgres://ann:xxxxx@db.example/shop names a PostgreSQL store, but this starplan was built without the PostgreSQL backend (package store/pg)", args)
			assert.Contains(t, out.err, "Try: use a starplan built with store/pg, or pass --db DIR", args)
			assert.NotContains(t, out.err+out.out, "s3cret", args)
			assert.NoDirExists(t, "postgres:", "%v made a directory of the URL", args)
			assert.NoDirExists(t, s.dir, args)
		}
	}
}

// A URL no backend takes is a usage error, never a directory named after it.
func TestAnUnknownSchemeIsAUsageError(t *testing.T) {
	t.Parallel()
	s := &session{t: t, dir: filepath.Join(t.TempDir(), "unused"), db: "mysql://h/shop"}
	out := s.run(false, "", "db", "init")
	assert.Equal(t, ExitUsage, out.code, out.err)
	assert.Contains(t, out.err, "Error: no store backend takes mysql:// URLs")
	assert.Contains(t, out.err, "Try: pass --db DIR (a directory for the embedded store) or a URL starting postgres:// or postgresql://")
	assert.NoDirExists(t, "mysql:")
}

// dirless is a bbolt store seen as a database's store is: every tool of the db commands, and no
// directory of this machine (not a store.Local).
type dirless struct {
	store.Store
	store.Seeder
	store.Exporter
	store.Importer
}

// fakeDatabase is an opener whose fake://NAME URLs open the bbolt store root/NAME as a dirless
// store, as a database backend would: the commands must pick it by the scheme and work without
// the store's directory.
func fakeDatabase(root string) *opener.Opener {
	dir := func(target string) string { return filepath.Join(root, strings.TrimPrefix(target, "fake://")) }
	fake := opener.Backend{Name: "fake", Package: "store/fake", Schemes: []string{"fake"},
		Open: func(ctx context.Context, target string, opts opener.Options) (store.Store, bool, error) {
			st, created, err := opener.Bolt.Open(ctx, dir(target), opts)
			if err != nil {
				return nil, false, err
			}
			b := st.(interface {
				store.Store
				store.Seeder
				store.Exporter
				store.Importer
			})
			return dirless{b, b, b, b}, created, nil
		},
		Check: func(ctx context.Context, target string, opts store.CheckOptions) (*store.CheckReport, error) {
			return opener.Bolt.Check(ctx, dir(target), opts)
		}}
	return &opener.Opener{Backends: []opener.Backend{opener.Bolt, fake}}
}

// The commands open the store --db's scheme names with that backend, and every db command,
// exec, apply, runs and token work on a store that has no directory.
func TestCommandsOnAStoreWithoutADirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := &session{t: t, dir: filepath.Join(root, "unused"), db: "fake://shop", opener: fakeDatabase(root)}
	ok := func(args ...string) output {
		t.Helper()
		o := s.run(false, "", args...)
		require.Equal(t, ExitOK, o.code, "%v: %s", args, o.err)
		return o
	}

	o := ok("db", "init")
	assert.Contains(t, o.err, "seeded new store at "+filepath.Join(root, "shop"))
	o = s.run(false, "", "db", "init")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "a store already exists at fake://shop; nothing was changed")
	assert.NoDirExists(t, filepath.Join(root, "unused"), "the path backend was never asked")

	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(ok("exec", "--request", "Purchase 3 Wayfarer sunglasses for customer Alice.", example("02_purchase_wayfarer.star")).out), &res))
	require.True(t, res.Pending)
	ok("apply", res.RunID)
	assert.Contains(t, ok("runs").out, res.RunID)
	assert.NoFileExists(t, filepath.Join(root, "shop", SocketName), "nothing hosts a database's store")

	assert.Contains(t, ok("db", "dump").out, "inventory (6 rows)")
	assert.Contains(t, ok("db", "dump", "--json").out, `"inventory": [`)
	assert.True(t, strings.HasPrefix(ok("db", "export", "inventory", "--format", "csv").out, "item_id,name,description,quantity_in_stock,price\n"))
	good := writeFile(t, "good.csv", "item_id,name,description,quantity_in_stock,price\nSG007,Cat Eye,Pointed,5,75\n")
	assert.Contains(t, ok("db", "import", "inventory", good).out, "1 inserted")
	o = ok("db", "seed", "--force")
	assert.Contains(t, o.err, "seeded fake://shop with")
	assert.NotContains(t, ok("db", "dump").out, "Cat Eye")
	assert.Contains(t, ok("db", "check").out, `"problems": []`)
	tty := s.run(true, "", "token", "list")
	require.Equal(t, ExitOK, tty.code, tty.err)
	assert.Contains(t, tty.out, "No tokens yet; the admin token is the one serve is given (STARPLAN_TOKEN or --token).")
	ok("token", "create", "agent-1", "--role", "proposer")
	assert.Contains(t, ok("token", "list").out, "agent-1")

	// serve keeps its token beside a store in a directory; for a database's it must be given.
	o = s.run(false, "", "serve", "--listen", "127.0.0.1:0")
	assert.Equal(t, ExitUsage, o.code, o.err)
	assert.Contains(t, o.err, "Error: a store in a database has no directory to keep serve.token in, and no token was given")
	assert.Contains(t, o.err, "Try: set STARPLAN_TOKEN")
}

// A backend without the db commands' tools says which it cannot do.
func TestABackendWithoutTheTools(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bare := opener.Backend{Name: "bare", Schemes: []string{"bare"},
		Open: func(ctx context.Context, target string, opts opener.Options) (store.Store, bool, error) {
			st, created, err := opener.Bolt.Open(ctx, filepath.Join(root, "s"), opts)
			if err != nil {
				return nil, false, err
			}
			return struct{ store.Store }{st}, created, nil
		}}
	s := &session{t: t, dir: root, db: "bare://s", opener: &opener.Opener{Backends: []opener.Backend{bare}}}
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	for args, what := range map[string]string{
		"db seed --force":     "be seeded again",
		"db dump --json":      "dump its tables as JSON",
		"db export inventory": "export a table",
		"db import inventory " + writeFile(t, "x.csv", "item_id\n"): "import rows",
	} {
		o := s.run(false, "", strings.Fields(args)...)
		assert.Equal(t, ExitUsage, o.code, "%s: %s", args, o.err)
		assert.Contains(t, o.err, "Error: the store bare://s cannot "+what+": its backend does not implement it", args)
	}
	o := s.run(false, "", "db", "check")
	assert.Equal(t, ExitInternal, o.code)
	assert.Contains(t, o.err, "the bare backend cannot check a store (bare://s)")
}

// serve on a store without a directory serves HTTP with the token it is given, and keeps
// nothing beside the store: no socket for the CLI, no serve.json, no serve.token.
func TestServeOnAStoreWithoutADirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	const token = "a-token-of-sixteen-or-more"
	o := fakeDatabase(root)
	s := &session{t: t, dir: filepath.Join(root, "unused"), db: "fake://shop", opener: o}
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)

	ctx, cancel := context.WithCancel(deadline(t))
	defer cancel()
	errb := &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		ios := IOStreams{In: strings.NewReader(""), Out: io.Discard, Err: errb, opener: o,
			Getenv: func(k string) string { return map[string]string{"STARPLAN_TOKEN": token}[k] }}
		code <- MainContext(ctx, []string{"--db", "fake://shop", "--in-process", "serve", "--listen", "127.0.0.1:0"}, ios)
	}()
	listening := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	var m []string
	for m == nil {
		select {
		case c := <-code:
			t.Fatalf("serve exited %d: %s", c, errb)
		case <-ctx.Done():
			t.Fatalf("serve never listened: %s", errb)
		default:
			waitABit()
		}
		m = listening.FindStringSubmatch(errb.String())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m[1]+"/v1/describe", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), `"inventory"`)

	for _, name := range []string{SocketName, ServeInfoName, server.TokenFile} {
		assert.NoFileExists(t, filepath.Join(root, "shop", name))
	}
	assert.NotContains(t, errb.String(), "CLI commands on this store go through")
	cancel()
	assert.Equal(t, ExitOK, <-code, errb.String())
}

// A path is the embedded store, from --db or STARPLAN_DB alike, a colon in it included: only
// SCHEME:// makes a URL.
func TestAPathIsTheEmbeddedStore(t *testing.T) {
	t.Parallel()
	for _, viaEnv := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "shop:2026")
		s := &session{t: t, dir: dir}
		if viaEnv {
			s.db, s.env = "-", map[string]string{"STARPLAN_DB": dir}
		}
		o := s.run(false, "", "db", "init")
		require.Equal(t, ExitOK, o.code, o.err)
		assert.Contains(t, o.err, "seeded new store at "+dir)
		assert.FileExists(t, filepath.Join(dir, "data.db"))
		o = s.run(false, "", "exec", "--request", "Purchase 3 Wayfarer sunglasses for customer Alice.", example("02_purchase_wayfarer.star"))
		require.Equal(t, ExitOK, o.code, o.err)
		o = s.run(true, "", "db", "check")
		require.Equal(t, ExitOK, o.code, o.err)
		assert.Contains(t, o.out, filepath.Join(dir, "data.db")+":")
	}
}
