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
	}
	_, err := os.Stat(filepath.Join(s.dir, "data.db"))
	assert.True(t, os.IsNotExist(err), "no store was created")
}

// starplan check checks a plan against the store's own domain, and against the built-in one
// where there is no store.
func TestCheckUsesTheStoresDomain(t *testing.T) {
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
