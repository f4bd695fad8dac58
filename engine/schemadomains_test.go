package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// shippedDomains are the domain directories of the repository: domains/* and the test domains.
func shippedDomains(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, pattern := range []string{"../domains/*/domain.json", "../testdata/domains/*/domain.json"} {
		m, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, f := range m {
			dirs = append(dirs, filepath.Dir(f))
		}
	}
	require.GreaterOrEqual(t, len(dirs), 3)
	return dirs
}

// resolvedSchema reads and resolves domains/schema/NAME.schema.json.
func resolvedSchema(t *testing.T, file string) *jsonschema.Resolved {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "domains", "schema", strings.TrimSuffix(file, ".json")+".schema.json"))
	require.NoError(t, err)
	var sc jsonschema.Schema
	require.NoError(t, json.Unmarshal(b, &sc))
	r, err := sc.Resolve(nil)
	require.NoError(t, err, file)
	return r
}

// Every shipped domain's JSON files are valid under the published schemas, as domain check
// finds them: an editor using the schemas never flags a file the tool accepts.
func TestShippedDomainsFitTheSchemas(t *testing.T) {
	for _, dir := range shippedDomains(t) {
		if _, err := os.Stat(filepath.Join(dir, "policy.json")); err == nil {
			_, errs := LoadDomain(os.DirFS(dir))
			require.Empty(t, errs, "%s: domain check", dir)
		} else {
			_, err := store.LoadDomain(os.DirFS(dir)) // a test domain of the store alone
			require.NoError(t, err, dir)
		}
		for _, file := range []string{"domain.json", "seed.json", "policy.json", "prompt.json"} {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if os.IsNotExist(err) {
				continue
			}
			require.NoError(t, err)
			var v any
			require.NoError(t, json.Unmarshal(b, &v))
			assert.NoError(t, resolvedSchema(t, file).Validate(v), "%s/%s", dir, file)
		}
	}
}

// The schemas and domain check agree on edits of a shipped domain: what one accepts the other
// does, what one refuses the other does.
func TestSchemasAgreeWithDomainCheck(t *testing.T) {
	read := func(file string) map[string]any {
		b, err := os.ReadFile(filepath.Join("..", "domains", "library", file))
		require.NoError(t, err)
		var v map[string]any
		require.NoError(t, json.Unmarshal(b, &v))
		return v
	}
	for _, tt := range []struct {
		name, file string
		edit       func(v map[string]any)
		ok         bool
	}{
		{"no limits", "policy.json", func(v map[string]any) { delete(v, "limits") }, true},
		{"no rules", "policy.json", func(v map[string]any) { delete(v, "rules"); delete(v, "approval") }, true},
		{"a read-only domain", "policy.json", func(v map[string]any) {
			delete(v["contract"].(map[string]any), "write_status")
			delete(v, "rules")
			delete(v, "approval")
		}, true},
		{"an unknown rule kind", "policy.json", func(v map[string]any) {
			v["rules"].([]any)[0].(map[string]any)["kind"] = "only_table"
		}, false},
		{"no statuses", "policy.json", func(v map[string]any) { delete(v["contract"].(map[string]any), "statuses") }, false},
		{"a list of strings (authors)", "domain.json", func(map[string]any) {}, true},
		{"a field without a type", "domain.json", func(v map[string]any) {
			delete(v["tables"].([]any)[0].(map[string]any)["fields"].([]any)[1].(map[string]any), "type")
		}, false},
		{"a table without a key", "domain.json", func(v map[string]any) { delete(v["tables"].([]any)[0].(map[string]any), "key") }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("..", "domains", "library"))))
			v := read(tt.file)
			tt.edit(v)
			b, err := json.Marshal(v)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, tt.file), b, 0o644))
			if tt.file == "policy.json" && v["rules"] == nil {
				require.NoError(t, os.Remove(filepath.Join(dir, "invariants.star"))) // its functions would be unused
			}
			_, errs := LoadDomain(os.DirFS(dir))
			var generic any
			require.NoError(t, json.Unmarshal(b, &generic))
			serr := resolvedSchema(t, tt.file).Validate(generic)
			assert.Equal(t, tt.ok, len(errs) == 0, "domain check: %v", errs)
			assert.Equal(t, tt.ok, serr == nil, "the schema: %v", serr)
		})
	}
}
