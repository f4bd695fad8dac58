package bolt

import (
	"bytes"
	"context"
	"strings"
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

// A new document of an indexed collection (the audit log's records) is stored in sequence and
// found through its entry; one stored before sequences (under its hashed id, an entry without
// a key) still reads and is written again where it is. Prune, a rebuilt index and db check
// know both, and a rebuilt index goes on after the last sequence number.
func TestIndexedSysDocsAreStoredInSequence(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	// A log as a starplan before sequences left it: a record under its hashed id, indexed.
	putLegacySys(t, s, "runs", "old", `{"id":"old"}`)
	_, err := s.RebuildSysIndex(bg, "runs", func(r store.SysRecord) (store.SysIndex, error) {
		return store.SysIndex{Order: "1", Group: "done"}, nil
	})
	require.NoError(t, err)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "2", "pending"), idxDoc("b", "3", "pending")))
	old := sysDocID("_runs", "old")
	assert.Equal(t, []string{sequencedDocID(1), sequencedDocID(2), old}, sysKeysOf(t, s, "runs"))

	// Written again: each where it is.
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "4", "done"), store.SysDoc{Collection: "runs", ID: "old", Value: map[string]string{"id": "old", "v": "2"}, Index: &store.SysIndex{Order: "1", Group: "done"}}))
	assert.Equal(t, []string{sequencedDocID(1), sequencedDocID(2), old}, sysKeysOf(t, s, "runs"))
	var v map[string]string
	for id, want := range map[string]string{"a": "done", "b": "pending", "old": ""} {
		v = nil
		ok, err := s.GetSys("runs", id, &v)
		require.NoError(t, err)
		require.True(t, ok, id)
		assert.Equal(t, id, v["id"])
		assert.Equal(t, want, v["group"], id)
	}
	ok, err := s.GetSys("runs", "old", &v)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "2", v["v"])
	assert.Equal(t, []string{"a", "b", "old"}, scanIDs(t, s, "", true, 2))

	// A pruned document's number is not given again.
	pruned, err := s.PruneSysOldest(bg, store.SysPrune{Coll: "runs", Before: "3", Drop: func(store.SysRecord) (bool, error) { return true, nil }})
	require.NoError(t, err)
	assert.Equal(t, []string{"old"}, pruned.IDs)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("c", "5", "pending")))
	assert.Equal(t, []string{sequencedDocID(1), sequencedDocID(2), sequencedDocID(3)}, sysKeysOf(t, s, "runs"))

	// A rebuilt index finds the documents stored in sequence, and goes on after them.
	_, err = s.RebuildSysIndex(bg, "runs", func(r store.SysRecord) (store.SysIndex, error) {
		return store.SysIndex{Order: r.ID, Group: "done"}, nil
	})
	require.NoError(t, err)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("d", "6", "pending")))
	assert.Equal(t, []string{sequencedDocID(1), sequencedDocID(2), sequencedDocID(3), sequencedDocID(4)}, sysKeysOf(t, s, "runs"))
	v = nil
	ok, err = s.GetSys("runs", "c", &v)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "c", v["id"])
	recs, err := s.ListSys("runs")
	require.NoError(t, err)
	assert.Len(t, recs, 4)
	require.NoError(t, s.Close())
	rep := checkOf(t, dir, store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
}

// db check reports a record stored in sequence and also under its hashed id (a lookup reads one
// and hides the other), and one in sequence that no entry of the index names.
func TestCheckReportsASequencedDocStoredTwiceOrUnnamed(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "1", "done")))
	putLegacySys(t, s, "runs", "a", `{"id":"a"}`)
	require.NoError(t, s.write(bg, func() error {
		doc := newCloverDoc()
		doc.Set(idField, sequencedDocID(7))
		doc.Set("id", "z")
		doc.Set("json", `{"id":"z"}`)
		return s.db.Insert("_runs", doc)
	}))
	require.NoError(t, s.Close())
	rep := checkOf(t, dir, store.CheckOptions{})
	got := problemsOf(rep, store.CheckSystem)
	require.Len(t, got, 2, "%v", rep.Problems)
	assert.Contains(t, got[0], "a of _runs is stored twice")
	assert.Contains(t, got[1], "_runs/"+sequencedDocID(7)+" does not carry the id it is stored under")
}

