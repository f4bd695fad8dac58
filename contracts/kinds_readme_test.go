package contracts_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
)

var updateREADME = flag.Bool("update", false, "rewrite the README's table of rule kinds")

// The README's table of rule kinds is contracts.KindTable, made from the kinds themselves.
func TestREADMEKindTable(t *testing.T) {
	const begin, end = "<!-- rule kinds: contracts.KindTable; go test ./contracts -run TestREADMEKindTable -update rewrites it -->\n", "<!-- end of rule kinds -->\n"
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	readme := string(raw)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	require.True(t, i >= 0 && j > i, "README.md holds the rule kinds between %q and %q", begin, end)
	got, want := readme[i+len(begin):j], contracts.KindTable()
	if *updateREADME && got != want {
		require.NoError(t, os.WriteFile("../README.md", []byte(readme[:i+len(begin)]+want+readme[j:]), 0o644))
		got = want
	}
	assert.Equal(t, want, got, "run go test ./contracts -run TestREADMEKindTable -update")
	for _, k := range contracts.KindNames() {
		assert.Contains(t, contracts.KindText(), k)
	}
}
