package prompts_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The prompt is rendered from plain values: the package never reaches the model client, the
// store, the engine or the network (its tests may use the engine and the store).
func TestDependencyBoundaries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	deps := map[string]bool{}
	for _, d := range strings.Fields(string(out)) {
		deps[d] = true
	}
	require.True(t, deps["github.com/starplan/starplan/builtins"], "go list -deps works")
	for _, bad := range []string{
		"github.com/starplan/starplan/llm", "github.com/starplan/starplan/store",
		"github.com/starplan/starplan/engine", "github.com/ostafen/clover/v2",
		"github.com/sashabaranov/go-openai", "go.etcd.io/bbolt", "net/http",
	} {
		assert.False(t, deps[bad], "prompts must not depend on %s", bad)
	}
}
