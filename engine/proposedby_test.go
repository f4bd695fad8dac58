package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
)

// Whoever proposes a run is recorded as its proposed_by; a run without one is the local user's.
func TestRunRecordsItsProposer(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	for _, c := range []struct {
		by   access.Principal
		want string
	}{{access.Principal{Name: "agent-1", Role: access.Proposer}, "agent-1"}, {access.Principal{}, access.Local().Name}} {
		res, err := e.Run(ctx, Request{Reply: example(t, "02_purchase_wayfarer.star"), By: c.by})
		require.NoError(t, err)
		rec, err := e.Record(res.RunID)
		require.NoError(t, err)
		assert.Equal(t, c.want, rec.ProposedBy)
	}
}
