package bolt

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/store"
)

// holdCommit makes the next write group of s wait, in its transaction before it commits, until
// the returned release is called (at the latest when the test ends); held is closed once the
// group waits there, holding the store's write locks.
func holdCommit(t *testing.T, s *Store) (held <-chan struct{}, release func()) {
	t.Helper()
	h, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(r) }) }
	t.Cleanup(release)
	next := s.bolt.beforeCommit
	var first sync.Once
	s.bolt.beforeCommit = func(tx *bbolt.Tx, delta map[string]*collDigest) error {
		first.Do(func() {
			close(h)
			<-r
		})
		return next(tx, delta)
	}
	return h, release
}

// within waits for done, failing the test when it does not come: what it waits for is blocked
// behind the commit the test holds, and would otherwise hang the suite.
func within(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: still waiting after a minute, behind the commit the test holds", what)
	}
}

// TestReadsDoNotWaitForACommit: while a write group of system documents (a batch of the audit
// log) waits before its commit, holding the store's write locks, GetSys reads the state last
// committed, hit and miss, and a run's stage starts and reads: none waits for the commit and its
// disk sync (issue 32). After it, they see what it wrote.
func TestReadsDoNotWaitForACommit(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	require.NoError(t, s.PutSysDocs(ctx, store.SysDoc{Collection: "runs", ID: "r1", Value: map[string]any{"n": 1}}))
	var v map[string]any
	ok, err := s.GetSys("runs", "nobody", &v) // a miss verifies the collection, under the lock
	require.NoError(t, err)
	require.False(t, ok)

	held, release := holdCommit(t, s)
	wrote := make(chan error, 1)
	go func() {
		wrote <- s.PutSysDocs(ctx, store.SysDoc{Collection: "runs", ID: "r2", Value: map[string]any{"n": 2}},
			store.SysDoc{Collection: "runs", ID: "r1", Value: map[string]any{"n": 10}})
	}()
	within(t, held, "the commit to be held")

	read := make(chan struct{})
	go func() {
		defer close(read)
		var r1, r2 map[string]any
		ok, err := s.GetSys("runs", "r1", &r1)
		assert.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, 1.0, r1["n"], "the state last committed")
		ok, err = s.GetSys("runs", "r2", &r2)
		assert.NoError(t, err)
		assert.False(t, ok, "not committed yet")
		tb, found := s.StageFor(ctx, store.RunLimits{}).Table("inventory")
		if assert.True(t, found) {
			_, found, err = tb.Get("SG001")
			assert.NoError(t, err)
			assert.True(t, found)
		}
	}()
	within(t, read, "the reads")
	release()
	require.NoError(t, <-wrote)

	var r1, r2 map[string]any
	ok, err = s.GetSys("runs", "r1", &r1)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 10.0, r1["n"])
	ok, err = s.GetSys("runs", "r2", &r2)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 2.0, r2["n"])
	ok, err = s.GetSys("runs", "nobody", &v)
	require.NoError(t, err)
	assert.False(t, ok)
}
