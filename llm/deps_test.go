package llm_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDependencies keeps the package boundary: llm and llmtest import no other starplan package
// (in particular not sandbox or store), so the model client stays a leaf of the data flow.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".", "./llmtest").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/starplan/starplan/") {
			assert.Contains(t, []string{"github.com/starplan/starplan/llm", "github.com/starplan/starplan/llm/llmtest"}, dep)
		}
	}
}
