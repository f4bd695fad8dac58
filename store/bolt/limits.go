package bolt

import (
	"context"

	"github.com/starplan/starplan/store"
)

// StageFor starts a run's staged view that stops its scans when ctx is done (the run's deadline
// or cancellation) and holds the run to limits (store.Store's StageFor; the view is a *Stage).
func (s *Store) StageFor(ctx context.Context, limits store.RunLimits) store.Stage {
	return s.stageFor(ctx, limits)
}

// stageFor is StageFor with the concrete type.
func (s *Store) stageFor(ctx context.Context, limits store.RunLimits) *Stage {
	sg := s.Stage()
	sg.meter = store.NewMeter(ctx, limits)
	return sg
}

// Store and Stage are the bbolt implementations of store's interfaces.
var (
	_ store.Store = (*Store)(nil)
	_ store.Stage = (*Stage)(nil)
)

// Exceeded returns the run limit the run crossed, or nil.
func (sg *Stage) Exceeded() *store.LimitError { return sg.meter.Exceeded() }

// RowsRead is how many rows the run's reads took (store.Stage).
func (sg *Stage) RowsRead() int { return sg.meter.RowsRead() }

// call counts one table call (store.Meter's Call), failing first with an error the stage met
// where it could not return it.
func (sg *Stage) call() error {
	if sg.broken != nil {
		return sg.broken
	}
	return sg.meter.Call()
}

// room fails when staging n more rows of t (rows the run has not written yet) would cross a
// rows-written limit (store.Meter's Room).
func (sg *Stage) room(t *stageTable, n int) error {
	return sg.meter.Room(t.s.Name, len(t.writes), n, func() int {
		total := 0
		for _, x := range sg.tables {
			total += len(x.writes)
		}
		return total
	})
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
