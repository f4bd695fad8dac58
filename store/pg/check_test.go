package pg

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/storetest"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Check finds a sound store sound, and reports what other programs' writes broke that the SQL
// constraints let through (a key inserted without its _ord, a system document that does not
// decode), and the domain's rules over the rows.
func TestCheck(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s, err := Create(bg, dsn, storetest.Domain(), Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.PutSys(bg, "runs", "r1", map[string]int{"n": 1}))
	records := map[string]func([]byte) error{"runs": func(raw []byte) error {
		if string(raw) == `{"n":1}` {
			return nil
		}
		return errors.New("not a run")
	}}
	rep, err := s.Check(bg, store.CheckOptions{Records: records})
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%+v", rep.Problems)
	assert.Equal(t, []store.TableCount{{Table: "items", Rows: 4}}, rep.Tables)
	assert.Positive(t, rep.Size, "the schema's tables take room on disk")
	assert.Positive(t, rep.Seq, "the seed wrote a version")

	conn, err := pgx.Connect(bg, dsn)
	require.NoError(t, err)
	defer conn.Close(bg)
	_, err = conn.Exec(bg, `INSERT INTO conformance.items (sku, category, qty, _ord) VALUES ('zz', 'z', 1, '\x00')`)
	require.NoError(t, err)
	_, err = conn.Exec(bg, `UPDATE conformance._starplan_sys SET json = '{"n":2}' WHERE coll = 'runs'`)
	require.NoError(t, err)
	rep, err = s.Check(bg, store.CheckOptions{Records: records, Invariants: func(_ *store.Domain, rows table.ChangeSet) ([]string, error) {
		return []string{"saw " + rows["items"].Inserted[0]["sku"].(string)}, nil
	}})
	require.NoError(t, err)
	var checks []string
	for _, p := range rep.Problems {
		checks = append(checks, p.Check+": "+p.Message)
	}
	assert.ElementsMatch(t, []string{
		"rows: row \"zz\": its _ord is not its key's (a row written by another program must set it), so it sorts out of place",
		"system: system document runs/r1: not a run",
		"policy: saw zz",
	}, checks)
}
