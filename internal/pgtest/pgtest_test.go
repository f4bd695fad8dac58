package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// Two tests get two databases, each empty and writable, at once.
func TestDSNGivesEachTestItsOwnDatabase(t *testing.T) {
	names := make(chan string, 2)
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, DSN(t))
			require.NoError(t, err)
			defer conn.Close(ctx)
			var db string
			require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
			_, err = conn.Exec(ctx, "CREATE TABLE t (x int)")
			require.NoError(t, err, "the database is empty: no table t yet")
			names <- db
		})
	}
	t.Cleanup(func() {
		close(names)
		a, b := <-names, <-names
		assert.NotEqual(t, a, b)
	})
}

func TestWithDatabase(t *testing.T) {
	assert.Equal(t, "postgres://u:p@h:5/x?sslmode=disable", withDatabase("postgres://u:p@h:5/db?sslmode=disable", "x"))
	assert.Equal(t, "postgres://h/x", withDatabase("postgres://h", "x"))
	assert.Equal(t, "host=/tmp dbname=postgres dbname=x", withDatabase("host=/tmp dbname=postgres", "x"))
	cfg, err := pgx.ParseConfig(withDatabase("host=/tmp dbname=postgres", "x"))
	require.NoError(t, err)
	assert.Equal(t, "x", cfg.Database)
}

// The server named by the environment wins; else the binaries found; else none, and DSN skips.
func TestChoose(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	bin := func(v string) func() string { return func() string { return v } }
	dsn, b := choose(env("postgres://h/db"), bin("/usr/bin"))
	assert.Equal(t, "postgres://h/db", dsn)
	assert.Empty(t, b)
	dsn, b = choose(env(""), bin("/usr/lib/postgresql/15/bin"))
	assert.Empty(t, dsn)
	assert.Equal(t, "/usr/lib/postgresql/15/bin", b)
	dsn, b = choose(env(""), bin(""))
	assert.Empty(t, dsn+b, "no server: DSN skips with Hint")
	assert.NotContains(t, Hint, "\n", "the hint is one line")
}
