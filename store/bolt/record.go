package bolt

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/starplan/starplan/store"
	"go.etcd.io/bbolt"
)

// The store's record held in memory.
//
// The record (metaRecord) carries the domain's definition files, about 11 KB for the test
// domain, and every commit changes it (its sequence number, tables and digests). Reading it from
// the file and decoding it, then encoding it again, at each commit (twice at an apply: the commit
// and recordDigestsLocked) was the largest single cost of a run and its apply (issue 32). So the
// Store keeps the record as last committed in memory, under s.bolt.mu (only this process writes
// the file while it is open: the lock), with the definition and its sums as the JSON they are in
// the file: a commit copies the small fields, changes them and writes the record with that JSON
// spliced in, never decoding or encoding the definition. What it writes is byte for byte what
// json.Marshal of the metaRecord wrote (same fields, same order), so every starplan reads it.
//
// A group works on its own copy (recordLocked), made current by afterCommitLocked when the group
// commits, and dropped when it rolls back. A record written any other way (putSysLocked: create,
// upgrade, tests that edit it) drops the copy in memory: the next reader decodes it from the file.

// liveRecord is the store's record as held in memory: metaRecord with the definition and its
// sums as their JSON (nil: absent).
type liveRecord struct {
	Format         int                   `json:"format"`
	Domain         string                `json:"domain"`
	Seq            int64                 `json:"seq"`
	Tables         map[string]int64      `json:"tables"`
	Digests        map[string]collDigest `json:"digests"`
	Definition     json.RawMessage       `json:"definition,omitempty"`
	DefinitionSums json.RawMessage       `json:"definition_sums,omitempty"`
	Keys           int                   `json:"keys,omitempty"`
}

// recordCache is the record in memory (Store.rec), guarded by bolt.mu.
type recordCache struct {
	// committed is the record as last committed, nil when it must be read from the file.
	committed *liveRecord
	// next is the record as the running group tx has it (read or written), made committed by
	// afterCommitLocked.
	tx   *bbolt.Tx
	next *liveRecord
	// dirty says next is not written yet (setRecordLocked): the group's end writes it.
	dirty bool
	// decodes and encodes count the record's reads from the file and its full encodings (with
	// the definition as maps, putSysLocked), for tests.
	decodes, encodes int
	// writes counts the record's writes by commits (putRecordRawLocked), for tests.
	writes int
}

// clone copies r's maps, which a group changes in place; the definition's JSON is shared (never
// changed: a new definition is a new slice).
func (r *liveRecord) clone() *liveRecord {
	c := *r
	if r.Tables != nil {
		c.Tables = make(map[string]int64, len(r.Tables))
		for k, v := range r.Tables {
			c.Tables[k] = v
		}
	}
	if r.Digests != nil {
		c.Digests = make(map[string]collDigest, len(r.Digests))
		for k, v := range r.Digests {
			c.Digests[k] = v
		}
	}
	return &c
}

// decodeRecord decodes the record's JSON, the definition left as JSON. A null definition or
// sums is an absent one, as it decoded into metaRecord.
func decodeRecord(raw []byte) (*liveRecord, error) {
	var r liveRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if string(r.Definition) == "null" {
		r.Definition = nil
	}
	if string(r.DefinitionSums) == "null" {
		r.DefinitionSums = nil
	}
	return &r, nil
}

// encode is the record's JSON: what json.Marshal of the metaRecord with the same fields writes
// (its fields in order, the definition and sums omitted when empty), the definition's JSON copied.
func (r *liveRecord) encode() ([]byte, error) {
	head := *r
	head.Definition, head.DefinitionSums, head.Keys = nil, nil, 0
	b, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	b = b[:len(b)-1] // the closing brace
	out := make([]byte, 0, len(b)+len(r.Definition)+len(r.DefinitionSums)+48)
	out = append(out, b...)
	if !emptyJSONObject(r.Definition) {
		out = append(append(out, `,"definition":`...), r.Definition...)
	}
	if !emptyJSONObject(r.DefinitionSums) {
		out = append(append(out, `,"definition_sums":`...), r.DefinitionSums...)
	}
	if r.Keys != 0 {
		out = strconv.AppendInt(append(out, `,"keys":`...), int64(r.Keys), 10)
	}
	return append(out, '}'), nil
}

// emptyJSONObject reports whether raw is what omitempty omits of a map: nothing, or {}.
func emptyJSONObject(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "{}"
}

