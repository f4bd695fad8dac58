package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

// POST /v1/runs/{id}/replay runs a recorded run again and says whether it gives the recorded
// result; an unknown run is a 404, and a replay writes nothing.
func TestReplayOverHTTP(t *testing.T) {
	f := newFixture(t, Options{})
	doc := f.run(example(t, "02_purchase_wayfarer.star"), "Purchase 3 Wayfarer sunglasses for customer Alice.")
	ledger := f.count("transactions")

	r := f.call("POST", "/v1/runs/"+doc.RunID+"/replay", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var rep engine.ReplayReport
	r.decode(t, &rep)
	assert.True(t, rep.Identical, "%v", rep.Differences)
	assert.Equal(t, doc.RunID, rep.RunID)
	assert.Equal(t, ledger, f.count("transactions"), "a replay writes nothing")
	assert.Equal(t, int64(6), f.committed("inventory", "SG002")["quantity_in_stock"])

	r = f.call("POST", "/v1/runs/r_0000000000/replay", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Equal(t, CodeUnknownRun, r.errorCode(t))

	noProgram := f.run("I cannot write a plan for that.", "hello")
	r = f.call("POST", "/v1/runs/"+noProgram.RunID+"/replay", nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	assert.Equal(t, CodeNotReplayable, r.errorCode(t))
}
