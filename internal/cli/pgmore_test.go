package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

// inventoryWithColor is a copy of the inventory domain whose inventory table has an optional,
// indexed color field of at most 12 characters (required: a required one), which its policy lets
// a plan change.
func inventoryWithColor(t *testing.T, required bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "inventory")
	require.NoError(t, os.CopyFS(dir, os.DirFS("../../domains/inventory")))
	path := filepath.Join(dir, "domain.json")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var d map[string]any
	require.NoError(t, json.Unmarshal(b, &d))
	for _, tb := range d["tables"].([]any) {
		if tb := tb.(map[string]any); tb["name"] == "inventory" {
			tb["fields"] = append(tb["fields"].([]any), map[string]any{"name": "color", "type": "string", "max_len": 12, "required": required, "doc": "the frame's color"})
			tb["indexes"] = append(tb["indexes"].([]any), "color")
		}
	}
	b, err = json.MarshalIndent(d, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	if required {
		require.NoError(t, os.Remove(filepath.Join(dir, "seed.json"))) // the seed would not fit either
	}
	// The policy lets the color change too (only quantity_in_stock may, in the shipped one).
	policy := filepath.Join(dir, "policy.json")
	b, err = os.ReadFile(policy)
	require.NoError(t, err)
	const only = `"params": {"table": "inventory", "fields": ["quantity_in_stock"]}`
	require.Contains(t, string(b), only)
	b = []byte(strings.Replace(string(b), only, `"params": {"table": "inventory", "fields": ["quantity_in_stock", "color"]}`, 1))
	require.NoError(t, os.WriteFile(policy, b, 0o644))
	return dir
}

// domain upgrade on a PostgreSQL store: refused while a run is pending, and with every offender
// when the rows do not fit (a required field no row has), writing nothing; recorded with
// --expire-pending when they fit; then exec writes the new field and a plan finds rows by it,
// and db check finds the store sound.
func TestDomainUpgradeOnPostgreSQL(t *testing.T) {
	t.Parallel()
	s := &session{t: t, dir: filepath.Join(t.TempDir(), "unused"), db: pgURL(t)}
	require.Equal(t, ExitOK, s.run(false, "", "db", "init", "--domain", "../../domains/inventory").code)
	o := s.run(false, "", "exec", "--request", "Purchase 3 Wayfarer sunglasses for customer Alice.", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	require.True(t, res.Pending)

	dom := inventoryWithColor(t, false)
	o = s.run(false, "", "domain", "upgrade", dom)
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "1 runs made under the current definition are pending ("+res.RunID+")")

	o = s.run(false, "", "domain", "upgrade", inventoryWithColor(t, true), "--expire-pending")
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "inventory row SG001 field color: is required")
	assert.Contains(t, o.err, "nothing was changed")
	o = s.run(false, "", "runs", "show", res.RunID, "--json")
	assert.Contains(t, o.out, `"state": "pending"`, "a refused upgrade expires nothing")
	o = s.run(false, "", "describe", "--json")
	assert.NotContains(t, o.out, `"color"`)

	o = s.run(false, "", "domain", "upgrade", dom, "--expire-pending", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	var rep engine.UpgradeReport
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
	assert.Equal(t, []string{res.RunID}, rep.Expired)
	o = s.run(false, "", "describe", "--json")
	assert.Contains(t, o.out, `"color"`)

	o = s.run(false, "", "exec", "--apply", writePlan(t, `item = inventory_tbl.get({"item_id": "SG002"})
inventory_tbl.update({"color": "tortoise"}, item)
STATUS, answer_text = "success", "Painted."
`))
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	assert.Contains(t, o.out, `"applied": true`)
	o = s.run(false, "", "exec", writePlan(t, `rows = inventory_tbl.search({"color": "tortoise"})
STATUS, answer_text = "success", ",".join([r["item_id"] for r in rows])
`))
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	assert.Contains(t, o.out, `"answer_text": "SG002"`)
	o = s.run(false, "", "db", "export", "inventory", "--format", "csv")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "item_id,name,description,quantity_in_stock,price,color\n")
	assert.Contains(t, o.out, ",tortoise\n")
	o = s.run(false, "", "db", "check")
	require.Equal(t, ExitOK, o.code, o.out+o.err)
}

// db import and export of CSV on a PostgreSQL store: a CSV export imports back (into a second
// store) as the same bytes; a broken file is refused with its line, and nothing is written.
func TestCSVOnPostgreSQL(t *testing.T) {
	t.Parallel()
	s := &session{t: t, dir: filepath.Join(t.TempDir(), "unused"), db: pgURL(t)}
	require.Equal(t, ExitOK, s.run(false, "", "db", "init", "--domain", "../../domains/inventory").code)
	o := s.run(false, "", "db", "export", "inventory", "--format", "csv")
	require.Equal(t, ExitOK, o.code, o.err)
	export := o.out
	assert.Contains(t, export, "item_id,name,description,quantity_in_stock,price\nSG001,")

	o = s.run(false, "", "db", "import", "inventory", writeFile(t, "new.csv", "item_id,name,description,quantity_in_stock,price\nSG050,Round,\"Round, wire\",4,99.5\n,Keyless,,1,2\n"))
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "2 inserted")
	o = s.run(false, "", "db", "export", "inventory", "--format", "csv")
	assert.Contains(t, o.out, "SG050,Round,\"Round, wire\",4,99.5\nSG051,Keyless,,1,2.0\n")
	after := o.out

	before := s.run(false, "", "db", "dump", "--json").out
	o = s.run(false, "", "db", "import", "inventory", writeFile(t, "broken.csv", "item_id,name,description,quantity_in_stock,price\nSG060,A,d,1,1\nSG061,\"B,d,1,1\n"))
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "line 3")
	assert.Contains(t, o.err, "malformed CSV")
	assert.Contains(t, o.err, "nothing was imported")
	o = s.run(false, "", "db", "import", "inventory", writeFile(t, "bad.csv", "item_id,name,description,quantity_in_stock,price\nSG060,A,d,1,1\nSG061,B,d,-1,1\n"))
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, `record 2, line 3: field "quantity_in_stock" = -1`)
	assert.Equal(t, before, s.run(false, "", "db", "dump", "--json").out, "nothing was written")

	// The export imports into a second store (a schema of its own) as the same bytes.
	two := &session{t: t, dir: s.dir, db: s.db + "&schema=two"}
	require.Equal(t, ExitOK, two.run(false, "", "db", "init", "--domain", "../../domains/inventory", "--empty").code)
	o = two.run(false, "", "db", "import", "inventory", writeFile(t, "all.csv", after), "--replace")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Equal(t, after, two.run(false, "", "db", "export", "inventory", "--format", "csv").out)
}
