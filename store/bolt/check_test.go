package bolt

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func checkOf(t *testing.T, dir string, opts store.CheckOptions) *store.CheckReport {
	t.Helper()
	rep, err := Check(dir, opts)
	require.NoError(t, err)
	return rep
}

func problemsOf(rep *store.CheckReport, check string) []string {
	var out []string
	for _, p := range rep.Problems {
		if p.Check == check {
			out = append(out, p.Message)
		}
	}
	return out
}

func TestCheckASoundStore(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.Close())
	var got table.ChangeSet
	rep := checkOf(t, dir, store.CheckOptions{Invariants: func(_ *store.Domain, rows table.ChangeSet) ([]string, error) {
		got = rows
		return nil, nil
	}})
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Equal(t, []store.TableCount{{Table: "inventory", Rows: 6}, {Table: "transactions", Rows: 1}}, rep.Tables)
	assert.Equal(t, int64(1), rep.Seq)
	assert.Equal(t, filepath.Join(dir, dbFileName), rep.File)
	require.Contains(t, got, "transactions")
	assert.Equal(t, "OPENING_BALANCE", got["transactions"].Inserted[0]["customer_name"], "the invariants see the committed rows")
	assert.Len(t, got["inventory"].Inserted, 6)
}

func TestCheckNeverCreatesAStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	_, err := Check(dir, store.CheckOptions{})
	assert.True(t, errors.Is(err, store.ErrNoStore), "%v", err)
	_, statErr := os.Stat(dir)
	assert.True(t, os.IsNotExist(statErr))
}

func TestCheckReportsADamagedFile(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	dir, _ := damagedStore(t, 0, func([]byte) []byte { return []byte{} })
	rep := checkOf(t, dir, store.CheckOptions{})
	assert.False(t, rep.OK())
	assert.Contains(t, problemsOf(rep, store.CheckFile)[0], "empty (0 bytes)")

	dir, _ = damagedStore(t, 2000, func(b []byte) []byte { return b[:len(b)/2] })
	rep = checkOf(t, dir, store.CheckOptions{})
	assert.Contains(t, problemsOf(rep, store.CheckFile)[0], "truncated")
	assert.Positive(t, rep.Size, "the size is reported also when the file is damaged")

	dir, _ = damagedStore(t, 2000, func(b []byte) []byte {
		for i := len(b) / 4; i < len(b)*3/4; i++ {
			b[i] = 0xAB
		}
		return b
	})
	rep = checkOf(t, dir, store.CheckOptions{})
	// Which page the overwritten half holds (the freelist, a branch, a leaf) depends on the
	// layout: bbolt's freelist is a problem of the file, the others of its pages.
	assert.NotEmpty(t, append(problemsOf(rep, store.CheckPages), problemsOf(rep, store.CheckFile)...), "%v", rep.Problems)
	assert.LessOrEqual(t, len(rep.Problems), store.MaxProblemsPerCheck)

	dir, _ = damagedStore(t, 3, func(b []byte) []byte {
		b[(1-newerMeta(t, b))*4096+metaOffset+56] ^= 0xFF
		return b
	})
	assert.Contains(t, problemsOf(checkOf(t, dir, store.CheckOptions{}), store.CheckFile)[0], "older of its two meta pages")
}

// putRawRow writes a document as clover would, bypassing validation, as a bug or another tool
// might.
func putRawRow(t *testing.T, s *Store, coll, id string, row table.Row, ver int64) {
	t.Helper()
	require.NoError(t, s.write(bg, func() error { return s.db.Insert(coll, encodeDoc(id, row, ver)) }))
}

func TestCheckReportsRowsThatBreakTheSchemaOrTheRecord(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	bad := table.Row{"item_id": "SG900", "name": "Bad", "description": "", "quantity_in_stock": int64(-3), "price": 1.0}
	putRawRow(t, s, "inventory", rowDocID(1, 900), bad, 1)
	dup, _ := committed(t, s, "inventory", "SG001")
	putRawRow(t, s, "inventory", rowDocID(1, 901), dup, 1)
	future := table.Row{"item_id": "SG902", "name": "Future", "description": "", "quantity_in_stock": int64(1), "price": 1.0}
	putRawRow(t, s, "inventory", rowDocID(1, 902), future, 7)
	require.NoError(t, s.Close())

	rep := checkOf(t, dir, store.CheckOptions{})
	rows := problemsOf(rep, store.CheckRows)
	require.Len(t, rows, 2, "%v", rep.Problems)
	assert.Contains(t, rows[0], `inventory row "SG900" does not fit the schema`)
	assert.Contains(t, rows[0], "quantity_in_stock")
	assert.Contains(t, rows[1], `inventory key "SG001" is held by two documents`)
	assert.Equal(t, []string{`inventory row "SG902" is at version 7, but its table is at version 1`}, problemsOf(rep, store.CheckRecord))
}

func TestCheckReportsThePolicy(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.Close())
	rep := checkOf(t, dir, store.CheckOptions{Invariants: func(*store.Domain, table.ChangeSet) ([]string, error) {
		return []string{"the balance chain breaks at TXN002"}, nil
	}})
	assert.Equal(t, []string{"the balance chain breaks at TXN002"}, problemsOf(rep, store.CheckPolicy))
	assert.False(t, rep.OK())

	rep = checkOf(t, dir, store.CheckOptions{Invariants: func(*store.Domain, table.ChangeSet) ([]string, error) { return nil, errors.New("boom") }})
	assert.Contains(t, problemsOf(rep, store.CheckRecord)[0], "boom", "rules that do not load are reported with the rest")
}

func TestCheckInUse(t *testing.T) {
	dir := t.TempDir()
	openAt(t, dir)
	_, err := Check(dir, store.CheckOptions{LockTimeout: 50e6})
	assert.True(t, errors.Is(err, store.ErrInUse), "%v", err)
}
