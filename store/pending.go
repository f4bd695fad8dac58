package store

import (
	"encoding/json"

	"github.com/starplan/starplan/table"
)

// Pending is the serializable form of a run's staged writes and the reads they depend on. The
// engine stores it with a dry run and applies it later, possibly from another process, with
// Store.ApplyPending. It survives a JSON round trip: keys and rows are normalised by the schema
// again when it is applied (JSON turns 20 into 20.0; the int field takes it back as 20).
type Pending struct {
	Domain string         `json:"domain"`
	Writes []PendingWrite `json:"writes"`
	Reads  []PendingRead  `json:"reads"`
}

// PendingWrite is the run's final state of one row.
type PendingWrite struct {
	Table string `json:"table"`
	Key   any    `json:"key"`
	// Base is the version of the row the run replaced; 0 means the row did not exist.
	Base int64 `json:"base"`
	// Before is the row the run replaced (nil for an insert); it is what a diff shows as before.
	Before table.Row `json:"before,omitempty"`
	// Row is the row to store; nil removes the row.
	Row table.Row `json:"row"`
}

// PendingRead is a row, a whole table (All) or a predicate (Pred) the run read, at the version
// it saw.
type PendingRead struct {
	Table   string `json:"table"`
	Key     any    `json:"key,omitempty"`
	All     bool   `json:"all,omitempty"` // the run read the whole table; Version is the table's
	Version int64  `json:"version"`       // 0: the row did not exist; with All or Pred: the table's
	// Pred, when set, makes this a predicate read (see reads.go): "rows" (the committed rows
	// matching Where in [From, To], N of them with digest Digest), "count" (N committed rows
	// match Where) or "next_key" (N is the highest generated key number, -1 for none).
	Pred   string          `json:"pred,omitempty"`
	Where  json.RawMessage `json:"where,omitempty"`
	From   any             `json:"from,omitempty"`
	To     any             `json:"to,omitempty"`
	N      int64           `json:"n,omitempty"`
	Digest string          `json:"digest,omitempty"`
}

// Empty reports whether applying p would change no rows.
func (p *Pending) Empty() bool { return len(p.Writes) == 0 }

// Committed reads the committed state for a Verify. It has the method set of
// contracts.Committed, so the engine passes it to the policy as it is.
type Committed interface {
	// LastRow returns the committed row of tbl with the highest key in natural order
	// (table.CompareKeys), or ok == false when the table is empty or does not exist.
	LastRow(tbl string) (row table.Row, ok bool, err error)
}

// Verify checks, inside an apply, the changes exactly as they are about to be committed against
// the committed state they will join. An error it returns aborts the apply: nothing is written,
// and ApplyPending returns that error as it is.
type Verify func(changes table.ChangeSet, committed Committed) error
