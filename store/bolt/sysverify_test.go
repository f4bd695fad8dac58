package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/store"
)

// hashedDocs is how many documents the store's verifications of system collections hashed.
func hashedDocs(s *Store) int64 {
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	return s.hashed
}

// A lookup that finds nothing (a run without a decision) hashes its collection once per open,
// not on every miss: what the store's own writes change is followed commit by commit, and the
// collection is not read whole again (issue 32: every look at a run without a decision hashed
// all decisions). Damage is still found by the next open's first miss.
func TestAMissHashesItsCollectionOncePerOpen(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	const n = 300
	docs := make([]store.SysDoc, n)
	for i := range docs {
		docs[i] = store.SysDoc{Collection: "decisions", ID: fmt.Sprintf("r%04d", i), Value: map[string]int{"n": i}}
	}
	require.NoError(t, s.PutSysDocs(bg, docs...))
	var v map[string]int
	miss := func(what string) {
		t.Helper()
		ok, err := s.GetSys("decisions", "none", &v)
		require.NoError(t, err, what)
		require.False(t, ok, what)
	}
	miss("first miss")
	assert.Equal(t, int64(n), hashedDocs(s), "the first miss hashes the collection once")
	for range 20 {
		miss("again")
	}
	// Every kind of write in between: new documents, a replace, a prune.
	require.NoError(t, s.PutSysDocs(bg, store.SysDoc{Collection: "decisions", ID: "r9999", Value: map[string]int{"n": 1}}))
	miss("after an insert")
	require.NoError(t, s.PutSys(bg, "decisions", "r0001", map[string]int{"n": 10}))
	miss("after a replace")
	_, err := s.PruneSys(bg, "decisions", func(r store.SysRecord) (bool, error) { return r.ID < "r0100", nil })
	require.NoError(t, err)
	miss("after a prune")
	_, err = s.ListSys("decisions")
	require.NoError(t, err)
	assert.Equal(t, int64(n), hashedDocs(s), "no miss nor listing hashed the collection again")
	recorded, found := recordedDigests(t, s)
	assert.Equal(t, found["_decisions"], recorded["_decisions"])
	s.bolt.mu.Lock()
	assert.Equal(t, recorded["_decisions"], s.verified["_decisions"], "what was verified follows the writes")
	s.bolt.mu.Unlock()
	require.NoError(t, s.Close())

	// Damage while closed: the next open's first miss finds it, and so does every miss after.
	orig, err := os.ReadFile(filepath.Join(dir, dbFileName))
	require.NoError(t, err)
	rawUpdate(t, dir, func(bk *bbolt.Bucket) error {
		return bk.Delete([]byte("c:_decisions;d:" + sysDocID("_decisions", "r0200")))
	})
	s = openAt(t, dir)
	for range 2 {
		_, err = s.GetSys("decisions", "none", &v)
		var de *store.DamagedError
		require.True(t, errors.As(err, &de), "%v", err)
		assert.Contains(t, err.Error(), "system collection _decisions holds")
	}
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, dbFileName), orig, 0o644))
	s = openAt(t, dir)
	miss("sound again")
}
