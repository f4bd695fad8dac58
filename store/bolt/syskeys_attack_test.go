package bolt

import (
	"fmt"
	"strings"
	"testing"

	"github.com/starplan/starplan/store"

	d "github.com/ostafen/clover/v2/document"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// pointEntryAt edits, as damage would, the index entry of id in coll so that its "k" names key.
func pointEntryAt(t *testing.T, s *Store, coll, id, key string) {
	t.Helper()
	require.NoError(t, s.bolt.db.Update(func(tx *bbolt.Tx) error {
		ids := sysIndexOf(tx, coll).Bucket(sysIdxIDs)
		raw := string(ids.Get([]byte(id)))
		i := strings.LastIndex(raw, `"k":"`)
		require.Positive(t, i, raw)
		return ids.Put([]byte(id), []byte(raw[:i+5]+key+`"}`))
	}))
}

// An index entry whose key names another document (a damaged or edited store) must not make a
// lookup of its id read, or a write of its id overwrite, that other document: a record found
// through its entry is the record of the id asked for, or the lookup names the damage.
func TestASequencedEntryNamingAnotherDocumentIsNotFollowed(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "1", "pending"), idxDoc("b", "2", "pending")))
	pointEntryAt(t, s, "_runs", "a", sequencedDocID(2)) // b's place

	var v map[string]string
	ok, err := s.GetSys("runs", "a", &v)
	if err == nil && ok {
		assert.Equal(t, "a", v["id"], "GetSys(a) read another run's record")
	}
	var damaged *store.DamagedError
	require.ErrorAs(t, err, &damaged, "a lookup of a names the damage")
	assert.Contains(t, err.Error(), "the index of runs names for document a the place "+sequencedDocID(2)+", which holds another document")
	page, err := s.ScanSys("runs", store.SysScan{Next: func(store.SysEntry) (bool, bool) { return true, true }})
	if err == nil {
		for _, e := range page {
			assert.Contains(t, string(e.JSON), `"id":"`+e.ID+`"`, "ScanSys gave entry %s another record", e.ID)
		}
	} else {
		assert.ErrorAs(t, err, &damaged)
	}
	// A write of a must not replace b: it is refused as damage.
	err = s.PutSysDocs(bg, store.SysDoc{Collection: "runs", ID: "a", Value: map[string]string{"id": "a", "group": "done"}, Index: &store.SysIndex{Order: "3", Group: "done"}})
	assert.ErrorAs(t, err, &damaged)
	v = nil
	ok, err = s.GetSys("runs", "b", &v)
	require.NoError(t, err)
	require.True(t, ok, "b is gone")
	assert.Equal(t, "b", v["id"], "a write of a overwrote b's record")
}

// entryOfANamingB makes a store whose record a is where a starplan before sequences stored it,
// record b (of a's size) in sequence, and a's index entry naming b's place (damage).
func entryOfANamingB(t *testing.T, dir string) *Store {
	s := openAt(t, dir)
	putLegacySys(t, s, "runs", "a", `{"group":"done","id":"a"}`)
	_, err := s.RebuildSysIndex(bg, "runs", func(r store.SysRecord) (store.SysIndex, error) {
		return store.SysIndex{Order: "1", Group: "done"}, nil
	})
	require.NoError(t, err)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("b", "2", "done")))
	require.NoError(t, s.bolt.db.Update(func(tx *bbolt.Tx) error {
		ids := sysIndexOf(tx, "_runs").Bucket(sysIdxIDs)
		raw := string(ids.Get([]byte("a")))
		return ids.Put([]byte("a"), []byte(strings.TrimSuffix(raw, "}")+`,"k":"`+sequencedDocID(1)+`"}`))
	}))
	return s
}

// Such an entry is not followed: a lookup of a reads a's record.
func TestALegacyRecordIsFoundPastAnEntryNamingAnother(t *testing.T) {
	s := entryOfANamingB(t, t.TempDir())
	var v map[string]string
	ok, err := s.GetSys("runs", "a", &v)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "a", v["id"])
}

// db check reports such an entry (no document is out of place, the counts agree and the two
// records are of one size: only the entry's key is wrong).
func TestCheckReportsAnEntryNamingAnotherDocument(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, entryOfANamingB(t, dir).Close())
	rep := checkOf(t, dir, store.CheckOptions{})
	require.False(t, rep.OK(), "db check passes an index whose entry of a names b's record")
	assert.Contains(t, fmt.Sprint(rep.Problems), "holds another document")
}

// sysDocCarries knows a document's id in each form it is written in, and tells another's apart.
func TestSysDocCarries(t *testing.T) {
	key := sequencedDocID(1)
	mine := appendSysDoc(nil, key, "a", []byte(`{}`))
	assert.True(t, sysDocCarries(mine, key, "a"))
	assert.False(t, sysDocCarries(mine, key, "b"))
	assert.False(t, sysDocCarries(mine, key, ""))
	assert.False(t, sysDocCarries(mine, key, "a\x00"))
	doc := newCloverDoc()
	doc.Set(idField, key)
	doc.Set("id", "a")
	doc.Set("json", "{}")
	raw, err := d.Encode(doc)
	require.NoError(t, err)
	assert.True(t, sysDocCarries(raw, key, "a"))
	assert.False(t, sysDocCarries(raw, key, "ab"))
	assert.False(t, sysDocCarries([]byte("junk"), key, "a"))
}

// An index rebuilt by a starplan before sequences (entries without keys, its bucket's sequence
// at 0; README: "an index it rebuilds forgets where they are") must not leave this version
// unable to write: found with the base binary (1a282d1), every later audit write of this one
// failed with "the index is behind its documents" and runs show of its records answered "there
// is no run with this id".
func TestAnIndexRebuiltByAnEarlierStarplanIsRecovered(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("a", "1", "done"), idxDoc("b", "2", "done")))
	_, err := s.RebuildSysIndex(bg, "runs", func(r store.SysRecord) (store.SysIndex, error) {
		return store.SysIndex{Order: r.ID, Group: "done"}, nil
	})
	require.NoError(t, err)
	require.NoError(t, s.bolt.db.Update(func(tx *bbolt.Tx) error { // as the earlier rebuild left it
		b := sysIndexOf(tx, "_runs")
		ids := b.Bucket(sysIdxIDs)
		for _, id := range []string{"a", "b"} {
			raw := string(ids.Get([]byte(id)))
			if i := strings.Index(raw, `,"k":`); i > 0 {
				raw = raw[:i] + "}"
			}
			if err := ids.Put([]byte(id), []byte(raw)); err != nil {
				return err
			}
		}
		if err := b.Delete(sysIdxLayoutKey); err != nil { // its bucket is made afresh, without it
			return err
		}
		return b.SetSequence(0)
	}))
	s.sysIdxCurrent = nil // as at the next open
	ready, err := s.SysIndexReady("runs")
	require.NoError(t, err)
	require.False(t, ready, "an index without keys over documents stored in sequence is not current")
	// The engine rebuilds an index that is not current at open (ensureIndex).
	_, err = s.RebuildSysIndex(bg, "runs", func(r store.SysRecord) (store.SysIndex, error) {
		return store.SysIndex{Order: r.ID, Group: "done"}, nil
	})
	require.NoError(t, err)
	require.NoError(t, s.PutSysDocs(bg, idxDoc("c", "3", "done")), "a new record is written")
	for _, id := range []string{"a", "b", "c"} {
		ok, err := s.GetSys("runs", id, &map[string]string{})
		require.NoError(t, err)
		assert.True(t, ok, "%s is found", id)
	}
}
