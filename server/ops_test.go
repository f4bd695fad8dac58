package server

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
)

var updateREADME = flag.Bool("update", false, "rewrite the README's API table from Operations")

// The rights each operation declares (TEAM.md's table): a change here is a decision, not a typo.
func TestOperationRights(t *testing.T) {
	t.Parallel()
	want := map[string]access.Right{
		"describe": access.Read, "list": access.Read, "show": access.Read, "events": access.Read,
		"check": access.Propose, "run": access.Propose, "ask": access.Propose, "reject": access.Propose,
		"apply": access.Propose, "replay": access.Administer,
	}
	got := map[string]access.Right{}
	for _, op := range Operations {
		got[op.Name] = op.Right
	}
	assert.Equal(t, want, got)
}

// Every operation is reachable on each transport it claims, and nothing is served outside the
// table: the /v1 routes are exactly the table's (a path answers its methods, and 405 with Allow
// for the others), the MCP tools are exactly the table's.
func TestOperationParity(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	doc := f.run(example(t, "02_purchase_wayfarer.star"), "Purchase 3 Wayfarer sunglasses for customer Alice.")
	h := f.srv.Handler()
	serve := func(method, path string) *httptest.ResponseRecorder {
		ctx, cancel := context.WithCancel(testContext(t))
		if path == "/v1/events" {
			cancel() // the stream answers its headers, then ends with the request
		} else {
			defer cancel()
		}
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader("{}")
		} else {
			body = strings.NewReader("")
		}
		req := httptest.NewRequestWithContext(ctx, method, path, body)
		req.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	allowed := map[string][]string{}
	names := map[string]bool{}
	for _, op := range Operations {
		require.False(t, names[op.Name], "operation %s is in the table twice", op.Name)
		names[op.Name] = true
		assert.NotEmpty(t, op.Doc, op.Name)
		assert.Contains(t, []access.Right{access.Read, access.Propose, access.Approve, access.Administer}, op.Right, op.Name)
		require.True(t, strings.HasPrefix(op.Path, "/v1/"), "%s: the API is under /v1", op.Name)
		allowed[op.Path] = append(allowed[op.Path], op.Method)

		path := strings.ReplaceAll(op.Path, "{id}", doc.RunID)
		w := serve(op.Method, path)
		assert.NotEqual(t, http.StatusMethodNotAllowed, w.Code, "%s %s", op.Method, path)
		if w.Code == http.StatusNotFound {
			assert.NotContains(t, w.Body.String(), `"code":"`+CodeNotFound+`"`, "%s %s is routed", op.Method, path)
		}
		if op.Tool == nil {
			assert.NotEmpty(t, op.NoTool, "%s has no MCP tool: the table says why", op.Name)
		} else {
			assert.Empty(t, op.NoTool, op.Name)
		}
	}
	for path, methods := range allowed {
		w := serve(http.MethodDelete, strings.ReplaceAll(path, "{id}", doc.RunID))
		require.Equal(t, http.StatusMethodNotAllowed, w.Code, path)
		sort.Strings(methods)
		assert.Equal(t, strings.Join(methods, ", "), w.Header().Get("Allow"), "%s answers the table's methods only", path)
	}
	_, patterns := f.srv.mux()
	for _, p := range patterns {
		if p != MCPPath && p != "/" {
			assert.Contains(t, allowed, p, "%s is routed outside the operations table", p)
		}
	}
	assert.Len(t, patterns, len(allowed)+2, "the operations' paths, MCP and the review page: %v", patterns)
	for _, path := range []string{"/v1/run", "/v1/runs/" + doc.RunID + "/approve", "/v1/tokens", "/v1/prune", "/v1/describe/x"} {
		w := serve(http.MethodGet, path)
		assert.Equal(t, http.StatusNotFound, w.Code, "%s is not an operation", path)
	}

	want := map[string]bool{}
	for _, op := range Operations {
		if op.Tool != nil {
			want[op.Tool.Name] = true
		}
	}
	for _, overHTTP := range []bool{false, true} {
		tools, err := mcpClient(t, f, overHTTP).ListTools(testContext(t), nil)
		require.NoError(t, err)
		got := map[string]bool{}
		for _, tool := range tools.Tools {
			got[tool.Name] = true
		}
		assert.Equal(t, want, got, "the MCP tools are the table's (over HTTP: %v)", overHTTP)
	}
}

