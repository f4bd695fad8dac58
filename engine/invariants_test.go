package engine

import (
	"context"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// An orders domain whose one rule no built-in kind covers: only a pending order may be cancelled.
var ordersDomain = fstest.MapFS{
	"domain.json": {Data: []byte(`{"name": "orders", "tables": [{"name": "orders", "key": "order_id", "fields": [
		{"name": "order_id", "type": "string", "required": true, "read_only": true},
		{"name": "status", "type": "string", "required": true, "enum": ["pending", "shipped", "cancelled"]}]}]}`)},
	"seed.json": {Data: []byte(`{"orders": [{"order_id": "O1", "status": "pending"}, {"order_id": "O2", "status": "shipped"}]}`)},
	"policy.json": {Data: []byte(`{"name": "orders",
		"contract": {"statuses": ["success", "refused"], "write_status": "success", "answer_max_sentences": 2, "answer_max_chars": 200},
		"rules": [
			{"name": "pending_only_cancelled", "kind": "starlark", "doc": "only a pending order may be cancelled", "params": {"function": "pending_only_cancelled"}},
			{"name": "sane", "kind": "starlark", "doc": "a rule that loops when asked to", "params": {"function": "loops_on_o3"}}
		]}`)},
	"invariants.star": {Data: []byte(`
def pending_only_cancelled(changes):
    found = []
    for u in changes.get("orders", {}).get("updated", []):
        if u["after"]["status"] == "cancelled" and u["before"]["status"] != "pending":
            found.append({"message": "order %s is %s; only a pending order may be cancelled" % (u["key"], u["before"]["status"]),
                          "hint": "cancel only pending orders"})
    return found

def loops_on_o3(changes):
    for r in changes.get("orders", {}).get("inserted", []):
        if r["order_id"] == "O3":
            while True:
                pass
    return []
`)},
}

func ordersEngine(t *testing.T) *Engine {
	dom, errs := LoadDomain(ordersDomain)
	require.Empty(t, errs)
	return domainEngine(t, dom)
}

// A domain's own rule, in Starlark, refuses what it finds wrong under its name, lets the rest
// through, and runs again at apply; a rule that cannot finish refuses the changes.
func TestInvariantsInStarlark(t *testing.T) {
	e := ordersEngine(t)
	ctx := context.Background()
	cancel := func(id string) *Result {
		res, err := e.Run(ctx, Request{Reply: `orders_tbl.update({"status": "cancelled"}, {"order_id": "` + id + `"})
STATUS, answer_text = "success", "Cancelled."`})
		require.NoError(t, err)
		return res
	}
	res := cancel("O2")
	require.Equal(t, OutcomeContractViolation, res.Outcome)
	assert.Equal(t, "pending_only_cancelled", res.Diagnostics[0].Code)
	assert.Equal(t, "order O2 is shipped; only a pending order may be cancelled", res.Diagnostics[0].Message)
	assert.Equal(t, "cancel only pending orders", res.Diagnostics[0].Hint)

	res = cancel("O1")
	require.Equal(t, OutcomeOK, res.Outcome, res.Diagnostics.String())
	require.True(t, res.Pending)
	applied, err := e.Apply(ctx, res.RunID)
	require.NoError(t, err)
	assert.True(t, applied.Applied)

	res, err = e.Run(ctx, Request{Reply: `orders_tbl.insert({"order_id": "O3", "status": "pending"})
STATUS, answer_text = "success", "Added."`})
	require.NoError(t, err)
	require.Equal(t, OutcomeContractViolation, res.Outcome, "a rule that cannot finish refuses")
	assert.Equal(t, "sane", res.Diagnostics[0].Code)
	assert.Contains(t, res.Diagnostics[0].Message, "the rule could not be checked")
}

// A rule that names a function invariants.star lacks, or a file that does not check, is a
// problem of the domain, found before any store is made.
func TestInvariantsProblems(t *testing.T) {
	broken := fstest.MapFS{}
	for k, v := range ordersDomain {
		broken[k] = v
	}
	broken["invariants.star"] = &fstest.MapFile{Data: []byte("def pending_only_cancelled(changes):\n    return []\n")}
	_, errs := LoadDomain(broken)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "invariants.star: defines no function loops_on_o3, which rule ")
	broken["invariants.star"] = &fstest.MapFile{Data: []byte("def f(:\n")}
	_, errs = LoadDomain(broken)
	require.Len(t, errs, 1, "the rules naming its functions are not also reported: %v", errs)
	assert.Contains(t, errs[0].Error(), "invariants.star:1:")
}

