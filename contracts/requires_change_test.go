package contracts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/table"
)

// A shop whose "purchased" says data changed and whose "answered" says nothing did.
const requiresChange = `{"name": "shop", "contract": {"statuses": ["purchased", "answered", "not_found"], "write_status": "purchased",
  "answer_max_sentences": 2, "answer_max_chars": 400, "requires_change": {"purchased": true}}}`

func TestRequiresChange(t *testing.T) {
	d, err := contracts.Parse(strings.NewReader(requiresChange))
	require.NoError(t, err)
	sale := table.ChangeSet{"orders": &table.TableChanges{Key: "id", Inserted: []table.Row{{"id": 1}}}}

	// A purchase that staged nothing is a violation; with its change it is not.
	ds, err := d.Check(contracts.Input{Globals: globals("purchased", "Done."), Changes: table.ChangeSet{}})
	require.NoError(t, err)
	assert.Equal(t, []string{contracts.CodeChangeMissing}, codes(ds))
	assert.Contains(t, ds[0].Hint, `"answered"`, "the hint names the domain's other statuses")
	ds, err = d.Check(contracts.Input{Globals: globals("purchased", "Done."), Changes: sale})
	require.NoError(t, err)
	assert.Empty(t, ds)
	ds, err = d.Check(contracts.Input{Globals: globals("not_found", "Sorry."), Changes: table.ChangeSet{}})
	require.NoError(t, err)
	assert.Empty(t, ds, "a status it does not name may change nothing")

	// false: the write status says nothing changed, and the plan staged writes.
	d, err = contracts.Parse(strings.NewReader(strings.Replace(requiresChange, `{"purchased": true}`, `{"purchased": false}`, 1)))
	require.NoError(t, err)
	ds, err = d.Check(contracts.Input{Globals: globals("purchased", "Done."), Changes: sale})
	require.NoError(t, err)
	assert.Equal(t, []string{contracts.CodeChangeUnexpected}, codes(ds))
	ds, err = d.Check(contracts.Input{Globals: globals("purchased", "Done."), Changes: table.ChangeSet{}})
	require.NoError(t, err)
	assert.Empty(t, ds)

	// The rule is in the contract's words only where a domain declares it.
	var docs []string
	for _, r := range d.Describe() {
		docs = append(docs, r.Name)
	}
	assert.Contains(t, docs, "status_requires_change")
	for _, r := range loadInventory(t).Describe() {
		assert.NotEqual(t, "status_requires_change", r.Name)
	}
}

func TestRequiresChangeParseErrors(t *testing.T) {
	for _, tt := range []struct{ json, want string }{
		{strings.Replace(requiresChange, `{"purchased": true}`, `{"bought": true}`, 1), `names "bought", which is not one of contract.statuses`},
		{strings.Replace(requiresChange, `{"purchased": true}`, `{"answered": true}`, 1), `"answered" requires a change, but only the write status "purchased"`},
	} {
		_, err := contracts.Parse(strings.NewReader(tt.json))
		assert.ErrorContains(t, err, tt.want)
	}
}
