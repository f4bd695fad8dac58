package bolt

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/starplan/starplan/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// The record the store writes from memory is byte for byte what json.Marshal of the metaRecord
// wrote, so a starplan before the record was kept in memory reads it, and the record such a
// starplan wrote decodes into the same fields.
func TestTheRecordInMemoryEncodesAsTheMetaRecord(t *testing.T) {
	def := store.Inventory().Definition
	require.NotEmpty(t, def)
	for name, m := range map[string]metaRecord{
		"full": {Format: 1, Domain: "inventory", Seq: 7, Tables: map[string]int64{"inventory": 7, "transactions": 1},
			Digests:    map[string]collDigest{"inventory": {Rows: 6, Sum: 1<<63 + 5}, "_runs": {Rows: 1, Sum: 2}},
			Definition: def, DefinitionSums: store.DefinitionSums(def), Keys: keysLayout},
		"old":          {Format: 1, Domain: "inventory", Seq: 2, Tables: map[string]int64{"inventory": 2}},
		"no sums":      {Format: 1, Domain: "inventory", Seq: 3, Tables: map[string]int64{}, Digests: map[string]collDigest{}, Definition: def},
		"empty maps":   {Format: 1, Domain: "x<&>", Definition: map[string]string{}, DefinitionSums: map[string]string{}, Keys: 0},
		"html escaped": {Format: 1, Domain: "d", Definition: map[string]string{"a<b>.md": "x & <y>"}, DefinitionSums: map[string]string{"a<b>.md": "0"}},
	} {
		want, err := json.Marshal(m)
		require.NoError(t, err)
		r, err := decodeRecord(want)
		require.NoError(t, err, name)
		got, err := r.encode()
		require.NoError(t, err, name)
		assert.Equal(t, string(want), string(got), name)
		var back metaRecord
		require.NoError(t, json.Unmarshal(got, &back), name)
		assert.Equal(t, m.Seq, back.Seq, name)
	}
}

// recordCounts is how often the store decoded its record from the file and encoded it whole.
func recordCounts(s *Store) (decodes, encodes int) {
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	return s.rec.decodes, s.rec.encodes
}

// recordWrites is how often commits wrote the store's record.
func recordWrites(s *Store) int {
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	return s.rec.writes
}

// fileRecord reads the store's record from the file.
func fileRecord(t *testing.T, s *Store) metaRecord {
	t.Helper()
	s.bolt.mu.Lock()
	defer s.bolt.mu.Unlock()
	var m metaRecord
	ok, err := s.getSysLocked(metaCollection, metaID, &m)
	require.NoError(t, err)
	require.True(t, ok)
	return m
}

// A commit, an apply's or a write of system documents (the audit log's), neither reads the
// record from the file nor encodes the definition's files: the record is kept in memory (issue
// 32: decoding and encoding it at each commit was the largest cost of a run and its apply).
func TestACommitNeitherDecodesNorEncodesTheRecord(t *testing.T) {
	s := openTemp(t)
	dec, enc := recordCounts(s)
	for range 3 {
		w := recordWrites(s)
		v := s.Stage()
		sell(t, v, "Moon")
		require.NoError(t, v.Apply(bg))
		assert.Equal(t, w+1, recordWrites(s), "an apply writes the record once")
		require.NoError(t, s.PutSysDocs(bg, store.SysDoc{Collection: "runs", ID: "r", Value: map[string]int{"n": 1}}))
		assert.Equal(t, w+2, recordWrites(s), "a write of system documents writes it once")
	}
	d, e := recordCounts(s)
	assert.Equal(t, dec, d, "record decodes by 3 applies and 3 writes of system documents")
	assert.Equal(t, enc, e, "full encodings of the record by them")

	m := fileRecord(t, s)
	assert.Equal(t, s.seq, m.Seq)
	assert.Equal(t, store.Inventory().Definition, m.Definition)
	assert.Equal(t, store.DefinitionSums(m.Definition), m.DefinitionSums)
	recorded, found := recordedDigests(t, s)
	assert.Equal(t, found, recorded)
	require.NoError(t, s.Close())
	rep := checkOf(t, s.Dir(), store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Empty(t, rep.Unverified)
}

// A group that rolls back after writing the record leaves the record in memory as committed;
// one that edits the record some other way makes the next commit read it from the file.
func TestTheRecordInMemoryFollowsCommitsOnly(t *testing.T) {
	s := openTemp(t)
	seq := s.seq
	err := s.write(bg, func() error {
		tx := s.bolt.group
		r, _, err := s.recordLocked(tx)
		require.NoError(t, err)
		r.Seq, r.Digests["inventory"] = 999, collDigest{}
		require.NoError(t, s.putRecordLocked(tx, r))
		return errors.New("no")
	})
	require.Error(t, err)
	v := s.Stage()
	sell(t, v, "Moon")
	require.NoError(t, v.Apply(bg))
	m := fileRecord(t, s)
	assert.Equal(t, seq+1, m.Seq)
	recorded, found := recordedDigests(t, s)
	assert.Equal(t, found, recorded)

	dec, _ := recordCounts(s)
	editRecord(t, s, func(m *metaRecord) { m.Definition["notes.md"] = "x" })
	v = s.Stage()
	sell(t, v, "Moon")
	require.NoError(t, v.Apply(bg))
	d, _ := recordCounts(s)
	assert.Equal(t, dec+2, d, "the edited record is read from the file by the edit and by its group's end, not again")
	assert.Equal(t, "x", fileRecord(t, s).Definition["notes.md"], "and kept")
	require.NoError(t, s.Close())
	_, err = Open(s.Dir(), Options{MustExist: true})
	assert.ErrorContains(t, err, "notes.md was added")
}

// A store whose record has no definition sums gets them at its next commit from the record in
// memory, as from the file.
func TestTheRecordInMemoryGetsTheDefinitionSums(t *testing.T) {
	s := openTemp(t)
	s.bolt.mu.Lock()
	s.bolt.beforeCommit = nil
	require.NoError(t, s.bolt.runGroup(func(tx *bbolt.Tx) error {
		r, _, err := s.recordLocked(tx)
		require.NoError(t, err)
		r.DefinitionSums = nil
		return s.putRecordLocked(tx, r)
	}))
	s.bolt.beforeCommit = s.recordDigestsLocked
	s.bolt.mu.Unlock()
	assert.Nil(t, fileRecord(t, s).DefinitionSums)
	require.NoError(t, s.PutSysDocs(bg, store.SysDoc{Collection: "runs", ID: "r", Value: 1}))
	m := fileRecord(t, s)
	assert.Equal(t, store.DefinitionSums(m.Definition), m.DefinitionSums)
}
