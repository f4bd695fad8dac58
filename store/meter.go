package store

import (
	"context"
	"fmt"

	"github.com/starplan/starplan/table"
)

// ScanCheckEvery is how many rows a backend's walk checks between two looks at the run's context.
const ScanCheckEvery = 4096

// Meter holds one run to its RunLimits and its context: the accounting every backend's Stage
// keeps the same way. Backends call it before they act, so a crossed limit stages nothing. Once a
// limit is crossed every later Call fails with it, so a plan cannot go on past one by ignoring
// the error. The zero Meter has no limits and no context.
type Meter struct {
	ctx      context.Context // nil: the run is not stopped
	limits   RunLimits
	calls    int
	rowsRead int
	staged   int64       // about the stored size of the rows staged (see Charge)
	exceeded *LimitError // the first run limit crossed
}

// NewMeter starts the accounting of a run stopped by ctx (nil: never) and held to limits.
func NewMeter(ctx context.Context, limits RunLimits) Meter {
	return Meter{ctx: ctx, limits: limits}
}

// Context is the run's context, nil when the run is not stopped by one.
func (m *Meter) Context() context.Context { return m.ctx }

// Exceeded returns the run limit the run crossed, or nil.
func (m *Meter) Exceeded() *LimitError { return m.exceeded }

// RowsRead is how many rows the run's reads have taken so far (what RunLimits.RowsRead bounds).
func (m *Meter) RowsRead() int { return m.rowsRead }

// Call counts one table call; it fails once the run has crossed a limit or was stopped.
func (m *Meter) Call() error {
	if m.exceeded != nil {
		return m.exceeded
	}
	if err := m.Err(); err != nil {
		return err
	}
	m.calls++
	if l := m.limits.HelperCalls; l > 0 && m.calls > l {
		return m.exceed(&LimitError{Limit: LimitHelperCalls, Max: l})
	}
	return nil
}

// MayRead reports whether n more rows stay within the rows_read limit.
func (m *Meter) MayRead(n int) bool {
	l := m.limits.RowsRead
	return l <= 0 || m.rowsRead+n <= l
}

// ReadRoom returns how many more rows stay within the rows_read limit, and false when the run
// has none.
func (m *Meter) ReadRoom() (int, bool) {
	if m.limits.RowsRead <= 0 {
		return 0, false
	}
	return m.limits.RowsRead - m.rowsRead, true
}

// Read counts n rows handed to the plan.
func (m *Meter) Read(n int) error {
	m.rowsRead += n
	if l := m.limits.RowsRead; l > 0 && m.rowsRead > l {
		return m.exceed(&LimitError{Limit: LimitRowsRead, Max: l})
	}
	return nil
}

// Room fails when staging n more rows of table (rows the run has not written yet) would cross a
// rows-written limit; written is how many rows of table the run has written, total (called only
// when the run has a limit over all tables) how many of every table. It is asked before anything
// is staged, so an update of a whole table is refused before it copies a row.
func (m *Meter) Room(table string, written, n int, total func() int) error {
	if l := m.limits.RowsWrittenPerTable[table]; l > 0 && written+n > l {
		return m.exceed(&LimitError{Limit: LimitRowsWritten, Max: l, Table: table})
	}
	if l := m.limits.RowsWritten; l > 0 && total()+n > l {
		return m.exceed(&LimitError{Limit: LimitRowsWritten, Max: l})
	}
	return nil
}

// Charge adds n bytes (may be negative) to the rows the run has staged, failing when they
// would outgrow StagedBytes. Callers charge before they stage.
func (m *Meter) Charge(n int64) error {
	if l := m.limits.StagedBytes; l > 0 && m.staged+n > l {
		return m.exceed(&LimitError{Limit: LimitMemory, Max: int(l)})
	}
	m.staged += n
	return nil
}

// Err is the error of a stopped run (its deadline passed or it was cancelled), or nil.
func (m *Meter) Err() error {
	if m.ctx == nil {
		return nil
	}
	if err := m.ctx.Err(); err != nil {
		return fmt.Errorf("the run was stopped: %w", context.Cause(m.ctx))
	}
	return nil
}

func (m *Meter) exceed(e *LimitError) error {
	if m.exceeded == nil {
		m.exceeded = e
	}
	return m.exceeded
}

// RowSize is about the size of a row when stored: its field names and values (see Charge).
func RowSize(r table.Row) int64 {
	n := int64(0)
	for k, v := range r {
		n += int64(len(k)) + ValueSize(v)
	}
	return n
}

// ValueSize is about the size of one value when stored.
func ValueSize(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x)) + 2
	case []any:
		n := int64(2)
		for _, e := range x {
			n += ValueSize(e) + 1
		}
		return n
	case map[string]any:
		return RowSize(x) + 2
	}
	return 9
}
