package engine

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/prompts"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

var updateSchemas = flag.Bool("update-schemas", false, "rewrite domains/schema/*.schema.json")

// The JSON Schemas of a domain's files ship in domains/schema, derived from the Go types each
// layer decodes its file into, so an editor can check a domain as it is written and the schemas
// cannot drift from the code (go test ./engine -run TestDomainFileSchemas -update-schemas).
func TestDomainFileSchemas(t *testing.T) {
	for file, f := range map[string]func() (*jsonschema.Schema, error){
		store.DomainFile:     domainSchema,
		store.SeedFile:       func() (*jsonschema.Schema, error) { return jsonschema.For[map[string][]table.Row](nil) },
		contracts.PolicyFile: policySchema,
		prompts.NotesFile:    func() (*jsonschema.Schema, error) { return jsonschema.For[prompts.Notes](nil) },
	} {
		sc, err := f()
		require.NoError(t, err, file)
		if file != store.SeedFile {
			assert.Empty(t, document(file, sc), "every property of %s has a description (schemaDocs)", file)
		}
		got, err := json.MarshalIndent(sc, "", "  ")
		require.NoError(t, err)
		got = append(got, '\n')
		path := filepath.Join("..", "domains", "schema", strings.TrimSuffix(file, ".json")+".schema.json")
		if *updateSchemas {
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, got, 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "run go test ./engine -run TestDomainFileSchemas -update-schemas")
		assert.JSONEq(t, string(want), string(got), "%s is stale: go test ./engine -run TestDomainFileSchemas -update-schemas", path)
	}
}

// fieldDecl has table.Field's shape under another name, so that its own schema can be derived
// while every field declaration inside it (items, fields) refers back to it.
type fieldDecl table.Field

// domainSchema is the schema of domain.json: a field declaration is a $defs entry that refers
// to itself, since jsonschema-go infers no recursive type.
func domainSchema() (*jsonschema.Schema, error) {
	ref := map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[table.Field](): {Ref: "#/$defs/field"}}
	field, err := jsonschema.ForType(reflect.TypeFor[fieldDecl](), &jsonschema.ForOptions{TypeSchemas: ref})
	if err != nil {
		return nil, err
	}
	sc, err := jsonschema.For[store.Domain](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[table.Field](): {Ref: "#/$defs/field"}}})
	if err != nil {
		return nil, err
	}
	// A list's items are a field without a name: the definition "value", whose fields refer back
	// to "field" (an object's keys have names).
	value := field.CloneSchemas()
	withoutRequired(value, "name")
	// A map's values are too.
	for _, s := range []*jsonschema.Schema{field, value} {
		for _, p := range []string{"items", "values"} {
			s.Properties[p] = &jsonschema.Schema{Ref: "#/$defs/value"}
		}
	}
	sc.Defs = map[string]*jsonschema.Schema{"field": field, "value": value}
	return sc, nil
}
