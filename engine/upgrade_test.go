package engine

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/store/bolt"
)

// An upgrade is chained: the chain's last entry names the new definition's digest and who, it
// links to the entry before it, and the store reopens with the new definition.
func TestUpgradeDomainIsChained(t *testing.T) {
	fsys, ok := domains.Builtin(domains.Library)
	require.True(t, ok)
	dom, errs := LoadDomain(fsys)
	require.Empty(t, errs)
	dir := t.TempDir()
	st, err := bolt.Open(dir, bolt.Options{Domain: dom})
	require.NoError(t, err)
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	res, err := e.Run(context.Background(), Request{Reply: "STATUS = \"not_found\"\nanswer_text = \"Sorry, we have no such book.\"\n"})
	require.NoError(t, err)
	require.Equal(t, OutcomeOK, res.Outcome)

	next := *dom
	next.Definition = maps.Clone(dom.Definition)
	next.Definition[InvariantsFile] += "\n# reviewed\n"
	rep, err := e.UpgradeDomain(context.Background(), &next, UpgradeOptions{})
	require.NoError(t, err)
	assert.Equal(t, DefinitionDigest(next.Definition), rep.Definition)
	assert.NotEqual(t, DefinitionDigest(dom.Definition), rep.Definition)
	require.NoError(t, e.Close())
	require.NoError(t, st.Close())

	st, err = bolt.Open(dir, bolt.Options{MustExist: true})
	require.NoError(t, err)
	defer st.Close()
	assert.Equal(t, next.Definition, st.Domain().Definition)
	e, err = New(st, Options{})
	require.NoError(t, err)
	defer e.Close()
	v, err := e.VerifyChain()
	require.NoError(t, err)
	assert.True(t, v.OK(), "%v", v.Problems)
	entries, err := st.ListSys(ChainCollection)
	require.NoError(t, err)
	var last ChainEntry
	for _, d := range entries {
		if !strings.HasPrefix(d.ID, "0") {
			continue // the head
		}
		last = ChainEntry{}
		require.NoError(t, json.Unmarshal(d.JSON, &last))
	}
	assert.Equal(t, ChainDomain, last.Event)
	assert.Equal(t, rep.Definition, last.Definition)
	assert.Equal(t, "local:", last.By[:6])
	assert.Empty(t, last.RunID)
}