// definitionMaps decodes the record's definition and sums.
func (r *liveRecord) definitionMaps() (def, sums map[string]string, err error) {
	if r.Definition != nil {
		if err := json.Unmarshal(r.Definition, &def); err != nil {
			return nil, nil, fmt.Errorf("system document %s/%s: definition: %w", metaCollection, metaID, err)
		}
	}
	if r.DefinitionSums != nil {
		if err := json.Unmarshal(r.DefinitionSums, &sums); err != nil {
			return nil, nil, fmt.Errorf("system document %s/%s: definition_sums: %w", metaCollection, metaID, err)
		}
	}
	return def, sums, nil
}

// readRecordLocked decodes the record from the file (through clover, in the running group if
// any), reporting whether there is one.
func (s *Store) readRecordLocked() (*liveRecord, bool, error) {
	if ok, err := s.db.HasCollection(metaCollection); err != nil || !ok {
		return nil, false, err
	}
	doc, err := s.db.FindById(metaCollection, sysDocID(metaCollection, metaID))
	if err != nil || doc == nil {
		return nil, false, err
	}
	raw, _ := doc.Get("json").(string)
	s.rec.decodes++
	r, err := decodeRecord([]byte(raw))
	if err != nil {
		return nil, true, fmt.Errorf("system document %s/%s: %w", metaCollection, metaID, err)
	}
	return r, true, nil
}

// recordLocked is the record as the running group tx has it, for the group to change and write
// with putRecordLocked; found is false when there is none (yet). It runs inside the group.
func (s *Store) recordLocked(tx *bbolt.Tx) (r *liveRecord, found bool, err error) {
	if s.rec.tx == tx && s.rec.next != nil {
		return s.rec.next, true, nil
	}
	if s.rec.committed != nil {
		r = s.rec.committed.clone()
	} else if r, found, err = s.readRecordLocked(); err != nil || !found {
		return nil, found, err
	}
	s.rec.tx, s.rec.next = tx, r
	return r, true, nil
}

// committedRecordLocked is the record as last committed, read only; outside a group.
func (s *Store) committedRecordLocked() (*liveRecord, bool, error) {
	if s.rec.committed != nil {
		return s.rec.committed, true, nil
	}
	r, found, err := s.readRecordLocked()
	if err == nil && found {
		s.rec.committed = r
	}
	return r, found, err
}

// putRecordLocked writes r, the running group's record (from recordLocked), to the file now.
func (s *Store) putRecordLocked(tx *bbolt.Tx, r *liveRecord) error {
	raw, err := r.encode()
	if err != nil {
		return fmt.Errorf("system document %s/%s: %w", metaCollection, metaID, err)
	}
	if err := s.putRecordRawLocked(tx, raw); err != nil {
		return err
	}
	s.rec.tx, s.rec.next, s.rec.dirty = tx, r, false
	return nil
}

// setRecordLocked makes r, the running group's record (from recordLocked), the one the group's
// end (recordDigestsLocked, which adds the group's digests) writes: the record is written once
// per commit.
func (s *Store) setRecordLocked(tx *bbolt.Tx, r *liveRecord) {
	s.rec.tx, s.rec.next, s.rec.dirty = tx, r, true
}

// putRecordRawLocked replaces the record's document with one holding raw, as clover's
// ReplaceById would but without reading the old document twice and decoding it (the record is
// no collection's digest, and in no key bucket): the msgpack map clover writes for a system
// document (see insertSys). A file without the record's document (being created) goes through
// clover.
func (s *Store) putRecordRawLocked(tx *bbolt.Tx, raw []byte) error {
	s.rec.writes++
	b := tx.Bucket([]byte(rootBucket))
	uuid := sysDocID(metaCollection, metaID)
	key := append(docPrefix(metaCollection), uuid...)
	if b == nil || b.Get(key) == nil {
		return s.putSysRawLocked(metaCollection, metaID, raw)
	}
	return b.Put(key, appendSysDoc(make([]byte, 0, len(raw)+len(uuid)+len(metaID)+32), uuid, metaID, raw))
}

// dropRecordLocked forgets the record in memory: it was written some other way.
func (s *Store) dropRecordLocked() {
	s.rec.committed, s.rec.tx, s.rec.next, s.rec.dirty = nil, nil, nil, false
}

// recordCommittedLocked makes the committed group's record the one in memory (afterCommitLocked).
func (s *Store) recordCommittedLocked() {
	if s.rec.tx != nil && s.rec.tx == s.bolt.group && s.rec.next != nil && !s.rec.dirty {
		s.rec.committed = s.rec.next
	}
	s.rec.tx, s.rec.next, s.rec.dirty = nil, nil, false
}

// sumsJSON is the JSON of the sums of the definition whose JSON is def.
func sumsJSON(def json.RawMessage) (json.RawMessage, error) {
	var m map[string]string
	if err := json.Unmarshal(def, &m); err != nil {
		return nil, err
	}
	return json.Marshal(store.DefinitionSums(m))
}
