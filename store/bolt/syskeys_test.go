package bolt

import (
	"bytes"
	"context"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// putLegacySys stores a system document where a starplan before sysDocKeys stored it: under
// sysDocID, whatever its id, through clover (so the group's digests count it).
func putLegacySys(t *testing.T, s *Store, coll, id, js string) {
	t.Helper()
	c, err := sysCollection(coll)
	require.NoError(t, err)
	require.NoError(t, s.write(context.Background(), func() error {
		if ok, err := s.db.HasCollection(c); err != nil || !ok {
			if err != nil {
				return err
			}
			if err := s.db.CreateCollection(c); err != nil {
				return err
			}
		}
		doc := newCloverDoc()
		doc.Set(idField, sysDocID(c, id))
		doc.Set("id", id)
		doc.Set("json", js)
		return s.db.Insert(c, doc)
	}))
}

// sysKeysOf lists the clover ids of coll's documents in the file, in the file's order.
func sysKeysOf(t *testing.T, s *Store, coll string) []string {
	t.Helper()
	c, _ := sysCollection(coll)
	var out []string
	require.NoError(t, s.bolt.db.View(func(tx *bbolt.Tx) error {
		prefix := docPrefix(c)
		cur := tx.Bucket([]byte(rootBucket)).Cursor()
		for k, _ := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = cur.Next() {
			out = append(out, string(k[len(prefix):]))
		}
		return nil
	}))
	return out
}

// Numbered system documents (the audit chain's entries) are stored in their order, after
// those a starplan before stored under hashed ids, which still read, are found by a Create
// and are replaced where they are; db check finds the store sound.
func TestNumberedSysDocsAreStoredInOrder(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	ctx := context.Background()
	putLegacySys(t, s, "chain", "0000000000000001", `{"n":1}`)
	require.NoError(t, s.PutSysDocs(ctx,
		store.SysDoc{Collection: "chain", ID: "0000000000000003", Value: map[string]int{"n": 3}, Create: true},
		store.SysDoc{Collection: "chain", ID: "0000000000000002", Value: map[string]int{"n": 2}, Create: true},
		store.SysDoc{Collection: "chain", ID: "head", Value: map[string]int{"n": 0}},
	))
	n2, n3 := numberedDocID(2, 16), numberedDocID(3, 16)
	legacy1, head := sysDocID("_chain", "0000000000000001"), sysDocID("_chain", "head")
	assert.ElementsMatch(t, []string{n2, n3, legacy1, head}, sysKeysOf(t, s, "chain"))
	assert.Equal(t, []string{n2, n3}, sysKeysOf(t, s, "chain")[:2], "numbered documents first, in order")

	var v map[string]int
	for id, n := range map[string]int{"0000000000000001": 1, "0000000000000002": 2, "0000000000000003": 3} {
		ok, err := s.GetSys("chain", id, &v)
		require.NoError(t, err)
		require.True(t, ok, id)
		assert.Equal(t, n, v["n"], id)
	}
	// A Create of an id stored the old way finds it, and writes nothing.
	err := s.PutSysDocs(ctx, store.SysDoc{Collection: "chain", ID: "0000000000000001", Value: 9, Create: true})
	require.ErrorIs(t, err, store.ErrSysExists)
	// A write of it replaces it where it is: one document, still under its old id.
	require.NoError(t, s.PutSys(ctx, "chain", "0000000000000001", map[string]int{"n": 11}))
	assert.Len(t, sysKeysOf(t, s, "chain"), 4)
	ok, err := s.GetSys("chain", "0000000000000001", &v)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 11, v["n"])
	recs, err := s.ListSys("chain")
	require.NoError(t, err)
	assert.Len(t, recs, 4)

	// Prune finds both kinds.
	pruned, err := s.PruneSys(ctx, "chain", func(r store.SysRecord) (bool, error) { return r.ID != "head", nil })
	require.NoError(t, err)
	assert.Equal(t, []string{"0000000000000001", "0000000000000002", "0000000000000003"}, pruned.IDs)
	assert.Equal(t, []string{head}, sysKeysOf(t, s, "chain"))
	require.NoError(t, s.Close())
	rep := checkOf(t, dir, store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

// db check reports a numbered document stored both where this starplan stores it and where an
// older one did (a lookup would read one and hide the other), and one under an id that is
// neither.
func TestCheckReportsANumberedSysDocStoredTwiceOrMisplaced(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.PutSys(context.Background(), "chain", "0000000000000007", map[string]int{"n": 7}))
	putLegacySys(t, s, "chain", "0000000000000007", `{"n":70}`)
	require.NoError(t, s.write(context.Background(), func() error {
		doc := newCloverDoc()
		doc.Set(idField, numberedDocID(9, 16)) // the place of another id
		doc.Set("id", "0000000000000008")
		doc.Set("json", `{"n":8}`)
		return s.db.Insert("_chain", doc)
	}))
	require.NoError(t, s.Close())
	rep := checkOf(t, dir, store.CheckOptions{})
	got := problemsOf(rep, store.CheckSystem)
	require.Len(t, got, 2, "%v", rep.Problems)
	assert.Contains(t, got[0], "0000000000000007 of _chain is stored twice")
	assert.Contains(t, got[1], "_chain/"+numberedDocID(9, 16)+" does not carry the id it is stored under")
}

func TestSysDocKeys(t *testing.T) {
	for _, id := range []string{"", "head", "r_816c40ea74", "12a", "-1", "123456789012345678901", "0000000000000001 ", "281474976710656"} {
		key, legacy := sysDocKeys("_c", id)
		assert.Equal(t, sysDocID("_c", id), key, "%q", id)
		assert.Empty(t, legacy, "%q", id)
	}
	key, legacy := sysDocKeys("_c", "0000000000000012")
	assert.Equal(t, "00000000-000c-8010-805d-000000000000", key)
	assert.Equal(t, sysDocID("_c", "0000000000000012"), legacy)
	k7, _ := sysDocKeys("_c", "7")
	assert.NotEqual(t, k7, numberedDocID(7, 3), "7 and 007 are two ids")
	assert.Less(t, numberedDocID(9, 16), numberedDocID(10, 16))
	assert.Less(t, numberedDocID(1<<40, 16), numberedDocID(1<<40+1, 16))
	k, _ := sysDocKeys("_c", "281474976710655") // 2^48-1
	assert.Equal(t, numberedDocID(1<<48-1, 15), k)
}
