package pg

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/storetest"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// createFresh is the conformance suite's Opener: a new store of dom in a database of its own.
func createFresh(t testing.TB, dom *store.Domain) store.Store {
	t.Helper()
	s, err := Create(context.Background(), pgtest.DSN(t), dom, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, createFresh)
}

// The PostgreSQL store passes the conformance suite's upgrade part; a store is opened again by
// its DSN alone, with the definition it recorded.
func TestUpgradeConformance(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	dsns := map[store.Store]string{}
	open := func(t testing.TB, dom *store.Domain) store.Store {
		t.Helper()
		dsn := pgtest.DSN(t)
		s, err := Create(context.Background(), dsn, dom, Options{})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		mu.Lock()
		dsns[s] = dsn
		mu.Unlock()
		return s
	}
	storetest.RunUpgrade(t, open, func(t testing.TB, st store.Store) store.Store {
		t.Helper()
		require.NoError(t, st.Close())
		mu.Lock()
		dsn := dsns[st]
		mu.Unlock()
		s, err := Open(context.Background(), dsn, Options{})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		mu.Lock()
		dsns[s] = dsn
		mu.Unlock()
		return s
	})
}
