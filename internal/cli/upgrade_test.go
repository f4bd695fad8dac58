package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

// addMemberField adds a field to the members table of the library domain in dir.
func addMemberField(t *testing.T, dir string, field map[string]any) {
	t.Helper()
	path := filepath.Join(dir, "domain.json")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var d map[string]any
	require.NoError(t, json.Unmarshal(b, &d))
	for _, tb := range d["tables"].([]any) {
		if tb := tb.(map[string]any); tb["name"] == "members" {
			tb["fields"] = append(tb["fields"].([]any), field)
		}
	}
	b, err = json.MarshalIndent(d, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// A store's domain changes: a definition its rows do not fit is refused with each offender; one
// they fit is refused while a run made under the old one is pending, then recorded with
// --expire-pending, in the audit chain too, and the store runs on the new definition.
func TestDomainUpgrade(t *testing.T) {
	t.Parallel()
	dom := libraryCopy(t)
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init", "--domain", dom).code)
	o := s.run(false, "", "db", "init", "--domain", dom)
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "Try: starplan domain upgrade "+dom+" --db "+s.dir, "db init again points at the upgrade")

	o = s.run(false, "", "exec", writePlan(t, lendPlan))
	require.Equal(t, ExitOK, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	require.True(t, res.Pending)

	// Unchanged, the definition is upgraded to itself only once the pending run is settled.
	o = s.run(false, "", "domain", "upgrade", dom)
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "1 runs made under the current definition are pending ("+res.RunID+")")
	assert.Contains(t, o.err, "--expire-pending")

	// A required field no member has: every member is listed, and nothing changes.
	bad := libraryCopy(t)
	addMemberField(t, bad, map[string]any{"name": "phone", "type": "string", "required": true, "doc": "a phone number"})
	require.NoError(t, os.Remove(filepath.Join(bad, "seed.json"))) // the seed would not fit either
	o = s.run(false, "", "domain", "upgrade", bad, "--expire-pending")
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "members row M001 field phone: is required")
	assert.Contains(t, o.err, "nothing was changed")
	o = s.run(false, "", "runs", "show", res.RunID, "--json")
	assert.Contains(t, o.out, `"state": "pending"`, "a refused upgrade expires nothing")

	// An optional field and a new helper: recorded, the pending run expired with it.
	addMemberField(t, dom, map[string]any{"name": "phone", "type": "string", "doc": "a phone number"})
	helpers, err := os.ReadFile(filepath.Join(dom, "helpers.star"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dom, "helpers.star"), append(helpers, []byte("\ndef shelf_of(book):\n    \"\"\"Where a book stands.\"\"\"\n    return book[\"shelf\"]\n")...), 0o644))
	o = s.run(false, "", "domain", "upgrade", dom, "--expire-pending", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	var rep engine.UpgradeReport
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
	assert.Equal(t, []string{res.RunID}, rep.Expired)
	o = s.run(false, "", "runs", "show", res.RunID, "--json")
	assert.Contains(t, o.out, `"state": "rejected"`)
	o = s.run(false, "", "apply", res.RunID)
	assert.NotEqual(t, ExitOK, o.code, "an expired run cannot be applied: %s", o.out)

	o = s.run(false, "", "describe", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "shelf_of", "the edited helpers.star is picked up")
	assert.Contains(t, o.out, `"phone"`)
	o = s.run(false, "", "runs", "verify", "--json")
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	o = s.run(false, "", "db", "check")
	require.Equal(t, ExitOK, o.code, o.out+o.err)

	// The store runs on the new definition: the new field is known (and, by the library's
	// rules, immutable), a write is applied, the seed restores.
	o = s.run(false, "", "exec", "--apply", writePlan(t, `m = members_tbl.get({"member_id": "M001"})
members_tbl.update({"phone": "+44 20 7946 0000"}, m)
STATUS, answer_text = "success", "Saved."
`))
	assert.Equal(t, ExitContract, o.code, o.out+o.err)
	assert.Contains(t, o.out, "the plan changes phone of members row")
	o = s.run(false, "", "exec", "--apply", writePlan(t, lendPlan)) // the expired loan, made again
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	assert.Contains(t, o.out, `"applied": true`)
	require.Equal(t, ExitOK, s.run(false, "", "db", "seed", "--force").code)
	o = s.run(false, "", "db", "check")
	require.Equal(t, ExitOK, o.code, o.out+o.err)
}

// An upgrade to another domain is refused: it is not a new version of the store's.
func TestDomainUpgradeRefusesAnotherDomain(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	o := s.run(false, "", "domain", "upgrade", libraryCopy(t))
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "the store holds the inventory domain")
	assert.Contains(t, o.err, "nothing was changed")
}

// While a server holds the store, --domain commands and domain upgrade run here, not in the
// server: check and exec --domain without --db need no store; an upgrade of the served store is
// refused, naming the server; so is exec --domain on it.
func TestDomainCommandsBesideAServer(t *testing.T) {
	t.Parallel()
	f := startServe(t) // the inventory store
	dom := libraryCopy(t)
	o := f.runOut("check", "--domain", dom, writePlan(t, lendPlan))
	require.Equal(t, ExitOK, o.code, "checked here, against the library, not the served shop: %s", o.out+o.err)
	o = f.runOut("exec", "--domain", dom, writePlan(t, lendPlan))
	assert.Equal(t, ExitInternal, o.code, "--db names the served store: %s", o.out)
	assert.Contains(t, o.err, "is held by `starplan serve`")
	o = f.runOut("domain", "upgrade", "../../domains/inventory")
	assert.Equal(t, ExitInternal, o.code, o.out)
	assert.Contains(t, o.err, "is held by `starplan serve`")
	assert.Contains(t, o.err, "stop the server")
}
