package isolate

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/table"
)

// TestReplyRollback drives conn.reply through a pipe to the worker's decoder: when a frame of
// an answer cannot be encoded (its last one, or a later part after earlier parts were sent),
// the pool forgets the rows that frame would have kept, so its numbers keep naming the
// worker's rows. Without either rollback, the last reply crosses wrong rows or fails.
func TestReplyRollback(t *testing.T) {
	var pipe bytes.Buffer
	pc := newConn(&bytes.Buffer{}, &pipe, 1<<30)
	pc.sent = newRowCache(DefaultRowCache, &rowBudget{limit: DefaultRowCache})
	wc := newConn(&pipe, &bytes.Buffer{}, 1<<30) // the worker's end
	shape := []string{"item_id"}
	mk := func(p string, n int) []table.Row {
		rs := make([]table.Row, n)
		for i := range rs {
			rs[i] = table.Row{"item_id": fmt.Sprintf("%s%d", p, i)}
		}
		return rs
	}
	recv := func() ([]table.Row, error) {
		var all []table.Row
		for {
			typ, d, err := wc.recv()
			require.NoError(t, err)
			require.Equal(t, msgReply, typ)
			a := d.answer(opFind, &wc.rows)
			require.NoError(t, d.err)
			if a.err != nil {
				return nil, a.err
			}
			all = append(all, a.rows...)
			if !a.more {
				return all, nil
			}
		}
	}
	bad := table.Row{"item_id": struct{}{}}
	old := mk("old", 10)
	require.NoError(t, pc.reply(opFind, &answer{rows: old, shape: shape}))
	got, err := recv()
	require.NoError(t, err)
	require.Equal(t, old, got)

	// An answer of one frame that fails.
	require.NoError(t, pc.reply(opFind, &answer{rows: []table.Row{mk("x", 1)[0], bad}, shape: shape}))
	_, err = recv()
	require.Error(t, err)

	// A second part that fails after a first one was sent.
	a, b := mk("a", findPart), mk("b", 5)
	rows := append(append(append(append([]table.Row{}, a...), b...), bad), mk("c", findPart)...)
	require.NoError(t, pc.reply(opFind, &answer{rows: rows, shape: shape}))
	_, err = recv()
	require.Error(t, err)

	want := append(append(append([]table.Row{}, b...), a[:3]...), old...)
	require.NoError(t, pc.reply(opFind, &answer{rows: want, shape: shape}))
	got, err = recv()
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Len(t, wc.rows, len(pc.sent.order), "both ends hold the same rows")
	assert.Equal(t, pc.sent.allowance(), pc.sent.budget.used.Load(), "the rows forgotten gave back their share")
}
