package isolate

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEmbeddingLinksOnlyTheSandbox: a program that embeds the worker pool links the sandbox and
// what it needs, and no other package of starplan (the engine, the store, the model client, the
// prompts, the contracts) nor the store's backend; ARCHITECTURE.md's row says so too.
func TestEmbeddingLinksOnlyTheSandbox(t *testing.T) {
	deps := func(pkg string) map[string]bool {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		m := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			m[d] = true
		}
		return m
	}
	const module = "github.com/starplan/starplan"
	sandbox := deps("../sandbox")
	for d := range deps(".") {
		if d == module+"/isolate" {
			continue
		}
		if strings.HasPrefix(d, module+"/") {
			assert.True(t, sandbox[d], "isolate links %s, which the sandbox does not", d)
		}
		for _, bad := range []string{"github.com/ostafen/clover", "go.etcd.io/bbolt", "github.com/sashabaranov/go-openai"} {
			assert.False(t, strings.HasPrefix(d, bad), "isolate links %s", d)
		}
	}
}
