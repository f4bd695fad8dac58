package sandbox

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDependencyBoundaries keeps the table in ARCHITECTURE.md honest: the packages a plan runs
// in never reach the database, the network, other processes or the model.
func TestDependencyBoundaries(t *testing.T) {
	forbidden := map[string][]string{
		"./":              {"github.com/ostafen/clover", "github.com/starplan/starplan/store", "github.com/starplan/starplan/llm", "net", "net/http", "os/exec", "go.etcd.io/bbolt"},
		"../builtins/...": {"github.com/ostafen/clover", "github.com/starplan/starplan/store", "net", "os/exec", "go.etcd.io/bbolt"},
		"../table":        {"go.starlark.net/starlark", "github.com/ostafen/clover"},
		"../diag":         {"go.starlark.net/starlark"},
		"./pycompat":      {"go.starlark.net/starlark", "github.com/starplan/starplan/builtins"},
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, b := range bad {
			assert.False(t, deps[b], "%s must not depend on %s", pkg, b)
		}
	}
}
