package bolt

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Around mapAheadMin, damage is found as it was before the map ahead: a file of exactly 16 MiB
// (bbolt's pages and zeros past them, as bbolt grows a file) opens mapped ahead, checks clean and
// keeps its size; the same file cut short of its pages (the map then reaches far past its end)
// is a *DamagedError at Open and a file problem for db check, never a fault; and one byte short
// of 16 MiB it is not mapped ahead.
func TestRvwalkDamageIsFoundAroundTheMapAheadSize(t *testing.T) {
	t.Parallel()
	base := bigInventory(t, 300)
	s := openAt(t, base)
	require.NoError(t, s.PutSysDocs(bg, bigDocs("pad", 12<<20)...))
	require.Less(t, used(t, s), int64(mapAheadMin-1), "the store's pages end before 16 MiB")
	require.NoError(t, s.Close())
	file := func(dir string) string { return filepath.Join(dir, dbFileName) }
	copyAt := func(t *testing.T, size int64) string {
		dir := t.TempDir()
		require.NoError(t, os.CopyFS(dir, os.DirFS(base)))
		require.NoError(t, os.Truncate(file(dir), size))
		return dir
	}
	size := func(dir string) int64 {
		st, err := os.Stat(file(dir))
		require.NoError(t, err)
		return st.Size()
	}
	for _, tc := range []struct {
		name  string
		size  int64
		ahead bool
	}{{"16MiB", mapAheadMin, true}, {"16MiB-1", mapAheadMin - 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyAt(t, tc.size)
			rep := checkOf(t, dir, store.CheckOptions{})
			assert.True(t, rep.OK(), "%v", rep.Problems)
			s := openAt(t, dir)
			if mapAhead(file(dir)) > 0 || !tc.ahead {
				assert.Equal(t, tc.ahead, mapped(t, s) >= tc.size+mapAheadRoom, "mapped %d MiB", mapped(t, s)>>20)
			}
			rows, err := tbl(t, s.Stage(), "inventory").Find(table.Query{})
			require.NoError(t, err)
			assert.Len(t, rows, 306)
			require.NoError(t, s.Close())
			assert.Equal(t, tc.size, size(dir), "the file keeps its size")
		})
	}

	// A store whose pages reach past 16 MiB, cut short of them.
	s = openAt(t, base)
	require.NoError(t, s.PutSysDocs(bg, bigDocs("more", 8<<20)...))
	hwm := used(t, s)
	require.NoError(t, s.Close())
	require.Greater(t, hwm, int64(mapAheadMin)+(1<<20))
	dir := copyAt(t, hwm-(1<<20))
	require.GreaterOrEqual(t, size(dir), int64(mapAheadMin), "mapped ahead, if it opened")
	_, err := Open(dir, Options{})
	var de *store.DamagedError
	require.True(t, errors.As(err, &de), "%v", err)
	assert.Contains(t, de.Problem, "truncated")
	assertCheckFinds(t, dir, store.CheckFile, "truncated")
}
