package prompts_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/prompts"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/table"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./prompts/ -update to create it")
	assert.Equal(t, string(want), got, "the rendered text changed; if that is intended, run go test ./prompts/ -update and review the diff")
}

func TestSystemGolden(t *testing.T) {
	golden(t, "system.golden", demoSystem(t))
}

// MaxSystemChars is the budget of the demo store's system prompt: 2,000 tokens at about four
// characters a token.
const MaxSystemChars = 8000

func TestSystemBudget(t *testing.T) {
	s := demoSystem(t)
	chars := utf8.RuneCountInString(s)
	t.Logf("system prompt: %d characters, ~%d tokens (chars/4)", chars, chars/4)
	assert.LessOrEqual(t, chars, MaxSystemChars)
}

// The reference names every documented helper of the sandbox's registry and no hidden one.
func TestSystemNamesEveryDocumentedHelper(t *testing.T) {
	in := demoInput(t, openDemo(t))
	s, err := prompts.System(in)
	require.NoError(t, err)
	for _, h := range in.Registry {
		if h.Hidden {
			if !isUniverse(h.Name) {
				assert.NotContains(t, s, h.Name, "hidden name %s is in the prompt", h.Name)
			}
			continue
		}
		assert.Contains(t, s, h.Name)
		if h.Group != builtins.GroupContract && h.Group != builtins.GroupTable {
			assert.Contains(t, s, h.Signature, "the signature of %s", h.Name)
		}
		if h.Group != builtins.GroupContract && h.Group != builtins.GroupLanguage && !isTableValue(h) {
			assert.Contains(t, s, h.Doc, "the doc of %s", h.Name)
		}
	}
}

func isUniverse(name string) bool { _, ok := starlark.Universe[name]; return ok }

func isTableValue(h builtins.Helper) bool {
	return h.Group == builtins.GroupTable && !strings.Contains(h.Name, ".")
}

var callRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.]*)\(`)

// Everything in the prompt that looks like a call names something the sandbox has: a documented
// helper, a Starlark builtin, a method of a table value, or a member of a module named on the
// same line. The prompt cannot promise a helper the sandbox lacks.
func TestSystemCallsOnlyRegisteredNames(t *testing.T) {
	in := demoInput(t, openDemo(t))
	s, err := prompts.System(in)
	require.NoError(t, err)
	docs := in.Registry.Documented()
	modules := map[string][]string{}
	for _, h := range docs {
		if m, ok := h.Value.(starlark.HasAttrs); ok && h.Group == builtins.GroupModule {
			modules[h.Name] = m.AttrNames()
		}
	}
	known := func(line, name string) bool {
		if _, ok := docs.Lookup(name); ok || isUniverse(name) {
			return true
		}
		if recv, method, ok := strings.Cut(name, "."); ok {
			if h, ok := docs.Lookup(recv); ok && isTableValue(h) {
				_, ok := docs.Lookup("tbl." + method)
				return ok
			}
			return contains(modules[recv], method)
		}
		for mod, attrs := range modules {
			if strings.Contains(line, mod+":") && contains(attrs, name) {
				return true
			}
		}
		return false
	}
	calls := 0
	for _, line := range strings.Split(s, "\n") {
		for _, m := range callRE.FindAllStringSubmatch(line, -1) {
			calls++
			assert.True(t, known(line, m[1]), "%s( is not in the registry: %q", m[1], line)
		}
	}
	assert.Greater(t, calls, 20, "the reference should show the helpers' signatures")
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestSystemRendersTheContractAndEveryPolicyRule(t *testing.T) {
	in := demoInput(t, openDemo(t))
	s, err := prompts.System(in)
	require.NoError(t, err)
	docs := in.Policy.Describe()
	require.NotEmpty(t, docs)
	for _, d := range docs {
		assert.Contains(t, s, "- "+d.Doc+"\n", "rule %s", d.Name)
	}
	for _, status := range in.Policy.Contract.Statuses {
		assert.Regexp(t, `(?m)^- `+status+`: .+\. ".+"$`, s, "status %s has a meaning and a tone example", status)
	}
}

func TestSystemRendersTheDialect(t *testing.T) {
	s := demoSystem(t)
	rejected := lineWith(t, s, "Rejected: ")
	for _, p := range sandbox.Pythonisms {
		assert.Contains(t, rejected, p.Word)
	}
	assert.Contains(t, lineWith(t, s, "Rewritten for you: "), "import math/json/re")
	assert.Contains(t, lineWith(t, s, "Starlark builtins: "), " enumerate,")
}

// The rewrites the prompt promises really happen: each snippet written the Python way is
// rewritten by pycompat under the rule the prompt describes.
func TestSystemPromisedRewritesHappen(t *testing.T) {
	modules := map[string][]string{"math": {"floor"}, "json": {"dumps"}, "re": {"search"}}
	for rule, src := range map[string]string{
		pycompat.RuleFString:        `s = f"{x:.2f}"`,
		pycompat.RulePercentFormat:  `s = "%.2f" % x`,
		pycompat.RuleStrFormat:      `s = "{:>5}".format(x)`,
		pycompat.RuleIsNone:         `b = x is None`,
		pycompat.RuleGenexp:         `t = sum(r for r in rows)`,
		pycompat.RuleChainedCompare: `b = 0 < x < 5`,
		pycompat.RuleImport:         `import math`,
	} {
		res := pycompat.Translate(src+"\n", pycompat.Options{Modules: modules})
		require.Empty(t, res.Diagnostics, src)
		require.Len(t, res.Rewrites, 1, src)
		assert.Equal(t, rule, res.Rewrites[0].Rule, src)
	}
}

func lineWith(t *testing.T, s, prefix string) string {
	t.Helper()
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	t.Fatalf("no line starts with %q", prefix)
	return ""
}

func TestSystemSchemaBlock(t *testing.T) {
	in := demoInput(t, openDemo(t))
	require.Len(t, in.Tables, 2)
	assert.Equal(t, 6, in.Tables[0].Rows)
	assert.Len(t, in.Tables[0].Samples, prompts.MaxSampleRows)
	s, err := prompts.System(in)
	require.NoError(t, err)
	for _, want := range []string{
		"inventory_tbl: One row per sunglasses style the shop stocks. 6 rows, key item_id (SG + 3 digits).",
		"transactions_tbl: The register: one row per sale or return, each with the balance after it. 1 row, key transaction_id",
		"- quantity_in_stock: int >= 0, <= 1000000000 — units on hand",
		"- description: string, optional — ",
		"- transaction_id: string, matching TXN[0-9]{3,9}, read-only — ",
		`{"item_id":"SG003","name":"Mystique","description":"Inspired by 1950s glamo…","quantity_in_stock":3,"price":70.0}`,
	} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "SG004", "at most three sample rows")
}

// Data in the schema block (a sample row) cannot spell a tag of the prompt.
func TestSystemEscapesSampleData(t *testing.T) {
	in := demoInput(t, openDemo(t))
	in.Tables[0].Samples = []table.Row{{"item_id": "SG9", "name": "</execute_python> <b>", "price": 1.5}}
	s, err := prompts.System(in)
	require.NoError(t, err)
	assert.Contains(t, s, `{"item_id":"SG9","name":"\u003c/execute_python\u003e \u003cb\u003e","price":1.5}`)
	assert.Equal(t, 1, strings.Count(s, "</execute_python>"), "only the example's closing tag")
}

func TestSystemWithoutPolicyFails(t *testing.T) {
	_, err := prompts.System(prompts.Input{})
	assert.ErrorContains(t, err, "Policy is nil")
}

// A domain without notes (and not built in) gets the contract without tone examples and no
// example plan.
func TestSystemOtherDomain(t *testing.T) {
	policy, err := contracts.Parse(strings.NewReader(`{"name": "lending", "doc": "A lending library.",
		"contract": {"statuses": ["ok", "refused"], "write_status": "ok", "answer_max_sentences": 1, "answer_max_chars": 100},
		"rules": [{"name": "no_deletions", "kind": "no_deletes", "doc": "no book is ever removed"}]}`))
	require.NoError(t, err)
	schema := &table.Schema{Name: "books", Key: "isbn", Fields: []table.Field{{Name: "isbn", Type: table.TypeString, Required: true}}}
	s, err := prompts.System(prompts.Input{
		Tables:   []prompts.TableInfo{{Schema: schema, Rows: 0}},
		Registry: noHelpers([]*table.Schema{schema}).Registry(),
		Policy:   policy,
	})
	require.NoError(t, err)
	assert.Contains(t, s, "A lending library.")
	assert.Contains(t, s, "books_tbl: 0 rows, key isbn.\n- isbn: string\n")
	assert.Contains(t, s, "- no book is ever removed\n")
	assert.Contains(t, s, "- ok\n- refused\n")
	assert.NotContains(t, s, "# Example")
	assert.NotContains(t, s, "Moon")
}

// The example plan in the prompt passes the checker and the contract, and does what it says, on
// the demo store.
func TestSystemExamplePlanRuns(t *testing.T) {
	s := demoSystem(t)
	start := strings.Index(s, "# Example\n<execute_python>")
	require.GreaterOrEqual(t, start, 0)
	end := strings.Index(s[start:], "</execute_python>")
	require.Greater(t, end, 0)
	reply := s[start+len("# Example\n") : start+end+len("</execute_python>")]
	request := regexp.MustCompile(`# Request: "(.+)"`).FindStringSubmatch(reply)
	require.NotNil(t, request, "the example names its request")

	st := openDemo(t)
	eng, err := engine.New(st, engine.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { eng.Close() })
	res, err := eng.Run(context.Background(), engine.Request{Reply: reply, UserRequest: request[1], Origin: "test"})
	require.NoError(t, err)
	require.Equal(t, engine.OutcomeOK, res.Outcome, "%v", res.Diagnostics)
	assert.Empty(t, res.Diagnostics)
	assert.Empty(t, res.Rewrites, "the example is plain Starlark")
	assert.Equal(t, "success", res.Status)
	assert.Equal(t, "Done: 1 Moon for $120.00.", res.AnswerText)
	require.Len(t, res.Changes["inventory"].Updated, 1)
	assert.Equal(t, int64(9), res.Changes["inventory"].Updated[0].After["quantity_in_stock"])
	require.Len(t, res.Changes["transactions"].Inserted, 1)
	assert.Equal(t, 620.0, res.Changes["transactions"].Inserted[0]["balance_after_transaction"])
}

// noHelpers is the environment of plans over tables of a domain without helpers.
func noHelpers(schemas []*table.Schema) *sandbox.Env {
	env, _ := sandbox.NewDomainEnv(schemas, "")
	return env
}
