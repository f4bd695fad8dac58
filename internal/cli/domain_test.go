package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/engine"
)

// A to-do domain, written at test time: a domain is files, and no Go names it.
var todoDomain = map[string]string{
	"domain.json": `{
  "name": "todo",
  "doc": "A to-do list.",
  "tables": [{
    "name": "tasks", "key": "task_id", "key_prefix": "T", "key_digits": 3,
    "doc": "One row per task.",
    "fields": [
      {"name": "task_id", "type": "string", "required": true, "read_only": true, "doc": "T001, ..."},
      {"name": "title", "type": "string", "required": true, "min_len": 1, "doc": "what to do"},
      {"name": "done", "type": "bool", "required": true, "doc": "whether it is done"}
    ]
  }]
}`,
	"seed.json": `{"tasks": [{"task_id": "T001", "title": "Water the plants", "done": false}]}`,
	"policy.json": `{
  "name": "todo",
  "doc": "A to-do list: people ask what is left and add or finish tasks.",
  "contract": {"statuses": ["success", "not_found"], "write_status": "success", "answer_max_sentences": 2, "answer_max_chars": 200},
  "rules": [
    {"name": "only_tasks", "kind": "only_tables", "doc": "only tasks change", "params": {"tables": ["tasks"]}},
    {"name": "no_deletions", "kind": "no_deletes", "doc": "a task is finished, never removed"},
    {"name": "only_done_changes", "kind": "mutable_fields", "doc": "only done may change", "params": {"table": "tasks", "fields": ["done"]}}
  ]
}`,
	"prompt.json": `{"statuses": {
  "success": {"when": "answered, or the task was added or finished", "answer": "Done: the plants are watered."},
  "not_found": {"when": "no task matches", "answer": "There is no such task."}
}}`,
	"example.star": `task = tasks_tbl.get({"title": {"$ieq": "water the plants"}})
if task == None:
    STATUS, answer_text = "not_found", "There is no such task."
else:
    tasks_tbl.update({"done": True}, task)
    STATUS, answer_text = "success", "Done: the plants are watered."
`,
}

func writeDomain(t *testing.T, files map[string]string) string {
	dir := filepath.Join(t.TempDir(), "domain")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	return dir
}

// A domain made of files only: checked, made a store, and run, with its own policy; later
// commands find the domain in the store.
func TestADomainFromADirectoryRunsWithoutGo(t *testing.T) {
	t.Parallel()
	dir := writeDomain(t, todoDomain)
	s := newSession(t)
	o := s.run(false, "", "domain", "check", dir)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "domain todo, 1 table, no problems found")

	o = s.run(false, "", "db", "init", "--domain", dir)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.err, "seeded new store")
	require.NoError(t, os.RemoveAll(dir), "the store keeps its domain")

	plan := filepath.Join(t.TempDir(), "finish.star")
	require.NoError(t, os.WriteFile(plan, []byte(todoDomain["example.star"]), 0o644))
	o = s.run(false, "", "exec", plan)
	require.Equal(t, ExitOK, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	require.True(t, res.Pending, o.out)
	assert.Equal(t, true, res.Changes["tasks"].Updated[0].After["done"])
	o = s.run(false, "", "apply", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)

	// The domain's own rules hold: a title may not change.
	rename := `tasks_tbl.update({"title": "Water the cactus"}, {"task_id": "T001"})
STATUS, answer_text = "success", "Renamed."
`
	require.NoError(t, os.WriteFile(plan, []byte(rename), 0o644))
	o = s.run(false, "", "exec", plan)
	assert.Equal(t, ExitContract, o.code, o.out)
	assert.Contains(t, o.out, `"field-immutable"`)
	assert.Contains(t, o.out, "only done may change")

	o = s.run(true, "", "domain", "show")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Domain todo")
	assert.Contains(t, o.out, "only_done_changes")
}

// A broken domain is refused with every problem, each naming its file, and no store is made.
func TestABrokenDomainListsEveryProblemAndCreatesNothing(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for k, v := range todoDomain {
		files[k] = v
	}
	files["policy.json"] = `{
  "name": "todo",
  "contract": {"statuses": ["success", "not_found"], "write_status": "success", "answer_max_sentences": 2, "answer_max_chars": 200},
  "rules": [
    {"name": "only_tasks", "kind": "only_tables", "doc": "only tasks change", "params": {"tables": ["task"]}},
    {"name": "only_done_changes", "kind": "mutable_fields", "doc": "only done may change", "params": {"table": "tasks", "fields": ["finished"]}}
  ]
}`
	files["prompt.json"] = `{"statuses": {"success": {"when": "done", "answer": "Done."}}}`
	files["example.star"] = "tasks_tbl.get({})\ntry:\n    pass\n"
	files["polcy.json"] = "{}"
	dir := writeDomain(t, files)
	s := newSession(t)
	for _, args := range [][]string{{"domain", "check", dir}, {"db", "init", "--domain", dir}} {
		o := s.run(false, "", args...)
		assert.Equal(t, ExitUsage, o.code, o.err)
		for _, want := range []string{
			`polcy.json: not a file of a domain`,
			`policy.json: rule "only_tasks": tables names table "task", which the domain does not have (did you mean "tasks"?)`,
			`policy.json: rule "only_done_changes": fields names field "finished", which table tasks does not have`,
			`prompt.json: STATUS "not_found" of the contract has no note`,
			`example.star:2:1:`,
			"5 problems in the domain",
		} {
			assert.Contains(t, o.err, want, args)
		}
		if args[0] == "db" {
			assert.Contains(t, o.err, "5 problems in the domain "+dir+"; no store was created")
		} else {
			assert.NotContains(t, o.err, "created", "a check would create nothing")
		}
	}
	_, err := os.Stat(filepath.Join(s.dir, "data.db"))
	assert.True(t, os.IsNotExist(err), "no store was created")
}

