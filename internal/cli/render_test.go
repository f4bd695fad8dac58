package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
)

// A result notes the reads that walked many rows for want of an index, and no small walk.
func TestResultNotesLargeScans(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	res := &engine.Result{Outcome: engine.OutcomeOK, Status: "success", AnswerText: "ok", Scans: []store.Scan{
		{Table: "inventory", Fields: []string{"price"}, Calls: 3, Rows: 3 * 100_000},
		{Table: "transactions", Fields: []string{"customer_name"}, Calls: 1, Rows: 12},
		{Table: "transactions", Fields: []string{"date"}, Calls: 1, Rows: 200_000},
	}}
	require.NoError(t, renderResult(IOStreams{Out: &out, Getenv: func(string) string { return "" }}, res, nil))
	text := out.String()
	assert.Contains(t, text, "Note: a read of inventory filtered on price walked 300000 rows (3 calls)")
	assert.Contains(t, text, `"indexes" (domain.json)`)
	assert.Contains(t, text, "Note: a read of transactions filtered on date walked 200000 rows (1 call)")
	assert.Equal(t, 2, strings.Count(text, "Note:"), text)
}
