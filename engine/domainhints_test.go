package engine

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/llm/llmtest"
)

// editedDomain is the built-in domain name with each file's text edited by the replacements
// (old, new, ...) given for it.
func editedDomain(t *testing.T, name string, edits map[string][]string) *Engine {
	t.Helper()
	dir, ok := domains.Builtin(name)
	require.True(t, ok)
	files := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(dir, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(dir, path)
		if err != nil {
			return err
		}
		text := string(b)
		if r := edits[path]; r != nil {
			edited := strings.NewReplacer(r...).Replace(text)
			require.NotEqual(t, text, edited, "the edit of %s changes nothing", path)
			text = edited
		}
		files[path] = &fstest.MapFile{Data: []byte(text)}
		return nil
	}))
	dom, errs := LoadDomain(files)
	require.Empty(t, errs)
	return domainEngine(t, dom)
}

// A warehouse: the shop's domain whose "no_match" is "not_stocked". A plan that uses a missing
// row as one is told the warehouse's statuses, in its result and in the model's repair message,
// never the shop's.
func TestRuntimeHintsUseTheDomainsStatuses(t *testing.T) {
	e := editedDomain(t, domains.Inventory, map[string][]string{
		"policy.json":  {`"no_match"`, `"not_stocked"`},
		"prompt.json":  {`"no_match"`, `"not_stocked"`},
		"example.star": {`"no_match"`, `"not_stocked"`},
	})
	bad := "item = inventory_tbl.get({\"name\": \"Butterfly\"})\nSTATUS = \"success\"\nanswer_text = \"We have \" + str(item[\"quantity_in_stock\"]) + \".\"\n"
	res, err := e.Run(t.Context(), Request{Reply: bad})
	require.NoError(t, err)
	require.Equal(t, OutcomeRuntimeError, res.Outcome)
	require.Len(t, res.Diagnostics, 1)
	hint := res.Diagnostics[0].Hint
	assert.Contains(t, hint, `"not_stocked"`)
	assert.NotContains(t, hint, "no_match")
	assert.NotContains(t, hint, `"success"`, "the write status says nothing about a missing row")

	_, srv, err := askWith(t, e, nil, AskRequest{Question: "How many Butterfly?", MaxRepairs: 1}, llmtest.Reply(tagged(bad)), llmtest.Reply(tagged(bad)))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	repair := reqs[1].LastUser()
	assert.Contains(t, repair, `"not_stocked"`)
	assert.NotContains(t, repair, "no_match")
}

// An error raised inside the domain's helpers.star names the file and line there (the plan's
// line is the call's).
func TestHelperErrorNamesItsFileAndLine(t *testing.T) {
	e, _ := newEngine(t)
	res, err := e.Run(t.Context(), Request{Reply: "x = 1\ntxn = next_transaction_id(transactions_tbl, 5)\n"})
	require.NoError(t, err)
	require.Equal(t, OutcomeRuntimeError, res.Outcome)
	d := res.Diagnostics[0]
	assert.Regexp(t, `^helpers\.star:\d+:\d+: .*prefix must be a string`, d.Message)
	assert.Equal(t, 2, d.Line, "the plan's line of the call")

	// An error of the plan itself names no domain file.
	res, err = e.Run(t.Context(), Request{Reply: "x = 1 // 0\n"})
	require.NoError(t, err)
	assert.NotContains(t, res.Diagnostics[0].Message, ".star:")
}

// An error raised inside invariants.star names the file and line there.
func TestInvariantErrorNamesItsFileAndLine(t *testing.T) {
	e := editedDomain(t, domains.Library, map[string][]string{
		"invariants.star": {"def _of(changes, name):", "def loan_status_machine_broken(changes):\n    if changes.get(\"loans\") != None:\n        return 1 // 0\n    return []\n\ndef _of(changes, name):"},
		"policy.json":     {`"params": {"function": "loan_status_machine"}`, `"params": {"function": "loan_status_machine_broken"}`},
	})
	lib, _ := domains.Builtin(domains.Library)
	src, err := fs.ReadFile(lib, "example.star")
	require.NoError(t, err)
	res, err := e.Run(t.Context(), Request{Reply: string(src)})
	require.NoError(t, err)
	require.Equal(t, OutcomeContractViolation, res.Outcome, res.Diagnostics.String())
	assert.Regexp(t, `loan_status_machine_broken: invariants\.star:\d+:\d+: .*division by zero`, res.Diagnostics[0].Message)
}
