package pg

import (
	"context"
	"os"
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
	storetest.Run(t, createFresh)
}
