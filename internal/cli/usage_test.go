package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// visibleCommands lists the commands of a fresh root, by command path.
func visibleCommands(t *testing.T) map[string]*cobra.Command {
	t.Helper()
	var out bytes.Buffer
	cmds := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		cmds[c.CommandPath()] = c
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(IOStreams{Out: &out, Err: &out, Getenv: func(string) string { return "" }}))
	require.NotEmpty(t, cmds)
	return cmds
}

// A command line with too few or too many arguments says what to give and shows the command's
// example, with the usage exit code; cobra's "accepts 1 arg(s), received 0" is never shown.
func TestUsageErrorsSayWhatToGive(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "exec")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "Error: starplan exec takes FILE, the plan to run (a .star file or a model's reply), or - to read it from standard input; it got none\n")
	assert.Contains(t, o.err, "Try: starplan exec --request")

	o = s.run(false, "", "db", "import", "inventory")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, `starplan db import takes TABLE FILE: the table to fill and the .json or .csv file to read; it got 1: "inventory"`)

	o = s.run(false, "", "db", "frob")
	assert.Equal(t, ExitUsage, o.code, "a group given a word that is none of its commands: %s", o.out)
	assert.Contains(t, o.err, `starplan db has no command "frob"`)
	o = s.run(false, "", "db")
	assert.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Available Commands:", "a group given nothing prints its help")

	for path, cmd := range visibleCommands(t) {
		if cmd.Args == nil || path == "starplan" || strings.HasPrefix(path, "starplan help") {
			continue
		}
		args := strings.Fields(strings.TrimPrefix(path, "starplan"))
		lines := [][]string{append(args, "one", "two", "three")} // too many for every command
		if _, ok := arguments[path]; ok && !strings.HasPrefix(arguments[path], "at most") {
			lines = append(lines, args) // too few
		}
		for _, line := range lines {
			o := s.run(false, "", line...)
			assert.Equal(t, ExitUsage, o.code, "%v: %s", line, o.err)
			assert.NotContains(t, o.err, "arg(s)", line)
			assert.Regexp(t, `\nTry: starplan \S`, o.err, line)
			assert.NotContains(t, o.err, "Try: starplan --help", "%v: the command's own example or help", line)
		}
	}
}

// Every command whose usage names an argument explains it, and every explanation belongs to a
// command.
func TestEveryArgumentIsExplained(t *testing.T) {
	t.Parallel()
	cmds := visibleCommands(t)
	for path, cmd := range cmds {
		words := strings.Fields(cmd.Use)[1:]
		named := false
		for i, w := range words {
			w = strings.TrimPrefix(w, "[")
			if w != "" && 'A' <= w[0] && w[0] <= 'Z' && (i == 0 || !strings.HasPrefix(words[i-1], "-")) {
				named = true
			}
		}
		_, ok := arguments[path]
		assert.Equal(t, named, ok, "%s (%q): an argument in its usage needs an entry in arguments, and only then", path, cmd.Use)
	}
	for path := range arguments {
		assert.Contains(t, cmds, path)
	}
}