// The README's API table is APITable's output, and the README names every MCP tool.
func TestREADMEAPITable(t *testing.T) {
	t.Parallel()
	const begin, end = "<!-- api table: server.APITable; go test ./server -run TestREADMEAPITable -update rewrites it -->\n", "<!-- end of api table -->\n"
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	readme := string(raw)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	require.True(t, i >= 0 && j > i, "README.md holds the API table between %q and %q", begin, end)
	got, want := readme[i+len(begin):j], APITable()
	if *updateREADME && got != want {
		require.NoError(t, os.WriteFile("../README.md", []byte(readme[:i+len(begin)]+want+readme[j:]), 0o644))
		got = want
	}
	assert.Equal(t, want, got, "run go test ./server -run TestREADMEAPITable -update")
	for _, op := range Operations {
		if op.Tool != nil {
			assert.Contains(t, readme, "`"+op.Tool.Name+"`", "the README names the tool")
		}
	}
}

// Every tool's input and output schema passes the MCP inspector's strict lint (--strict), and
// keeps to one type per property: no boolean schema but as additionalProperties, no type
// arrays, nothing that constrains nothing, no remote $ref; every input property says what it is.
func TestToolSchemasAreStrict(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	tools, err := mcpClient(t, f, false).ListTools(testContext(t), nil)
	require.NoError(t, err)
	require.NotEmpty(t, tools.Tools)
	for _, tool := range tools.Tools {
		for kind, sc := range map[string]any{"inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema} {
			raw, err := json.Marshal(sc)
			require.NoError(t, err)
			var tree any
			require.NoError(t, json.Unmarshal(raw, &tree))
			findings := strictLint(tree, kind == "inputSchema")
			assert.Empty(t, findings, "tool %s, %s", tool.Name, kind)
		}
	}
}

// strictLint returns what the inspector's --strict lint reports of a schema, and more.
func strictLint(root any, describe bool) []string {
	var out []string
	var walk func(node any, path, keyword string, property bool)
	walk = func(node any, path, keyword string, property bool) {
		switch n := node.(type) {
		case bool:
			switch keyword {
			case "additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems":
			default:
				out = append(out, fmt.Sprintf("%s: a bare %v schema", path, n))
			}
			return
		case map[string]any:
			if _, ok := n["type"].([]any); ok {
				out = append(out, fmt.Sprintf("%s: type is a list %v", path, n["type"]))
			}
			if ref, ok := n["$ref"].(string); ok && !strings.HasPrefix(ref, "#") {
				out = append(out, fmt.Sprintf("%s: remote $ref %s", path, ref))
			}
			if !constrains(n) && keyword != "not" {
				out = append(out, fmt.Sprintf("%s: constrains nothing", path))
			}
			if _, typed := n["type"]; !typed {
				if branches, ok := n["anyOf"].([]any); ok {
					for _, b := range branches {
						if bm, ok := b.(map[string]any); !ok || bm["type"] == nil {
							out = append(out, fmt.Sprintf("%s: an anyOf branch without one type", path))
						}
					}
				} else if n["$ref"] == nil && n["enum"] == nil && n["const"] == nil {
					out = append(out, fmt.Sprintf("%s: no type", path))
				}
			}
			if property && describe && n["description"] == nil {
				out = append(out, fmt.Sprintf("%s: no description", path))
			}
			for _, kw := range []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"} {
				if m, ok := n[kw].(map[string]any); ok {
					for name, sub := range m {
						walk(sub, path+"."+name, kw, kw == "properties")
					}
				}
			}
			for _, kw := range []string{"items", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema"} {
				if sub, ok := n[kw]; ok {
					walk(sub, path+"."+kw, kw, false)
				}
			}
			for _, kw := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
				if list, ok := n[kw].([]any); ok {
					for i, sub := range list {
						walk(sub, fmt.Sprintf("%s.%s[%d]", path, kw, i), kw, false)
					}
				}
			}
		}
	}
	walk(root, "", "", false)
	return out
}

