package bolt

import (
	"testing"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/storetest"
	"github.com/stretchr/testify/require"
)

// openFresh is the conformance suite's Opener: a new store of dom in a temporary directory.
func openFresh(t testing.TB, dom *store.Domain) store.Store {
	t.Helper()
	s, err := Open(t.TempDir(), Options{Domain: dom, residency: residencyOf(t)})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// The bbolt store passes the conformance suite with its tables read into memory at Open (the
// small tables' mode) and with them left in the file, every read going to it (the large tables'
// mode, see disk.go).
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("resident", func(t *testing.T) {
		setResidency(t, 1<<30, -1)
		storetest.Run(t, openFresh)
	})
	t.Run("on-disk", func(t *testing.T) {
		onDisk(t, -1)
		storetest.Run(t, openFresh)
	})
}

// The bbolt store passes the conformance suite's upgrade part.
func TestUpgradeConformance(t *testing.T) {
	storetest.RunUpgrade(t, openFresh, func(t testing.TB, st store.Store) store.Store {
		t.Helper()
		dir := st.(*Store).Dir()
		require.NoError(t, st.Close())
		s, err := Open(dir, Options{})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	})
}
