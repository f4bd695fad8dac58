package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/starplan/starplan/table"
)

// ErrInUse is matched (errors.Is) by the error Open returns when another process has the store
// open.
var ErrInUse = errors.New("store is in use by another starplan process")

// InUseError is returned by Open when another process holds the store's lock for longer than
// the lock timeout. bbolt allows one process at a time; starplan reports it instead of waiting.
type InUseError struct {
	Dir string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("store %s is in use by another starplan process", e.Dir)
}

// Hint says what to do about it.
func (e *InUseError) Hint() string {
	return "wait for the other starplan command to finish, or pass --db DIR (or set STARPLAN_DB) to use another store"
}

func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// ErrConflict is matched (errors.Is) by every *ConflictError.
var ErrConflict = errors.New("apply conflict")

// Conflict is one row (or whole table) that moved between a run and its apply.
type Conflict struct {
	Table string `json:"table"`
	Key   any    `json:"key,omitempty"` // nil: the run read the whole table
	Seen  int64  `json:"seen"`          // the version the run saw; 0: the row did not exist
	Now   int64  `json:"now"`           // the version now; 0: the row does not exist
	// Read describes a predicate read that no longer finds what it found ("the transactions rows
	// matching ... changed after the run read them"); Seen and Now are then the table's versions.
	Read string `json:"read,omitempty"`
}

func (c Conflict) String() string {
	if c.Read != "" {
		return c.Read
	}
	if c.Key == nil {
		return fmt.Sprintf("table %s changed after the run read all of it", c.Table)
	}
	what := "was changed"
	switch {
	case c.Seen == 0:
		what = "was inserted"
	case c.Now == 0:
		what = "was deleted"
	}
	return fmt.Sprintf("%s row %s %s after the run read it", c.Table, table.FormatValue(c.Key), what)
}

// ConflictError is returned by Apply when a row the run read or changed is no longer at the
// version the run saw. Nothing was written.
type ConflictError struct {
	Conflicts []Conflict
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	b.WriteString("apply conflict: ")
	b.WriteString(e.Conflicts[0].String())
	if n := len(e.Conflicts) - 1; n > 0 {
		fmt.Fprintf(&b, " (and %d more)", n)
	}
	b.WriteString("; nothing was written")
	return b.String()
}

// Hint says what to do about it.
func (e *ConflictError) Hint() string {
	return "run the plan again against the current data"
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ErrSysExists is the error of a write of a SysDoc with Create set whose id its collection
// already holds (written by another process since the writer last looked): nothing is written.
var ErrSysExists = errors.New("the system document exists already")

// ErrNotEmpty is returned by Seed without force when the store already holds rows.
var ErrNotEmpty = errors.New("the store already holds data; seed with force to replace it")

// WriteError is returned when a commit could not be written to the store's file: the disk is
// full, the file may not grow (a quota, RLIMIT_FSIZE) or the device failed. Nothing was
// committed; the store holds what it held before.
type WriteError struct {
	Path string // the data.db file
	Err  error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("writing %s failed: %v; nothing was written", e.Path, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// Hint says what to do about it.
func (e *WriteError) Hint() string {
	return "make room on the disk that holds " + e.Path + " (or raise its quota), then try again"
}

// DomainError is Open of a store made for another domain: its tables and rules are another's,
// so it is refused rather than read as the wrong one.
type DomainError struct {
	Dir    string
	Holds  string // the domain the store was created for
	Wanted string // the domain Open was given
}

func (e *DomainError) Error() string {
	return fmt.Sprintf("the store holds the %s domain, not %s", e.Holds, e.Wanted)
}

// Hint says what to do about it.
func (e *DomainError) Hint() string {
	return fmt.Sprintf("open %s with the %s domain (store.Options.Domain), or pass --db DIR for a store of the %s domain", e.Dir, e.Holds, e.Wanted)
}

// ErrDamaged is matched (errors.Is) by every *DamagedError.
var ErrDamaged = errors.New("store file is damaged")

// DamagedError says that a store's data.db cannot be trusted: it is empty, truncated, not a
// bbolt file, holds no starplan record, has a page or a row that does not read back, holds
// other documents than its record counted and digested (a row lost, added or changed outside
// starplan), or its newer meta page is damaged (so that opening it would silently go back to the
// previous commit). starplan never writes to a
// file it reports damaged.
type DamagedError struct {
	Path    string // the data.db file
	Problem string // what is wrong, in words
	Err     error  // the cause, when there is one
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("store file %s is damaged: %s", e.Path, e.Problem)
}

// Hint says what to do about it.
func (e *DamagedError) Hint() string {
	return "restore " + e.Path + " from a backup (starplan will not write to it as it is); " +
		"starplan db check --db " + filepath.Dir(e.Path) + " reports everything it finds"
}

func (e *DamagedError) Unwrap() error { return e.Err }

func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// ErrNoStore is matched (errors.Is) by every *NoStoreError.
var ErrNoStore = errors.New("no store")

// NoStoreError is returned by Open with Options.MustExist when dir holds no store.
type NoStoreError struct {
	Dir string
}

func (e *NoStoreError) Error() string { return "no store at " + e.Dir }

// Hint says what to do about it.
func (e *NoStoreError) Hint() string {
	return "run starplan db init (or any exec or ask) to create one, or pass --db DIR to use another store"
}

func (e *NoStoreError) Is(target error) bool { return target == ErrNoStore }
