package table

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pattern compiled again is the compiled pattern kept from before, and the cache stays bounded
// however many patterns it sees.
func TestRegexCache(t *testing.T) {
	first, err := compileRegex("^TXN[0-9]+$")
	require.NoError(t, err)
	again, err := compileRegex("^TXN[0-9]+$")
	require.NoError(t, err)
	assert.Same(t, first, again)

	for i := range 3 * regexCacheSize {
		_, err := compileRegex(fmt.Sprintf("^x%d$", i))
		require.NoError(t, err)
		regexes.Lock()
		n := len(regexes.m)
		regexes.Unlock()
		require.LessOrEqual(t, n, regexCacheSize)
	}
	_, err = compileRegex("(")
	require.Error(t, err, "a pattern that does not compile is still refused the second time")
	_, err = compileRegex("(")
	require.Error(t, err)
}
