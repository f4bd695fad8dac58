package store

import "fmt"

// RunLimits bound what one run may make the store do for it: the blast radius of a plan, set by
// its domain's policy. Zero fields are unlimited. Exceeding one fails the call that crossed it
// with a *LimitError; Stage.Exceeded then names the limit, so the engine ends the run as
// limit_exceeded whether the plan ran in process or in a worker.
type RunLimits struct {
	// HelperCalls is the most table calls (search, get, count, insert, update, ...) a run makes.
	HelperCalls int
	// RowsRead is the most rows the run's reads hand to the plan.
	RowsRead int
	// RowsWritten is the most rows a run changes (inserts, updates and removals, by key), over
	// all tables; RowsWrittenPerTable bounds single tables as well.
	RowsWritten         int
	RowsWrittenPerTable map[string]int
	// StagedBytes bounds the rows a run stages, at about the size they take when stored; the
	// engine sets it to the run's memory budget, since the parent holds them (LimitMemory).
	StagedBytes int64
}

// LimitError is a run limit crossed by a table call.
type LimitError struct {
	Limit string // one of the Limit* names
	Max   int
	Table string // for a per-table bound of rows written
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case LimitHelperCalls:
		return fmt.Sprintf("the plan made more than %d table %s (limit %s)", e.Max, plural(int64(e.Max), "call", "calls"), e.Limit)
	case LimitRowsRead:
		return fmt.Sprintf("the plan read more than %d %s (limit %s)", e.Max, plural(int64(e.Max), "row", "rows"), e.Limit)
	case LimitMemory:
		return fmt.Sprintf("the rows the plan changed would take more than %d bytes (limit %s)", e.Max, e.Limit)
	}
	if e.Table != "" {
		return fmt.Sprintf("the plan changed more than %d %s of %s (limit %s)", e.Max, plural(int64(e.Max), "row", "rows"), e.Table, e.Limit)
	}
	return fmt.Sprintf("the plan changed more than %d %s (limit %s)", e.Max, plural(int64(e.Max), "row", "rows"), e.Limit)
}

// Hint says what to do about it.
func (e *LimitError) Hint() string {
	switch e.Limit {
	case LimitHelperCalls:
		return "fetch what you need with one search(where) instead of a call per row"
	case LimitRowsRead:
		return "filter with where so that only the rows you need come back"
	case LimitMemory:
		return "write fewer or smaller rows"
	}
	return "a request changes a few rows; a plan that rewrites a table is refused"
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// The names of the run limits, as they appear in results (Result.Limit).
const (
	LimitHelperCalls = "helper_calls"
	LimitRowsRead    = "rows_read"
	LimitRowsWritten = "rows_written"
	LimitMemory      = "memory" // the run's staged rows outgrew StagedBytes
)
