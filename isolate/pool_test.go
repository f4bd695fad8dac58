package isolate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/sandbox"
)

func TestSmoke(t *testing.T) {
	p := newPool(t, Options{})
	t.Log(p.Warnings())
	st := openStore(t)
	j, _ := job(st, "n = len(inventory_tbl)\nrow = inventory_tbl.get_by_key('SG001')\nanswer_text = row['name']\nSTATUS = 'success'\n", sandbox.Limits{})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	assert.Equal(t, int64(6), res.Globals["n"])
	t.Log(res.Globals, res.Duration)
}