// constrains reports whether a schema object has a keyword that constrains a value (the
// inspector's constrainsInstance).
func constrains(n map[string]any) bool {
	for k := range n {
		switch k {
		case "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
			"maxLength", "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "contentSchema",
			"maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
			"required", "dependentRequired", "allOf", "anyOf", "oneOf", "not", "items", "prefixItems", "contains",
			"additionalItems", "unevaluatedItems", "properties", "patternProperties", "additionalProperties",
			"unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "$ref", "$dynamicRef", "$recursiveRef":
			return true
		}
	}
	_, hasIf := n["if"]
	_, hasThen := n["then"]
	_, hasElse := n["else"]
	return hasIf && (hasThen || hasElse)
}

// The lint finds what main's schemas had: a bare true property, a nullable type list, an
// untyped property, an undescribed input property.
func TestStrictLintFindsTheOldSchemas(t *testing.T) {
	t.Parallel()
	var old any
	require.NoError(t, json.Unmarshal([]byte(`{"type": "object", "properties": {
		"key": true,
		"inserted": {"type": ["null", "array"], "items": {"type": "object", "additionalProperties": true}, "description": "rows"},
		"args": {"description": "any value"},
		"limit": {"type": "integer"}
	}, "additionalProperties": false}`), &old))
	findings := strings.Join(strictLint(old, true), "\n")
	for _, want := range []string{".key: a bare true schema", ".inserted: type is a list", ".args: constrains nothing", ".limit: no description"} {
		assert.Contains(t, findings, want)
	}
}

// A tool's output leaves null members out, at every depth, keeping the order of the others,
// their numbers' digits, and HTML characters as they are.
func TestDropNulls(t *testing.T) {
	t.Parallel()
	type inner struct {
		B []int          `json:"b"`
		A map[string]any `json:"a"`
	}
	v := struct {
		Z     string  `json:"z"`
		Null  *int    `json:"null"`
		Inner inner   `json:"inner"`
		List  []any   `json:"list"`
		Big   float64 `json:"big"`
	}{Z: "<a&b>", Inner: inner{A: map[string]any{"x": nil, "y": 9007199254740993}}, List: []any{nil, 1}, Big: 1e21}
	raw, err := dropNulls(v)
	require.NoError(t, err)
	assert.Equal(t, `{"z":"<a&b>","inner":{"a":{"y":9007199254740993}},"list":[null,1],"big":1e+21}`, string(raw))
}

// Errors over MCP name the tools to call next, never HTTP paths; over HTTP they keep the paths.
func TestMCPErrorsHintAtTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	cs := mcpClient(t, f, false)
	doc := f.run(example(t, "02_purchase_wayfarer.star"), "Purchase 3 Wayfarer sunglasses for customer Alice.")
	for _, c := range []struct {
		tool string
		args any
		code string
		hint string
	}{
		{"show_run", RunRef{RunID: "r_0000000000"}, CodeUnknownRun, "list_runs"},
		{"replay_run", RunRef{RunID: "r_0000000000"}, CodeUnknownRun, "list_runs"},
		{"reject_run", RejectInput{RunID: "r_0000000000", Feedback: "no"}, CodeUnknownRun, "list_runs"},
		{"apply_run", ApplyInput{RunID: doc.RunID, Digest: "sha256:0000"}, CodeDigestMismatch, "show_run"},
	} {
		res := call(t, cs, c.tool, c.args, nil)
		require.True(t, res.IsError, c.tool)
		msg := text(res)
		assert.Contains(t, msg, c.code, c.tool)
		assert.Contains(t, msg, c.hint, c.tool)
		assert.NotContains(t, msg, "/v1/", "%s: %s", c.tool, msg)
	}
	r := f.call("GET", "/v1/runs/r_0000000000", nil)
	assert.Contains(t, string(r.body), "GET /v1/runs lists the runs", "HTTP keeps its hint")
}

// replay_run answers as POST /v1/runs/{id}/replay does.
func TestMCPReplayRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	doc := f.run(example(t, "02_purchase_wayfarer.star"), "Purchase 3 Wayfarer sunglasses for customer Alice.")
	var overMCP, overHTTP map[string]any
	res := call(t, mcpClient(t, f, false), "replay_run", RunRef{RunID: doc.RunID}, &overMCP)
	require.False(t, res.IsError, text(res))
	r := f.call("POST", "/v1/runs/"+doc.RunID+"/replay", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r.decode(t, &overHTTP)
	assert.Equal(t, true, overMCP["identical"], "%v", overMCP)
	assert.Equal(t, overHTTP["identical"], overMCP["identical"])
}
