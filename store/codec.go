package store

import (
	"bytes"
	"crypto/sha1"
	"fmt"
	"strconv"

	d "github.com/ostafen/clover/v2/document"
	"github.com/starplan/starplan/table"
	"github.com/vmihailenco/msgpack/v5"
	"go.etcd.io/bbolt"
)

// Fields starplan adds to every stored document. Schema field names cannot start with "_".
const (
	idField      = d.ObjectIdField // clover's document id: a UUID derived from the row's key
	versionField = "_v"            // the commit sequence number that last wrote the row
)

// idNamespace is the namespace of the name-based (version 5) UUIDs that identify documents.
var idNamespace = [16]byte{0x5c, 0x1a, 0x7e, 0x02, 0x9b, 0x44, 0x4f, 0x0d, 0x8a, 0x6e, 0x33, 0x52, 0x10, 0xc4, 0x77, 0xe9}

// docID is the clover document id of a row: clover requires a UUID, so the id is the version-5
// UUID of the collection and the key, which makes it a pure function of the key: a write never
// needs to look a row up to find its document.
func docID(collection string, key any) string {
	h := sha1.New()
	h.Write(idNamespace[:])
	h.Write([]byte(collection))
	h.Write([]byte{0})
	switch k := key.(type) {
	case string:
		h.Write([]byte("s:" + k))
	case int64:
		h.Write([]byte("i:" + strconv.FormatInt(k, 10)))
	default:
		fmt.Fprintf(h, "?:%v", k)
	}
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// encodeDoc builds the clover document stored for a row.
func encodeDoc(collection string, key any, row table.Row, version int64) *d.Document {
	doc := d.NewDocument()
	for k, v := range row {
		doc.Set(k, v)
	}
	doc.Set(idField, docID(collection, key))
	doc.Set(versionField, version)
	return doc
}

// docPrefix is the bbolt key prefix under which clover stores a collection's documents
// (db.go, getDocumentKeyPrefix). Reading them directly is how Open stays fast: see the package
// documentation.
func docPrefix(collection string) []byte { return []byte("c:" + collection + ";d:") }

// loadDocs decodes every document of a collection straight from the bbolt values clover wrote
// (msgpack maps), calling fn with the fields (ints as int64 or uint64, floats as float64) and the
// stored version. The map is fn's to keep.
func loadDocs(tx *bbolt.Tx, collection string, fn func(row map[string]any, version int64) error) error {
	b := tx.Bucket([]byte(rootBucket))
	if b == nil {
		return nil
	}
	prefix := docPrefix(collection)
	var rd bytes.Reader
	dec := msgpack.NewDecoder(&rd)
	dec.UseLooseInterfaceDecoding(true)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		rd.Reset(v)
		dec.Reset(&rd)
		dec.UseLooseInterfaceDecoding(true)
		n, err := dec.DecodeMapLen()
		if err != nil {
			return fmt.Errorf("%s: document %s: %w", collection, k[len(prefix):], err)
		}
		row := make(map[string]any, n)
		var version int64
		for range n {
			name, err := dec.DecodeString()
			if err != nil {
				return fmt.Errorf("%s: document %s: %w", collection, k[len(prefix):], err)
			}
			val, err := dec.DecodeInterfaceLoose()
			if err != nil {
				return fmt.Errorf("%s: document %s: field %s: %w", collection, k[len(prefix):], name, err)
			}
			switch name {
			case idField:
			case versionField:
				version, _ = toInt(val)
			default:
				row[name] = val
			}
		}
		if err := fn(row, version); err != nil {
			return err
		}
	}
	return nil
}

type cloverDoc = d.Document

func newCloverDoc() *cloverDoc { return d.NewDocument() }
