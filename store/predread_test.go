package store

import (
	"testing"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The same question asked again is recorded once; past MaxPredReads, or a read of more than
// BigRead rows, the run depends on the whole table from the oldest version seen.
func TestPredReadsStayBounded(t *testing.T) {
	var r PredReads
	r.Note(PredRead{Kind: PredCount, Ver: 5, N: 1, Where: map[string]any{"a": "x"}})
	r.Note(PredRead{Kind: PredCount, Ver: 5, N: 1, Where: map[string]any{"a": "x"}})
	require.Len(t, r.Preds, 1)
	for i := range MaxPredReads {
		r.Note(PredRead{Kind: PredCount, Ver: int64(7 + i), N: 1})
	}
	reads, all, ver := r.Pending("t")
	assert.Nil(t, reads)
	assert.True(t, all)
	assert.Equal(t, int64(5), ver)

	var big PredReads
	big.Note(PredRead{Kind: PredRows, Ver: 9, N: BigRead + 1})
	_, all, ver = big.Pending("t")
	assert.True(t, all)
	assert.Equal(t, int64(9), ver)
}

// A recorded walk comes back from its Pending form as the same check.
func TestPredReadRoundTrip(t *testing.T) {
	sc, err := CompileSchema(&table.Schema{Name: "t", Key: "id", Fields: []table.Field{{Name: "id", Type: table.TypeString}}})
	require.NoError(t, err)
	o := &ReadObs{}
	o.Add("a", 3)
	o.Add("b", 4)
	o.StopAt("b")
	var r PredReads
	r.NoteWalk(map[string]any{"id": "a"}, false, o, 4)
	reads, all, _ := r.Pending("t")
	require.False(t, all)
	require.Len(t, reads, 1)
	pc, err := CheckPred(sc, reads[0])
	require.NoError(t, err)
	assert.Equal(t, PredCheck{Schema: sc, Kind: PredRows, Where: map[string]any{"id": "a"}, M: pc.M, To: "b", Ver: 4, N: 2, Digest: ReadDigest([]VerKey{{"b", 4}, {"a", 3}})}, pc)
	assert.Contains(t, pc.Describe(), `t rows matching {"id":"a"} up to "b" changed`)
	_, err = CheckPred(sc, PendingRead{Table: "t", Pred: "other"})
	assert.ErrorContains(t, err, `unknown kind "other"`)
}
