package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/starplan/starplan/table"
)

// digestPrefix names the digest's algorithm and encoding version, so that a later encoding can
// never be mistaken for this one.
const digestPrefix = "sha256:"

// digestDomain separates change-set digests from any other SHA-256 of the same bytes.
const digestDomain = "starplan change set v1\n"

// Digest returns the digest of a change set: "sha256:" and the hex SHA-256 of a canonical
// encoding of every changed row (inserted, updated with before, after and fields, deleted) per
// table. The encoding is JSON with object keys sorted and no insignificant space, so the digest
// of a run's changes is the same whether they come from its dry run or, later, from its audit
// record. A nil change set digests as the empty one.
func Digest(cs table.ChangeSet) (string, error) {
	if cs == nil {
		cs = table.ChangeSet{}
	}
	var b bytes.Buffer
	b.WriteString(digestDomain)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cs); err != nil {
		return "", fmt.Errorf("encoding the change set for its digest: %w", err)
	}
	sum := sha256.Sum256(b.Bytes())
	return digestPrefix + hex.EncodeToString(sum[:]), nil
}
