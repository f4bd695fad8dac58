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
