package bolt

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/store"
)

// TestRvmixedGetSysReportsDamageBesideItsOwnTransaction: GetSys's read in a transaction of its
// own never answers for a damaged collection: a lost document, a miss in a collection that
// lost one, and a document whose bytes do not decode are *DamagedError values, every time
// (not only the first, which verifies), for an indexed collection and a plain one alike.
func TestRvmixedGetSysReportsDamageBesideItsOwnTransaction(t *testing.T) {
	for _, indexed := range []bool{true, false} {
		t.Run(map[bool]string{true: "indexed", false: "plain"}[indexed], func(t *testing.T) {
			dir := t.TempDir()
			s := openAt(t, dir)
			var docs []store.SysDoc
			for _, id := range []string{"r1", "r2", "r3"} {
				d := store.SysDoc{Collection: "runs", ID: id, Value: map[string]any{"id": id}}
				if indexed {
					d.Index = &store.SysIndex{Order: id, Group: "pending"}
				}
				docs = append(docs, d)
			}
			require.NoError(t, s.PutSysDocs(context.Background(), docs...))
			var v map[string]any
			ok, err := s.GetSys("runs", "nobody", &v) // verified while sound
			require.NoError(t, err)
			require.False(t, ok)
			require.NoError(t, s.Close())

			rawUpdate(t, dir, func(b *bbolt.Bucket) error {
				uuid, _ := sysDocAt(b, "_runs", "r2")
				require.NotEmpty(t, uuid)
				return b.Delete(append(docPrefix("_runs"), uuid...))
			})
			s = openAt(t, dir)
			for range 3 {
				for _, id := range []string{"r2", "nobody"} {
					ok, err := s.GetSys("runs", id, &v)
					assert.ErrorIs(t, err, store.ErrDamaged, "%s: a lost document is damage, not a miss", id)
					assert.False(t, ok)
				}
			}
			require.NoError(t, s.Close())

			rawUpdate(t, dir, func(b *bbolt.Bucket) error {
				uuid, _ := sysDocAt(b, "_runs", "r3")
				require.NotEmpty(t, uuid)
				return b.Put(append(docPrefix("_runs"), uuid...), []byte("\xc1garbage"))
			})
			s = openAt(t, dir)
			for range 3 {
				_, err := s.GetSys("runs", "r3", &v)
				assert.ErrorIs(t, err, store.ErrDamaged, "a document that does not decode")
			}
		})
	}
}