// A file that is not valid JSON is named with the line and column where reading it failed.
func TestDomainFilesNameTheirLines(t *testing.T) {
	for file, text := range map[string]string{
		"domain.json": "{\n  \"name\": \"orders\",\n  \"tables\": [\n    {\"name\": \"orders\", \"key\": 7}\n  ]\n}",
		"policy.json": "{\n  \"name\": \"orders\",\n  \"contract\": {\"statuses\": [\"success\",]}\n}",
		"seed.json":   "{\"orders\": [\n  {\"order_id\": \"O1\", \"status\": \"pending\"}\n  {\"order_id\": \"O2\"}\n]}",
	} {
		broken := fstest.MapFS{}
		for k, v := range ordersDomain {
			broken[k] = v
		}
		broken[file] = &fstest.MapFile{Data: []byte(text)}
		_, errs := LoadDomain(broken)
		require.NotEmpty(t, errs, file)
		assert.Regexp(t, `\b`+regexp.QuoteMeta(file)+`:[2-4]:\d+: `, errs[len(errs)-1].Error(), file)
	}
}

// What a domain directory may not hold, each refused with its file: text a terminal or a model
// would read differently, a link instead of a file, data after the JSON, a file too large to
// read whole, and docs that would flood the prompt.
func TestDomainDirectoryBounds(t *testing.T) {
	with := func(name string, f *fstest.MapFile) fstest.MapFS {
		d := fstest.MapFS{}
		for k, v := range ordersDomain {
			d[k] = v
		}
		d[name] = f
		return d
	}
	for what, tc := range map[string]struct {
		fs   fstest.MapFS
		want string
	}{
		"escape in a doc": {with("invariants.star", &fstest.MapFile{Data: []byte("# \x1b]0;title\x07\ndef pending_only_cancelled(c):\n    return []\ndef loops_on_o3(c):\n    return []\n")}),
			"invariants.star:1:3: a control or bidirectional character (U+001B)"},
		"a link":             {with("prompt.json", &fstest.MapFile{Data: []byte("x"), Mode: fs.ModeSymlink}), "prompt.json is not a regular file"},
		"data after JSON":    {with("seed.json", &fstest.MapFile{Data: []byte(`{"orders": []} {"orders": [{"oops": 1}]}`)}), "trailing data"},
		"domain after JSON":  {with("domain.json", &fstest.MapFile{Data: append(ordersDomain["domain.json"].Data, []byte(` {"name": "x"}`)...)}), "trailing data"},
		"a large definition": {with("example.star", &fstest.MapFile{Data: []byte("# " + strings.Repeat("x", store.MaxDefinition))}), "hold more than"},
		"a large seed":       {with("seed.json", &fstest.MapFile{Data: []byte(`{"orders": ["` + strings.Repeat("x", store.MaxSeed) + `"]}`)}), "seed.json holds more than"},
		"a flooded prompt": {with("example.star", &fstest.MapFile{Data: []byte("STATUS, answer_text = 'success', 'Done.'\n# " + strings.Repeat("words ", 8000) + "\n")}),
			"the system prompt of this domain is"},
	} {
		_, errs := LoadDomain(tc.fs)
		require.NotEmpty(t, errs, what)
		var all []string
		for _, e := range errs {
			all = append(all, e.Error())
		}
		assert.Contains(t, strings.Join(all, "\n"), tc.want, what)
	}
}

// A file that does not load does not hide the problems of the files that do not depend on it:
// a domain.json that does not decode still has policy.json, invariants.star and prompt.json
// checked; a policy.json that does not decode still has prompt.json checked. Each problem is
// listed once, as its file's.
func TestDomainProblemsOfIndependentFilesAreAllListed(t *testing.T) {
	broken := fstest.MapFS{}
	for k, v := range ordersDomain {
		broken[k] = v
	}
	broken["prompt.json"] = &fstest.MapFile{Data: []byte(`{"statuses": {"success": }}`)}
	broken["invariants.star"] = &fstest.MapFile{Data: []byte("def f(:\n")}
	broken["domain.json"] = &fstest.MapFile{Data: []byte(`{"name": "orders", "tables": [}`)}
	broken["policy.json"] = &fstest.MapFile{Data: []byte(`{"name": "orders", "contract": {"statuses": []}}`)}
	_, errs := LoadDomain(broken)
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	require.Len(t, got, 4, strings.Join(got, "\n"))
	for i, want := range []string{"load domain: domain.json:1:", "policy.json: contracts: ", "invariants.star:1:", "prompt.json:1:"} {
		assert.Contains(t, got[i], want)
	}

	broken["domain.json"] = ordersDomain["domain.json"]
	broken["invariants.star"] = ordersDomain["invariants.star"]
	_, errs = LoadDomain(broken)
	got = got[:0]
	for _, err := range errs {
		got = append(got, err.Error())
	}
	require.Len(t, got, 2, strings.Join(got, "\n"))
	assert.Contains(t, got[0], "policy.json: contracts: ")
	assert.Contains(t, got[1], "prompt.json:1:")
}
