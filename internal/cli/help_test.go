package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEveryCommandHasExamples(t *testing.T) {
	t.Parallel()
	root := newRoot(IOStreams{Getenv: func(string) string { return "" }})
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		assert.NotEmpty(t, c.Example, "%s has no Examples: section", c.CommandPath())
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for path := range examples {
		assert.NotPanics(t, func() { find(root, path) }, "examples names %q, which is not a command", path)
	}
}

// Completion offers what exists: pending run ids for apply, every run for runs show, the tables,
// the formats and the states.
func TestCompletion(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	readOnly, pending := s.oldRuns(1)
	complete := func(args ...string) string {
		t.Helper()
		o := s.run(false, "", append([]string{"__complete"}, args...)...)
		require.Equal(t, ExitOK, o.code, o.err)
		return o.out
	}
	out := complete("apply", "")
	assert.Contains(t, out, pending)
	assert.NotContains(t, out, readOnly, "apply offers pending runs only")
	out = complete("runs", "show", "")
	assert.Contains(t, out, pending)
	assert.Contains(t, out, readOnly)
	assert.Contains(t, complete("db", "export", ""), "transactions")
	assert.Contains(t, complete("db", "export", "inventory", "--format", ""), "csv")
	assert.Contains(t, complete("runs", "--state", ""), "rejected")

	empty := &session{t: t, dir: filepath.Join(t.TempDir(), "none")}
	o := empty.run(false, "", "__complete", "apply", "")
	require.Equal(t, ExitOK, o.code)
	assert.NoDirExists(t, empty.dir, "completing never creates a store")
}

func TestDocsMan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	code := Main([]string{"docs", "man", dir}, IOStreams{Out: &out, Err: &out, Getenv: func(string) string { return "" }})
	require.Equal(t, ExitOK, code, out.String())
	page, err := os.ReadFile(filepath.Join(dir, "starplan-exec.1"))
	require.NoError(t, err)
	assert.Contains(t, string(page), ".SH EXAMPLE")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Contains(t, strings.Join(names, " "), "starplan-db-import.1")
}
