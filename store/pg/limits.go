package pg

// The run limits, as store/bolt (limits.go) holds a stage to them.

import "github.com/starplan/starplan/store"

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
