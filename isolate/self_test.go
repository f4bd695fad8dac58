package isolate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
)

// The embedder's path: the test binary is "this program", and TestMain calls ServeWorkerIfAsked
// as an embedder's main would.
func TestSelfPool(t *testing.T) {
	p, err := NewSelfPool(Options{Warm: 1, MaxWorkers: 1})
	require.NoError(t, err)
	defer p.Close()
	st := openStore(t)
	j, _ := job(st, "n = len(inventory_tbl.all())\nanswer_text = str(n)\n", sandbox.Limits{})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, "6", res.Globals["answer_text"])

	_, err = NewSelfPool(Options{Command: []string{"/bin/true"}})
	assert.ErrorContains(t, err, "use NewPool")
}