// A new document never replaces one already at the place its index's sequence gives it.
func TestASequenceBehindItsDocumentsIsRefused(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "1", "done")))
	require.NoError(t, s.bolt.db.Update(func(tx *bbolt.Tx) error { return sysIndexOf(tx, "_runs").SetSequence(0) }))
	err := s.PutSysDocs(bg, idxDoc("b", "2", "done"))
	var damaged *store.DamagedError
	require.ErrorAs(t, err, &damaged)
	assert.Contains(t, err.Error(), "behind its documents")
	ok, err := s.GetSys("runs", "a", &map[string]string{})
	require.NoError(t, err)
	assert.True(t, ok, "a is still there")
}

func TestSequencedDocID(t *testing.T) {
	for _, n := range []uint64{1, 2, 255, 256, 1<<48 - 1} {
		got, ok := sequencedNumber(sequencedDocID(n))
		assert.True(t, ok)
		assert.Equal(t, n, got)
	}
	assert.Less(t, sequencedDocID(255), sequencedDocID(256))
	for _, u := range []string{sysDocID("_runs", "a"), numberedDocID(1, 16), rowDocID(1, 1), "", "zz"} {
		_, ok := sequencedNumber(u)
		assert.False(t, ok, u)
	}
}

// A collection whose sequence has given every number a clover id can hold refuses a new
// document, naming why, rather than wrapping onto the first.
func TestASpentSequenceIsRefused(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "1", "done")))
	require.NoError(t, s.bolt.db.Update(func(tx *bbolt.Tx) error { return sysIndexOf(tx, "_runs").SetSequence(1<<48 - 2) }))
	require.NoError(t, s.PutSysDocs(bg, idxDoc("b", "2", "done")), "the last number")
	err := s.PutSysDocs(bg, idxDoc("c", "3", "done"))
	require.ErrorContains(t, err, "the index of runs: its sequence is spent")
	ok, err := s.GetSys("runs", "b", &map[string]string{})
	require.NoError(t, err)
	assert.True(t, ok)
}

// A document whose JSON came with room before it (store.RoomEncoded) is stored as one whose
// JSON is copied behind its header, whatever the lengths; without room enough it is copied.
func TestSysDocInRoomIsAppendSysDoc(t *testing.T) {
	uuid := sequencedDocID(7)
	for _, id := range []string{"r_0123456789", "0000000000000042", strings.Repeat("i", 40), strings.Repeat("j", 300)} {
		for _, n := range []int{0, 1, 31, 32, 255, 256, 65535, 65536} {
			raw := []byte(strings.Repeat("x", n))
			want := appendSysDoc(nil, uuid, id, raw)
			buf := append(make([]byte, store.SysDocRoom), raw...)
			got := sysDocIn(buf, uuid, id, buf[store.SysDocRoom:])
			require.Equal(t, want, got, "id %d bytes, json %d bytes", len(id), n)
			require.Equal(t, want, sysDocIn(nil, uuid, id, raw))
		}
	}
}

// A batch's places are checked as a range (placesTaken): a document at its last place, the
// first being free, is found too, and the batch writes nothing.
func TestASequenceBehindItsDocumentsIsRefusedAtABatchsLastPlace(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "1", "done"), idxDoc("b", "2", "done")))
	require.NoError(t, s.bolt.db.Update(func(tx *bbolt.Tx) error {
		root := tx.Bucket([]byte(rootBucket))
		if err := root.Delete(append(docPrefix("_runs"), sequencedDocID(1)...)); err != nil {
			return err
		}
		return sysIndexOf(tx, "_runs").SetSequence(0)
	}))
	err := s.PutSysDocs(bg, idxDoc("x", "3", "done"), idxDoc("y", "4", "done"))
	var damaged *store.DamagedError
	require.ErrorAs(t, err, &damaged)
	assert.Contains(t, err.Error(), "behind its documents")
	assert.Contains(t, err.Error(), "document y")
	require.NoError(t, s.bolt.db.View(func(tx *bbolt.Tx) error {
		assert.Nil(t, tx.Bucket([]byte(rootBucket)).Get(append(docPrefix("_runs"), sequencedDocID(1)...)), "x not written")
		return nil
	}))
}
