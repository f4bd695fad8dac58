package prompts

import (
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
)

// Every embedded domain file belongs to a known domain and notes exactly its statuses, so a
// renamed or added STATUS cannot silently lose its tone example.
func TestDomainNotesMatchTheContracts(t *testing.T) {
	files, err := fs.Glob(templateFS, "templates/domains/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "templates/domains/"), ".json")
		policy, err := contracts.Load(name)
		require.NoError(t, err, f)
		notes, err := loadDomainNotes(name)
		require.NoError(t, err, f)
		assert.ElementsMatch(t, policy.Contract.Statuses, slices.Collect(maps.Keys(notes.Statuses)), f)
		for s, n := range notes.Statuses {
			assert.NotEmpty(t, n.When, "%s: %s", f, s)
			// The tone example is itself a valid answer under its STATUS.
			ds, err := policy.Check(contracts.Input{Globals: map[string]any{
				contracts.AnswerGlobal: n.Answer, contracts.StatusGlobal: s,
			}})
			require.NoError(t, err)
			assert.Empty(t, ds, "%s: %s", f, s)
		}
	}
}
