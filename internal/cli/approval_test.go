package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

// The local user proposes and approves its own runs (exec's [y/N], apply), runs show says who,
// and runs verify and db check both find a record edited through the store's system-document API.
func TestLocalUserApprovesAndTheChainFindsAnEdit(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	local := access.Local().Name
	o := s.run(true, "y\n", "exec", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Applied run r_")

	o = s.run(false, "", "exec", example("02_purchase_wayfarer.star"))
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	assert.Equal(t, local, res.ProposedBy)
	o = s.run(true, "", "runs", "show", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Who: proposed by "+local+"; awaiting 1 approval")
	o = s.run(false, "", "apply", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)
	o = s.run(true, "", "runs", "show", res.RunID)
	assert.Contains(t, o.out, "Who: proposed by "+local+"; approved by "+local)

	o = s.run(true, "", "describe")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "four_eyes")
	assert.Contains(t, o.out, "admins and the local user may approve their own runs")

	o = s.run(true, "", "runs", "verify")
	require.Equal(t, ExitOK, o.code, o.err+o.out)
	assert.Contains(t, o.out, "The chain and every record match.")
	o = s.run(true, "", "db", "check")
	require.Equal(t, ExitOK, o.code, o.out)

	// An edit through the store's API: the store's own digests follow it, the chain does not.
	st, err := bolt.Open(s.dir, bolt.Options{})
	require.NoError(t, err)
	var rec map[string]any
	ok, err := st.GetSys(engine.AuditCollection, res.RunID, &rec)
	require.NoError(t, err)
	require.True(t, ok)
	rec["approved_by"] = []string{"someone-else"}
	require.NoError(t, st.PutSysDocs(context.Background(), store.SysDoc{Collection: engine.AuditCollection, ID: res.RunID, Value: rec,
		Index: &store.SysIndex{Order: "x", Group: engine.StateApplied}}))
	require.NoError(t, st.Close())

	o = s.run(true, "", "db", "check")
	assert.Equal(t, ExitInternal, o.code)
	assert.Contains(t, o.out, "chain:  run "+res.RunID+": its record does not match the hash chained")
	o = s.run(true, "", "runs", "verify")
	assert.Equal(t, ExitInternal, o.code)
	assert.Contains(t, o.err, "Error: the audit log does not match its hash chain: run "+res.RunID)
	o = s.run(false, "", "runs", "verify")
	assert.Equal(t, ExitInternal, o.code)
	var rep engine.ChainReport
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
	assert.Equal(t, res.RunID, rep.Problems[0].RunID)
}
