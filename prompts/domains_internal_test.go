package prompts

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/table"
)

// Every built-in domain notes exactly its statuses, each with a tone example that is a valid
// answer, so a renamed or added STATUS cannot silently lose its note.
func TestBuiltinDomainNotesMatchTheirContracts(t *testing.T) {
	for _, name := range domains.Names() {
		policy, err := contracts.Load(name)
		require.NoError(t, err)
		// The engine binds a domain's starlark rules from its invariants.star; an answer alone
		// changes nothing, so here they may find nothing.
		none := map[string]contracts.Invariant{}
		for _, fn := range policy.InvariantFunctions() {
			none[fn] = func(context.Context, table.ChangeSet, table.View) ([]contracts.Finding, error) { return nil, nil }
		}
		require.NoError(t, policy.BindInvariants(none))
		def := builtinDefinition(name)
		require.Contains(t, def, NotesFile, name)
		assert.Empty(t, CheckNotes(def, policy), name)
	}
}

// CheckNotes names each kind of problem.
func TestCheckNotes(t *testing.T) {
	policy, err := contracts.Load(domains.Inventory)
	require.NoError(t, err)
	def := builtinDefinition(domains.Inventory)
	good := def[NotesFile]

	def[NotesFile] = `{"statuses": {`
	assert.ErrorContains(t, CheckNotes(def, policy)[0], "prompt.json")

	def[NotesFile] = `{"statuses": {"success": {"when": "", "answer": "Done."}, "sold_out": {"when": "x", "answer": "y"}}}`
	var msgs []string
	for _, e := range CheckNotes(def, policy) {
		msgs = append(msgs, e.Error())
	}
	assert.Contains(t, msgs, `prompt.json: STATUS "no_match" of the contract has no note`)
	assert.Contains(t, msgs, `prompt.json: STATUS "sold_out" is not one of the contract's (success, no_match, insufficient_stock, invalid_request, unsupported_intent)`)
	assert.Contains(t, msgs, `prompt.json: STATUS "success" has no "when"`)

	def[NotesFile] = good[:len(good)/2]
	assert.ErrorContains(t, CheckNotes(def, policy)[0], "prompt.json")
	def[NotesFile] = strings.Replace(good, `"Done: 1 Moon for $120.00. Thank you!"`, `"One. Two. Three."`, 1)
	require.NotEqual(t, good, def[NotesFile])
	assert.ErrorContains(t, CheckNotes(def, policy)[0], `the example answer for "success" breaks the contract`)
	delete(def, NotesFile)
	assert.Empty(t, CheckNotes(def, policy), "a domain may have no notes")
}
