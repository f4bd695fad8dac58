package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

// mappedTodo is the to-do domain with its table mapped onto public.todo_items, which another
// program made: task_id is its column id, done its column is_done.
func mappedTodo(sqlTable string) map[string]string {
	files := map[string]string{}
	for k, v := range todoDomain {
		files[k] = v
	}
	files["domain.json"] = strings.Replace(todoDomain["domain.json"],
		`"doc": "One row per task.",`,
		`"doc": "One row per task.", "sql": {"table": "`+sqlTable+`", "columns": {"task_id": "id", "done": "is_done"}},`, 1)
	files["domain.json"] = strings.Replace(files["domain.json"], `"read_only": true, "doc": "T001, ..."`, `"read_only": true, "max_len": 10, "doc": "T001, ..."`, 1)
	return files
}

// Through the built binary: db init --domain DIR --db postgres://… adopts a table another
// program made and fills (its rows and its own column kept); a plan's dry run reads it and its
// apply changes the SQL table; another program's write between a dry run and its apply makes
// the apply a conflict (exit 5) naming the row; db check finds nothing wrong. A mapped domain
// whose table does not fit prints every mismatch, exits non-zero and creates nothing.
func TestMappedTableThroughTheBinary(t *testing.T) {
	t.Parallel()
	db := pgURL(t)
	bin := starplanBinary(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, sql := range []string{
		`CREATE TABLE public.todo_items (id varchar(10) PRIMARY KEY, title text NOT NULL, is_done boolean NOT NULL DEFAULT false, owner text)`,
		`INSERT INTO public.todo_items VALUES ('T001', 'Water the plants', false, 'ann'), ('T002', 'Feed the cat', false, 'bob')`,
		`CREATE TABLE public.todo_bad (id int, title char(5), is_done text NOT NULL, extra text NOT NULL)`,
	} {
		_, err := conn.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--db", db, "--in-process"}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return code, out.String(), errb.String()
	}

	code, _, stderr := run("db", "init", "--domain", writeDomain(t, mappedTodo("public.todo_bad")))
	assert.Equal(t, ExitUsage, code)
	for _, want := range []string{
		"(6 problems); nothing was created",
		"table tasks (public.todo_bad) column id: of type integer, and field task_id is string",
		"table tasks (public.todo_bad) column id: the key field task_id's column is neither the primary key nor unique",
		"table tasks (public.todo_bad) column title: of type character(5)",
		"table tasks (public.todo_bad) column title: nullable, and field title is required",
		"table tasks (public.todo_bad) column is_done: of type text, and field done is bool",
		"table tasks (public.todo_bad) column extra: NOT NULL without a default",
		"Try: change each SQL table or the domain's fields as the lines above say, then run db init again",
	} {
		assert.Contains(t, stderr, want)
	}
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'todo'`).Scan(&n))
	assert.Zero(t, n, "nothing was created")

	code, _, stderr = run("db", "init", "--domain", writeDomain(t, mappedTodo("public.todo_items")))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "adopted public.todo_items as table tasks (its rows kept, the seed's not loaded)")

	plan := filepath.Join(t.TempDir(), "finish.star")
	require.NoError(t, os.WriteFile(plan, []byte(todoDomain["example.star"]), 0o644))
	dryRun := func() engine.Result {
		t.Helper()
		code, out, stderr := run("exec", "--request", "I watered the plants.", plan)
		require.Equal(t, 0, code, stderr)
		var res engine.Result
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.True(t, res.Pending, "a piped exec is a dry run")
		return res
	}
	res := dryRun()
	code, _, stderr = run("apply", res.RunID)
	require.Equal(t, 0, code, stderr)
	var done bool
	var owner string
	require.NoError(t, conn.QueryRow(ctx, `SELECT is_done, owner FROM public.todo_items WHERE id = 'T001'`).Scan(&done, &owner))
	assert.True(t, done, "the apply changed the SQL table")
	assert.Equal(t, "ann", owner, "a column no field maps onto is kept")

	_, err = conn.Exec(ctx, `UPDATE public.todo_items SET is_done = false WHERE id = 'T001'`)
	require.NoError(t, err)
	res = dryRun()
	_, err = conn.Exec(ctx, `UPDATE public.todo_items SET owner = 'cy' WHERE id = 'T001'`)
	require.NoError(t, err)
	code, out, stderr := run("apply", res.RunID)
	assert.Equal(t, ExitConflict, code, stderr)
	assert.Contains(t, out, `tasks row \"T001\" was changed after the run read it; nothing was written`)

	code, out, stderr = run("db", "check")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"problems": []`)
	code, out, stderr = run("db", "export", "tasks")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"task_id": "T002"`)
}
