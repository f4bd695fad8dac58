package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPutSysDocsWritesAllOrNothing(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	require.NoError(t, s.PutSysDocs(ctx,
		SysDoc{Collection: "runs", ID: "r1", Value: map[string]any{"n": 1}},
		SysDoc{Collection: "runs", ID: "r2", Value: map[string]any{"n": 2}},
	))
	recs, err := s.ListSys("runs")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.JSONEq(t, `{"n": 2}`, string(recs[1].JSON))

	// A batch with one bad document writes none of them, the good ones included.
	err = s.PutSysDocs(ctx,
		SysDoc{Collection: "runs", ID: "r3", Value: map[string]any{"n": 3}},
		SysDoc{Collection: "no such name!", ID: "x", Value: 1},
	)
	require.Error(t, err)
	recs, err = s.ListSys("runs")
	require.NoError(t, err)
	assert.Len(t, recs, 2)
}
