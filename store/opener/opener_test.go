package opener

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/store/pg"
)

// A path opens the bbolt store in that directory: created only when asked, and the store is
// bolt's own (a store.Local), not a wrapper.
func TestAPathOpensTheBoltStore(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")

	_, _, err := Open(ctx, dir, Options{})
	require.ErrorIs(t, err, store.ErrNoStore, "the zero Options create nothing")
	assert.NoDirExists(t, dir)

	st, created, err := Open(ctx, dir, Options{Create: true, NoSeed: true})
	require.NoError(t, err)
	assert.True(t, created)
	_, isBolt := st.(*bolt.Store)
	assert.True(t, isBolt)
	local, ok := st.(store.Local)
	require.True(t, ok)
	assert.Equal(t, dir, local.Dir())
	require.NoError(t, st.Close())

	st, created, err = Open(ctx, dir, Options{Create: true})
	require.NoError(t, err)
	assert.False(t, created, "an existing store is opened, not made again")
	require.NoError(t, st.Close())

	rep, err := Check(ctx, dir, store.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

// The opener picks the backend by the URL's scheme (in any case), and every other target is a
// path for the backend without schemes.
func TestTheSchemePicksTheBackend(t *testing.T) {
	var opened []string
	fake := Backend{Name: "fake", Package: "store/fake", Schemes: []string{"fake", "fakes"},
		Open: func(_ context.Context, target string, _ Options) (store.Store, bool, error) {
			opened = append(opened, "fake "+target)
			return nil, false, nil
		}}
	paths := Backend{Name: "paths", Open: func(_ context.Context, target string, _ Options) (store.Store, bool, error) {
		opened = append(opened, "paths "+target)
		return nil, false, nil
	}}
	o := Opener{Backends: []Backend{paths, fake}}
	for _, target := range []string{"fake://h/db", "FAKES://h", "./fake:x", "fake:/x", "/tmp/fake://x", `C:\data`} {
		_, _, err := o.Open(context.Background(), target, Options{})
		require.NoError(t, err, target)
	}
	assert.Equal(t, []string{"fake fake://h/db", "fake FAKES://h", "paths ./fake:x", "paths fake:/x", "paths /tmp/fake://x", `paths C:\data`}, opened)

	_, _, err := o.Open(context.Background(), "mysql://h/db", Options{})
	var unknown *UnknownSchemeError
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, "no store backend takes mysql:// URLs", err.Error())
	assert.Equal(t, "pass --db DIR (a directory for the embedded store) or a URL starting fake:// or fakes://", unknown.Hint())

	_, _, err = o.Open(context.Background(), "", Options{})
	assert.EqualError(t, err, "no store named: give a directory or a postgres:// URL")
}

// A URL of a scheme no backend takes creates nothing: not a directory named after it, as bbolt
// would make of it.
func TestAnUnknownSchemeCreatesNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	_, _, err := Open(context.Background(), "mysql://h/db", Options{Create: true})
	require.ErrorAs(t, err, new(*UnknownSchemeError))
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// A backend the build knows by its schemes but does not link fails with an error that names it
// and its package, and never shows the URL's password.
func TestAMissingBackendIsNamed(t *testing.T) {
	ctx := context.Background()
	o := Opener{Backends: []Backend{Bolt, {Name: "PostgreSQL", Package: "store/pg", Schemes: []string{"postgres", "postgresql"}}}}
	for _, target := range []string{"postgres://ann:s3cret@db.example/shop", "postgresql://ann@/shop?host=/run/pg&password=s3cret"} {
		_, _, err := o.Open(ctx, target, Options{Create: true})
		var missing *MissingBackendError
		require.ErrorAs(t, err, &missing, target)
		assert.Contains(t, err.Error(), "this starplan was built without the PostgreSQL backend (package store/pg)")
		assert.NotContains(t, err.Error(), "s3cret")
		assert.Contains(t, missing.Hint(), "--db DIR")

		_, err = o.Check(ctx, target, store.CheckOptions{})
		require.ErrorAs(t, err, &missing, target)
	}
}

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// pgURL is a postgres:// URL of a fresh database (pgtest.DSN may be in key=value form).
func pgURL(t *testing.T) string {
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	u := url.URL{Scheme: "postgres", Path: "/" + cfg.Database}
	u.User = url.User(cfg.User)
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

// A postgres URL opens the PostgreSQL store: a missing one is a *store.NoStoreError (its
// password never shown) unless Create, which makes it in the schema the URL's schema= names;
// created once, then opened; and checked by Check.
func TestAPostgresURLOpensThePostgresStore(t *testing.T) {
	ctx := context.Background()
	target := pgURL(t)

	_, _, err := Open(ctx, target, Options{})
	require.ErrorIs(t, err, store.ErrNoStore)
	_, err = Check(ctx, target, store.CheckOptions{})
	require.ErrorIs(t, err, store.ErrNoStore)

	st, created, err := Open(ctx, target+"&schema=shop", Options{Create: true})
	require.NoError(t, err)
	assert.True(t, created)
	p, ok := st.(*pg.Store)
	require.True(t, ok)
	assert.Equal(t, "shop", p.SQLSchema())
	_, local := st.(store.Local)
	assert.False(t, local, "a database's store has no directory")
	require.NoError(t, st.Close())

	st, created, err = Open(ctx, target, Options{Create: true})
	require.NoError(t, err)
	assert.False(t, created, "the database's one store is opened, not made again")
	assert.Equal(t, "shop", st.(*pg.Store).SQLSchema())
	require.NoError(t, st.Close())

	rep, err := Check(ctx, target, store.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

// A missing PostgreSQL store's error shows the URL without its password.
func TestAMissingPostgresStoreHidesThePassword(t *testing.T) {
	target := pgURL(t)
	u, err := url.Parse(target)
	require.NoError(t, err)
	q := u.Query()
	q.Set("password", "s3cret-but-unused")
	u.RawQuery = q.Encode()
	_, _, err = Open(context.Background(), u.String(), Options{})
	if !errors.Is(err, store.ErrNoStore) {
		// A server that asks for passwords refuses the wrong one: still never shown.
		require.Error(t, err)
	}
	assert.NotContains(t, err.Error(), "s3cret")
	if errors.Is(err, store.ErrNoStore) {
		assert.Contains(t, err.Error(), "password=xxxxx")
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"/var/lib/starplan":                             "/var/lib/starplan",
		"postgres://ann:s3cret@db:5432/shop":            "postgres://ann:xxxxx@db:5432/shop",
		"postgres://ann@db/shop":                        "postgres://ann@db/shop",
		"postgres:///shop?host=/tmp/pg&password=s3cret": "postgres:///shop?host=%2Ftmp%2Fpg&password=xxxxx",
		"postgres://ann:s3cret@db/shop?sslmode=disable": "postgres://ann:xxxxx@db/shop?sslmode=disable",
		"postgres://ann:s3%zzcret@db/shop":              "postgres://…",
	} {
		assert.Equal(t, want, Redact(in), in)
	}
}
