package opener

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
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

// Until store/pg is wired into Builtin, a postgres URL says what is missing.
func TestBuiltinWithoutPostgres(t *testing.T) {
	b, err := Builtin().Backend("postgres://localhost/shop")
	require.NoError(t, err)
	assert.Equal(t, "PostgreSQL", b.Name)
	if b.Open != nil {
		t.Skip("store/pg is linked into Builtin")
	}
	_, _, err = Open(context.Background(), "postgres://localhost/shop", Options{})
	assert.EqualError(t, err, "postgres://localhost/shop names a PostgreSQL store, but this starplan was built without the PostgreSQL backend (package store/pg)")
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
