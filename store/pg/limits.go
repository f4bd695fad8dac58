package pg

// The run limits, as store/bolt (limits.go) holds a stage to them.

import (
	"context"
	"fmt"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/table"
)

// scanCheckEvery is how many rows a walk checks between two looks at the run's context.
const scanCheckEvery = 4096

// Exceeded returns the run limit the run crossed, or nil.
func (sg *Stage) Exceeded() *store.LimitError { return sg.exceeded }

// call counts one table call; it fails once the run has crossed a limit, so a plan cannot go on
// past one by ignoring the error.
func (sg *Stage) call() error {
	if sg.broken != nil {
		return sg.broken
	}
	if sg.exceeded != nil {
		return sg.exceeded
	}
	if err := sg.ctxErr(); err != nil {
		return err
	}
	sg.calls++
	if l := sg.limits.HelperCalls; l > 0 && sg.calls > l {
		return sg.exceed(&store.LimitError{Limit: store.LimitHelperCalls, Max: l})
	}
	return nil
}

// mayRead reports whether n more rows stay within the rows_read limit.
func (sg *Stage) mayRead(n int) bool {
	l := sg.limits.RowsRead
	return l <= 0 || sg.rowsRead+n <= l
}

// read counts n rows handed to the plan.
func (sg *Stage) read(n int) error {
	sg.rowsRead += n
	if l := sg.limits.RowsRead; l > 0 && sg.rowsRead > l {
		return sg.exceed(&store.LimitError{Limit: store.LimitRowsRead, Max: l})
	}
	return nil
}

// room fails when staging n more rows of t (rows the run has not written yet) would cross a
// rows-written limit. It is asked before anything is staged, so an update of a whole table is
// refused before it copies a row.
func (sg *Stage) room(t *stageTable, n int) error {
	if l := sg.limits.RowsWrittenPerTable[t.s.Name]; l > 0 && len(t.writes)+n > l {
		return sg.exceed(&store.LimitError{Limit: store.LimitRowsWritten, Max: l, Table: t.s.Name})
	}
	if l := sg.limits.RowsWritten; l > 0 {
		total := n
		for _, x := range sg.tables {
			total += len(x.writes)
		}
		if total > l {
			return sg.exceed(&store.LimitError{Limit: store.LimitRowsWritten, Max: l})
		}
	}
	return nil
}

// fresh counts the candidates whose rows the run has not written yet.
func (t *stageTable) fresh(cs []cand) int {
	n := 0
	for _, c := range cs {
		if _, ok := t.writes[c.key]; !ok {
			n++
		}
	}
	return n
}

// charge adds n bytes (may be negative) to the rows the run has staged, failing when they
// would outgrow StagedBytes. Callers charge before they stage.
func (sg *Stage) charge(n int64) error {
	if l := sg.limits.StagedBytes; l > 0 && sg.staged+n > l {
		return sg.exceed(&store.LimitError{Limit: store.LimitMemory, Max: int(l)})
	}
	sg.staged += n
	return nil
}

// rowSize is about the size of a row when stored: its field names and values.
func rowSize(r table.Row) int64 {
	n := int64(0)
	for k, v := range r {
		n += int64(len(k)) + valueSize(v)
	}
	return n
}

func valueSize(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x)) + 2
	case []any:
		n := int64(2)
		for _, e := range x {
			n += valueSize(e) + 1
		}
		return n
	case map[string]any:
		return rowSize(x) + 2
	}
	return 9
}

func (sg *Stage) exceed(e *store.LimitError) error {
	if sg.exceeded == nil {
		sg.exceeded = e
	}
	return sg.exceeded
}

func (sg *Stage) ctxErr() error {
	if sg.ctx == nil {
		return nil
	}
	if err := sg.ctx.Err(); err != nil {
		return fmt.Errorf("the run was stopped: %w", context.Cause(sg.ctx))
	}
	return nil
}
