package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// SysDoc is a document of a system collection (such as the audit log's "runs"), written by
// Apply in the same transaction as a run's changes. Value is stored as its JSON encoding.
type SysDoc struct {
	Collection string
	ID         string
	Value      any
	// Index places the document in its collection's ordered index (sysindex.go). A collection
	// that keeps an index takes no write without one.
	Index *SysIndex
	// Create writes the document only where its collection has none of its id: when it has,
	// the whole write fails with ErrSysExists and writes nothing. It is for documents appended
	// in sequence by several processes on one store (the audit log's hash chain on a database
	// that several servers share), where replacing one would lose another process's write.
	Create bool
}

// SysSerializer is a store whose system collections several processes may append to at once
// (servers that share a PostgreSQL database). LockSys holds a lock on coll, across processes,
// until unlock is called: an appender that reads the collection's end under it and writes after
// it cannot lose the race to another that takes the lock too (SysDoc.Create stays the check).
// Without it an appender whose write is slow (an apply waiting for its rows' locks) could find
// its numbers taken at every try while others append. A store that one process holds alone
// (bbolt: its file lock) has no need of it. The caller serializes its own goroutines.
type SysSerializer interface {
	LockSys(ctx context.Context, coll string) (unlock func(), err error)
}

// SelfEncoded is a SysDoc.Value that writes its own JSON (compact, valid; a backend stores the
// bytes as they are, without encoding/json's second pass over a Marshaler's output). Values are
// encoded in the order of the documents given to one write, so one may depend on the bytes of
// the one before (the audit log's hash chain does). The bytes stay the value's: a backend keeps
// no reference to them once the write that asked for them returns (the audit log encodes later
// records into them; a backend that holds them longer copies them).
type SelfEncoded interface {
	EncodeJSON() ([]byte, error)
}

// EncodeSys is a document value's JSON: its own (SelfEncoded) or encoding/json's.
func EncodeSys(v any) ([]byte, error) {
	if e, ok := v.(SelfEncoded); ok {
		return e.EncodeJSON()
	}
	return json.Marshal(v)
}

// RoomEncoded is a SelfEncoded value that can write its JSON after room of its own: buf[room:]
// is the JSON EncodeJSON returns, and a backend that stores the JSON behind a header of its own
// may write the header into buf[:room] instead of copying the JSON behind it (the audit log's
// records; issue 32). Nothing else writes buf[:room]; nothing changes buf[room:].
type RoomEncoded interface {
	SelfEncoded
	EncodeJSONRoom() (buf []byte, room int, err error)
}

// SysDocRoom is the room a RoomEncoded value leaves: enough for a backend's header of a
// document whose id is at most 32 bytes long (bbolt's msgpack map of "_id", "id" and "json").
const SysDocRoom = 96

// EncodeSysRoom is EncodeSys, with the value's room before the JSON when it has one
// (RoomEncoded): raw is the JSON; buf[:room] is free, buf[room:] is raw.
func EncodeSysRoom(v any) (raw, buf []byte, room int, err error) {
	if e, ok := v.(RoomEncoded); ok {
		buf, room, err = e.EncodeJSONRoom()
		if err != nil {
			return nil, nil, 0, err
		}
		return buf[room:], buf, room, nil
	}
	raw, err = EncodeSys(v)
	return raw, nil, 0, err
}

// SysRecord is a stored system document: its id and its JSON.
type SysRecord struct {
	ID   string
	JSON json.RawMessage
}

// SysIndex places a system document in its collection's ordered index (see SysDoc.Index).
type SysIndex struct {
	// Order sorts the documents (then their ids): ScanSys walks them by it, either way. It must
	// not hold a NUL byte.
	Order string
	// Group is the document's group (the audit log's: a run's state): ScanSys can keep to one,
	// and SysStats counts each. It must not be empty.
	Group string
}

// SysGroup is what SysStats keeps of one group of an indexed collection.
type SysGroup struct {
	Count int   `json:"count"`
	Bytes int64 `json:"bytes"` // the size of the documents' JSON
}

// Valid reports an entry a backend cannot index: an Order holding a NUL byte, or an empty Group.
func (x *SysIndex) Valid() error {
	if strings.IndexByte(x.Order, 0) >= 0 || x.Group == "" || strings.IndexByte(x.Group, 0) >= 0 {
		return fmt.Errorf("index entry %q/%q: the order holds no NUL byte and the group is not empty", x.Order, x.Group)
	}
	return nil
}

// ErrNoSysIndex is the error of ScanSys and SysStats on a collection without a current index.
var ErrNoSysIndex = errors.New("the system collection has no current index (RebuildSysIndex builds it)")

// SysScan says which documents ScanSys reads.
type SysScan struct {
	Group   string // only this group's documents; "" for all
	After   string // start after this entry (SysEntry.Cursor of the last one read); "" from the end
	Reverse bool   // greatest Order first
	// Next decides, for each entry in turn, whether to read it (true) and whether to go on. The
	// document's JSON is read only for the entries it takes.
	Next func(SysEntry) (take, more bool)
}

// SysEntry is one document of an indexed collection, as ScanSys reads it.
type SysEntry struct {
	ID     string
	Order  string
	Group  string
	Cursor string          // where a later scan starts after this entry
	JSON   json.RawMessage // set on the entries taken
}
