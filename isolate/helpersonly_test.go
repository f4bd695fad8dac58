package isolate

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

// A table only helpers write is held to it in a worker too: the schema's "writes" crosses with
// the schemas, and a helper's write is told by its file there as in process.
func TestWorkerHoldsHelpersOnlyTables(t *testing.T) {
	dom, err := store.LoadDomain(os.DirFS("../testdata/domains/retail-mini"))
	require.NoError(t, err)
	st, err := bolt.Open(t.TempDir(), bolt.Options{Domain: dom})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	p := newPool(t, Options{})

	j, _ := job(st, `ins = getattr(payments_tbl, "ins" + "ert")
ins({"order_id": "O1", "method_id": "PM2", "amount": 50.88})
STATUS, answer_text = "success", "Paid."`, sandbox.Limits{})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeRuntimeError, res.Outcome, res.Diagnostics.String())
	assert.Contains(t, res.Diagnostics.String(), "payments may be written only by the domain's helpers, not by a plan directly; call pay, which writes payments")

	j, stage := job(st, `id = pay("O1", "PM1")
STATUS, answer_text = "success", "Paid with " + id + "."`, sandbox.Limits{})
	res = p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	require.Len(t, stage.ChangeSet()["payments"].Inserted, 1)
	id := stage.ChangeSet()["payments"].Inserted[0]["payment_id"].(string)
	assert.Equal(t, map[string]map[string]string{"payments": {id: "pay"}}, res.Via, "which helper wrote the row crosses back from the worker")
}
