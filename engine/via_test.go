package engine

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The change set says which helper wrote which row, and the plan's own writes name none: in the
// run's result, in its record, and in the document a reviewer reads.
func TestChangeSetRecordsTheWritingHelper(t *testing.T) {
	e := retailEngine(t, nil)
	res := runPlan(t, e, `id = pay("O1", "PM1")
credits_tbl.insert({"credit_id": "CR9", "customer_id": "C1", "amount": 1.0})
STATUS, answer_text = "success", "Paid with " + id + "."`)
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	require.Len(t, res.Changes["payments"].Inserted, 1)
	payment := res.Changes["payments"].Inserted[0]["payment_id"]
	assert.Equal(t, "pay", res.Changes["payments"].RowVia(payment))
	assert.Equal(t, map[string]string{payment.(string): "pay"}, res.Changes["payments"].Via)
	require.Len(t, res.Changes["credits"].Inserted, 1)
	assert.Nil(t, res.Changes["credits"].Via, "a plan's own write names no helper")

	rec, err := e.Record(res.RunID)
	require.NoError(t, err)
	assert.Equal(t, "pay", rec.Changes["payments"].RowVia(payment))
	assert.Nil(t, rec.Changes["credits"].Via)

	_, err = e.Apply(context.Background(), res.RunID)
	require.NoError(t, err)
	rec, err = e.Record(res.RunID)
	require.NoError(t, err)
	require.True(t, rec.Applied)
	assert.Equal(t, "pay", rec.Changes["payments"].RowVia(payment), "the applied run keeps who wrote what")
}

// The list of runs a reviewer picks from names whom each run acts for.
func TestRunListShowsTheSubject(t *testing.T) {
	e := libraryEngine(t)
	src, err := os.ReadFile("../domains/library/example.star")
	require.NoError(t, err)
	plan := "<execute_python>\n" + string(src) + "\n</execute_python>"
	for _, subject := range []string{"M001", ""} {
		res, err := e.Run(context.Background(), Request{Reply: plan, Subject: subject})
		require.NoError(t, err)
		require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	}
	page, err := e.ListRuns(ListOptions{})
	require.NoError(t, err)
	var subjects []string
	for _, r := range page.Runs {
		subjects = append(subjects, r.Subject)
	}
	assert.ElementsMatch(t, []string{"M001", ""}, subjects)
	runs, err := e.Runs()
	require.NoError(t, err)
	subjects = nil
	for _, r := range runs {
		subjects = append(subjects, r.Subject)
	}
	assert.ElementsMatch(t, []string{"M001", ""}, subjects)
}