// starplan check checks a plan against the store's own domain, and against the built-in one
// where there is no store.
func TestCheckUsesTheStoresDomain(t *testing.T) {
	t.Parallel()
	plan := filepath.Join(t.TempDir(), "finish.star")
	require.NoError(t, os.WriteFile(plan, []byte(todoDomain["example.star"]), 0o644))
	s := newSession(t)
	o := s.run(false, "", "check", plan)
	assert.Equal(t, ExitRejected, o.code, "no store: the shop's tables, which have no tasks_tbl")
	assert.Contains(t, o.out, "tasks_tbl")
	_, err := os.Stat(s.dir)
	assert.True(t, os.IsNotExist(err), "check creates no store")

	require.Equal(t, ExitOK, s.run(false, "", "db", "init", "--domain", writeDomain(t, todoDomain)).code)
	o = s.run(false, "", "check", plan)
	assert.Equal(t, ExitOK, o.code, o.out+o.err)
	assert.Contains(t, o.out, "finish.star: ok")
}

// One run of domain check lists every problem of a domain, each once, in the file that holds
// it, and nothing that only follows from another: a function missing from invariants.star is not
// also a failure of every STATUS's example answer in prompt.json.
func TestDomainCheckListsEveryProblemOnceInItsFile(t *testing.T) {
	t.Parallel()
	lib, ok := domains.Builtin(domains.Library)
	require.True(t, ok)
	files := map[string]string{}
	entries, err := fs.ReadDir(lib, ".")
	require.NoError(t, err)
	for _, e := range entries {
		b, err := fs.ReadFile(lib, e.Name())
		require.NoError(t, err)
		files[e.Name()] = string(b)
	}
	plant := func(name, old, new string) {
		t.Helper()
		require.Contains(t, files[name], old, name)
		files[name] = strings.Replace(files[name], old, new, 1)
	}
	// domain.json: a right-to-left override in a doc.
	plant("domain.json", `"doc": "A small lending library`, "\"doc\": \"A small \u202elending library")
	// seed.json: two rows out of their bounds, in two tables.
	plant("seed.json", `"loans_out": 1, "fines_due": 0.0, "joined": "2025-01-15T16:20:00"`, `"loans_out": 9, "fines_due": 0.0, "joined": "2025-01-15T16:20:00"`)
	plant("seed.json", `"fines_due": 0.0, "joined": "2024-03-01T10:00:00"`, `"fines_due": -3.0, "joined": "2024-03-01T10:00:00"`)
	// policy.json: a rule names a field that no table has.
	plant("policy.json", `"params": {"table": "members", "field": "loans_out"}`, `"params": {"table": "members", "field": "loans_outstanding"}`)
	// invariants.star: a function a rule names is not defined.
	plant("invariants.star", "def one_loan_per_book(changes):", "def one_loan_per_bok(changes):")
	// helpers.star: a name that is not defined.
	plant("helpers.star", "_MAX_LATE_FINE = 10.0", "_MAX_LATE_FINE = ten_dollars")
	// prompt.json: a note for a STATUS the contract does not have.
	plant("prompt.json", `"statuses": {`, `"statuses": {"overdue": {"when": "late", "answer": "It is late."}, `)
	// example.star: Python's try.
	files["example.star"] += "try:\n    pass\n"

	dir := writeDomain(t, files)
	o := newSession(t).run(false, "", "domain", "check", dir)
	assert.Equal(t, ExitUsage, o.code, o.err)
	want := []string{
		`domain.json:3:19: a control or bidirectional character (U+202E)`,
		`seed.json: members record 1: members row M001: field "fines_due" = -3`,
		`seed.json: members record 2: members row M002: field "loans_out" = 9`,
		`policy.json: rule "loans_out_non_negative": field names field "loans_outstanding", which table members does not have`,
		`invariants.star: defines no function one_loan_per_book, which rule "one_loan_per_book" of policy.json names`,
		`helpers.star:14:18: ten_dollars is not defined`,
		`prompt.json: STATUS "overdue" is not one of the contract's`,
		`example.star:22:1: Starlark has no try/except`,
	}
	lines := strings.Split(strings.TrimSuffix(o.err, "\n"), "\n")
	require.Len(t, lines, len(want)+2, "a line for each problem, then the error and its hint:\n%s", o.err)
	for i, w := range want {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, dir+": "+w) {
				n++
			}
		}
		assert.Equal(t, 1, n, "problem %d, %q, once in:\n%s", i, w, o.err)
	}
	assert.Contains(t, o.err, fmt.Sprintf("Error: %d problems in the domain %s\n", len(want), dir), "a check creates nothing, and does not say it did not")
}
